"""The consumer's metrics (Kafka's ``FetchMetricsManager`` and ``ConsumerCoordinator``
sensors, kafka-python's ``FetchManagerMetrics`` and ``ConsumerCoordinatorMetrics``), by the
names and groups of Kafka's consumer:

``consumer-fetch-manager-metrics``
    ``fetch-latency-avg``/``-max`` (ms from sending a fetch to its answer), ``fetch-rate``/
    ``-total`` (fetch responses), ``fetch-throttle-time-avg``/``-max`` (the throttle time of
    each fetch response: client quotas), ``fetch-size-avg``/``-max`` and ``bytes-consumed-rate``/
    ``-total`` (record batch bytes per fetch response), ``records-consumed-rate``/``-total``
    (records ``poll()`` handed out), ``records-per-request-avg`` (records handed out per fetch
    response over the window), ``records-lag-max`` (the most any partition's position was
    behind its high watermark, or its last stable offset under read_committed, when records
    were handed out or a fetch came back empty: 0 once caught up);
``consumer-coordinator-metrics`` (with a ``group_id``)
    ``commit-latency-avg``/``-max``, ``commit-rate``/``-total`` (OffsetCommit requests),
    ``heartbeat-response-time-max``, ``heartbeat-rate``/``-total``,
    ``last-heartbeat-seconds-ago`` (inf before the first), ``assigned-partitions``; and in a
    classic group ``join-time-avg``/``-max``, ``join-rate``/``-total``, ``sync-time-avg``/
    ``-max``, ``sync-rate``/``-total`` (successful JoinGroup and SyncGroup).

Recorded per fetch response and per request; ``poll()`` only adds to two counters
(:class:`FetchManagerMetrics`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from rillet.client.metrics import Avg, Max, MetricName, Metrics, Sensor

__all__ = ["ConsumerCoordinatorMetrics", "FetchManagerMetrics"]

FETCH_GROUP = "consumer-fetch-manager-metrics"
COORDINATOR_GROUP = "consumer-coordinator-metrics"


class FetchManagerMetrics:
    """The fetcher's sensors, recorded on the consumer's thread; ``metrics()`` may be read
    from any thread.

    ``poll()`` only counts, in plain ints, the records it hands out (:attr:`consumed`) and
    the largest lag it saw (:attr:`lag`): :meth:`flush` records them into the sensors, at
    every fetch response and before these metrics are read, so a poll costs no sensor work
    and records count in the window of the flush after them (a fetch round trip later at
    most). A flush on another thread racing a poll may drop that poll's lag; the next poll
    measures it again."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.consumed = 0  # written by the consumer's thread only
        self.lag = -1
        self._recorded = 0
        self._flush_lock = threading.Lock()

        def name(metric: str, description: str) -> MetricName:
            return MetricName(metric, FETCH_GROUP, description)

        self.fetch_latency = metrics.sensor("fetch-latency")
        self.fetch_latency.add(
            name("fetch-latency-avg", "The average time taken for a fetch request"), Avg()
        )
        self.fetch_latency.add(
            name("fetch-latency-max", "The max time taken for any fetch request"), Max()
        )
        fetches = self.fetch_latency.add_meter(
            name("fetch-rate", "The number of fetch requests per second"),
            name("fetch-total", "The total number of fetch requests"),
            count=True,
        ).stat
        self.throttle_time = metrics.sensor("fetch-throttle-time")
        self.throttle_time.add(
            name("fetch-throttle-time-avg", "The average throttle time in ms"), Avg()
        )
        self.throttle_time.add(
            name("fetch-throttle-time-max", "The maximum throttle time in ms"), Max()
        )
        self.bytes_fetched = metrics.sensor("bytes-fetched")
        self.bytes_fetched.add(
            name("fetch-size-avg", "The average number of bytes fetched per request"), Avg()
        )
        self.bytes_fetched.add(
            name("fetch-size-max", "The maximum number of bytes fetched per request"), Max()
        )
        self.bytes_fetched.add_meter(
            name("bytes-consumed-rate", "The average number of bytes consumed per second"),
            name("bytes-consumed-total", "The total number of bytes consumed"),
        )
        self.records_consumed = metrics.sensor("records-consumed")
        records = self.records_consumed.add_meter(
            name("records-consumed-rate", "The average number of records consumed per second"),
            name("records-consumed-total", "The total number of records consumed"),
        ).stat

        def records_per_request(now_ms: float) -> float:
            n = self.fetch_latency.measure(fetches, now_ms)
            return self.records_consumed.measure(records, now_ms) / n if n else math.nan

        metrics.add_metric(
            name("records-per-request-avg", "The average number of records in each request"),
            records_per_request,
        )
        self.records_lag = metrics.sensor("records-lag")
        self.records_lag.add(
            name(
                "records-lag-max",
                "The maximum lag in terms of number of records for any partition in this window",
            ),
            Max(),
        )
        self.records_consumed.before_measure = self.flush
        self.records_lag.before_measure = self.flush

    def flush(self, now_ms: float | None = None) -> None:
        """Record what ``poll()`` counted since the last flush (any thread)."""
        if now_ms is None:
            now_ms = self.metrics.clock()
        with self._flush_lock:
            consumed = self.consumed
            handed_out, self._recorded = consumed - self._recorded, consumed
            lag, self.lag = self.lag, -1
        if handed_out:
            self.records_consumed.record(handed_out, now_ms)
        if lag >= 0:
            self.records_lag.record(lag, now_ms)


