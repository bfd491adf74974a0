"""The ``.lock`` file of a data directory: one process at a time uses a log dir or the
metadata log dir, as in Kafka. The lock is an ``flock`` held for as long as the returned
file stays open, and released by the kernel if the process dies."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from rillet.errors import KafkaStorageError

__all__ = ["LOCK_FILE", "lock_dir"]

LOCK_FILE = ".lock"


def lock_dir(d: Path) -> IO[bytes]:
    """Create ``d`` if needed and lock it; close the returned file to unlock. Raises
    KafkaStorageError when another process holds the lock."""
    d.mkdir(parents=True, exist_ok=True)
    f = open(d / LOCK_FILE, "ab")  # noqa: SIM115 - held open for as long as the lock is
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise KafkaStorageError(
            f"Failed to acquire lock on file {LOCK_FILE} in {d}. A Kafka instance in another "
            "process or thread is using this directory."
        ) from None
    return f
