"""The producer's Rust record path (partitioner + accumulator), driven from Python."""

from __future__ import annotations

import time

import pytest

from rillet._core import (
    ClosedBatch,
    FutureRecordMetadata,
    RecordAccumulator,
    decode_batches,
    encode_produce_request,
    kafka_decode_request,
    kafka_encode_produce_request,
    kafka_encode_request,
    partition_for_key,
)
from rillet.client.futures import ProduceRequestResult
from rillet.errors import (
    InvalidConfigurationError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from rillet.protocol import produce_pb2
from rillet.types import TopicPartition

NEEDS_METADATA = RecordAccumulator.NEEDS_METADATA
BUFFER_FULL = RecordAccumulator.BUFFER_FULL


def accumulator(**kwargs: object) -> tuple[RecordAccumulator, list[int]]:
    wakes: list[int] = []
    acc = RecordAccumulator(
        batch_result=ProduceRequestResult,
        on_batch_ready=lambda: wakes.append(1),
        seed=5,
        **kwargs,  # type: ignore[arg-type]
    )
    return acc, wakes


def add_topic(acc: RecordAccumulator, topic: str, n: int, ttl_ms: int = 60_000) -> None:
    expires = time.time_ns() // 1_000_000 + ttl_ms
    acc.set_topic(topic, [(p, TopicPartition(topic, p)) for p in range(n)], expires)


def test_unknown_and_expired_topics_ask_for_metadata() -> None:
    acc, _ = accumulator()
    assert acc.send("t", None, b"v") == NEEDS_METADATA
    add_topic(acc, "t", 2, ttl_ms=-1)
    assert acc.send("t", None, b"v") == NEEDS_METADATA
    add_topic(acc, "t", 2)
    assert isinstance(acc.send("t", None, b"v"), FutureRecordMetadata)
    assert acc.partitions("t") == [0, 1]
    acc.forget_topic("t")
    assert acc.send("t", None, b"v") == NEEDS_METADATA and acc.partitions("t") is None


def test_keys_route_by_murmur2_and_batches_drain_valid() -> None:
    acc, wakes = accumulator(batch_size=1024, linger_ms=10, compression="zstd")
    add_topic(acc, "t", 3)
    futures = [acc.send("t", b"k%d" % i, b"v" * 100, None, None, 1000 + i) for i in range(30)]
    assert all(isinstance(f, FutureRecordMetadata) for f in futures)
    for i, f in enumerate(futures):
        assert f.produce_result.topic_partition.partition == partition_for_key(b"k%d" % i, 3)
        assert f.timestamp == 1000 + i and f.serialized_key_size == len(b"k%d" % i)
        assert f.serialized_value_size == 100 and f.serialized_header_size == 0
    assert wakes, "new and full batches wake the sender"
    ready = acc.ready().slots
    drained = acc.drain(ready, 1 << 20)
    assert drained
    for d in drained:
        tp, result, count = d.topic_partition, d.result, d.record_count
        assert d.slot in ready and isinstance(result, ProduceRequestResult)
        assert result.topic_partition == tp and d.created_ms > 0
        assert isinstance(d.batch, ClosedBatch)
        (batch,) = decode_batches(bytes(d.batch))
        assert batch.compression == "zstd" and batch.record_count == count
        keys = [r.key for r in batch.records]
        assert all(partition_for_key(k or b"", 3) == tp.partition for k in keys)
        # The batch's futures share its result, and their offsets are its record indexes.
        mine = [f for f in futures if f.produce_result is result]
        assert [f.relative_offset for f in mine] == list(range(count))
        acc.release(d.reserved_bytes)
    while ready := acc.ready(0).slots:  # full batches are ready at any time
        for d in acc.drain(ready, 1 << 20):
            acc.release(d.reserved_bytes)
    # Tails wait for linger.ms unless flushed.
    tails = acc.ready(0)
    assert tails.slots == [] and tails.next_ready_ms is not None
    later = time.time_ns() // 1_000_000 + 10
    assert acc.ready(later).slots == acc.ready(0, flush=True).slots != []


def test_headers_timestamps_and_buffer_types() -> None:
    acc, _ = accumulator()
    add_topic(acc, "t", 1)
    f = acc.send("t", bytearray(b"key"), memoryview(b"value"), [("h", b"1"), ("é", None)], 0, 7)
    assert (f.serialized_key_size, f.serialized_value_size, f.serialized_header_size) == (3, 5, 4)
    acc.send("t", None, None, None, None, None)  # a tombstone
    [drained] = acc.drain(acc.ready(flush=True).slots, 1 << 20)
    assert isinstance(drained.batch, ClosedBatch)
    (batch,) = decode_batches(bytes(drained.batch))
    r0, r1 = batch.records
    assert (r0.key, r0.value, r0.headers, r0.timestamp) == (
        b"key",
        b"value",
        [("h", b"1"), ("é", None)],
        7,
    )
    assert (r1.key, r1.value) == (None, None) and r1.timestamp >= 7
    with pytest.raises(TypeError, match="value must be bytes"):
        acc.send("t", None, "text")
    with pytest.raises(TypeError, match="key must be bytes"):
        acc.send("t", 5, b"v")


def test_explicit_partitions_and_record_size() -> None:
    acc, _ = accumulator(max_request_size=100)
    add_topic(acc, "t", 2)
    assert acc.send("t", None, b"x", None, 1).produce_result.topic_partition.partition == 1
    with pytest.raises(UnknownTopicOrPartitionError, match="Partition 5 of topic t"):
        acc.send("t", None, b"x", None, 5)
    with pytest.raises(RecordTooLargeError, match=r"max\.request\.size"):
        acc.send("t", None, b"x" * 200)


def test_buffer_memory_back_pressure_and_abort() -> None:
    acc, _ = accumulator(batch_size=1024, linger_ms=0, buffer_memory=2048)
    add_topic(acc, "t", 3)
    assert isinstance(acc.send("t", None, b"x" * 900, None, 0), FutureRecordMetadata)
    assert isinstance(acc.send("t", None, b"x" * 900, None, 1), FutureRecordMetadata)
    assert acc.send("t", None, b"x" * 900, None, 2) == BUFFER_FULL
    assert acc.used_memory == 2048
    [drained] = acc.drain([acc.ready().slots[0]], 1 << 20)
    acc.release(drained.reserved_bytes)
    assert isinstance(acc.send("t", None, b"x" * 900, None, 2), FutureRecordMetadata)
    results = acc.abort_all()
    assert len(results) == 2 and acc.used_memory == 0 and acc.pending_batches == 0
    assert all(isinstance(r, ProduceRequestResult) for r in results)


def test_sticky_and_round_robin_spread_keyless_records() -> None:
    acc, _ = accumulator(batch_size=1000, partitioner="round_robin")
    add_topic(acc, "t", 3)
    parts = [acc.send("t", b"k", b"v").produce_result.topic_partition.partition for _ in range(6)]
    assert parts == [0, 1, 2, 0, 1, 2]  # round robin ignores keys
    sticky, _ = accumulator(batch_size=1000)
    add_topic(sticky, "t", 3)
    parts = [
        sticky.send("t", None, b"x" * 100).produce_result.topic_partition.partition
        for _ in range(100)
    ]
    runs = [p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1]]
    assert set(parts) == {0, 1, 2} and 8 <= len(runs) <= 12  # ~10 records per stint


