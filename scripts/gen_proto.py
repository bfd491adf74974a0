#!/usr/bin/env python3
"""Regenerate Rillet's Python gRPC/protobuf code from ``proto/rillet/v1/*.proto``.

    python scripts/gen_proto.py           # rewrite python/rillet/protocol/gen/
    python scripts/gen_proto.py --check   # exit 1, with a summary, if the committed code is stale

Runs ``grpc_tools.protoc -I proto`` with ``--python_out``, ``--grpc_python_out``, ``--mypy_out``
and ``--mypy_grpc_out`` (mypy-protobuf) into a scratch directory, then lays the result out as
the package ``rillet.protocol.gen.v1``: protoc writes ``rillet/v1/x_pb2.py`` with imports such as
``from rillet.v1 import common_pb2``, which would clash with the top-level ``rillet`` package, so
those module references become ``rillet.protocol.gen.v1``. Wire names (``rillet.v1.FetchRequest``,
``/rillet.v1.FetchService/Fetch``) and descriptor file names (``rillet/v1/fetch.proto``) are left
as they are: they are the API contract. ``_pb2_grpc`` modules are kept only for files that
define a service.

The output depends only on the .proto files and the versions of grpcio-tools and mypy-protobuf
(recorded in ``gen/__init__.py``), so a re-run is byte-identical.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import importlib.resources
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_PACKAGE_DIR = Path("rillet") / "v1"
GEN_DIR = ROOT / "python" / "rillet" / "protocol" / "gen"
GEN_SUBPACKAGE = "v1"
GEN_MODULE_PREFIX = "rillet.protocol.gen.v1"

# `from rillet.v1 import x_pb2` and dotted module references `rillet.v1.x_pb2` (imports in the
# stubs, the module name passed to the descriptor builder), but not wire names like
# `rillet.v1.FetchService`, which do not end in _pb2.
_FROM_IMPORT = re.compile(r"^(\s*)from rillet\.v1 import ", re.MULTILINE)
_MODULE_REF = re.compile(r"(?<![\w./])rillet\.v1\.(?=\w+_pb2(?:_grpc)?\b)")
_LEFTOVER = re.compile(r"^\s*(?:from|import) rillet\.v1\b", re.MULTILINE)
_SERVICE = re.compile(r"^service\s+\w+", re.MULTILINE)


def _plugin(name: str) -> str:
    """The path of a protoc plugin installed beside this Python (or on PATH)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        sys.exit(f"gen_proto: {name} not found; install mypy-protobuf")
    return found


def _versions() -> str:
    return (
        f"grpcio-tools {importlib.metadata.version('grpcio-tools')} and "
        f"mypy-protobuf {importlib.metadata.version('mypy-protobuf')}"
    )


def _rewrite(text: str) -> str:
    text = _FROM_IMPORT.sub(rf"\1from {GEN_MODULE_PREFIX} import ", text)
    text = _MODULE_REF.sub(f"{GEN_MODULE_PREFIX}.", text)
    leftover = _LEFTOVER.search(text)
    if leftover:
        raise RuntimeError(f"gen_proto: unrewritten import: {leftover.group(0).strip()}")
    return text


def _proto_files() -> list[Path]:
    files = sorted((PROTO_ROOT / PROTO_PACKAGE_DIR).glob("*.proto"))
    if not files:
        sys.exit(f"gen_proto: no .proto files under {PROTO_ROOT / PROTO_PACKAGE_DIR}")
    return files


def generate(out: Path) -> None:
    """Write the whole generated package (gen/ and everything in it) into ``out``."""
    protos = _proto_files()
    with_services = {p.stem for p in protos if _SERVICE.search(p.read_text(encoding="utf-8"))}
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory(prefix="rillet-protoc-") as scratch:
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
            f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
            f"--python_out={scratch}",
            f"--grpc_python_out={scratch}",
            f"--mypy_out={scratch}",
            f"--mypy_grpc_out={scratch}",
            *(str(p.relative_to(PROTO_ROOT)) for p in protos),
        ]
        done = subprocess.run(cmd, cwd=PROTO_ROOT, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            sys.exit(f"gen_proto: protoc failed with exit code {done.returncode}")

        package = out / GEN_SUBPACKAGE
        package.mkdir(parents=True)
        for src in sorted((Path(scratch) / PROTO_PACKAGE_DIR).iterdir()):
            stem = src.name.split("_pb2")[0]
            if "_pb2_grpc" in src.name and stem not in with_services:
                continue  # protoc writes an empty stub module for files without services
            text = _rewrite(src.read_text(encoding="utf-8"))
            (package / src.name).write_bytes(text.encode("utf-8"))

    (out / "__init__.py").write_bytes(
        (
            f'"""Generated from proto/{PROTO_PACKAGE_DIR.as_posix()}/*.proto by '
            "scripts/gen_proto.py: do not edit.\n\n"
            "Regenerate with ``python scripts/gen_proto.py``; ``--check`` fails when these files\n"
            "are stale. Import them through :mod:`rillet.protocol`.\n\n"
            f"Generated with {_versions()}.\n"
            '"""\n'
        ).encode()
    )
    (package / "__init__.py").write_bytes(
        b'"""The rillet.v1 protobuf package: messages (x_pb2) and gRPC services (x_pb2_grpc)."""\n'
    )


def _tree(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def check() -> int:
    """0 when GEN_DIR equals a fresh generation byte for byte, else 1 with a summary."""
    with tempfile.TemporaryDirectory(prefix="rillet-gen-check-") as scratch:
        fresh_dir = Path(scratch) / "gen"
        generate(fresh_dir)
        fresh, committed = _tree(fresh_dir), _tree(GEN_DIR)
    missing = sorted(fresh.keys() - committed.keys())
    extra = sorted(committed.keys() - fresh.keys())
    changed = sorted(k for k in fresh.keys() & committed.keys() if fresh[k] != committed[k])
    if not (missing or extra or changed):
        print(f"gen_proto: {GEN_DIR.relative_to(ROOT)} is up to date ({len(fresh)} files)")
        return 0
    print(f"gen_proto: {GEN_DIR.relative_to(ROOT)} is stale; run: python scripts/gen_proto.py")
    for name in missing:
        print(f"  missing: {name}")
    for name in extra:
        print(f"  not generated (remove it): {name}")
    for name in changed:
        print(f"  differs: {name}")
        diff = difflib.unified_diff(
            committed[name].decode("utf-8", "replace").splitlines(),
            fresh[name].decode("utf-8", "replace").splitlines(),
            f"committed/{name}",
            f"generated/{name}",
            lineterm="",
            n=1,
        )
        lines = list(diff)
        for line in lines[:20]:
            print(f"    {line[:160]}")
        if len(lines) > 20:
            print(f"    ... {len(lines) - 20} more diff lines")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="regenerate into a temporary directory and fail if the committed code differs",
    )
    args = parser.parse_args(argv)
    if args.check:
        return check()
    with tempfile.TemporaryDirectory(prefix="rillet-gen-") as scratch:
        fresh_dir = Path(scratch) / "gen"
        generate(fresh_dir)
        if GEN_DIR.exists():
            shutil.rmtree(GEN_DIR)
        shutil.copytree(fresh_dir, GEN_DIR)
    print(f"gen_proto: wrote {len(_tree(GEN_DIR))} files to {GEN_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
