"""The producer's and consumer's sensors (SenderMetrics, FetchManagerMetrics,
ConsumerCoordinatorMetrics) on an injected clock: what one request, response, fetch or
heartbeat adds to which of Kafka's metric names and groups."""

from __future__ import annotations

import gc
import math
import time
import weakref
from concurrent.futures import Future
from typing import Any

import pytest

from rillet import Consumer
from rillet._core import RecordAccumulator
from rillet.client.cluster import ClusterMetadata
from rillet.client.consumer.fetcher import Fetcher
from rillet.client.consumer.metrics import ConsumerCoordinatorMetrics, FetchManagerMetrics
from rillet.client.consumer.subscription import SubscriptionState
from rillet.client.futures import ProduceRequestResult
from rillet.client.metrics import MetricConfig, MetricName, Metrics
from rillet.client.producer.metrics import SenderMetrics
from rillet.client.producer.sender import InFlightBatch
from rillet.protocol import fetch_pb2
from rillet.types import TopicPartition

WINDOW = MetricConfig(samples=2, time_window_ms=1000)


class Clock:
    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


def drained_batches(acc: RecordAccumulator) -> list[InFlightBatch]:
    """Real closed batches: 3 records of topic a, 2 of topic b."""
    expires = time.time_ns() // 1_000_000 + 60_000
    for topic in ("a", "b"):
        acc.set_topic(topic, [(0, TopicPartition(topic, 0))], expires)
    for topic, n in (("a", 3), ("b", 2)):
        for i in range(n):
            acc.send(topic, None, b"v" * (10 + i), None, 0, None)
    ready = acc.ready(flush=True).slots
    out = []
    for d in acc.drain(ready, 1 << 20):
        assert not isinstance(d.batch, BaseException)
        out.append(
            InFlightBatch(
                d.slot,
                d.topic_partition,
                d.result,
                d.batch,
                d.record_count,
                d.reserved_bytes,
                d.created_ms,
            )
        )
    return sorted(out, key=lambda b: b.tp.topic)


def test_a_produce_request_and_its_response() -> None:
    clock = Clock()
    metrics = Metrics(WINDOW, clock)
    acc = RecordAccumulator(batch_result=ProduceRequestResult, buffer_memory=1 << 20)
    in_flight = [0]
    cluster = ClusterMetadata(["127.0.0.1:1"])
    sensors = SenderMetrics(metrics, acc, cluster, 1 << 20, lambda: in_flight[0])
    batches = drained_batches(acc)
    a, b = batches
    sizes = [len(x.records) for x in batches if x.records is not None]
    node = sensors.node("127.0.0.1:1")  # not a known broker: named by its address
    created = max(x.created_ms for x in batches)
    in_flight[0] = 1
    sensors.record_request(node, batches, created + 7, clock.ms)
    clock.ms = 250
    sensors.record_response(node, 12.5, 0, clock.ms)
    sensors.record_response(node, 7.5, 300, clock.ms)  # throttled by a client quota
    got = metrics.snapshot()
    p = got["producer-metrics"]
    assert p["record-send-total"] == 5.0
    assert p["records-per-request-avg"] == 5.0
    assert p["byte-total"] == float(sum(sizes))
    assert p["batch-size-avg"] == pytest.approx(sum(sizes) / 2)
    assert p["batch-size-max"] == float(max(sizes))
    assert 7.0 <= p["record-queue-time-max"] <= 7.0 + abs(a.created_ms - b.created_ms)
    assert p["request-total"] == 1.0 and p["response-total"] == 2.0
    assert p["request-latency-avg"] == 10.0 and p["request-latency-max"] == 12.5
    assert p["produce-throttle-time-avg"] == 150.0 and p["produce-throttle-time-max"] == 300.0
    assert p["requests-in-flight"] == 1.0
    assert p["buffer-total-bytes"] == float(1 << 20)
    assert p["buffer-available-bytes"] == float((1 << 20) - acc.used_memory)
    assert p["record-send-rate"] == pytest.approx(5 / 1.25)  # 250 ms plus one window
    assert got["producer-topic-metrics.a"]["record-send-total"] == 3.0
    assert got["producer-topic-metrics.b"]["record-send-total"] == 2.0
    assert got["producer-topic-metrics.a"]["byte-total"] == float(len(a.records or b""))
    n = got["producer-node-metrics.node-127.0.0.1:1"]
    assert n["request-total"] == 1.0 and n["response-total"] == 2.0
    assert n["request-latency-max"] == 12.5


def test_retries_and_failures_count_records_per_topic() -> None:
    metrics = Metrics(WINDOW, Clock())
    acc = RecordAccumulator(batch_result=ProduceRequestResult)
    sensors = SenderMetrics(metrics, acc, ClusterMetadata(["127.0.0.1:1"]), 1 << 20, lambda: 0)
    sensors.record_retries("a", 3)
    sensors.record_errors("a", 3)
    sensors.record_errors("b", 2)
    got = metrics.snapshot()
    assert got["producer-metrics"]["record-retry-total"] == 3.0
    assert got["producer-metrics"]["record-error-total"] == 5.0
    assert got["producer-topic-metrics.a"]["record-error-total"] == 3.0
    assert got["producer-topic-metrics.b"]["record-error-total"] == 2.0
    assert got["producer-topic-metrics.b"]["record-retry-total"] == 0.0


