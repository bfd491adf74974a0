"""The replicated log as the Raft core sees it: entries, the leader-epoch view, the Protocol.

An entry is identified by its offset and the epoch of the leader that appended it (KIP-595,
"Log Records"); two logs that hold an entry with the same offset and epoch hold the same
entries up to it (log matching, Raft §5.3). The leader-epoch cache maps each epoch to the
offset of its first entry, as Kafka's ``LeaderEpochFileCache`` does; from it
:meth:`RaftLog.end_offset_for_epoch` answers where an epoch ends, which is how the leader tells a
fetching follower where their logs diverge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

__all__ = [
    "Entry",
    "EpochEndOffset",
    "FetchPosition",
    "RaftLog",
    "SnapshotId",
    "validate_offset_and_epoch",
]


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry: ``offset``, the ``epoch`` of the leader that appended it, and its bytes.

    ``control`` marks entries written by the Raft layer itself (the leader-change entry every
    leader appends when its epoch starts, Kafka's LEADER_CHANGE control record); they are
    committed and handed to the driver like any other entry, which skips them when applying.
    """

    offset: int
    epoch: int
    payload: bytes
    control: bool = False


class EpochEndOffset(NamedTuple):
    """An epoch and the offset at which it ends (exclusive), as in Kafka's ``OffsetAndEpoch``
    answers to OffsetsForLeaderEpoch and the Fetch response's ``DivergingEpoch``."""

    epoch: int
    end_offset: int


class SnapshotId(NamedTuple):
    """A snapshot of the state machine (KIP-630): the state after applying every entry below
    ``end_offset``, where ``epoch`` is the epoch of the entry at ``end_offset - 1``. Ordered
    as Kafka's ``OffsetAndEpoch``: by end offset, then epoch."""

    end_offset: int
    epoch: int


class FetchPosition(NamedTuple):
    """The leader's verdict on a fetcher's position (Kafka's ``ValidOffsetAndEpoch``): at
    most one of the two is set; neither means the position is consistent with the log."""

    diverging: EpochEndOffset | None = None
    snapshot: SnapshotId | None = None


class RaftLog(Protocol):
    """The log store the Raft core appends to and reads from (the metadata log).

    The core writes through this Protocol; durability is the driver's job: when
    :attr:`~rillet.raft.node.Outputs.flush_log` is set, the driver makes the log durable before
    it sends any of the outputs' messages. A production implementation wraps the Rust ``Log``
    of ``__cluster_metadata``; :class:`rillet.raft.memory.MemoryRaftLog` is the in-memory one.
    """

    @property
    def log_start_offset(self) -> int:
        """Offset of the first entry still held: 0, or, once a snapshot let the prefix go,
        the end offset of the earliest snapshot kept (or a little below it)."""
        ...

    @property
    def end_offset(self) -> int:
        """The log end offset: offset the next appended entry gets."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last entry; when the log holds none, the latest snapshot's epoch (0
        without one)."""
        ...

    def append_as_leader(
        self, payloads: Sequence[bytes], epoch: int, *, control: bool = False
    ) -> range:
        """Append ``payloads`` as entries of ``epoch`` at the end; return their offsets."""
        ...

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        """Append entries fetched from the leader; the first one's offset is ``end_offset``."""
        ...

    def read(self, from_offset: int, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries from ``from_offset`` (empty at the end of the log)."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at ``offset`` and above (and their leader-epoch cache entries)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        """Where ``epoch`` ends in this log, as Kafka's leader-epoch cache answers it.

        The answer is the largest epoch ``e <= epoch`` present in the log and the start offset
        of the first epoch after ``e`` (the log end offset when ``e`` is the latest epoch).
        When no epoch ``<= epoch`` is present the answer is ``epoch`` itself and the start of
        the first epoch held (the log end offset if the log is empty).
        """
        ...

    # -- snapshots (KIP-630) -----------------------------------------------------------------

    def snapshot_ids(self) -> list[SnapshotId]:
        """The complete snapshots held, oldest first."""
        ...

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of a snapshot's bytes from ``position``. Raises KeyError when
        the snapshot is not held and IndexError when ``position`` is past its end."""
        ...

    def snapshot_size(self, snapshot_id: SnapshotId) -> int:
        """A held snapshot's size in bytes (KeyError when it is not held)."""
        ...

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a complete snapshot, durably and atomically (a crash leaves it whole or
        absent). It must be newer than every snapshot held."""
        ...

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Let go of every entry below a held snapshot (the log start offset moves to its end
        offset) and of the older snapshots; return whether anything moved. The driver may call
        it only for a snapshot of committed entries (at most the high watermark)."""
        ...

    def truncate_to_latest_snapshot(self, *, force: bool = False) -> bool:
        """If the latest snapshot is ahead of the log (a later epoch, or the same epoch and a
        larger end offset), or with ``force``, drop every entry and restart the log empty at
        the snapshot's end offset, durably (Kafka's ``truncateToLatestSnapshot``: a follower
        installing a fetched snapshot, or reopening after a crash while installing one).
        Returns whether it did."""
        ...


def latest_snapshot_id(log: RaftLog) -> SnapshotId | None:
    ids = log.snapshot_ids()
    return ids[-1] if ids else None


def earliest_snapshot_id(log: RaftLog) -> SnapshotId | None:
    ids = log.snapshot_ids()
    return ids[0] if ids else None


def end_offset_for_epoch(log: RaftLog, epoch: int) -> EpochEndOffset:
    """:meth:`RaftLog.end_offset_for_epoch`, where an epoch older than every epoch the log
    still holds ends at the earliest snapshot (whose end offset is where the log starts)."""
    end = log.end_offset_for_epoch(epoch)
    earliest = earliest_snapshot_id(log)
    if earliest is not None and end.epoch == epoch and end.end_offset == earliest.end_offset:
        return EpochEndOffset(earliest.epoch, earliest.end_offset)
    return end


def validate_offset_and_epoch(
    log: RaftLog, fetch_offset: int, last_fetched_epoch: int
) -> FetchPosition:
    """Check a fetcher's position against ``log`` (Kafka's ``validateOffsetAndEpoch``).

    The fetcher needs a snapshot when the log no longer holds what would tell: its position is
    below the log start offset, or at it with another epoch than the snapshot there, or its
    epoch is older than the earliest snapshot's. Otherwise the position
    ``(fetch_offset, last_fetched_epoch)`` is consistent with the log when the log holds
    ``last_fetched_epoch`` and that epoch does not end before ``fetch_offset``; by log
    matching the fetcher's log then equals this log below ``fetch_offset``. Failing that the
    answer is where the largest epoch not above ``last_fetched_epoch`` ends here, which the
    fetcher truncates to (KIP-595, "Fetch": DivergingEpoch).
    """
    start = log.log_start_offset
    if fetch_offset == 0 and start == 0:
        # An empty prefix matches every log.
        return FetchPosition()
    earliest = earliest_snapshot_id(log)
    if earliest is not None and (
        fetch_offset < start
        or (fetch_offset == start and last_fetched_epoch != earliest.epoch)
        or last_fetched_epoch < earliest.epoch
    ):
        latest = latest_snapshot_id(log)
        assert latest is not None
        return FetchPosition(snapshot=latest)
    end = end_offset_for_epoch(log, last_fetched_epoch)
    if end.epoch != last_fetched_epoch or end.end_offset < fetch_offset:
        return FetchPosition(diverging=end)
    return FetchPosition()
