"""rillet.spark.worker: an unchanged zip archive is not re-read on every invalidate_caches()
(the per-task cost PySpark's workers pay on Python 3.11), a changed one is."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet.spark.worker import skip_unchanged_zip_reloads


@pytest.fixture
def zipped_module(tmp_path: Path) -> Iterator[Path]:
    archive = tmp_path / "mods.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("rillet_zipped_a.py", "VALUE = 1\n")
    sys.path.insert(0, str(archive))
    yield archive
    sys.path.remove(str(archive))
    for name in ("rillet_zipped_a", "rillet_zipped_b"):
        sys.modules.pop(name, None)
    sys.path_importer_cache.pop(str(archive), None)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="CPython 3.12 reloads lazily itself")
def test_unchanged_archives_are_not_reread_and_changed_ones_are(
    zipped_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert skip_unchanged_zip_reloads() and skip_unchanged_zip_reloads()  # idempotent
    reads: list[str] = []
    read_directory = zipimport._read_directory  # type: ignore[attr-defined]

    def counting(archive: str) -> object:
        reads.append(archive)
        return read_directory(archive)

    monkeypatch.setattr(zipimport, "_read_directory", counting)
    assert importlib.import_module("rillet_zipped_a").VALUE == 1
    importlib.invalidate_caches()  # the first one reads (and records the archive's stat)
    first = len(reads)
    assert first >= 1
    for _ in range(5):
        importlib.invalidate_caches()
    assert len(reads) == first  # unchanged: not read again
    # A rewritten archive (other size) is read again, and its new module imports.
    with zipfile.ZipFile(zipped_module, "w") as z:
        z.writestr("rillet_zipped_a.py", "VALUE = 1\n")
        z.writestr("rillet_zipped_b.py", "VALUE = 2\n")
    importlib.invalidate_caches()
    assert len(reads) > first
    assert importlib.import_module("rillet_zipped_b").VALUE == 2
