"""Time for the drivers: the clock they read and the scheduler that runs periodic work.

Both are injected. The process's composition root passes :func:`wall_clock_ms` and an
:class:`AsyncioScheduler`; a test or the simulator passes a virtual clock and runs the
scheduled work itself. No module outside this one reads the wall clock for protocol or
housekeeping decisions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["AsyncioScheduler", "Clock", "Scheduler", "wall_clock_ms"]

_log = logging.getLogger(__name__)

Clock = Callable[[], int]
"""Milliseconds since the epoch (the wall clock in a real process, virtual in tests)."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Scheduler(Protocol):
    """Runs a function every ``interval_ms`` (Kafka's KafkaScheduler). A run that raises is
    logged and does not stop later runs."""

    def schedule(self, name: str, fn: Callable[[], object], interval_ms: int) -> None: ...


class AsyncioScheduler:
    """:class:`Scheduler` on the running asyncio event loop: each task sleeps its interval
    (at least 10 ms), then runs on the loop. Not thread safe; :meth:`shutdown` cancels every
    task and waits for it to end."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def schedule(self, name: str, fn: Callable[[], object], interval_ms: int) -> None:
        self._tasks.append(asyncio.create_task(self._every(name, fn, interval_ms), name=name))

    @staticmethod
    async def _every(name: str, fn: Callable[[], object], interval_ms: int) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                fn()
            except Exception:
                _log.exception("scheduled task %s failed", name)

    async def shutdown(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
