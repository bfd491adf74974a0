"""The Consumer against an in-process broker (real gRPC, real logs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import rillet
from rillet import BatchBuilder, Consumer, ConsumerRecord, Producer, TopicPartition
from rillet.errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidConfigurationError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from rillet.protocol.gen.v1 import fetch_pb2
from tests.support.mini_broker import MiniBroker

T0 = TopicPartition("t", 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path / "data", {"t": 3, "one": 1})
    yield b
    b.close()


def produce(broker: MiniBroker, n: int, partition: int = 0, topic: str = "t", **kw: object) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1, **kw) as p:
        for i in range(n):
            p.send(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition,
                   headers=[("h", b"%d" % i)], timestamp_ms=1_000 + i)  # fmt: skip


def consume(c: Consumer, n: int, timeout_s: float = 20) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=200).values():
            out.extend(records)
    return out


def test_assign_poll_reads_everything_in_order_with_kafka_python_fields(broker: MiniBroker) -> None:
    produce(broker, 300, compression_type="zstd")
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([T0])
        records = consume(c, 300)
        assert c.position(T0) == 300
    assert [r.offset for r in records] == list(range(300))
    r = records[7]
    assert (r.topic, r.partition, r.key, r.value, r.headers) == (
        "t",
        0,
        b"k7",
        b"v7",
        [("h", b"7")],
    )
    assert (r.timestamp, r.timestamp_type, r.checksum) == (1_007, 0, None)
    assert (r.serialized_key_size, r.serialized_value_size, r.serialized_header_size) == (2, 2, 2)
    assert r.leader_epoch == 0
    assert "ConsumerRecord(topic='t', partition=0" in repr(r)


def test_max_records_seek_and_seek_to_beginning_end(broker: MiniBroker) -> None:
    produce(broker, 50)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([T0])
        first = c.poll(timeout_ms=5000, max_records=10)
        assert [r.offset for r in first[T0]] == list(range(10))
        assert c.position(T0) == 10
        c.seek(T0, 42)
        assert c.position(T0) == 42
        assert [r.offset for r in consume(c, 8)] == list(range(42, 50))
        c.seek_to_beginning(T0)
        assert c.position(T0) == 0
        c.seek_to_end()
        assert c.position(T0) == 50
        assert c.poll(timeout_ms=100) == {}
        with pytest.raises(ValueError, match="non-negative"):
            c.seek(T0, -5)
        with pytest.raises(IllegalStateError, match="No current assignment"):
            c.position(TopicPartition("t", 1))


def test_latest_default_sees_only_new_records_and_long_poll_wakes(broker: MiniBroker) -> None:
    produce(broker, 5)
    with Consumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=5000) as c:
        c.assign([T0])
        assert c.position(T0) == 5  # auto_offset_reset=latest, as in Kafka
        later = threading.Timer(0.3, produce, args=(broker, 1))
        later.start()
        started = time.monotonic()
        got = consume(c, 1)
        later.join()
        # The fetch waits in the broker's purgatory and is woken by the append, well before
        # fetch_max_wait_ms would have answered it.
        assert [r.value for r in got] == [b"v0"] and got[0].offset == 5
        assert time.monotonic() - started < 4.5


def test_offset_lookups(broker: MiniBroker) -> None:
    produce(broker, 20)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        tps = [T0, TopicPartition("t", 1)]
        assert c.beginning_offsets(tps) == {T0: 0, tps[1]: 0}
        assert c.end_offsets(tps) == {T0: 20, tps[1]: 0}
        found = c.offsets_for_times({T0: 1_010, tps[1]: 0})
        assert found[T0] == rillet.OffsetAndTimestamp(10, 1_010, 0)
        assert found[tps[1]] is None
        assert c.offsets_for_times({T0: 10**13}) == {T0: None}
        with pytest.raises(ValueError):
            c.offsets_for_times({T0: -7})
        assert c.partitions_for_topic("t") == {0, 1, 2}
        assert c.partitions_for_topic("missing") is None
        assert {"t", "one"} <= c.topics()


def test_subscribe_without_group_reads_every_partition_and_iterates(broker: MiniBroker) -> None:
    for p in range(3):
        produce(broker, 4, partition=p)
    c = Consumer(
        "t",
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
        value_deserializer=lambda v: v.decode(),
        key_deserializer="str",
    )
    assert c.subscription() == {"t"}
    assert c.assignment() == {TopicPartition("t", p) for p in range(3)}
    records = list(c)  # stops after consumer_timeout_ms without records
    c.close()
    assert len(records) == 12
    assert {(r.partition, r.value, r.key) for r in records} == {
        (p, f"v{i}", f"k{i}") for p in range(3) for i in range(4)
    }
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        Consumer("t", bootstrap_servers=broker.bootstrap).assign([T0])


def test_pause_resume(broker: MiniBroker) -> None:
    produce(broker, 3)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([T0])
        c.pause(T0)
        assert c.paused() == {T0}
        assert c.poll(timeout_ms=300) == {}
        c.resume(T0)
        assert len(consume(c, 3)) == 3


def test_out_of_range_resets_or_raises(broker: MiniBroker) -> None:
    produce(broker, 10)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([T0])
        c.seek(T0, 1000)
        assert [r.offset for r in consume(c, 10)] == list(range(10))
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([T0])
        with pytest.raises(NoOffsetForPartitionError, match="no reset policy"):
            c.poll(timeout_ms=100)
        c.seek(T0, 1000)
        with pytest.raises(OffsetOutOfRangeError, match="out of range"):
            consume(c, 1, timeout_s=5)


def test_unknown_partition_is_a_clear_error(broker: MiniBroker) -> None:
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("t", 9)])
        with pytest.raises(UnknownTopicOrPartitionError):
            c.poll(timeout_ms=100)


def test_bad_configs_name_the_key(broker: MiniBroker) -> None:
    cases = [
        ({"auto_offset_reset": "sideways"}, "auto.offset.reset"),
        ({"fetch_min_bytes": -1}, "fetch.min.bytes"),
        ({"isolation_level": "dirty"}, "isolation.level"),
        ({"group_id": ""}, "group.id"),
        ({"enable_auto_commit": True}, "enable.auto.commit"),
        ({"group_id": "g", "group_protocol": "eager"}, "group.protocol"),
        ({"group_id": "g", "max_poll_interval_ms": -5}, "max.poll.interval.ms"),
        ({"no_such_thing": 1}, "no_such_thing"),
    ]
    for kwargs, key in cases:
        with pytest.raises(InvalidConfigurationError, match=key.replace(".", r"\.")):
            Consumer(bootstrap_servers=broker.bootstrap, **kwargs)  # type: ignore[arg-type]
    # Kafka's dotted names, as a dict first.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest"}, "one")
    assert c.config["auto_offset_reset"] == "earliest" and c.subscription() == {"one"}
    c.close()


def test_corrupt_batch_on_disk_is_refused_unless_check_crcs_is_off(
    broker: MiniBroker, tmp_path: Path
) -> None:
    produce(broker, 1, topic="one")
    broker.log("one", 0).flush()
    segment = tmp_path / "data" / "one-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    at = data.index(b"v0")
    data[at + 1] ^= 0x01  # b"v0" becomes b"v1" on disk: the batch CRC no longer matches
    segment.write_bytes(data)
    one = TopicPartition("one", 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([one])
        with pytest.raises(CorruptRecordError, match="one-0 at offset 0"):
            consume(c, 1, timeout_s=5)
    with Consumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", check_crcs=False
    ) as c:
        c.assign([one])
        assert [r.value for r in consume(c, 1)] == [b"v1"]


def test_decode_skips_records_before_the_position_and_control_batches() -> None:
    b = BatchBuilder(base_offset=10)
    for i in range(5):
        b.append(i, None, b"%d" % i)
    control = BatchBuilder(base_offset=15, is_control=True)
    control.append(9, b"\x00\x00\x00\x00", b"")
    data = b.build() + control.build()
    d = rillet._core.decode_consumer_records(data, "t", 0, 12)
    assert [r.offset for r in d.records] == [12, 13, 14] and d.next_offset == 16
    # A trailing partial batch (a size-limited fetch) is left for the next fetch.
    d = rillet._core.decode_consumer_records(data[:-3], "t", 0, 12)
    assert [r.offset for r in d.records] == [12, 13, 14] and d.next_offset == 15


def test_kafka_python_names_are_exported() -> None:
    assert rillet.KafkaConsumer is Consumer and rillet.KafkaProducer is Producer
    for name in ("AdminClient", "NewTopic", "NewPartitions", "RecordMetadata", "ConsumerRecord"):
        assert hasattr(rillet, name)


def test_idle_partitions_long_poll_does_not_hold_back_a_busy_one(broker: MiniBroker) -> None:
    # Partition 1 has more data than one fetch returns; 0 and 2 are empty, so a fetch for them
    # parks in the broker for fetch_max_wait_ms. The next fetch of partition 1 must not wait
    # behind it, or reading 400 records would take minutes instead of finishing here.
    produce(broker, 400, partition=1)
    with Consumer(
        "t",
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=60_000,
        max_partition_fetch_bytes=512,
    ) as c:
        records = consume(c, 400, timeout_s=30)
    assert [r.offset for r in records] == list(range(400))


def test_decode_stops_at_a_batch_boundary_after_max_records() -> None:
    batches = []
    for base in (0, 4, 8):
        b = BatchBuilder("zstd", base_offset=base)
        for i in range(4):
            b.append(i, None, b"%d" % (base + i))
        batches.append(b.build())
    data = b"".join(batches)
    d = rillet._core.decode_consumer_records(data, "t", 0, 1, max_records=3)
    # The first batch (offsets 0-3) holds 3 records at or past offset 1: enough.
    assert [r.offset for r in d.records] == [1, 2, 3] and d.next_offset == 4
    assert d.end == len(batches[0])
    d = rillet._core.decode_consumer_records(
        data, "t", 0, d.next_offset, start=d.end, max_records=5
    )
    assert [r.offset for r in d.records] == list(range(4, 12)) and d.end == len(data)
    assert rillet._core.decode_consumer_records(data, "t", 0, 12, start=d.end).end == d.end


def test_compressed_fetches_are_decoded_a_poll_at_a_time(broker: MiniBroker) -> None:
    # 2000 identical records compress to a few kilobytes; the consumer must not decode the
    # whole fetch at once, and hands out exactly max_records per poll in offset order.
    with Producer(
        bootstrap_servers=broker.bootstrap, linger_ms=5, compression_type="zstd", batch_size=4096
    ) as p:
        for _ in range(2000):
            p.send("one", b"x" * 500)
    one = TopicPartition("one", 0)
    with Consumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", max_poll_records=7
    ) as c:
        c.assign([one])
        seen: list[int] = []
        while len(seen) < 2000:
            got = c.poll(timeout_ms=2000).get(one, [])
            assert 0 < len(got) <= 7
            seen.extend(r.offset for r in got)
            state = c._subscriptions.assignment[one]
            assert len(state.records) <= 7 + 4096 // 500 + 1  # one poll's worth of batches
    assert seen == list(range(2000))


def test_fetching_ahead_reads_every_record_once_and_a_seek_drops_what_was_ahead(
    broker: MiniBroker,
) -> None:
    # Small fetches, so a poll's records span many responses and the consumer has one
    # response buffered and the next in flight most of the time.
    produce(broker, 2000, batch_size=2000)
    with Consumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4096,
        max_poll_records=7,
    ) as c:
        c.assign([T0])
        first = consume(c, 900)
        assert [r.offset for r in first] == list(range(len(first)))
        c.seek(T0, 100)  # while responses past the position are buffered and in flight
        again = consume(c, 1900)
        assert [r.offset for r in again] == list(range(100, 2000))
        assert [r.value for r in again[:3]] == [b"v100", b"v101", b"v102"]


@pytest.mark.parametrize(
    "config", [{"isolation_level": "read_committed"}, {"isolation.level": "READ_COMMITTED"}]
)
def test_read_committed_fetches_and_lists_offsets_read_committed(
    config: dict[str, object],
) -> None:
    c = Consumer({"bootstrap.servers": "localhost:9092", **config})
    assert c._fetcher.isolation_level == fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED
    c.close()
    c = Consumer(bootstrap_servers="localhost:9092", isolation_level="read_uncommitted")
    assert c._fetcher.isolation_level == fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
    c.close()
