"""ReplicaManager and Partition: produce, fetch long polls, acks=all, list offsets."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import BatchBuilder, decode_batches, errors
from rillet.broker.purgatory import Purgatory
from rillet.broker.replica_manager import FetchPartition, ReplicaManager
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

TID = uuid.UUID(int=1)
TP = TopicPartition("t", 0)
EP = (BrokerEndpoint("PLAINTEXT", "localhost", 9092),)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def batch(*values: bytes, ts: int = 1_000) -> bytes:
    b = BatchBuilder()
    for v in values:
        b.append(ts, None, v)
    return b.build()


@pytest.fixture
def log_manager(tmp_path: Path) -> Iterator[LogManager]:
    lm = LogManager([tmp_path / "logs"])
    lm.startup()
    yield lm
    lm.shutdown()


def setup(lm: LogManager, replicas: tuple[int, ...] = (1,)) -> tuple[ReplicaManager, MetadataDelta]:
    rm = ReplicaManager(1, lm, Clock())
    records = [
        RegisterBrokerRecord(1, uuid.UUID(int=11), 1, EP, None, True),
        UnfenceBrokerRecord(1, 1),
        TopicRecord("t", TID),
        PartitionRecord(TID, 0, replicas, replicas, replicas[0]),
    ]
    delta = MetadataDelta(MetadataImage())
    for i, r in enumerate(records):
        delta.replay(i, r)
    rm.apply_partition_changes(delta.partition_changes(), delta.apply())
    return rm, delta


async def test_produce_then_fetch(log_manager: LogManager) -> None:
    rm, _ = setup(log_manager)
    res = await rm.append_records({TP: batch(b"a", b"b")}, required_acks=1, timeout_ms=1000)
    assert res[TP].error is None and res[TP].base_offset == 0
    res = await rm.append_records({TP: batch(b"c")}, required_acks=-1, timeout_ms=1000)
    assert res[TP].base_offset == 2  # RF 1: the ISR is the leader alone
    fetched = await rm.fetch({TP: FetchPartition(1, 1 << 20)})
    f = fetched[TP]
    assert f.error is None and f.high_watermark == 3 and f.data is not None
    values = [r.value for b in decode_batches(f.data.read_all()) for r in b.records]
    assert values == [b"a", b"b", b"c"]  # whole batches from the one holding offset 1


async def test_fetch_long_poll_is_completed_by_an_append(log_manager: LogManager) -> None:
    rm, _ = setup(log_manager)
    fetch = asyncio.create_task(rm.fetch({TP: FetchPartition(0, 1 << 20)}, max_wait_ms=10_000))
    await asyncio.sleep(0.01)
    assert not fetch.done()
    await rm.append_records({TP: batch(b"x")}, required_acks=1, timeout_ms=1000)
    result = await asyncio.wait_for(fetch, 5)
    assert result[TP].size > 0


async def test_fetch_long_poll_times_out_empty(log_manager: LogManager) -> None:
    rm, _ = setup(log_manager)
    result = await rm.fetch({TP: FetchPartition(0, 1 << 20)}, max_wait_ms=20, min_bytes=1)
    assert result[TP].error is None and result[TP].size == 0


async def test_per_partition_errors(log_manager: LogManager) -> None:
    rm, _ = setup(log_manager)
    other = TopicPartition("nope", 0)
    res = await rm.append_records({TP: b"garbage" * 10, other: batch(b"x")}, 1, 1000)
    assert isinstance(res[TP].error, errors.CorruptRecordError)
    assert isinstance(res[other].error, errors.UnknownTopicOrPartitionError)
    res = await rm.append_records({TP: batch(b"x")}, 2, 1000)
    assert isinstance(res[TP].error, errors.InvalidRequiredAcksError)
    fetched = await rm.fetch({TP: FetchPartition(99, 100)})
    assert isinstance(fetched[TP].error, errors.OffsetOutOfRangeError)
    fetched = await rm.fetch({TP: FetchPartition(0, 100, current_leader_epoch=0)})
    assert fetched[TP].error is None
    fetched = await rm.fetch({TP: FetchPartition(0, 100, current_leader_epoch=7)})
    assert isinstance(fetched[TP].error, errors.UnknownLeaderEpochError)


async def test_acks_all_waits_for_the_follower(log_manager: LogManager) -> None:
    rm, _ = setup(log_manager, replicas=(1, 2))
    p = rm.partitions[TP]
    assert p.is_leader and p.isr == (1, 2)
    produce = asyncio.create_task(rm.append_records({TP: batch(b"a")}, -1, 10_000))
    await asyncio.sleep(0.01)
    assert not produce.done() and p.high_watermark == 0
    # Consumers see nothing above the high watermark yet.
    assert (await rm.fetch({TP: FetchPartition(0, 1 << 20)}))[TP].size == 0
    # The follower fetches at offset 1: it has offset 0, the HW moves and the produce completes.
    await rm.fetch({TP: FetchPartition(1, 1 << 20)}, replica_id=2)
    res = await asyncio.wait_for(produce, 5)
    assert res[TP].error is None and p.high_watermark == 1


async def test_acks_all_times_out_and_min_isr(log_manager: LogManager) -> None:
    rm, _ = setup(log_manager, replicas=(1, 2))
    res = await rm.append_records({TP: batch(b"a")}, -1, 30)
    assert isinstance(res[TP].error, errors.RequestTimedOutError)
    rm.partitions[TP].min_insync_replicas = 3
    res = await rm.append_records({TP: batch(b"a")}, -1, 30)
    assert isinstance(res[TP].error, errors.NotEnoughReplicasError)


async def test_leadership_moves_away_and_list_offsets(log_manager: LogManager) -> None:
    rm, delta = setup(log_manager)
    await rm.append_records({TP: batch(b"a", ts=500)}, 1, 1000)
    await rm.append_records({TP: batch(b"b", b"c", ts=900)}, 1, 1000)
    listed = rm.list_offsets({TP: -2})[TP]
    assert (listed.error, listed.offset) == (None, 0)
    assert rm.list_offsets({TP: -1})[TP].offset == 3
    found = rm.list_offsets({TP: 800})[TP]
    assert (found.offset, found.timestamp) == (1, 900)
    assert rm.list_offsets({TP: 5000})[TP].offset == -1
    image = delta.apply()
    d2 = MetadataDelta(image)
    d2.replay(image.offset + 1, PartitionChangeRecord(TID, 0, leader=-1))
    rm.apply_partition_changes(d2.partition_changes(), d2.apply())
    res = await rm.append_records({TP: batch(b"x")}, 1, 1000)
    assert isinstance(res[TP].error, errors.NotLeaderOrFollowerError)
    assert isinstance(rm.list_offsets({TP: -1})[TP].error, errors.NotLeaderOrFollowerError)


async def test_purgatory_wait_and_timeout() -> None:
    p = Purgatory("test")
    state = {"ready": False}
    waiter = asyncio.create_task(p.wait(["k"], lambda: state["ready"], 10_000))
    await asyncio.sleep(0)
    assert len(p) == 1 and p.check_and_complete("k") == 0
    state["ready"] = True
    assert p.check_and_complete("k") == 1
    assert await waiter is True and len(p) == 0
    assert await p.wait(["k"], lambda: False, 5) is False


async def test_high_watermarks_are_checkpointed_and_restored(tmp_path: Path) -> None:
    lm = LogManager([tmp_path / "logs"])
    lm.startup()
    rm, delta = setup(lm, replicas=(1, 2))
    await rm.append_records({TP: batch(b"a", b"b", b"c")}, 1, 1000)
    await rm.fetch({TP: FetchPartition(2, 1 << 20)}, replica_id=2)
    assert rm.high_watermarks() == {TP: 2}
    lm.checkpoint_high_watermarks(rm.high_watermarks())
    lm.shutdown()
    text = (tmp_path / "logs" / "replication-offset-checkpoint").read_text()
    assert text == "0\n1\nt 0 2\n"
    lm2 = LogManager([tmp_path / "logs"])
    lm2.startup()
    try:
        assert lm2.checkpointed_high_watermark("t", 0) == 2
        rm2 = ReplicaManager(1, lm2, Clock())
        rm2.apply_partition_changes(delta.partition_changes(), delta.apply())
        # Before any follower fetches again, consumers still see what was committed.
        fetched = await rm2.fetch({TP: FetchPartition(0, 1 << 20)})
        assert fetched[TP].high_watermark == 2
    finally:
        lm2.shutdown()
