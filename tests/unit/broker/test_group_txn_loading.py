"""The group coordinator's driver loads transactional writes from a real ``__consumer_offsets``
log: a transactional batch's offsets replay as pending for its producer, a COMMIT or ABORT
control batch ends that producer's transaction, other control records are skipped, and a
read that starts inside a batch skips the records before it. Also ``complete_transaction``'s
refusals when this broker does not coordinate the partition."""

from __future__ import annotations

import asyncio
import random
import struct
import uuid
from pathlib import Path

from rillet._core import BatchBuilder, Log
from rillet.broker import group_coordinator as gc
from rillet.coordinator.end_txn_marker import end_txn_marker_batch
from rillet.coordinator.group import (
    GroupCoordinatorConfig,
    GroupCoordinatorShard,
    OffsetFetchRequest,
    TopicInfo,
    TopicPartitionIndexes,
)
from rillet.coordinator.group.record_helpers import offset_commit_record
from rillet.coordinator.group.records import OffsetCommitValue
from rillet.errors import InvalidRequestError, NotCoordinatorError
from rillet.types import TopicPartition

TP = TopicPartition(gc.OFFSETS_TOPIC, 0)
CONFIG = GroupCoordinatorConfig(offsets_topic_num_partitions=1)
TOPICS = {"t": TopicInfo(uuid.UUID(int=1), 4)}


def offsets_batch(
    base_offset: int, offsets: dict[int, int], producer_id: int = -1, epoch: int = -1
) -> bytes:
    """OffsetCommit records of group "g" for partitions of t (transactional if a producer)."""
    builder = BatchBuilder(
        base_offset=base_offset,
        partition_leader_epoch=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        is_transactional=producer_id >= 0,
    )
    for partition, offset in sorted(offsets.items()):
        record = offset_commit_record("g", "t", partition, OffsetCommitValue(offset, -1, "", 1))
        builder.append(1, record.key_bytes(), record.value_bytes())
    return builder.build()


def marker(base_offset: int, producer_id: int, committed: bool) -> bytes:
    data = bytearray(end_txn_marker_batch(producer_id, 0, 3, committed, 1))
    struct.pack_into(">q", data, 0, base_offset)  # the offset and leader epoch the
    struct.pack_into(">i", data, 12, 0)  # leader stamps (outside the CRC)
    return bytes(data)


def other_control_batch(base_offset: int) -> bytes:
    """A control record of another type (Kafka's LEADER_CHANGE, type 2)."""
    builder = BatchBuilder(base_offset=base_offset, partition_leader_epoch=0, is_control=True)
    builder.append(1, struct.pack(">hh", 0, 2), b"\x00\x00")
    return builder.build()


def load(log: Log) -> GroupCoordinatorShard:
    shard = GroupCoordinatorShard(0, CONFIG, rng=random.Random(1), topics=TOPICS)
    gc._replay(shard, gc._read_records(log), TP)
    shard.on_loaded(0)
    return shard


def fetch(shard: GroupCoordinatorShard) -> dict[int, int | str]:
    request = OffsetFetchRequest(
        "g", (TopicPartitionIndexes("t", (0, 1, 2, 3)),), require_stable=True
    )
    response = shard.fetch_offsets(request).response
    assert response is not None
    return {
        p.partition_index: p.committed_offset if p.error is None else p.error.name
        for t in response.topics
        for p in t.partitions
        if p.error is not None or p.committed_offset >= 0
    }


def test_loading_replays_transactions_and_their_markers(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "offsets")
    log.append_as_follower(offsets_batch(0, {0: 5}))
    log.append_as_follower(offsets_batch(1, {0: 10, 1: 11}, producer_id=7, epoch=0))
    log.append_as_follower(offsets_batch(3, {2: 20}, producer_id=8, epoch=0))
    log.append_as_follower(marker(4, 7, committed=True))
    log.append_as_follower(other_control_batch(5))
    log.append_as_follower(offsets_batch(6, {0: 30}, producer_id=7, epoch=0))
    log.append_as_follower(marker(7, 7, committed=False))
    log.append_as_follower(offsets_batch(8, {3: 40}, producer_id=9, epoch=0))

    entries = gc._read_records(log)
    assert [type(e).__name__ for e in entries] == [
        "_Record", "_Record", "_Record", "_Record", "_Marker", "_Record", "_Marker", "_Record"
    ]  # fmt: skip
    assert [e.producer_id for e in entries] == [-1, 7, 7, 8, 7, 7, 7, 9]
    shard = load(log)
    # 7's first transaction committed, its second aborted; 8's and 9's are still open.
    assert fetch(shard) == {0: 10, 1: 11, 2: "UNSTABLE_OFFSET_COMMIT", 3: "UNSTABLE_OFFSET_COMMIT"}
    assert sorted(shard.state.pending.by_producer) == [8, 9]
    log.close()


def test_a_read_from_inside_a_batch_skips_its_earlier_records(tmp_path: Path) -> None:
    # After retention moved the log start into a batch (as on a compacted topic).
    log = Log.open(tmp_path / "offsets")
    log.append_as_follower(offsets_batch(0, {0: 5, 1: 6, 2: 7}, producer_id=7, epoch=0))
    log.append_as_follower(marker(3, 7, committed=True))
    assert log.maybe_increment_log_start_offset(2)
    assert fetch(load(log)) == {2: 7}
    log.close()


def test_complete_transaction_is_refused_where_this_broker_does_not_coordinate() -> None:
    coordinator = gc.GroupCoordinator.__new__(gc.GroupCoordinator)
    coordinator.broker_id, coordinator._loaded, coordinator._loading = 1, {}, {}

    async def go() -> None:
        refused = await coordinator.complete_transaction(TP, 7, 0, 0, True)
        assert isinstance(refused, NotCoordinatorError)
        elsewhere = TopicPartition("t", 0)
        assert isinstance(
            await coordinator.complete_transaction(elsewhere, 7, 0, 0, True), InvalidRequestError
        )

    asyncio.run(go())
