"""Client quotas on a real ``rillet server start`` process: ``rillet configs`` sets and
describes them (gRPC) as kafka-configs.sh does, Kafka's DescribeClientQuotas and
AlterClientQuotas answer over Kafka's protocol, and a producer or consumer that goes as fast
as it can is held to its byte rate: an unmodified Kafka client (librdkafka) on the Kafka
listener, and Rillet's own producer on gRPC.

Quotas are measured as Kafka measures them: the bytes of the last ``quota.window.num``
samples of ``quota.window.size.seconds`` over the time they span. A client that sends as fast
as it may gets, each time its oldest sample expires, a burst of what the window allows, so
its rate is the quota only over many windows. The servers here take two samples of one
second (Kafka's default is eleven, whose first burst would take ten seconds to pass): each
client goes as fast as it can for 20 seconds, and its rate over 16 of them, past the first
burst, must be within 20% of its quota.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from rillet import Consumer as RilletConsumer
from rillet.client.kafka_connection import KafkaConnection
from rillet.client.producer.producer import Producer as RilletProducer
from rillet.types import TopicPartition as RilletTopicPartition
from tests.support.server_process import ServerProcess, serving

pytestmark = pytest.mark.timeout(180)

QUOTA = 256 * 1024  # bytes per second: far below what any client here can send
RECORD = 1024
WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
RUN_S = 20.0  # how long each client goes as fast as it can
MEASURED_S = (3.0, 19.0)  # past the first burst (one sample's quota) and its throttle


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with serving(tmp_path / "data", kafka=True, overrides=dict(WINDOW)) as s:
        yield s


def configs(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", "configs",
         "--bootstrap-server", server.bootstrap, *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def rate_between(events: list[tuple[float, int]], start: float, end: float) -> float:
    """Bytes per second of the events (monotonic time, bytes) from ``start`` to ``end``."""
    inside = [n for t, n in events if start <= t < end]
    assert len(inside) > 10, f"only {len(inside)} events measured"
    return sum(inside) / (end - start)


def assert_near_quota(events: list[tuple[float, int]], started: float) -> None:
    rate = rate_between(events, started + MEASURED_S[0], started + MEASURED_S[1])
    print(f"measured {rate:.0f} B/s against a quota of {QUOTA} B/s")
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"


# -- managing quotas ----------------------------------------------------------------------


def test_configs_sets_describes_and_deletes_quotas(server: ServerProcess) -> None:
    ok(configs(server, "--alter", "--entity-type", "clients", "--entity-name", "fast",
               "--add-config", "producer_byte_rate=262144"))  # fmt: skip
    assert ok(configs(server, "--alter", "--user-defaults", "--add-config",
                      "consumer_byte_rate=10485760")) == (
        "Completed updating default config for users in the cluster.\n"
    )  # fmt: skip
    ok(configs(server, "--alter", "--user", "alice", "--client", "app",
               "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"))  # fmt: skip
    assert ok(configs(server, "--describe", "--entity-type", "clients")) == (
        "Quota configs for client-id 'fast' are producer_byte_rate=262144.0\n"
    )
    assert ok(configs(server, "--describe", "--user-defaults")) == (
        "Quota configs for the default user-principal are consumer_byte_rate=1.048576E7\n"
    )
    assert ok(configs(server, "--describe", "--user", "alice", "--client", "app")) == (
        "Quota configs for user-principal 'alice', client-id 'app' are "
        "consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n"
    )
    # Refused with Kafka's error and a reason: a quota Rillet does not enforce, a bad value.
    r = configs(server, "--alter", "--client", "x", "--add-config", "request_percentage=50")
    assert r.returncode == 1 and "INVALID_REQUEST" in r.stderr and "not enforced" in r.stderr
    r = configs(server, "--alter", "--client", "x", "--add-config", "producer_byte_rate=abc")
    assert r.returncode == 1 and "Cannot parse quota configuration value" in r.stderr
    r = configs(server, "--alter", "--client", "x", "--add-config", "producer_byte_rate=-1")
    assert r.returncode == 1 and "must be positive" in r.stderr
    ok(configs(server, "--alter", "--client", "fast", "--delete-config", "producer_byte_rate"))
    assert ok(configs(server, "--describe", "--entity-type", "clients")) == ""


def test_kafka_protocol_describes_and_alters_quotas(server: ServerProcess) -> None:
    conn = KafkaConnection(server.kafka_bootstrap, "admin", 10_000)
    try:
        default_user = [{"entity_type": "user", "entity_name": None}]
        altered = conn.call(49, (0, 1), {
            "entries": [
                {"entity": default_user,
                 "ops": [{"key": "producer_byte_rate", "value": 4096.0, "remove": False}]},
                {"entity": [{"entity_type": "ip", "entity_name": "1.2.3.4"}],
                 "ops": [{"key": "connection_creation_rate", "value": 5.0, "remove": False}]},
            ],
            "validate_only": False,
        })  # fmt: skip
        first, second = altered["entries"]
        assert first["error_code"] == 0 and first["entity"] == default_user
        assert second["error_code"] == 42 and "ip entities" in second["error_message"]
        described = conn.call(48, (0, 1), {
            "components": [{"entity_type": "user", "match_type": 1, "match": None}],
            "strict": True,
        })  # fmt: skip
        assert described["error_code"] == 0
        assert described["entries"] == [
            {"entity": default_user, "values": [{"key": "producer_byte_rate", "value": 4096.0}]}
        ]
        # validate_only checks without writing; a bad filter is answered INVALID_REQUEST.
        conn.call(49, (0, 1), {
            "entries": [{"entity": [{"entity_type": "client-id", "entity_name": "c"}],
                         "ops": [{"key": "consumer_byte_rate", "value": 1.0, "remove": False}]}],
            "validate_only": True,
        })  # fmt: skip
        every = conn.call(48, (0, 1), {"components": [], "strict": False})
        assert len(every["entries"]) == 1
        bad = conn.call(48, (0, 1), {
            "components": [{"entity_type": "user", "match_type": 9, "match": None}],
            "strict": False,
        })  # fmt: skip
        assert bad["error_code"] == 42 and "Unknown match type 9" in bad["error_message"]
    finally:
        conn.close()


# -- enforcing them -----------------------------------------------------------------------


def test_a_fast_kafka_producer_is_held_to_its_client_quota(server: ServerProcess) -> None:
    ok(configs(server, "--alter", "--client", "fast", "--add-config",
               f"producer_byte_rate={QUOTA}"))  # fmt: skip
    server.create_topic("throttled", 1)
    deliveries: list[tuple[float, int]] = []
    throttled_ms: list[int] = []

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        deliveries.append((time.monotonic(), RECORD))

    def stats(raw: str) -> None:
        import json

        for broker in json.loads(raw)["brokers"].values():
            throttled_ms.append(int(broker["throttle"]["max"]))

    producer = Producer({
        "bootstrap.servers": server.kafka_bootstrap,
        "client.id": "fast",
        "linger.ms": 5,
        # The Java client's batch size: requests small against a quota window, as Kafka's
        # throttling assumes (librdkafka's own default is 1 MB).
        "batch.size": 16384,
        # A small queue: what is queued when the test stops must drain at the quota.
        "queue.buffering.max.messages": 1000,
        "statistics.interval.ms": 1000,
        "stats_cb": stats,
    })  # fmt: skip
    started = time.monotonic()
    while time.monotonic() - started < RUN_S:
        try:
            producer.produce("throttled", b"x" * RECORD, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)
    assert_near_quota(deliveries, started)
    # librdkafka saw throttle_time_ms in the produce responses.
    assert max(throttled_ms, default=0) > 0


def test_a_grpc_producer_never_exceeds_its_client_quota(server: ServerProcess) -> None:
    """Rillet's producer over gRPC (whose calls count against the client id it sends) is
    held back by the broker alone: it does not wait out throttle_time_ms itself, as KIP-219
    asks clients to, and packs many batches into one call, so it goes in bursts of what a
    window allows, one each time a sample expires. Over the run it never gets more than the
    quota plus that first burst, and it is throttled, not stopped."""
    ok(configs(server, "--alter", "--client", "grpc-fast", "--add-config",
               f"producer_byte_rate={QUOTA}"))  # fmt: skip
    server.create_topic("throttled-grpc", 1)
    deliveries: list[tuple[float, int]] = []
    # A small buffer: what is buffered when the test stops must drain at the quota.
    producer = RilletProducer(
        bootstrap_servers=server.bootstrap,
        client_id="grpc-fast",
        transport="grpc",
        linger_ms=5,
        buffer_memory=256 * 1024,
        max_block_ms=60_000,
    )
    try:
        started = time.monotonic()
        while time.monotonic() - started < RUN_S:
            future = producer.send("throttled-grpc", b"y" * RECORD)
            future.add_callback(lambda _: deliveries.append((time.monotonic(), RECORD)))
        producer.flush(60)
        # The producer saw throttle_time_ms in the responses (its metrics, as kafka-python's).
        metrics = producer.metrics()
        assert metrics is not None
        assert metrics["producer-metrics"]["produce-throttle-time-max"] > 0
    finally:
        producer.close()
    samples = int(WINDOW["quota.window.num"])
    elapsed = deliveries[-1][0] - started
    delivered = sum(n for _, n in deliveries)
    # The most a window lets through at the start (all but one sample's quota), plus the
    # quota for the rest of the run, plus the last call let through (at most a buffer).
    most = QUOTA * (samples - 1) + QUOTA * elapsed + 256 * 1024
    assert delivered <= most, f"{delivered} bytes in {elapsed:.1f} s: more than {most:.0f}"
    assert delivered >= 0.5 * QUOTA * elapsed, f"{delivered} bytes in {elapsed:.1f} s"


def test_a_fast_consumer_is_held_to_its_quota(server: ServerProcess) -> None:
    server.create_topic("to-read", 1)
    # Small batches: a fetch answers at least one whole batch, whatever its size.
    producer = Producer({
        "bootstrap.servers": server.kafka_bootstrap, "linger.ms": 20, "batch.size": 16384
    })  # fmt: skip
    for _ in range(8 * 1024 * 1024 // RECORD):  # more than it may read in RUN_S
        while True:
            try:
                producer.produce("to-read", b"z" * RECORD)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    ok(configs(server, "--alter", "--client", "slow", "--add-config",
               f"consumer_byte_rate={QUOTA}"))  # fmt: skip
    consumer = Consumer({
        "bootstrap.servers": server.kafka_bootstrap,
        "client.id": "slow",
        "group.id": "quota-readers",
        "enable.auto.commit": False,
        # Fetches of 16 KB (the batches'), small against a quota window as for the
        # producers: librdkafka's default is 1 MB.
        "max.partition.fetch.bytes": 16384,
    })  # fmt: skip
    consumer.assign([TopicPartition("to-read", 0, OFFSET_BEGINNING)])
    received: list[tuple[float, int]] = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < RUN_S:
            for msg in consumer.consume(1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                received.append((time.monotonic(), len(msg.value() or b"")))
    finally:
        consumer.close()
    assert_near_quota(received, started)


def test_a_grpc_consumer_sees_its_fetches_throttled(server: ServerProcess) -> None:
    """Rillet's consumer over gRPC, over its client id's consumer quota, reads the
    throttle_time_ms of its fetch responses into ``fetch-throttle-time-max``."""
    server.create_topic("to-read-grpc", 1)
    with RilletProducer(bootstrap_servers=server.bootstrap, transport="grpc") as producer:
        for _ in range(4 * 1024 * 1024 // RECORD):
            producer.send("to-read-grpc", b"w" * RECORD)
        producer.flush(60)
    ok(configs(server, "--alter", "--client", "slow-grpc", "--add-config",
               f"consumer_byte_rate={QUOTA}"))  # fmt: skip
    consumer = RilletConsumer(
        bootstrap_servers=server.bootstrap, client_id="slow-grpc", auto_offset_reset="earliest"
    )
    try:
        tp = RilletTopicPartition("to-read-grpc", 0)
        consumer.assign([tp])
        deadline = time.monotonic() + 60
        throttled = 0.0
        while throttled <= 0 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
            metrics = consumer.metrics()["consumer-fetch-manager-metrics"]
            throttled = metrics["fetch-throttle-time-max"]
        assert throttled > 0
    finally:
        consumer.close()
