"""In-memory implementations of :class:`~rillet.raft.log.RaftLog` and
:class:`~rillet.raft.store.QuorumStateStore`, for tests and the simulator.

Both model durability explicitly, so a simulated crash can lose exactly what a real one would:
:class:`MemoryRaftLog` keeps a durable image that :meth:`MemoryRaftLog.flush` refreshes and
:meth:`MemoryRaftLog.lose_unflushed` reverts to (appends *and* truncations since the last
flush are forgotten, as with a page cache that never reached the disk).
:class:`MemoryQuorumStateStore` is durable on every :meth:`~MemoryQuorumStateStore.persist`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from rillet.raft.log import Entry, EpochEndOffset
from rillet.raft.store import ElectionState

__all__ = ["MemoryQuorumStateStore", "MemoryRaftLog"]


class MemoryRaftLog:
    """A list of entries plus a leader-epoch cache of ``(epoch, start offset)`` pairs.

    Appends check what a real log checks: offsets contiguous from the end, epochs never
    decreasing. The log start offset stays 0 (no snapshots).
    """

    def __init__(self, entries: Sequence[Entry] = ()) -> None:
        self._entries: list[Entry] = []
        self._epochs: list[tuple[int, int]] = []
        self._durable: list[Entry] = []
        self._dirty = False
        if entries:
            self.append_as_follower(entries)
            self.flush()

    # -- RaftLog -----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def end_offset(self) -> int:
        return len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else 0

    def append_as_leader(
        self, payloads: Sequence[bytes], epoch: int, *, control: bool = False
    ) -> range:
        if not payloads:
            raise ValueError("nothing to append")
        start = self.end_offset
        self.append_as_follower(
            [Entry(start + i, epoch, bytes(p), control) for i, p in enumerate(payloads)]
        )
        return range(start, self.end_offset)

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        if not entries:
            raise ValueError("nothing to append")
        last_epoch = self.last_fetched_epoch
        new_epochs: list[tuple[int, int]] = []
        for i, entry in enumerate(entries):
            if entry.offset != self.end_offset + i:
                raise ValueError(
                    f"entry offset {entry.offset} does not follow {self.end_offset + i - 1}"
                )
            if entry.epoch < last_epoch:
                raise ValueError(f"entry epoch {entry.epoch} is below {last_epoch}")
            if entry.epoch > last_epoch or not (self._epochs or new_epochs):
                new_epochs.append((entry.epoch, entry.offset))
            last_epoch = entry.epoch
        self._epochs.extend(new_epochs)
        self._entries.extend(entries)
        self._dirty = True

    def read(self, from_offset: int, max_entries: int) -> list[Entry]:
        if not 0 <= from_offset <= self.end_offset:
            raise ValueError(f"offset {from_offset} is outside the log [0, {self.end_offset}]")
        return self._entries[from_offset : from_offset + max(0, max_entries)]

    def truncate_to(self, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot truncate to {offset}")
        if offset >= self.end_offset:
            return
        del self._entries[offset:]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()
        self._dirty = True

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        # Index of the largest cached epoch <= epoch.
        i = bisect.bisect_right(self._epochs, (epoch, self.end_offset + 1)) - 1
        if i < 0:
            first_start = self._epochs[0][1] if self._epochs else self.end_offset
            return EpochEndOffset(epoch, first_start)
        found_epoch = self._epochs[i][0]
        if i + 1 < len(self._epochs):
            return EpochEndOffset(found_epoch, self._epochs[i + 1][1])
        return EpochEndOffset(found_epoch, self.end_offset)

    # -- durability ----------------------------------------------------------------------------

    def flush(self) -> None:
        """Make every append and truncation so far durable."""
        if self._dirty:
            self._durable = list(self._entries)
            self._dirty = False

    def lose_unflushed(self) -> None:
        """What a crash does: go back to the last flushed image."""
        if self._dirty:
            durable = self._durable
            self._entries = []
            self._epochs = []
            self._durable = []
            if durable:
                self.append_as_follower(durable)
            self._durable = durable
            self._dirty = False

    @property
    def flushed_end_offset(self) -> int:
        return len(self._durable)

    def durable_entry(self, offset: int) -> Entry | None:
        """The flushed entry at ``offset``, if there is one."""
        return self._durable[offset] if 0 <= offset < len(self._durable) else None

    # -- inspection ----------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def epochs(self) -> list[tuple[int, int]]:
        """The leader-epoch cache: ``(epoch, start offset)`` pairs, ascending."""
        return list(self._epochs)

    def __repr__(self) -> str:
        return f"MemoryRaftLog(end_offset={self.end_offset}, epochs={self._epochs})"


class MemoryQuorumStateStore:
    """Keeps the last persisted :class:`ElectionState`; ``persist_count`` counts writes."""

    def __init__(self, state: ElectionState | None = None) -> None:
        self._state = state
        self.persist_count = 0

    def load(self) -> ElectionState | None:
        return self._state

    def persist(self, epoch: int, voted_id: int | None, leader_id: int | None) -> None:
        self._state = ElectionState(epoch, voted_id, leader_id)
        self.persist_count += 1

    @property
    def state(self) -> ElectionState | None:
        return self._state
