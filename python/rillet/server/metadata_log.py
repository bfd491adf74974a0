"""The metadata quorum's storage on disk: the ``__cluster_metadata-0`` log (the Rust Log, as
for topic data) behind the Raft core's :class:`~rillet.raft.log.RaftLog` Protocol, and the
``quorum-state`` file behind :class:`~rillet.raft.store.QuorumStateStore`.

Each Raft entry is one record of a RecordBatch whose partition leader epoch is the entry's
epoch; a leader's proposal is one batch, so epochs change only at batch boundaries, which is
where Raft truncates. Control entries (the leader-change entry) are control batches.

``quorum-state`` is Kafka's JSON file (``leaderId``, ``leaderEpoch``, ``votedId``, ...),
replaced atomically (tmp, fsync, rename, fsync dir) before a vote or epoch is acknowledged.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from rillet._core import BatchBuilder, Log, LogConfig, decode_batches
from rillet.errors import KafkaStorageError
from rillet.raft.log import Entry, EpochEndOffset
from rillet.raft.store import ElectionState

__all__ = [
    "METADATA_TOPIC",
    "FileQuorumStateStore",
    "MetadataLog",
    "batches_to_entries",
    "entries_to_batches",
]

METADATA_TOPIC = "__cluster_metadata"
QUORUM_STATE_FILE = "quorum-state"
_READ_BYTES = 8 << 20


class MetadataLog:
    """:class:`~rillet.raft.log.RaftLog` over the Rust :class:`~rillet._core.Log`."""

    def __init__(self, log: Log) -> None:
        self.log = log

    @classmethod
    def open(cls, metadata_log_dir: Path, config: LogConfig | None = None) -> MetadataLog:
        path = Path(metadata_log_dir) / f"{METADATA_TOPIC}-0"
        return cls(Log.open(path, config or LogConfig(max_message_bytes=8 << 20)))

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
        now = time.time_ns() // 1_000_000
        for p in payloads:
            b.append(now, None, p)
        info = self.log.append_as_leader(b.build(), epoch, allow_control=control)
        return range(info.first_offset, info.last_offset + 1)

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        if entries:
            self.log.append_as_follower(entries_to_batches(entries))

    def read(self, from_offset: int, max_entries: int) -> list[Entry]:
        if from_offset >= self.end_offset or max_entries <= 0:
            return []
        data = self.log.read(from_offset, _READ_BYTES).read_all()
        return [e for e in batches_to_entries(data) if e.offset >= from_offset][:max_entries]

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        entries = self.log.leader_epoch_entries()
        if not entries or epoch < entries[0][0]:
            first_start = entries[0][1] if entries else self.end_offset
            return EpochEndOffset(epoch, first_start)
        found, end = self.log.end_offset_for_epoch(epoch)
        if found < 0:
            # Newer than any epoch here: the latest epoch ends at the log end.
            return EpochEndOffset(entries[-1][0], self.end_offset)
        return EpochEndOffset(found, end)

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()


def entries_to_batches(entries: Sequence[Entry]) -> bytes:
    """Entries as RecordBatch bytes: one batch per run of the same epoch and kind."""
    data = bytearray()
    run: list[Entry] = []
    for e in entries:
        if run and (e.epoch != run[0].epoch or e.control != run[0].control):
            data += _batch(run)
            run = []
        run.append(e)
    if run:
        data += _batch(run)
    return bytes(data)


def _batch(run: Sequence[Entry]) -> bytes:
    first = run[0]
    now = time.time_ns() // 1_000_000
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


class FileQuorumStateStore:
    """The ``quorum-state`` file of the metadata log directory."""

    def __init__(self, metadata_log_dir: Path, voters: Sequence[int] = ()) -> None:
        self.dir = Path(metadata_log_dir)
        self.path = self.dir / QUORUM_STATE_FILE
        self.voters = sorted(voters)

    def load(self) -> ElectionState | None:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise KafkaStorageError(f"cannot read {self.path}: {e}") from None
        try:
            epoch = int(raw["leaderEpoch"])
            voted = int(raw.get("votedId", -1))
            leader = int(raw.get("leaderId", -1))
        except (KeyError, TypeError, ValueError) as e:
            raise KafkaStorageError(f"{self.path} is malformed: {e}") from None
        return ElectionState(epoch, None if voted < 0 else voted, None if leader < 0 else leader)

    def persist(self, epoch: int, voted_id: int | None, leader_id: int | None) -> None:
        body = {
            "clusterId": "",
            "leaderId": -1 if leader_id is None else leader_id,
            "leaderEpoch": epoch,
            "votedId": -1 if voted_id is None else voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in self.voters],
            "data_version": 0,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(body, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
