"""The Producer against an in-process broker (real gRPC, real logs)."""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rillet import decode_batches
from rillet._core import partition_for_key
from rillet.client.futures import RecordMetadata
from rillet.client.producer import Producer
from rillet.errors import (
    InvalidConfigurationError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from tests.support.mini_broker import MiniBroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from kafka.partitioner.default import murmur2 as reference_murmur2


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path / "data", {"t": 3, "one": 1})
    yield b
    b.close()


def read_all(broker: MiniBroker, topic: str, partition: int) -> list[Any]:
    log = broker.log(topic, partition)
    if log.log_end_offset == 0:
        return []
    data = log.read(0, 1 << 30).read_all()
    return [r for b in decode_batches(data) for r in b.records]


def test_send_returns_futures_with_offsets_and_keyed_partitioning(broker: MiniBroker) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1) as p:
        futures = [p.send("t", value=b"v%d" % i, key=b"key-%d" % (i % 5)) for i in range(50)]
        metas = [f.get(timeout=10) for f in futures]
    for i, m in enumerate(metas):
        assert isinstance(m, RecordMetadata) and m.topic == "t"
        key = b"key-%d" % (i % 5)
        assert m.partition == partition_for_key(key, 3)
        assert m.partition == (reference_murmur2(key) & 0x7FFFFFFF) % 3
    for part in range(3):
        offsets = sorted(m.offset for m in metas if m.partition == part)
        assert offsets == list(range(len(offsets)))  # contiguous from 0
        values = [r.value for r in read_all(broker, "t", part)]
        assert values == [b"v%d" % i for i, m in enumerate(metas) if m.partition == part]


def test_dotted_configs_serializers_compression_acks_all(broker: MiniBroker) -> None:
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "compression.type": "zstd",
            "value.serializer": lambda v: json.dumps(v).encode(),
            "key.serializer": "str",
        }
    )
    try:
        f = p.send("one", {"n": 1}, key="k", headers=[("h", b"1")], timestamp_ms=1234)
        m = f.get(10)
        assert (m.offset, m.timestamp) == (0, 1234)
    finally:
        p.close()
    [r] = read_all(broker, "one", 0)
    assert (r.key, json.loads(r.value), r.headers) == (b"k", {"n": 1}, [("h", b"1")])


def test_callbacks_flush_and_sticky_null_keys(broker: MiniBroker) -> None:
    got: list[int] = []
    done = threading.Event()
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1000, batch_size=1 << 20) as p:
        futures = [p.send("t", b"x") for _ in range(20)]
        futures[-1].add_callback(lambda m: (got.append(m.offset), done.set()))
        p.flush(timeout=10)
        assert all(f.is_done and f.succeeded() for f in futures)
    assert done.wait(5) and got == [19]
    # Null keys stick to one partition while its batch fills.
    assert len({f.get().partition for f in futures}) == 1


def test_sticky_partition_moves_on_after_batch_size_bytes(broker: MiniBroker) -> None:
    # KIP-794: 100-byte values with batch.size 1000 switch partitions about every 10 records,
    # each switch to a different partition, so the load spreads over all of them.
    with Producer(bootstrap_servers=broker.bootstrap, batch_size=1000, linger_ms=1) as p:
        metas = [p.send("t", b"x" * 100).get(10) for _ in range(200)]
    parts = [m.partition for m in metas]
    assert set(parts) == {0, 1, 2}
    runs = [parts[0]]
    for q in parts[1:]:
        if q != runs[-1]:
            runs.append(q)
    assert 15 <= len(runs) <= 25  # ~200 records / ~10 per stint


def test_client_side_errors(broker: MiniBroker) -> None:
    with pytest.raises(InvalidConfigurationError, match=r"no\.such\.thing"):
        Producer({"bootstrap.servers": broker.bootstrap, "no.such.thing": 1})
    with pytest.raises(InvalidConfigurationError, match="acks"):
        Producer(bootstrap_servers=broker.bootstrap, acks=3)
    with Producer(bootstrap_servers=broker.bootstrap, max_request_size=100) as p:
        with pytest.raises(UnknownTopicOrPartitionError):
            p.send("t", b"x", partition=99)
        with pytest.raises(RecordTooLargeError):
            p.send("t", b"x" * 200)
        failed = []
        f = p.send("t", b"ok", partition=1)
        f.add_errback(failed.append)
        assert f.get(10).partition == 1 and not failed


def test_auto_created_topic_and_partitions_for(broker: MiniBroker) -> None:
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        assert p.partitions_for("t") == {0, 1, 2}
        assert p.send("fresh", b"x").get(10).offset == 0


def test_a_partitions_batches_share_a_request_with_their_own_offsets(broker: MiniBroker) -> None:
    # batch.size 1000 and a long linger: the flush finds ~12 closed batches of partition 0
    # and sends them one after the other in one request entry; each batch's records get
    # their own offsets, as the log assigned them.
    with Producer(bootstrap_servers=broker.bootstrap, batch_size=1000, linger_ms=60_000) as p:
        futures = [p.send("one", b"%03d" % i + b"x" * 100) for i in range(100)]
        p.flush(10)
        metas = [f.get(10) for f in futures]
    assert len({f.produce_result for f in futures}) > 10
    assert [m.offset for m in metas] == list(range(100))
    assert [r.value[:3] for r in read_all(broker, "one", 0)] == [b"%03d" % i for i in range(100)]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"acks": 1}, "Must set acks to all"),
        ({"max.in.flight.requests.per.connection": 6}, "Must set max.in.flight"),
        ({"retries": 0}, "Must set retries to non-zero"),
    ],
)
def test_idempotence_asked_for_refuses_configs_that_break_it(
    config: dict[str, object], message: str
) -> None:
    # Kafka's ProducerConfig: an explicit enable.idempotence=true with a conflicting config
    # is an error; without it idempotence quietly turns off.
    with pytest.raises(InvalidConfigurationError, match=message):
        Producer({"bootstrap.servers": "localhost:9092", "enable.idempotence": "true", **config})
    p = Producer({"bootstrap.servers": "localhost:9092", **config})
    try:
        assert not p._idempotent
    finally:
        p.close(0)
    p = Producer(bootstrap_servers="localhost:9092")
    try:
        assert p._idempotent
    finally:
        p.close(0)
