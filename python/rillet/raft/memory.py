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

from rillet.raft.log import Entry, EpochEndOffset, SnapshotId
from rillet.raft.store import ElectionState

__all__ = ["MemoryQuorumStateStore", "MemoryRaftLog"]


class MemoryRaftLog:
    """A list of entries from ``log_start_offset`` on, a leader-epoch cache of
    ``(epoch, start offset)`` pairs, and snapshots.

    Appends check what a real log checks: offsets contiguous from the end, epochs never
    decreasing. Snapshots are durable when created, and moving the log start offset or
    restarting the log at a snapshot is durable at once, as the file-backed log's are (its
    segment deletions and creations are synced); appends and truncations wait for a flush.
    """

    def __init__(self, entries: Sequence[Entry] = ()) -> None:
        self._start = self._durable_start = 0
        self._entries: list[Entry] = []
        self._epochs: list[tuple[int, int]] = []
        self._durable: list[Entry] = []
        self._dirty = False
        self._snapshots: dict[SnapshotId, bytes] = {}
        if entries:
            self._start = self._durable_start = entries[0].offset
            self.append_as_follower(entries)
            self.flush()

    # -- RaftLog -----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        latest = max(self._snapshots, default=None)
        return latest.epoch if latest is not None else 0

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
        if not self._start <= from_offset <= self.end_offset:
            raise ValueError(
                f"offset {from_offset} is outside the log [{self._start}, {self.end_offset}]"
            )
        i = from_offset - self._start
        return self._entries[i : i + max(0, max_entries)]

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset}, below the log start {self._start}")
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start :]
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

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot_ids(self) -> list[SnapshotId]:
        return sorted(self._snapshots)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        data = self._snapshots[snapshot_id]
        if not 0 <= position <= len(data):
            raise IndexError(f"position {position} is outside snapshot {snapshot_id}")
        return data[position : position + max(0, max_bytes)]

    def snapshot_size(self, snapshot_id: SnapshotId) -> int:
        return len(self._snapshots[snapshot_id])

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        latest = max(self._snapshots, default=None)
        if latest is not None and (
            latest.end_offset > snapshot_id.end_offset or latest.epoch > snapshot_id.epoch
        ):
            raise ValueError(f"snapshot {snapshot_id} is older than the latest, {latest}")
        self._snapshots[snapshot_id] = bytes(data)

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        if (
            snapshot_id not in self._snapshots
            or snapshot_id.end_offset <= self._start
            or snapshot_id.end_offset > self.end_offset
        ):
            return False
        self._drop_prefix(snapshot_id.end_offset)
        self._forget_snapshots_before(snapshot_id)
        return True

    def truncate_to_latest_snapshot(self, *, force: bool = False) -> bool:
        latest = max(self._snapshots, default=None)
        if latest is None:
            return False
        last_epoch = self._entries[-1].epoch if self._entries else 0
        if (
            force
            or latest.epoch > last_epoch
            or (latest.epoch == last_epoch and latest.end_offset > self.end_offset)
        ):
            self._start = latest.end_offset
            self._entries = []
            self._epochs = []
            self._durable = []
            self._durable_start = self._start
            self._dirty = False
            self._forget_snapshots_before(latest)
            return True
        return False

    def _drop_prefix(self, offset: int) -> None:
        """Entries below ``offset`` go, in memory and on "disk" alike."""
        cut = offset - self._start
        del self._entries[:cut]
        self._durable = [e for e in self._durable if e.offset >= offset]
        self._start = self._durable_start = offset
        covering = [i for i, (_, start) in enumerate(self._epochs) if start <= offset]
        if covering:
            i = covering[-1]
            self._epochs = [(self._epochs[i][0], offset), *self._epochs[i + 1 :]]

    def _forget_snapshots_before(self, snapshot_id: SnapshotId) -> None:
        for old in [s for s in self._snapshots if s < snapshot_id]:
            del self._snapshots[old]

    # -- durability ----------------------------------------------------------------------------

    def flush(self) -> None:
        """Make every append and truncation so far durable."""
        if self._dirty:
            self._durable = list(self._entries)
            self._durable_start = self._start
            self._dirty = False

    def lose_unflushed(self) -> None:
        """What a crash does: go back to the last flushed image."""
        if self._dirty:
            self._start = self._durable_start
            self._entries = list(self._durable)
            self._epochs = []
            for e in self._entries:
                if not self._epochs or e.epoch > self._epochs[-1][0]:
                    self._epochs.append((e.epoch, e.offset))
            self._dirty = False

    @property
    def flushed_end_offset(self) -> int:
        return self._durable_start + len(self._durable)

    def durable_entry(self, offset: int) -> Entry | None:
        """The flushed entry at ``offset``, if there is one."""
        i = offset - self._durable_start
        return self._durable[i] if 0 <= i < len(self._durable) else None

    # -- inspection ----------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def epochs(self) -> list[tuple[int, int]]:
        """The leader-epoch cache: ``(epoch, start offset)`` pairs, ascending."""
        return list(self._epochs)

    def __repr__(self) -> str:
        return (
            f"MemoryRaftLog(start={self._start}, end_offset={self.end_offset}, "
            f"epochs={self._epochs}, snapshots={sorted(self._snapshots)})"
        )


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
