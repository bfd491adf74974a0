"""What a power cut does to a log that was not fsynced, for the simulation and for the
real-process tests: the bytes past the log's recovery point may be gone, all of them, none,
or from any byte on (a torn batch included); later segments go whole."""

from __future__ import annotations

import random
import struct
from pathlib import Path

__all__ = ["lose_unflushed", "unflushed_bytes"]

_BATCH_HEADER = 27  # up to and including lastOffsetDelta


def unflushed_bytes(log_dir: Path, recovery_point: int) -> list[tuple[Path, int, int]]:
    """Each segment of a closed log with its first byte holding an offset at or above
    ``recovery_point`` (its size when there is none) and its size."""
    regions = []
    for seg in sorted(log_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + _BATCH_HEADER <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            (last_delta,) = struct.unpack_from(">i", data, pos + 23)
            if base + last_delta >= recovery_point:
                break
            pos += 12 + length
        regions.append((seg, min(pos, len(data)), len(data)))
    return regions


def lose_unflushed(
    log_dir: Path, recovery_point: int, rng: random.Random, keep: int | None = None
) -> int:
    """Cut a closed log as a power loss might: keep ``keep`` of its unflushed bytes (by
    default all, none or a random number, a third of the time each). Returns how many
    bytes went."""
    regions = unflushed_bytes(log_dir, recovery_point)
    unflushed = sum(size - first for _, first, size in regions)
    if keep is None:
        roll = rng.random()
        keep = unflushed if roll < 1 / 3 else 0 if roll < 2 / 3 else rng.randrange(unflushed + 1)
    lost = unflushed - keep
    first_segment = regions[0][0] if regions else None
    for seg, first, size in regions:
        if keep >= size - first:
            keep -= size - first
            continue
        if keep == 0 and first == 0 and seg != first_segment:
            for suffix in (".log", ".index", ".timeindex"):
                seg.with_suffix(suffix).unlink(missing_ok=True)
            continue
        with open(seg, "r+b") as f:
            f.truncate(first + keep)
        keep = 0
    return lost
