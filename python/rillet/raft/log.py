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

__all__ = ["Entry", "EpochEndOffset", "RaftLog", "validate_offset_and_epoch"]


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


class RaftLog(Protocol):
    """The log store the Raft core appends to and reads from (the metadata log).

    The core writes through this Protocol; durability is the driver's job: when
    :attr:`~rillet.raft.node.Outputs.flush_log` is set, the driver makes the log durable before
    it sends any of the outputs' messages. A production implementation wraps the Rust ``Log``
    of ``__cluster_metadata``; :class:`rillet.raft.memory.MemoryRaftLog` is the in-memory one.
    """

    @property
    def log_start_offset(self) -> int:
        """Offset of the first entry still held (0 until snapshots compact the log)."""
        ...

    @property
    def end_offset(self) -> int:
        """The log end offset: offset the next appended entry gets."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last entry, 0 when the log is empty."""
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


def validate_offset_and_epoch(
    log: RaftLog, fetch_offset: int, last_fetched_epoch: int
) -> EpochEndOffset | None:
    """Check a fetcher's position against ``log``; return the diverging epoch, or None.

    The position ``(fetch_offset, last_fetched_epoch)`` is consistent with the log when the log
    holds ``last_fetched_epoch`` and that epoch does not end before ``fetch_offset``; by log
    matching the fetcher's log then equals this log below ``fetch_offset``. Otherwise the
    answer is where the largest epoch not above ``last_fetched_epoch`` ends here, which the
    fetcher truncates to (KIP-595, "Fetch": DivergingEpoch).
    """
    if fetch_offset == 0:
        # An empty prefix matches every log.
        return None
    end = log.end_offset_for_epoch(last_fetched_epoch)
    if end.epoch != last_fetched_epoch or end.end_offset < fetch_offset:
        return end
    return None
