"""Process-wide tuning for moving large byte strings.

Fetch responses and produce requests pass through Python as ``bytes`` of a megabyte or more.
glibc serves allocations that large with a fresh ``mmap`` and gives them back with
``munmap`` on free, so every such buffer is page-faulted in again, 256 faults per MiB. On
these machines that made a 1 MiB copy cost over a millisecond instead of a tenth of one and
halved fetch throughput. :func:`tune_malloc` keeps such buffers on the heap and stops glibc
from trimming it eagerly (what ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``
do when set before the process starts). The ``rillet`` command calls it at start; an
application embedding the client can call it too. It changes nothing on non-glibc systems.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

__all__ = ["tune_malloc"]

_log = logging.getLogger(__name__)

# From glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 256 << 20

_tuned: bool | None = None


def tune_malloc() -> bool:
    """Keep buffers up to 32 MiB on glibc's heap; True when glibc took the settings."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt)
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    _log.debug("malloc tuned for large buffers: %s", _tuned)
    return _tuned
