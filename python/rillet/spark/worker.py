"""What a Spark Python worker needs that is not about records: :func:`prepare_worker`, run
when a worker (or the driver) imports :mod:`rillet.spark`, and :func:`prepare_executor`, run
when a worker first reads records.

Fetch responses of several megabytes pass through the worker as ``bytes``; it keeps them on
glibc's heap (:func:`rillet.tuning.tune_malloc`) rather than mapping and faulting in fresh
pages for each.

PySpark's worker calls ``importlib.invalidate_caches()`` before every task and every planning
step (``worker_util.setup_spark_files``). On CPython before 3.12 that makes every
``zipimporter`` re-read its archive's directory at once: ``pyspark.zip`` holds thousands of
entries, and each package imported from it has an importer of its own, so a worker spent
0.15-0.2 s of CPU per task here re-reading the same unchanged file, about a third of a scan's
Python time. CPython 3.12 re-reads an archive only when it is next used after a change
(gh-103200). :func:`skip_unchanged_zip_reloads` brings the same to 3.11: an importer re-reads
its archive only when the file's size, mtime or inode changed since it last read it.
"""

from __future__ import annotations

import gc
import os
import sys
import zipimport
from typing import Any

from rillet.tuning import tune_malloc

__all__ = ["prepare_executor", "prepare_worker", "skip_unchanged_zip_reloads"]

_MARK = "_rillet_skips_unchanged"


def skip_unchanged_zip_reloads() -> bool:
    """Make ``zipimporter.invalidate_caches`` skip archives that have not changed (Python
    < 3.12; a no-op elsewhere). True when it is in place. Idempotent."""
    if sys.version_info >= (3, 12):
        return False
    original = zipimport.zipimporter.invalidate_caches
    if getattr(original, _MARK, False):
        return True

    def invalidate_caches(self: Any) -> None:
        try:
            st = os.stat(self.archive)
        except OSError:
            original(self)
            return
        seen = (st.st_size, st.st_mtime_ns, st.st_ino)
        if getattr(self, "_rillet_archive_stat", None) != seen:
            original(self)
            self._rillet_archive_stat = seen

    setattr(invalidate_caches, _MARK, True)
    invalidate_caches.__doc__ = original.__doc__
    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
    return True


def prepare_worker() -> None:
    """Tune this process for reading topics into Spark (idempotent)."""
    tune_malloc()
    skip_unchanged_zip_reloads()


_executor_prepared = False


def prepare_executor() -> None:
    """Once per worker process, before it first reads records: move the objects alive now
    (PySpark's, pyarrow's and gRPC's modules, ~50,000 of them) out of the garbage
    collector's way with ``gc.freeze()``. PySpark's daemon runs ``gc.collect()`` after every
    task of a reused worker; traversing that long-lived heap took ~50 ms a task here, and
    freezing it brings the collection to well under a millisecond. Frozen objects are still
    freed by reference counting; only cycles among them are never collected, which is
    what modules and their classes are anyway."""
    global _executor_prepared
    if _executor_prepared:
        return
    _executor_prepared = True
    gc.freeze()
