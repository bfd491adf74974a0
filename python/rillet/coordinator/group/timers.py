"""Timers as data: what the shard wants to happen at a given time, and nothing that runs.

Kafka's coordinator schedules closures on a timer keyed by strings
(``session-timeout-<group>-<member>``, ``join-<group>``, ...); scheduling a key again
replaces it, cancelling removes it. Here a :class:`Timer` is a key, a deadline and the data
its expiry needs; the shard exposes :meth:`Timers.next_deadline_ms` and, when the driver
calls ``tick(now_ms)``, pops the due timers in deadline order and handles each by its kind.
Timers are soft state: they are not persisted, and a shard schedules them again when it is
loaded (Kafka's ``onLoaded``).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

__all__ = ["Timer", "TimerKey", "Timers"]

# (kind, group id, member id or ""), e.g. ("consumer-session", "g", "m-1").
TimerKey = tuple[str, str, str]


@dataclass(frozen=True)
class Timer:
    key: TimerKey
    deadline_ms: int
    # Whatever the expiry handler needs (an epoch, a generation, the remaining delay).
    data: tuple[int, ...] = ()

    @property
    def kind(self) -> str:
        return self.key[0]

    @property
    def group_id(self) -> str:
        return self.key[1]

    @property
    def member_id(self) -> str:
        return self.key[2]


class Timers:
    """Scheduled timers by key, with a heap for the next deadline (lazy deletion)."""

    def __init__(self) -> None:
        self._timers: dict[TimerKey, tuple[int, Timer]] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = itertools.count()

    def schedule(self, key: TimerKey, deadline_ms: int, data: tuple[int, ...] = ()) -> None:
        """Schedules ``key`` at ``deadline_ms``, replacing any timer with that key."""
        seq = next(self._seq)
        self._timers[key] = (seq, Timer(key, deadline_ms, data))
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def schedule_if_absent(self, key: TimerKey, deadline_ms: int) -> None:
        if key not in self._timers:
            self.schedule(key, deadline_ms)

    def cancel(self, key: TimerKey) -> None:
        self._timers.pop(key, None)

    def get(self, key: TimerKey) -> Timer | None:
        entry = self._timers.get(key)
        return None if entry is None else entry[1]

    def _drop_stale(self) -> None:
        while self._heap:
            _, seq, key = self._heap[0]
            entry = self._timers.get(key)
            if entry is not None and entry[0] == seq:
                return
            heapq.heappop(self._heap)

    def next_deadline_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Timer | None:
        """The earliest timer due at ``now_ms``, removed; None if none is due."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        return self._timers.pop(key)[1]

    def __len__(self) -> int:
        return len(self._timers)
