"""The producer's metrics (Kafka's ``SenderMetricsRegistry``, kafka-python's
``SenderMetrics``), by the names and groups of Kafka's producer:

``producer-metrics``
    ``record-send-rate``/``-total`` and ``records-per-request-avg`` (records in produce
    requests sent, a retried batch again), ``byte-rate``/``-total`` (their batches' bytes),
    ``batch-size-avg``/``-max`` (bytes of each batch sent), ``record-queue-time-avg``/``-max``
    (ms from a batch's first record to its being sent), ``request-rate``/``-total``,
    ``response-rate``/``-total`` and ``request-latency-avg``/``-max`` (produce requests, ms
    from sending to the answer; acks=0 has no answer), ``requests-in-flight``,
    ``record-retry-rate``/``-total``, ``record-error-rate``/``-total`` (records whose send
    failed for good), ``buffer-total-bytes``, ``buffer-available-bytes``,
    ``bufferpool-wait-ratio`` and ``bufferpool-wait-time-ns-total`` (``send()`` blocked for
    memory), ``metadata-age`` (s);
``producer-topic-metrics.<topic>``
    ``record-send-rate``/``-total``, ``byte-rate``/``-total``, ``record-retry-rate``/``-total``,
    ``record-error-rate``/``-total``;
``producer-node-metrics.node-<id>``
    ``request-rate``/``-total``, ``response-rate``/``-total``, ``request-latency-avg``/``-max``.

Recorded per request and per batch, never per record: ``send()`` stays as it was.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rillet._core import RecordAccumulator
from rillet.client.cluster import ClusterMetadata
from rillet.client.metrics import (
    NANOSECOND_MS,
    Avg,
    Max,
    MetricName,
    Metrics,
    Sensor,
)

if TYPE_CHECKING:
    from rillet.client.producer.sender import InFlightBatch

__all__ = ["SenderMetrics"]

GROUP = "producer-metrics"
TOPIC_GROUP = "producer-topic-metrics."
NODE_GROUP = "producer-node-metrics.node-"


class _TopicSensors:
    __slots__ = ("bytes", "errors", "records", "retries")

    def __init__(self, metrics: Metrics, topic: str) -> None:
        group = TOPIC_GROUP + topic
        prefix = f"topic.{topic}."

        def meter(sensor: str, name: str, what: str) -> Sensor:
            s = metrics.sensor(prefix + sensor)
            s.add_meter(
                MetricName(f"{name}-rate", group, f"{what} per second for topic {topic}"),
                MetricName(f"{name}-total", group, f"{what} in all for topic {topic}"),
            )
            return s

        self.records = meter("records-per-batch", "record-send", "Records sent")
        self.bytes = meter("bytes", "byte", "Bytes sent")
        self.retries = meter("record-retries", "record-retry", "Record sends retried")
        self.errors = meter("record-errors", "record-error", "Record sends failed")


class _NodeSensors:
    __slots__ = ("latency", "requests", "responses")

    def __init__(self, metrics: Metrics, node: str) -> None:
        group = NODE_GROUP + node
        prefix = f"node-{node}."
        self.requests = metrics.sensor(prefix + "requests")
        self.requests.add_meter(
            MetricName("request-rate", group, "Produce requests sent per second"),
            MetricName("request-total", group, "Produce requests sent"),
            count=True,
        )
        self.responses = metrics.sensor(prefix + "responses")
        self.responses.add_meter(
            MetricName("response-rate", group, "Produce responses received per second"),
            MetricName("response-total", group, "Produce responses received"),
            count=True,
        )
        self.latency = metrics.sensor(prefix + "latency")
        self.latency.add(
            MetricName("request-latency-avg", group, "The average produce request latency in ms"),
            Avg(),
        )
        self.latency.add(
            MetricName("request-latency-max", group, "The maximum produce request latency in ms"),
            Max(),
        )


class SenderMetrics:
    """The producer's sensors. The sender thread records requests and batches; response
    threads record answers, retries and failures; ``send()`` records only its waits for
    memory. Thread safe (each sensor has its lock)."""

    def __init__(
        self,
        metrics: Metrics,
        accumulator: RecordAccumulator,
        cluster: ClusterMetadata,
        buffer_memory: int,
        requests_in_flight: Callable[[], int],
    ) -> None:
        self.metrics = metrics
        self._cluster = cluster
        self._topics: dict[str, _TopicSensors] = {}
        self._nodes: dict[str, _NodeSensors] = {}
        self._lock = threading.Lock()

        def name(metric: str, description: str) -> MetricName:
            return MetricName(metric, GROUP, description)

        self.records = metrics.sensor("records-per-request")
        self.records.add_meter(
            name("record-send-rate", "The average number of records sent per second"),
            name("record-send-total", "The total number of records sent"),
        )
        self.records.add(
            name("records-per-request-avg", "The average number of records per request"), Avg()
        )
        self.bytes = metrics.sensor("bytes")
        self.bytes.add_meter(
            name("byte-rate", "The average number of bytes sent per second"),
            name("byte-total", "The total number of bytes sent"),
        )
        self.batch_size = metrics.sensor("batch-size")
        self.batch_size.add(
            name("batch-size-avg", "The average number of bytes sent per partition per request"),
            Avg(),
        )
        self.batch_size.add(
            name("batch-size-max", "The max number of bytes sent per partition per request"),
            Max(),
        )
        self.queue_time = metrics.sensor("queue-time")
        self.queue_time.add(
            name("record-queue-time-avg", "The average ms record batches spent in the buffer"),
            Avg(),
        )
        self.queue_time.add(
            name("record-queue-time-max", "The maximum ms record batches spent in the buffer"),
            Max(),
        )
        self.requests = metrics.sensor("requests")
        self.requests.add_meter(
            name("request-rate", "The average number of produce requests sent per second"),
            name("request-total", "The total number of produce requests sent"),
            count=True,
        )
        self.responses = metrics.sensor("responses")
        self.responses.add_meter(
            name("response-rate", "The average number of produce responses per second"),
            name("response-total", "The total number of produce responses"),
            count=True,
        )
        self.latency = metrics.sensor("request-latency")
        self.latency.add(name("request-latency-avg", "The average request latency in ms"), Avg())
        self.latency.add(name("request-latency-max", "The maximum request latency in ms"), Max())
        self.throttle_time = metrics.sensor("produce-throttle-time")
        self.throttle_time.add(
            name("produce-throttle-time-avg", "The average time in ms a request was throttled"),
            Avg(),
        )
        self.throttle_time.add(
            name("produce-throttle-time-max", "The maximum time in ms a request was throttled"),
            Max(),
        )
        self.retries = metrics.sensor("record-retries")
        self.retries.add_meter(
            name("record-retry-rate", "The average per-second number of retried record sends"),
            name("record-retry-total", "The total number of retried record sends"),
        )
        self.errors = metrics.sensor("errors")
        self.errors.add_meter(
            name("record-error-rate", "The average per-second number of record sends that failed"),
            name("record-error-total", "The total number of record sends that failed"),
        )
        self.bufferpool_wait = metrics.sensor("bufferpool-wait-time")
        self.bufferpool_wait.add_meter(
            name("bufferpool-wait-ratio", "The fraction of time send() waited for memory"),
            name("bufferpool-wait-time-ns-total", "The total ns send() waited for memory"),
            unit_ms=NANOSECOND_MS,
        )
        metrics.add_metric(
            name("requests-in-flight", "Produce requests sent and not yet answered"),
            lambda _now: float(requests_in_flight()),
        )
        metrics.add_metric(
            name("buffer-total-bytes", "The memory the producer may buffer (buffer_memory)"),
            lambda _now: float(buffer_memory),
        )
        metrics.add_metric(
            name("buffer-available-bytes", "The buffer memory not taken by batches"),
            lambda _now: float(buffer_memory - accumulator.used_memory),
        )
        metrics.add_metric(
            name("metadata-age", "The age in seconds of the metadata the producer uses"),
            lambda _now: cluster.age_ms() / 1000,
        )

    def topic(self, topic: str) -> _TopicSensors:
        found = self._topics.get(topic)
        if found is None:
            with self._lock:  # a topic's metrics are registered once
                found = self._topics.get(topic)
                if found is None:
                    found = self._topics[topic] = _TopicSensors(self.metrics, topic)
        return found

    def node(self, address: str) -> _NodeSensors:
        """A broker's sensors, by its node id (its address when not a known broker's)."""
        found = self._nodes.get(address)
        if found is None:
            with self._lock:
                found = self._nodes.get(address)
                if found is None:
                    ids = {a: str(i) for i, a in self._cluster.brokers().items()}
                    node = ids.get(address, address)
                    found = self._nodes[address] = _NodeSensors(self.metrics, node)
        return found

    def record_request(
        self, node: _NodeSensors, batches: Sequence[InFlightBatch], wall_ms: int, now_ms: float
    ) -> None:
        """A produce request with ``batches`` sent, at ``wall_ms`` (the clock of the batches'
        ``created_ms``) and ``now_ms`` (the metrics' clock)."""
        topics: dict[str, list[int]] = {}
        records = total_bytes = largest = queued_total = 0
        queued_max = -math.inf
        for b in batches:
            size = len(b.records) if b.records is not None else 0
            if size > largest:
                largest = size
            queued = wall_ms - b.created_ms
            queued_total += queued
            if queued > queued_max:
                queued_max = queued
            counts = topics.get(b.tp.topic)
            if counts is None:
                topics[b.tp.topic] = [b.count, size]
            else:
                counts[0] += b.count
                counts[1] += size
            records += b.count
            total_bytes += size
        for topic, (n, size) in topics.items():
            sensors = self.topic(topic)
            sensors.records.record(n, now_ms)
            sensors.bytes.record(size, now_ms)
        # Each batch's size and queue time, in one call per request.
        self.batch_size.record_many(len(batches), total_bytes, largest, now_ms)
        self.queue_time.record_many(len(batches), queued_total, queued_max, now_ms)
        self.records.record(records, now_ms)
        self.bytes.record(total_bytes, now_ms)
        self.requests.record(1.0, now_ms)
        node.requests.record(1.0, now_ms)

    def record_response(
        self, node: _NodeSensors, latency_ms: float, throttle_ms: int, now_ms: float
    ) -> None:
        """A produce response, ``latency_ms`` after its request, throttled ``throttle_ms``
        by the broker's client quota."""
        self.throttle_time.record(throttle_ms, now_ms)
        self.responses.record(1.0, now_ms)
        node.responses.record(1.0, now_ms)
        self.latency.record(latency_ms, now_ms)
        node.latency.record(latency_ms, now_ms)

    def record_retries(self, topic: str, count: int) -> None:
        now_ms = self.metrics.clock()
        self.retries.record(count, now_ms)
        self.topic(topic).retries.record(count, now_ms)

    def record_errors(self, topic: str, count: int) -> None:
        now_ms = self.metrics.clock()
        self.errors.record(count, now_ms)
        self.topic(topic).errors.record(count, now_ms)
