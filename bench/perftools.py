"""Running Rillet's perf-test tools from a benchmark: the command line of a ``rillet``
subcommand, and a run that returns the JSON figures the tool wrote (``--json``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def log(msg: str) -> None:
    """Progress, on stderr (stdout carries the summary and the last-line JSON)."""
    print(msg, file=sys.stderr, flush=True)


def rillet(*args: str) -> list[str]:
    """The argv of ``rillet ARGS`` with this interpreter."""
    return [sys.executable, "-m", "rillet.cli.main", *args]


def run_tool(argv: list[str], json_path: Path) -> dict[str, Any]:
    """Run a ``rillet`` perf-test command (from :func:`rillet`) that writes its figures to
    ``json_path``; they come back with the tool's last output line and the command."""
    command = "rillet " + " ".join(argv[3:])
    log("  $ " + command)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[3]} failed:\n{done.stdout}\n{done.stderr}")
    last = done.stdout.strip().splitlines()[-1]
    log("    " + last)
    figures: dict[str, Any] = json.loads(json_path.read_text())
    figures["output"] = last
    figures["command"] = command
    return figures