def test_bad_settings() -> None:
    with pytest.raises(InvalidConfigurationError):
        accumulator(batch_size=0)
    with pytest.raises(InvalidConfigurationError):
        accumulator(compression="brotli")
    with pytest.raises(InvalidConfigurationError, match="partitioner"):
        accumulator(partitioner="hashing")
    acc, _ = accumulator()
    with pytest.raises(UnknownTopicOrPartitionError):
        acc.set_topic("t", [], 0)


def test_encoded_produce_requests_parse_with_the_generated_code() -> None:
    acc, _ = accumulator(batch_size=1 << 20)
    add_topic(acc, "a", 3)
    add_topic(acc, "bb", 1)
    for i in range(40):
        acc.send("a", b"k%d" % i, b"v" * (i * 50))
    acc.send("bb", None, b"x" * 300_000, None, 0)
    drained = acc.drain(acc.ready(flush=True).slots, 1 << 30)
    topics: dict[str, list[tuple[int, list[ClosedBatch]]]] = {}
    for d in drained:
        batch, tp = d.batch, d.topic_partition
        assert isinstance(batch, ClosedBatch) and len(batch) == len(bytes(batch))
        topics.setdefault(tp.topic, []).append((tp.partition, [batch]))
    # A partition's batches go one after the other into its record_batches.
    topics["bb"][0][1].extend(topics["a"][0][1])
    for acks, tx in ((1, None), (-1, "tx-1"), (0, None)):
        wire = encode_produce_request(acks, 30_000, list(topics.items()), tx)
        want = produce_pb2.ProduceRequest(acks=acks, timeout_ms=30_000)
        if tx is not None:
            want.transactional_id = tx
        for name, parts in topics.items():
            t = want.topics.add(name=name)
            for partition, batches in parts:
                joined = b"".join(bytes(b) for b in batches)
                t.partitions.add(partition=partition, record_batches=joined)
        assert produce_pb2.ProduceRequest.FromString(wire) == want
        assert wire == want.SerializeToString()  # the same bytes as the generated encoder


