"""The metadata log on disk: the ``__cluster_metadata-0`` log (the Rust Log, as for topic
data) behind the Raft core's :class:`~rillet.raft.log.RaftLog` Protocol.

Each Raft entry is one record of a RecordBatch whose partition leader epoch is the entry's
epoch; a leader's proposal is one batch, so epochs change only at batch boundaries, which is
where Raft truncates. Control entries (the leader-change entry) are control batches. A
batch's timestamp comes from the injected clock; nothing reads it back.

Snapshots (KIP-630) live beside the segments as Kafka names them,
``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``: written whole to a ``.part`` file,
synced and renamed, so a crash leaves a snapshot whole or absent. Opening deletes ``.part``
leftovers and snapshots older than the log start offset, and restarts the log at the latest
snapshot when that is ahead of the log (a follower that crashed while installing one). The
log start offset moves only to a snapshot's end offset (:meth:`MetadataLog.delete_before_snapshot`),
so everything below it is in that snapshot; segments wholly below it are deleted then.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rillet._core import BatchBuilder, Log, LogConfig, decode_batches
from rillet.errors import KafkaStorageError
from rillet.metadata.topic_names import METADATA_TOPIC
from rillet.raft.log import Entry, EpochEndOffset, SnapshotId
from rillet.scheduler import Clock, wall_clock_ms

__all__ = [
    "METADATA_TOPIC",
    "MetadataLog",
    "batches_to_entries",
    "entries_to_batches",
    "parse_snapshot_name",
    "snapshot_name",
]

_READ_BYTES = 8 << 20
SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".part"


def snapshot_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> SnapshotId | None:
    """The snapshot a complete snapshot file's name stands for (None for any other file)."""
    stem = name.removesuffix(SNAPSHOT_SUFFIX)
    if stem == name or len(stem) != 31 or stem[20] != "-":
        return None
    offset, epoch = stem[:20], stem[21:]
    if not (offset.isdigit() and epoch.isdigit()):
        return None
    return SnapshotId(int(offset), int(epoch))


class MetadataLog:
    """:class:`~rillet.raft.log.RaftLog` over the Rust :class:`~rillet._core.Log`."""

    def __init__(self, log: Log, clock: Clock = wall_clock_ms) -> None:
        self.log = log
        self.clock = clock
        self.dir = Path(log.dir)
        self._snapshots = self._recover_snapshots()
        self.truncate_to_latest_snapshot()

    @classmethod
    def open(
        cls,
        metadata_log_dir: Path,
        config: LogConfig | None = None,
        clock: Clock = wall_clock_ms,
        *,
        segment_bytes: int | None = None,
        segment_ms: int | None = None,
    ) -> MetadataLog:
        """Open (recovering) the metadata log. Only snapshots shorten it: time and size
        retention of the segments themselves are off, as in Kafka's KafkaMetadataLog."""
        path = Path(metadata_log_dir) / f"{METADATA_TOPIC}-0"
        if config is None:
            defaults = LogConfig()
            config = LogConfig(
                segment_bytes=segment_bytes or defaults.segment_bytes,
                segment_ms=segment_ms or defaults.segment_ms,
                max_message_bytes=8 << 20,
                retention_ms=-1,
                retention_bytes=-1,
            )
        return cls(Log.open(path, config), clock)

    def _recover_snapshots(self) -> list[SnapshotId]:
        found = []
        for f in self.dir.iterdir():
            if f.name.endswith(SNAPSHOT_SUFFIX + PARTIAL_SUFFIX):
                f.unlink(missing_ok=True)  # a snapshot a crash interrupted
                continue
            sid = parse_snapshot_name(f.name)
            if sid is None:
                continue
            if sid.end_offset < self.log.log_start_offset:
                f.unlink(missing_ok=True)  # older than the log start: never needed again
            else:
                found.append(sid)
        return sorted(found)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        epoch = self.log.latest_epoch()
        if epoch is not None and self.end_offset > self.log_start_offset:
            return epoch
        # No entry: the epoch of the snapshot the log starts at, if any.
        if self._snapshots and self._snapshots[-1].end_offset == self.end_offset:
            return self._snapshots[-1].epoch
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

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot_ids(self) -> list[SnapshotId]:
        return list(self._snapshots)

    def snapshot_path(self, snapshot_id: SnapshotId) -> Path:
        return self.dir / snapshot_name(snapshot_id)

    def snapshot_size(self, snapshot_id: SnapshotId) -> int:
        if snapshot_id not in self._snapshots:
            raise KeyError(snapshot_id)
        return self.snapshot_path(snapshot_id).stat().st_size

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        if snapshot_id not in self._snapshots:
            raise KeyError(snapshot_id)
        with open(self.snapshot_path(snapshot_id), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not 0 <= position <= size:
                raise IndexError(f"position {position} is outside snapshot {snapshot_id}")
            f.seek(position)
            return f.read(max(0, max_bytes))

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if self._snapshots:
            latest = self._snapshots[-1]
            if latest.end_offset > snapshot_id.end_offset or latest.epoch > snapshot_id.epoch:
                raise ValueError(f"snapshot {snapshot_id} is older than the latest, {latest}")
            if latest == snapshot_id:
                return
        path = self.snapshot_path(snapshot_id)
        part = path.with_name(path.name + PARTIAL_SUFFIX)
        with open(part, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
        _sync_dir(self.dir)
        self._snapshots.append(snapshot_id)

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        if (
            snapshot_id not in self._snapshots
            or snapshot_id.end_offset <= self.log_start_offset
            or snapshot_id.end_offset > self.end_offset
        ):
            return False
        self.log.maybe_increment_log_start_offset(snapshot_id.end_offset)
        self.log.delete_old_segments(high_watermark=snapshot_id.end_offset)
        self._remove_snapshots_before(snapshot_id)
        return True

    def truncate_to_latest_snapshot(self, *, force: bool = False) -> bool:
        if not self._snapshots:
            return False
        latest = self._snapshots[-1]
        last_epoch = self.log.latest_epoch() if self.end_offset > self.log_start_offset else None
        last_epoch = 0 if last_epoch is None else last_epoch
        if (
            force
            or latest.epoch > last_epoch
            or (latest.epoch == last_epoch and latest.end_offset > self.end_offset)
        ):
            self.log.truncate_fully_and_start_at(latest.end_offset)
            self._remove_snapshots_before(latest)
            return True
        return False

    def _remove_snapshots_before(self, snapshot_id: SnapshotId) -> None:
        for old in [s for s in self._snapshots if s < snapshot_id]:
            self._snapshots.remove(old)
            self.snapshot_path(old).unlink(missing_ok=True)

    def size_in_bytes(self) -> int:
        """The log's segments and the snapshots together (for metadata.max.retention.bytes)."""
        snapshots = sum(self.snapshot_path(s).stat().st_size for s in self._snapshots)
        return self.log.size_in_bytes + snapshots

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


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