def test_fetch_metrics_and_records_per_request() -> None:
    clock = Clock()
    metrics = Metrics(WINDOW, clock)
    sensors = FetchManagerMetrics(metrics)
    got = metrics.snapshot()["consumer-fetch-manager-metrics"]
    assert math.isnan(got["records-per-request-avg"]) and math.isnan(got["records-lag-max"])
    for latency, size, throttle in ((40.0, 1000, 0), (60.0, 3000, 250)):
        sensors.fetch_latency.record(latency)
        sensors.throttle_time.record(throttle)
        sensors.bytes_fetched.record(size)
    sensors.records_consumed.record(25)
    sensors.records_consumed.record(5)
    sensors.records_lag.record(30)
    clock.ms = 600
    sensors.records_lag.record(0)
    got = metrics.snapshot()["consumer-fetch-manager-metrics"]
    assert got["fetch-total"] == 2.0
    assert got["fetch-latency-avg"] == 50.0 and got["fetch-latency-max"] == 60.0
    assert got["fetch-throttle-time-avg"] == 125.0 and got["fetch-throttle-time-max"] == 250.0
    assert got["fetch-size-avg"] == 2000.0 and got["fetch-size-max"] == 3000.0
    assert got["bytes-consumed-total"] == 4000.0
    assert got["records-consumed-total"] == 30.0
    assert got["records-per-request-avg"] == 15.0  # 30 records over 2 fetches
    assert got["records-lag-max"] == 30.0
    # Two windows on, only what was recorded since counts: caught up.
    clock.ms = 2100
    sensors.records_lag.record(0)
    got = metrics.snapshot()["consumer-fetch-manager-metrics"]
    assert got["records-lag-max"] == 0.0
    assert got["fetch-total"] == 2.0 and got["fetch-rate"] == 0.0


def test_coordinator_metrics() -> None:
    clock = Clock()
    metrics = Metrics(WINDOW, clock)
    assigned = [3]
    sensors = ConsumerCoordinatorMetrics(metrics, lambda: assigned[0])
    got = metrics.snapshot()["consumer-coordinator-metrics"]
    assert got["last-heartbeat-seconds-ago"] == math.inf
    assert got["assigned-partitions"] == 3.0
    assert "join-rate" not in got  # only a classic group's member joins
    clock.ms = 1000
    sent = sensors.heartbeat_sent()
    clock.ms = 1004
    sensors.record_latency(sensors.heartbeat_latency, sent)
    sensors.record_latency(sensors.commit_latency, 1001)
    clock.ms = 2500
    assigned[0] = 1
    got = metrics.snapshot()["consumer-coordinator-metrics"]
    assert got["last-heartbeat-seconds-ago"] == 1.5
    assert got["heartbeat-total"] == 1.0 and got["heartbeat-response-time-max"] == 4.0
    assert got["commit-total"] == 1.0 and got["commit-latency-avg"] == 3.0
    assert got["assigned-partitions"] == 1.0
    sensors.add_classic()
    sensors.record_latency(sensors.join_latency, 2000)
    sensors.record_latency(sensors.sync_latency, 2490)
    got = metrics.snapshot()["consumer-coordinator-metrics"]
    assert got["join-total"] == 1.0 and got["join-time-max"] == 500.0
    assert got["sync-total"] == 1.0 and got["sync-time-avg"] == 10.0


def test_poll_counts_are_recorded_when_read_or_at_the_next_fetch() -> None:
    clock = Clock()
    metrics = Metrics(WINDOW, clock)
    sensors = FetchManagerMetrics(metrics)
    # What poll() does: plain counts, no sensor work.
    sensors.consumed += 40
    sensors.lag = 7
    sensors.consumed += 10
    clock.ms = 100
    got = metrics.snapshot()["consumer-fetch-manager-metrics"]
    assert got["records-consumed-total"] == 50.0
    assert got["records-lag-max"] == 7.0
    # Recorded once: reading again adds nothing.
    assert metrics.snapshot()["consumer-fetch-manager-metrics"]["records-consumed-total"] == 50.0
    sensors.consumed += 5
    sensors.flush()  # what a fetch response does
    assert sensors.lag == -1
    total = metrics.metrics[MetricName("records-consumed-total", "consumer-fetch-manager-metrics")]
    assert total.value() == 55.0


class _Connection:
    def __init__(self) -> None:
        self.futures: list[Future[Any]] = []

    def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        self.futures.append(Future())
        return self.futures[-1]


class _Cluster:
    """Just what Fetcher.send_fetches asks of the cluster, over Kafka's protocol."""

    transport = "kafka"

    def __init__(self) -> None:
        self.connection = _Connection()

    def leader_address(self, tp: TopicPartition) -> str:
        return "broker:9092"

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        return None

    def kafka_connection(self, address: str) -> _Connection:
        return self.connection


def test_a_fetch_with_metrics_is_freed_without_the_garbage_collector() -> None:
    """The fetch-latency stamp on a fetch's future must not make a cycle through the
    fetch (which holds the future): each multi-megabyte response would then live until
    the garbage collector ran (a measured ~10% of the consumer's throughput)."""
    subscriptions = SubscriptionState()
    subscriptions.assign([TopicPartition("t", 0)])
    subscriptions.state(TopicPartition("t", 0)).position = 0
    cluster = _Cluster()
    fetcher = Fetcher(
        Consumer.DEFAULT_CONFIG,
        cluster,  # type: ignore[arg-type]
        subscriptions,
        isolation_level=fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED,
        reset_default=None,
        key_deserializer=None,
        value_deserializer=None,
        metrics=FetchManagerMetrics(Metrics(WINDOW, Clock())),
    )
    gc.disable()
    try:
        fetcher.send_fetches()
        (in_flight,) = fetcher._in_flight.values()
        assert in_flight.timing is not None
        fetch = weakref.ref(in_flight)
        (future,) = cluster.connection.futures
        response = weakref.ref(future)
        future.set_result((b"response", None))
        del in_flight, future
        cluster.connection.futures.clear()
        fetcher._in_flight.clear()  # handled
        assert fetch() is None and response() is None
    finally:
        gc.enable()