@pytest.mark.parametrize("version", [3, 9, 11])
def test_kafka_produce_requests_read_back_as_the_schema_encoder_writes_them(version: int) -> None:
    acc, _ = accumulator(batch_size=1 << 20)
    add_topic(acc, "a", 2)
    add_topic(acc, "bb", 1)
    for i in range(30):
        acc.send("a", b"k%d" % i, b"v" * (i * 40))
    acc.send("bb", None, b"x" * 300_000, None, 0)  # big enough to copy without the GIL
    drained = acc.drain(acc.ready(flush=True).slots, 1 << 30)
    topics: dict[str, list[tuple[int, list[ClosedBatch]]]] = {}
    for d in drained:
        assert isinstance(d.batch, ClosedBatch)
        topics.setdefault(d.topic_partition.topic, []).append(
            (d.topic_partition.partition, [d.batch])
        )
    topics["bb"][0][1].extend(topics["a"][0][1])  # two batches in one partition's records
    for acks, tx in ((1, None), (-1, "tx-1"), (0, None)):
        frame = kafka_encode_produce_request(
            version, 77, "cid", acks, 30_000, list(topics.items()), tx
        )
        body = {
            "transactional_id": tx,
            "acks": acks,
            "timeout_ms": 30_000,
            "topic_data": [
                {
                    "name": name,
                    "partition_data": [
                        {"index": p, "records": b"".join(bytes(b) for b in batches)}
                        for p, batches in parts
                    ],
                }
                for name, parts in topics.items()
            ],
        }
        assert frame == kafka_encode_request(0, version, 77, "cid", body)
        api_key, got_version, correlation_id, client_id, decoded = kafka_decode_request(frame[4:])
        assert (api_key, got_version, correlation_id, client_id) == (0, version, 77, "cid")
        got = {
            (t["name"], p["index"]): bytes(p["records"])
            for t in decoded["topic_data"]
            for p in t["partition_data"]
        }
        assert got == {
            (name, p): b"".join(bytes(b) for b in batches)
            for name, parts in topics.items()
            for p, batches in parts
        }
        assert len(decode_batches(got[("bb", 0)])) == 2


def test_kafka_produce_requests_check_the_version() -> None:
    with pytest.raises(UnsupportedVersionError):
        kafka_encode_produce_request(99, 1, None, 1, 30_000, [])
