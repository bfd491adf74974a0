"""examples/rust-client, built once per test module that runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

MANIFEST = Path(__file__).resolve().parents[2] / "examples" / "rust-client" / "Cargo.toml"


def build_rust_client() -> Path:
    """Build the example (a debug build) and return its executable; skip without cargo."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not on PATH: cannot build examples/rust-client")
    # The JSON messages name the executable wherever the target directory is (CARGO_TARGET_DIR).
    r = subprocess.run(
        ["cargo", "build", "--manifest-path", str(MANIFEST),
         "--message-format=json-render-diagnostics"],
        capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert r.returncode == 0, f"cargo build failed:\n{r.stderr}"
    executables = [
        m["executable"]
        for m in map(json.loads, r.stdout.splitlines())
        if m.get("reason") == "compiler-artifact" and m.get("executable")
    ]
    assert len(executables) == 1, r.stdout
    return Path(executables[0])
