"""Kafka's binary protocol on a broker listener (``server/kafka``): unmodified kafka-python
negotiates versions, reads metadata, produces, consumes (assigned, and in a classic group
that commits its offsets) through it, beside the gRPC listener of the same broker; bad frames
close only their own connection, and unsupported versions get Kafka's UNSUPPORTED_VERSION."""

from __future__ import annotations

import socket
import struct
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import _core, decode_batches
from tests.support.kafka_wire import call, closed, connect, kafka_broker, kafka_port, read_frame
from tests.support.mini_broker import MiniBroker

with warnings.catch_warnings():
    # kafka-python reads its JSON schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

FETCH, API_VERSIONS, METADATA, FIND_COORDINATOR, ENVELOPE = 1, 18, 3, 10, 58
UNSUPPORTED_VERSION, UNKNOWN_TOPIC_OR_PARTITION, COORDINATOR_NOT_AVAILABLE = 35, 3, 15


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = kafka_broker(tmp_path / "data", {"orders": 3})
    yield b
    b.close()


def test_kafka_python_reads_metadata_through_the_kafka_listener(broker: MiniBroker) -> None:
    bootstrap = f"127.0.0.1:{kafka_port(broker)}"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        assert "orders" in consumer.topics()
        assert consumer.partitions_for_topic("orders") == {0, 1, 2}
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert "orders" in admin.list_topics()
    finally:
        admin.close()


def test_metadata_names_brokers_by_the_listener_asked(broker: MiniBroker) -> None:
    with connect(broker) as s:
        everything = call(s, METADATA, 12, {"topics": None})
        (node,) = everything["brokers"]
        assert (node["host"], node["port"]) == ("127.0.0.1", kafka_port(broker))
        (orders,) = [t for t in everything["topics"] if t["name"] == "orders"]
        assert orders["error_code"] == 0 and len(orders["partitions"]) == 3
        assert all(p["leader_id"] == node["node_id"] for p in orders["partitions"])
        # By id (v10+), an unknown name, and an empty list (no topics, v1+).
        by_id = call(s, METADATA, 12, {"topics": [{"topic_id": orders["topic_id"]}]})
        assert [t["name"] for t in by_id["topics"]] == ["orders"]
        unknown = call(
            s, METADATA, 12, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": False}
        )
        assert [t["error_code"] for t in unknown["topics"]] == [UNKNOWN_TOPIC_OR_PARTITION]
        assert call(s, METADATA, 12, {"topics": []})["topics"] == []
        # Metadata v0 reads an empty list as every topic.
        assert "orders" in [t["name"] for t in call(s, METADATA, 0, {"topics": []})["topics"]]


def test_unsupported_versions_get_kafkas_answer(broker: MiniBroker) -> None:
    with connect(broker) as s:
        versions = call(s, API_VERSIONS, 3, {"client_software_name": "raw"})
        served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
        assert served[API_VERSIONS] == (0, 4) and served[METADATA] == (0, 12)
        # ApiVersions at a version the broker does not know: a v0 answer (KIP-511).
        s.sendall(struct.pack(">ihhih", 10, API_VERSIONS, 99, 5, -1))
        correlation_id, answer = _core.kafka_decode_response(API_VERSIONS, 0, read_frame(s))
        assert correlation_id == 5 and answer["error_code"] == UNSUPPORTED_VERSION
        assert {k["api_key"] for k in answer["api_keys"]} == set(served)
        # A key the broker does not serve to clients (Envelope is controller-to-broker),
        # whose response has a top-level error code.
        s.sendall(_core.kafka_encode_request(ENVELOPE, 0, 6, "raw", {"request_data": b"x"}))
        correlation_id, answer = _core.kafka_decode_response(ENVELOPE, 0, read_frame(s))
        assert correlation_id == 6 and answer["error_code"] == UNSUPPORTED_VERSION
        assert call(s, METADATA, 1, {"topics": None})["brokers"]  # the connection still serves


def test_bad_frames_close_only_their_connection(broker: MiniBroker) -> None:
    bad_frames = [
        struct.pack(">i", 0x7FFF_FFFF),  # a 2 GiB size prefix
        struct.pack(">i", -5),  # a negative size
        struct.pack(">ih", 2, 3),  # shorter than a request header
        struct.pack(">ihhih", 12, 999, 0, 1, -1) + b"xy",  # an api key no schema has
    ]
    for frame in bad_frames:
        with connect(broker) as s:
            s.sendall(frame)
            assert closed(s), frame
    # Garbage after a valid Metadata header: INVALID_REQUEST where the response has an
    # error code, else the connection is closed; either way the broker keeps serving.
    with connect(broker) as s:
        header = struct.pack(">hhih", METADATA, 1, 7, -1)
        s.sendall(struct.pack(">i", len(header) + 3) + header + b"\xff\xff\xff")
        assert closed(s)
    # A truncated frame, and a client that connects and sends nothing, hold up no one.
    idle = connect(broker)
    half = connect(broker)
    half.sendall(struct.pack(">i", 100) + b"\x00\x03")
    try:
        with connect(broker) as s:
            assert call(s, METADATA, 12, {"topics": None})["brokers"]
    finally:
        idle.close()
        half.close()


