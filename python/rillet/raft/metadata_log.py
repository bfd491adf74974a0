"""The metadata log on disk: the ``__cluster_metadata-0`` log (the Rust Log, as for topic
data) behind the Raft core's :class:`~rillet.raft.log.RaftLog` Protocol.

Each Raft entry is one record of a RecordBatch whose partition leader epoch is the entry's
epoch; a leader's proposal is one batch, so epochs change only at batch boundaries, which is
where Raft truncates. Control entries (the leader-change entry) are control batches. A
batch's timestamp comes from the injected clock; nothing reads it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rillet._core import BatchBuilder, Log, LogConfig, decode_batches
from rillet.errors import KafkaStorageError
from rillet.raft.log import Entry, EpochEndOffset
from rillet.scheduler import Clock, wall_clock_ms

__all__ = [
    "METADATA_TOPIC",
    "MetadataLog",
    "batches_to_entries",
    "entries_to_batches",
]

METADATA_TOPIC = "__cluster_metadata"
_READ_BYTES = 8 << 20


class MetadataLog:
    """:class:`~rillet.raft.log.RaftLog` over the Rust :class:`~rillet._core.Log`."""

    def __init__(self, log: Log, clock: Clock = wall_clock_ms) -> None:
        self.log = log
        self.clock = clock

    @classmethod
    def open(
        cls,
        metadata_log_dir: Path,
        config: LogConfig | None = None,
        clock: Clock = wall_clock_ms,
    ) -> MetadataLog:
        path = Path(metadata_log_dir) / f"{METADATA_TOPIC}-0"
        return cls(Log.open(path, config or LogConfig(max_message_bytes=8 << 20)), clock)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        epoch = self.log.latest_epoch()
        return 0 if epoch is None or self.end_offset == 0 else epoch

    def append_as_leader(
        self, payloads: Sequence[bytes], epoch: int, *, control: bool = False
    ) -> range:
        if not payloads:
            raise ValueError("nothing to append")
        b = BatchBuilder(is_control=control, partition_leader_epoch=epoch)
        now = self.clock()
        for p in payloads:
            b.append(now, None, p)
        info = self.log.append_as_leader(b.build(), epoch, allow_control=control)
        return range(info.first_offset, info.last_offset + 1)

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        if entries:
            self.log.append_as_follower(entries_to_batches(entries, self.clock()))

    def read(self, from_offset: int, max_entries: int) -> list[Entry]:
        if from_offset >= self.end_offset or max_entries <= 0:
            return []
        data = self.log.read(from_offset, _READ_BYTES).read_all()
        return [e for e in batches_to_entries(data) if e.offset >= from_offset][:max_entries]

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        entries = self.log.leader_epoch_entries()
        if not entries or epoch < entries[0].epoch:
            first_start = entries[0].start_offset if entries else self.end_offset
            return EpochEndOffset(epoch, first_start)
        found = self.log.end_offset_for_epoch(epoch)
        if found.epoch < 0:
            # Newer than any epoch here: the latest epoch ends at the log end.
            return EpochEndOffset(entries[-1].epoch, self.end_offset)
        return EpochEndOffset(found.epoch, found.end_offset)

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()


def entries_to_batches(entries: Sequence[Entry], now_ms: int) -> bytes:
    """Entries as RecordBatch bytes (timestamped ``now_ms``): one batch per run of the same
    epoch and kind."""
    data = bytearray()
    run: list[Entry] = []
    for e in entries:
        if run and (e.epoch != run[0].epoch or e.control != run[0].control):
            data += _batch(run, now_ms)
            run = []
        run.append(e)
    if run:
        data += _batch(run, now_ms)
    return bytes(data)


def _batch(run: Sequence[Entry], now: int) -> bytes:
    first = run[0]
    b = BatchBuilder(
        base_offset=first.offset, partition_leader_epoch=first.epoch, is_control=first.control
    )
    for i, e in enumerate(run):
        if e.offset != first.offset + i:
            raise KafkaStorageError(f"metadata entries are not contiguous at {e.offset}")
        b.append(now, None, e.payload)
    return b.build()


def batches_to_entries(data: bytes) -> list[Entry]:
    """The entries in RecordBatch bytes (CRCs checked; a partial tail is ignored)."""
    return [
        Entry(r.offset, batch.partition_leader_epoch, r.value or b"", batch.is_control)
        for batch in decode_batches(data, allow_partial=True)
        for r in batch.records
    ]
