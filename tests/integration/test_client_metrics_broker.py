"""The clients' ``metrics()`` against a real one-node broker (in process, both listeners),
over gRPC and over Kafka's protocol: what was produced and consumed is what the metrics
count, checked against the broker's own logs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import pytest

from rillet import Consumer, Producer, TopicPartition
from tests.support.kafka_wire import kafka_broker, kafka_port
from tests.support.mini_broker import MiniBroker

N = 300
VALUE_BYTES = 100
TOPIC = "m"
PARTITIONS = 3
TRANSPORTS = ("grpc", "kafka")
# A topic per test and transport, made with the broker.
TOPICS = [TOPIC, "classic", *(f"{t}-{x}" for t in ("sent", "read") for x in TRANSPORTS)]
# Windows long enough that nothing recorded during a test leaves them.
LONG_WINDOW = {"metrics_sample_window_ms": 600_000}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniBroker]:
    b = kafka_broker(
        tmp_path_factory.mktemp("metrics") / "data",
        dict.fromkeys(TOPICS, PARTITIONS),
        {
            "group.consumer.heartbeat.interval.ms": "200",
            "offsets.topic.num.partitions": "2",
        },
    )
    yield b
    b.close()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def bootstrap(transport: str, broker: MiniBroker) -> str:
    """The listener of the transport under test (the client's ``auto`` picks it)."""
    return f"127.0.0.1:{kafka_port(broker)}" if transport == "kafka" else broker.bootstrap


def log_bytes(broker: MiniBroker, topic: str) -> int:
    """The bytes of every batch the broker has of ``topic``."""
    total = 0
    for p in range(PARTITIONS):
        log = broker.log(topic, p)
        if log.log_end_offset:
            total += len(log.read(0, 1 << 30).read_all())
    return total


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def produce(bootstrap: str, topic: str) -> dict[str, dict[str, float]]:
    """N records of VALUE_BYTES, as many to each partition; the producer's metrics after."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, **LONG_WINDOW) as p:
        for i in range(N):
            p.send(topic, value=bytes([i % 256]) * VALUE_BYTES, partition=i % PARTITIONS)
        p.flush()
        metrics = p.metrics()
        assert metrics is not None
        return metrics


def test_producer_metrics_count_what_was_sent(
    broker: MiniBroker, transport: str, bootstrap: str
) -> None:
    topic = f"sent-{transport}"
    metrics = produce(bootstrap, topic)
    p = metrics["producer-metrics"]
    # A retried batch is sent again: every record once, plus the retries.
    assert p["record-error-total"] == 0.0
    assert p["record-send-total"] == N + p["record-retry-total"]
    written = log_bytes(broker, topic)
    assert written >= N * VALUE_BYTES
    if p["record-retry-total"] == 0:
        # The broker keeps the producer's batches as they were sent.
        assert p["byte-total"] == written
    assert p["record-send-rate"] > 0 and p["byte-rate"] > 0
    requests = p["request-total"]
    assert requests >= 1 and p["response-total"] == requests
    assert p["records-per-request-avg"] == pytest.approx(p["record-send-total"] / requests)
    assert p["batch-size-max"] >= p["batch-size-avg"] > 0
    assert p["request-latency-max"] >= p["request-latency-avg"] > 0
    assert p["record-queue-time-max"] >= 0
    assert p["requests-in-flight"] == 0.0
    # Flushed: every batch's memory is back.
    assert p["buffer-available-bytes"] == p["buffer-total-bytes"] == 33554432.0
    assert p["bufferpool-wait-time-ns-total"] == 0.0
    assert 0 <= p["metadata-age"] < 600
    t = metrics[f"producer-topic-metrics.{topic}"]
    assert t["record-send-total"] == p["record-send-total"]
    assert t["byte-total"] == p["byte-total"]
    node = metrics["producer-node-metrics.node-1"]
    assert node["request-total"] == requests and node["response-total"] == requests
    assert node["request-latency-max"] == p["request-latency-max"]


def poll_until(consumer: Consumer, wanted: int) -> int:
    got = 0
    deadline = time.monotonic() + 30
    while got < wanted:
        assert time.monotonic() < deadline, f"consumed {got} of {wanted}"
        got += sum(len(v) for v in consumer.poll(200).values())
    return got


def test_consumer_metrics_count_what_was_consumed(
    broker: MiniBroker, transport: str, bootstrap: str
) -> None:
    topic = f"read-{transport}"
    produce(bootstrap, topic)
    stored = log_bytes(broker, topic)
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=50,
        fetch_max_wait_ms=50,
        # Short windows, so that the lag of the start leaves them once caught up.
        metrics_sample_window_ms=1000,
        metrics_num_samples=2,
    )
    try:
        consumer.subscribe([topic])
        got = poll_until(consumer, 1)
        first = consumer.metrics()
        assert first is not None
        # The first poll hands out at most 50 of a partition's 100 records: the rest is lag.
        assert first["consumer-fetch-manager-metrics"]["records-lag-max"] > 0
        got += poll_until(consumer, N - got)
        assert got == N

        def fetch_metrics() -> dict[str, float]:
            metrics = consumer.metrics()
            assert metrics is not None
            return metrics["consumer-fetch-manager-metrics"]

        f = fetch_metrics()
        assert f["records-consumed-total"] == N
        assert f["bytes-consumed-total"] == stored
        assert f["fetch-total"] >= 1
        assert f["fetch-size-max"] >= f["fetch-size-avg"] > 0
        assert f["fetch-latency-max"] >= f["fetch-latency-avg"] >= 0

        def caught_up() -> bool:
            consumer.poll(20)
            return fetch_metrics()["records-lag-max"] == 0.0

        # Caught up: the empty fetches record no lag, and the lag of the start ages out.
        wait_for("records-lag-max to be 0", caught_up)
        assert fetch_metrics()["records-consumed-total"] == N

        consumer.commit()
        metrics = consumer.metrics()
        assert metrics is not None
        c = metrics["consumer-coordinator-metrics"]
        assert c["commit-total"] >= 1 and c["commit-rate"] > 0
        assert c["commit-latency-max"] >= c["commit-latency-avg"] > 0
        assert c["assigned-partitions"] == PARTITIONS
        assert c["heartbeat-total"] >= 1
        assert 0 <= c["last-heartbeat-seconds-ago"] < 60
        assert "join-total" not in c  # a KIP-848 member sends no JoinGroup
        committed = {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
        assert sum(o or 0 for o in committed.values()) == N
    finally:
        consumer.close()


def test_a_classic_member_counts_joins_syncs_and_heartbeats(broker: MiniBroker) -> None:
    topic = "classic"
    produce(broker.bootstrap, topic)
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        group_id="classic-g",
        group_protocol="classic",
        heartbeat_interval_ms=100,
        auto_offset_reset="earliest",
        auto_commit_interval_ms=100,
        **LONG_WINDOW,
    )
    try:
        consumer.subscribe([topic])
        assert poll_until(consumer, N) == N

        def coordinator() -> dict[str, float]:
            consumer.poll(50)
            metrics = consumer.metrics()
            assert metrics is not None
            return metrics["consumer-coordinator-metrics"]

        def heartbeat_and_commit() -> bool:
            c = coordinator()
            return c["heartbeat-total"] >= 1 and c["commit-total"] >= 1

        wait_for("a heartbeat and an auto-commit", heartbeat_and_commit)
        c = coordinator()
        assert c["join-total"] >= 1 and c["sync-total"] >= 1
        assert c["join-time-max"] >= c["join-time-avg"] > 0
        assert c["sync-rate"] > 0 and c["heartbeat-rate"] > 0
        assert c["heartbeat-response-time-max"] > 0
        assert c["assigned-partitions"] == PARTITIONS
    finally:
        consumer.close()


def test_the_metrics_configs(broker: MiniBroker) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap, "metrics.enabled": "false"}) as quiet:
        assert quiet.metrics() is None
        assert quiet.metrics(raw=True) is None
    configs = {
        "bootstrap.servers": broker.bootstrap,
        "metrics.num.samples": "3",
        "metrics.sample.window.ms": "1000",
    }
    with Producer(configs) as p:
        assert (p.config["metrics_num_samples"], p.config["metrics_sample_window_ms"]) == (3, 1000)
        raw = p.metrics(raw=True)
        assert raw is not None
        named = {(n.group, n.name): m for n, m in raw.items()}
        p.send(TOPIC, b"x").get(timeout=30)
        assert named[("producer-metrics", "record-send-total")].value() == 1.0
        assert named[("producer-metrics", "bufferpool-wait-ratio")].value() == 0.0
        assert math.isnan(named[("producer-metrics", "request-latency-avg")].value()) is False
    consumer = Consumer(bootstrap_servers=broker.bootstrap, metrics_enabled=False)
    try:
        assert consumer.metrics() is None
    finally:
        consumer.close()
    consumer = Consumer(bootstrap_servers=broker.bootstrap)  # no group: no coordinator
    try:
        metrics = consumer.metrics()
        assert metrics is not None and set(metrics) == {"consumer-fetch-manager-metrics"}
    finally:
        consumer.close()
