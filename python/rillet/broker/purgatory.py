"""Delayed operations (Kafka's purgatory): requests that wait for an event, not a timer loop.

A fetch long poll waits until enough bytes arrive or ``fetch.max.wait.ms`` passes; an
``acks=all`` produce waits until the high watermark passes its records or the request
timeout passes. Each waiting operation watches keys (topic-partitions); whoever changes a
partition (an append, a high watermark move) calls :meth:`Purgatory.check_and_complete` for
its key, which re-checks only the operations watching it. Runs on one asyncio event loop.

Its size is kept as it changes, so the metrics read it at no cost: Kafka's
``NumDelayedOperations`` (operations waiting) and ``PurgatorySize`` (operations watched, one
per key an operation watches).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field


@dataclass(eq=False)
class DelayedOperation:
    """Completes when ``try_complete()`` returns True or after ``timeout_ms``."""

    try_complete: Callable[[], bool]
    future: asyncio.Future[bool] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def complete(self, satisfied: bool) -> None:
        if not self.future.done():
            self.future.set_result(satisfied)


class Purgatory:
    """Operations waiting on keys. Not thread safe: use from the event loop only."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[DelayedOperation]] = {}
        self._waiting: set[DelayedOperation] = set()
        self._watched = 0  # (key, operation) pairs in _watchers

    def __len__(self) -> int:
        """Operations waiting (Kafka's NumDelayedOperations)."""
        return len(self._waiting)

    @property
    def watched(self) -> int:
        """Operations watched, counted once per key they watch (Kafka's PurgatorySize)."""
        return self._watched

    async def wait(
        self, keys: Iterable[Hashable], try_complete: Callable[[], bool], timeout_ms: int
    ) -> bool:
        """Wait until ``try_complete()`` holds (True) or the timeout passes (False). It is
        tried once at once, then again each time a watched key is checked."""
        if try_complete():
            return True
        if timeout_ms <= 0:
            return False
        op = DelayedOperation(try_complete)
        keys = list(dict.fromkeys(keys))
        for k in keys:
            self._watchers.setdefault(k, set()).add(op)
        self._watched += len(keys)
        self._waiting.add(op)
        loop = asyncio.get_running_loop()
        timer = loop.call_later(timeout_ms / 1000, op.complete, False)
        try:
            return await op.future
        finally:
            timer.cancel()
            self._waiting.discard(op)
            for k in keys:
                ops = self._watchers.get(k)
                if ops is not None and op in ops:
                    ops.discard(op)
                    self._watched -= 1
                    if not ops:
                        del self._watchers[k]

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watching ``key``; returns how many completed."""
        done = 0
        for op in list(self._watchers.get(key, ())):
            if not op.future.done() and op.try_complete():
                op.complete(True)
                done += 1
        return done

    def cancel_all(self) -> None:
        for ops in self._watchers.values():
            for op in ops:
                op.complete(False)
        self._watchers.clear()
        self._waiting.clear()
        self._watched = 0
