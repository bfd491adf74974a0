"""Page-cache warm-up shared by the benchmarks.

In a VM whose balloon hands freed guest memory back to the host (virtio-balloon free page
reporting, as on the Firecracker VMs these benchmarks run on), the first write into memory
that was never touched or has been free for a while faults on the host and runs several
times slower than a write into recycled pages: measured here, 0.4-1 GB/s instead of 4-5 GB/s
for the same ``write`` loop. Which system under test meets such memory is an accident of run
order, and a long-running broker recycles page-cache pages anyway, so each timed write phase
is preceded by writing and deleting files of its size: the phase then writes into recycled
pages, whichever system it measures.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["warm_page_cache"]

_MIB = 1 << 20


def warm_page_cache(workdir: Path, nbytes: int) -> None:
    """Write and delete ``nbytes`` of files under ``workdir`` (untimed, no fsync: deleting
    the files drops their dirty pages and frees them for the next writer)."""
    chunk = b"\0" * _MIB
    paths = []
    per_file = 1 << 30
    left = nbytes
    while left > 0:
        p = workdir / f"warm-{len(paths)}.bin"
        paths.append(p)
        n = min(per_file, left)
        with open(p, "wb", buffering=0) as f:
            for _ in range(max(n // _MIB, 1)):
                f.write(chunk)
        left -= n
    for p in paths:
        p.unlink()