class ConsumerCoordinatorMetrics:
    """A group member's sensors: commits on the application's (or an async commit's)
    thread, heartbeats on the heartbeat thread, joins in ``poll()``. Thread safe."""

    def __init__(self, metrics: Metrics, assigned_partitions: Callable[[], int]) -> None:
        self.metrics = metrics
        self.last_heartbeat_ms = -math.inf

        def name(metric: str, description: str) -> MetricName:
            return MetricName(metric, COORDINATOR_GROUP, description)

        self.commit_latency = metrics.sensor("commit-latency")
        self.commit_latency.add(
            name("commit-latency-avg", "The average time taken for a commit request"), Avg()
        )
        self.commit_latency.add(
            name("commit-latency-max", "The max time taken for a commit request"), Max()
        )
        self.commit_latency.add_meter(
            name("commit-rate", "The number of commit calls per second"),
            name("commit-total", "The total number of commit calls"),
            count=True,
        )
        self.heartbeat_latency = metrics.sensor("heartbeat-latency")
        self.heartbeat_latency.add(
            name(
                "heartbeat-response-time-max",
                "The max time taken to receive a response to a heartbeat request",
            ),
            Max(),
        )
        self.heartbeat_latency.add_meter(
            name("heartbeat-rate", "The average number of heartbeats per second"),
            name("heartbeat-total", "The total number of heartbeats"),
            count=True,
        )
        metrics.add_metric(
            name(
                "last-heartbeat-seconds-ago",
                "The number of seconds since the last coordinator heartbeat was sent",
            ),
            lambda now_ms: (now_ms - self.last_heartbeat_ms) / 1000,
        )
        metrics.add_metric(
            name(
                "assigned-partitions",
                "The number of partitions currently assigned to this consumer",
            ),
            lambda _now: float(assigned_partitions()),
        )
        self.join_latency = metrics.sensor("join-latency")
        self.sync_latency = metrics.sensor("sync-latency")

    def add_classic(self) -> None:
        """The JoinGroup and SyncGroup metrics of a classic group's member."""
        for sensor, what, label in (
            (self.join_latency, "join", "group rejoin"),
            (self.sync_latency, "sync", "group sync"),
        ):
            group = COORDINATOR_GROUP
            sensor.add(
                MetricName(f"{what}-time-avg", group, f"The average time taken for a {label}"),
                Avg(),
            )
            sensor.add(
                MetricName(f"{what}-time-max", group, f"The max time taken for a {label}"), Max()
            )
            sensor.add_meter(
                MetricName(f"{what}-rate", group, f"The number of {label}s per second"),
                MetricName(f"{what}-total", group, f"The total number of {label}s"),
                count=True,
            )

    def heartbeat_sent(self) -> float:
        """A heartbeat goes out now; returns when (for :meth:`record_latency`)."""
        now = self.metrics.clock()
        self.last_heartbeat_ms = now
        return now

    def record_latency(self, sensor: Sensor, sent_ms: float) -> None:
        """An answer to a request sent at ``sent_ms`` (the metrics' clock) came now."""
        now = self.metrics.clock()
        sensor.record(now - sent_ms, now)