def test_kafka_python_produces_and_consumes_through_the_kafka_listener(
    broker: MiniBroker,
) -> None:
    bootstrap = f"127.0.0.1:{kafka_port(broker)}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    try:
        sent = [
            producer.send("orders", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3)
            for i in range(30)
        ]
        offsets = [f.get(timeout=30) for f in sent]
        producer.send("orders", value=b"fire and forget", partition=0)  # acks=all still
        producer.flush()
    finally:
        producer.close()
    assert sorted(m.offset for m in offsets if m.partition == 1) == list(range(10))
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5_000)
    try:
        parts = [TopicPartition("orders", p) for p in range(3)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        got = [(m.partition, m.offset, m.key, m.value) for m in consumer]
        assert consumer.end_offsets(parts) == {
            parts[0]: 11,
            parts[1]: 10,
            parts[2]: 10,
        }
    finally:
        consumer.close()
    assert sorted((p, k, v) for p, _, k, v in got if k is not None) == sorted(
        (i % 3, b"k%d" % i, b"v%d" % i) for i in range(30)
    )
    # The log holds what kafka-python wrote, as Rillet's own decoder reads it.
    log = broker.log("orders", 1)
    stored = [
        (r.offset, r.key, r.value)
        for b in decode_batches(log.read(0, 1 << 20).read_all())
        for r in b.records
    ]
    assert stored == [(o, k, v) for p, o, k, v in got if p == 1]


def test_kafka_python_consumes_in_a_classic_group_and_resumes_from_its_commits(
    broker: MiniBroker,
) -> None:
    bootstrap = f"127.0.0.1:{kafka_port(broker)}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    try:
        for i in range(20):
            producer.send("orders", value=b"m%d" % i, partition=i % 3)
        producer.flush()
    finally:
        producer.close()

    def consume(limit: int) -> list[bytes]:
        consumer = KafkaConsumer(
            "orders",
            bootstrap_servers=bootstrap,
            group_id="g1",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=3_000,
            max_poll_records=limit,
        )
        try:
            got: list[bytes] = []
            for message in consumer:
                got.append(message.value)
                if len(got) == limit:
                    break
            consumer.commit()
            return got
        finally:
            consumer.close()

    first = consume(12)
    rest = consume(100)
    assert len(first) == 12
    assert sorted(first + rest) == sorted(b"m%d" % i for i in range(20))


def test_find_coordinator_names_this_listener_in_each_versions_shape(broker: MiniBroker) -> None:
    with connect(broker) as s:
        # The first one creates __consumer_offsets: COORDINATOR_NOT_AVAILABLE until it is led.
        deadline = time.monotonic() + 60
        while True:
            old = call(s, FIND_COORDINATOR, 1, {"key": "g1", "key_type": 0})
            if old["error_code"] != COORDINATOR_NOT_AVAILABLE or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert (old["error_code"], old["port"]) == (0, kafka_port(broker))
        (new,) = call(s, FIND_COORDINATOR, 4, {"coordinator_keys": ["g1"]})["coordinators"]
        assert (new["key"], new["node_id"], new["port"]) == ("g1", old["node_id"], old["port"])
        bad = call(s, FIND_COORDINATOR, 1, {"key": "g1", "key_type": 7})
        assert bad["error_code"] == 42  # INVALID_REQUEST


def test_a_large_fetch_is_sent_whole_to_a_slow_reader(broker: MiniBroker) -> None:
    """Record sets go out with sendfile; a reader slower than the broker fills the socket,
    and the broker waits for room and goes on, the response byte for byte the log's."""
    bootstrap = f"127.0.0.1:{kafka_port(broker)}"
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=False, batch_size=1 << 18, linger_ms=5
    )
    try:
        for i in range(8000):
            producer.send("orders", value=bytes([i % 251]) * 1000, partition=0)
        producer.flush()
    finally:
        producer.close()
    limit = 64 << 20
    request = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": limit,
        "topics": [
            {
                "topic": "orders",
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": limit}],
            }
        ],
    }
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", kafka_port(broker)))
    with s:
        s.sendall(_core.kafka_encode_request(FETCH, 12, 3, "raw", request))
        time.sleep(0.5)  # the broker's side fills up meanwhile
        _, response = _core.kafka_decode_response(FETCH, 12, read_frame(s))
        (partition,) = response["responses"][0]["partitions"]
        # The connection goes on after a spliced response.
        assert call(s, METADATA, 12, {"topics": None})["brokers"]
    stored = broker.log("orders", 0).read(0, limit).read_all()
    assert partition["error_code"] == 0 and len(stored) > 8_000_000
    assert partition["records"] == stored


def test_kafka_python_idempotent_and_transactional_producers(broker: MiniBroker) -> None:
    bootstrap = f"127.0.0.1:{kafka_port(broker)}"
    idempotent = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    try:
        for i in range(10):
            idempotent.send("orders", value=b"i%d" % i, partition=1)
        idempotent.flush()
    finally:
        idempotent.close()
    txn = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    try:
        txn.init_transactions()
        txn.begin_transaction()
        txn.send("orders", value=b"committed", partition=2)
        txn.commit_transaction()
        txn.begin_transaction()
        txn.send("orders", value=b"aborted", partition=2)
        txn.flush()
        txn.abort_transaction()
    finally:
        txn.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", consumer_timeout_ms=3_000
    )
    try:
        parts = [TopicPartition("orders", 1), TopicPartition("orders", 2)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        got = [(m.partition, m.value) for m in consumer]
    finally:
        consumer.close()
    assert [v for p, v in got if p == 1] == [b"i%d" % i for i in range(10)]
    assert [v for p, v in got if p == 2] == [b"committed"]
    # The records carry the producers' ids: the idempotent one's batches are stamped.
    (batch, *_) = decode_batches(broker.log("orders", 1).read(0, 1 << 20).read_all())
    assert batch.producer_id >= 0 and batch.base_sequence == 0
