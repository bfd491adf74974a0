"""The idempotent producer against an in-process broker (real gRPC, real logs), with the
broker's answers lost after it appended: the retries must not write anything twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest

from rillet import BatchBuilder, decode_batches
from rillet.broker.replica_manager import ProducedPartition
from rillet.client.producer import Producer
from rillet.errors import NotLeaderOrFollowerError
from rillet.protocol import common_pb2, produce_pb2, produce_pb2_grpc
from rillet.types import TopicPartition
from tests.support.mini_broker import MiniBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path / "data", {"t": 1, "u": 2})
    yield b
    b.close()


def batches(broker: MiniBroker, topic: str, partition: int) -> list[Any]:
    log = broker.log(topic, partition)
    return decode_batches(log.read(0, 1 << 30).read_all()) if log.log_end_offset else []


def lose_answers(broker: MiniBroker, count: int) -> list[int]:
    """The broker appends the first ``count`` produce requests but answers them with a
    retriable error, as if the answer was lost. Returns the list it counts calls in."""
    replicas = broker.server.replicas
    assert replicas is not None
    real = replicas.append_records
    calls: list[int] = []

    async def append(
        entries: Mapping[TopicPartition, Any], required_acks: int, timeout_ms: int
    ) -> dict[TopicPartition, ProducedPartition]:
        results = await real(entries, required_acks, timeout_ms)
        calls.append(len(entries))
        if len(calls) <= count:
            lost = NotLeaderOrFollowerError("the answer to this append was lost")
            return {tp: ProducedPartition(lost) for tp in results}
        return results

    replicas.append_records = append  # type: ignore[method-assign]
    return calls


def refuse_first(broker: MiniBroker) -> list[int]:
    """The broker refuses the first produce request without appending it (a leader that
    does not know the topic yet), slowly enough that later requests arrive meanwhile, and
    serves the rest."""
    replicas = broker.server.replicas
    assert replicas is not None
    real = replicas.append_records
    calls: list[int] = []

    async def append(
        entries: Mapping[TopicPartition, Any], required_acks: int, timeout_ms: int
    ) -> dict[TopicPartition, ProducedPartition]:
        calls.append(len(entries))
        if len(calls) == 1:
            await asyncio.sleep(0.5)
            refused = NotLeaderOrFollowerError("this broker does not lead it yet")
            return {tp: ProducedPartition(refused) for tp in entries}
        return await real(entries, required_acks, timeout_ms)

    replicas.append_records = append  # type: ignore[method-assign]
    return calls


def test_a_refused_first_request_is_not_overtaken_by_later_batches(broker: MiniBroker) -> None:
    # A leader takes an unknown producer at any sequence: if a later request landed while
    # the first was refused, the first's retry could never follow it.
    calls = refuse_first(broker)
    with Producer(
        bootstrap_servers=broker.bootstrap, linger_ms=0, batch_size=256, retry_backoff_ms=50
    ) as p:
        futures = [p.send("t", b"%04d" % i) for i in range(100)]
        time.sleep(0.2)  # the first request is out (and held by the broker)
        futures += [p.send("t", b"%04d" % i) for i in range(100, 1000)]
        p.flush(60)
        offsets = [f.get(10).offset for f in futures]
    assert len(calls) >= 2
    assert offsets == list(range(1000))
    values = [r.value for b in batches(broker, "t", 0) for r in b.records]
    assert values == [b"%04d" % i for i in range(1000)]


def test_a_retry_of_an_appended_batch_is_answered_with_its_offsets_not_written_again(
    broker: MiniBroker,
) -> None:
    calls = lose_answers(broker, 3)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0, retry_backoff_ms=10) as p:
        first = [p.send("t", b"a%d" % i) for i in range(10)]
        p.flush(30)
        second = [p.send("t", b"b%d" % i) for i in range(10)]
        p.flush(30)
        offsets = [f.get(10).offset for f in first + second]
    assert len(calls) > 3, "the lost answers were retried"
    assert offsets == list(range(20))
    found = batches(broker, "t", 0)
    values = [r.value for b in found for r in b.records]
    assert values == [b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(10)]
    pids = {(b.producer_id, b.producer_epoch) for b in found}
    assert len(pids) == 1 and next(iter(pids))[0] >= 0
    # Sequences follow each other from 0 across the batches.
    seq = 0
    for b in found:
        assert b.base_sequence == seq
        seq += b.record_count


def test_batches_of_many_partitions_keep_their_order_across_lost_answers(
    broker: MiniBroker,
) -> None:
    lose_answers(broker, 5)
    with Producer(
        bootstrap_servers=broker.bootstrap, linger_ms=2, batch_size=64, retry_backoff_ms=5
    ) as p:
        futures = [p.send("u", b"%04d" % i, partition=i % 2) for i in range(400)]
        p.flush(60)
        metas = [f.get(10) for f in futures]
    for part in (0, 1):
        values = [r.value for b in batches(broker, "u", part) for r in b.records]
        assert values == [b"%04d" % i for i in range(part, 400, 2)]
        mine = sorted(m.offset for m in metas if m.partition == part)
        assert mine == list(range(200))


def test_producers_that_are_not_idempotent_stamp_no_producer_id(broker: MiniBroker) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, acks=1) as p:
        p.send("t", b"x").get(10)
    (b,) = batches(broker, "t", 0)
    assert (b.producer_id, b.base_sequence) == (-1, -1)


def _produce(broker: MiniBroker, batch: bytes) -> Any:
    """One raw Produce of ``batch`` to t-0 with acks=all; the partition's answer."""
    with grpc.insecure_channel(broker.bootstrap) as ch:
        request = produce_pb2.ProduceRequest(acks=-1, timeout_ms=10_000)
        request.topics.add(name="t").partitions.add(partition=0, record_batches=batch)
        return (
            produce_pb2_grpc.ProduceServiceStub(ch)
            .Produce(request, timeout=30)
            .topics[0]
            .partitions[0]
        )


def _batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    b.append(1_000, None, value)
    return b.build()


def test_bad_sequences_and_epochs_get_kafkas_errors_and_change_nothing(
    broker: MiniBroker,
) -> None:
    assert _produce(broker, _batch(77, 3, 0, b"a")).error_code == common_pb2.NONE
    assert _produce(broker, _batch(77, 3, 1, b"b")).error_code == common_pb2.NONE
    gap = _produce(broker, _batch(77, 3, 5, b"gap"))
    assert gap.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "out of order sequence number" in gap.error_message
    old = _produce(broker, _batch(77, 2, 2, b"zombie"))
    assert old.error_code == common_pb2.INVALID_PRODUCER_EPOCH
    # A retry is answered with its first offset, not written again.
    retry = _produce(broker, _batch(77, 3, 1, b"b"))
    assert (retry.error_code, retry.base_offset) == (common_pb2.NONE, 1)
    # A newer epoch starts at 0 (KIP-360); the broker kept serving throughout.
    assert _produce(broker, _batch(77, 4, 0, b"c")).base_offset == 2
    values = [r.value for b in batches(broker, "t", 0) for r in b.records]
    assert values == [b"a", b"b", b"c"]
