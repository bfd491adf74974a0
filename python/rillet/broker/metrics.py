"""A node's metrics, with Kafka's names in the form Prometheus' JMX exporter gives them
(``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``).

Counters are counted where the work is done (:meth:`BrokerMetrics.record_produce`,
:meth:`record_fetch`, :meth:`record_request`); gauges are computed at each scrape from the
node's state (the metadata image, the partitions it holds, the controller), on the event
loop, so they never see a half-made change. Topic counters have a ``topic`` label, and the
all-topics total (Kafka's BrokerTopicMetrics without a topic) is the series ``topic=""``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from rillet.metadata.image import MetadataImage
from rillet.metadata.records import NO_LEADER

__all__ = ["BrokerMetrics", "NodeState", "record_count"]

# Kafka's request names of the api keys served, for the request metrics' ``request`` label.
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
    29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 35: "DescribeLogDirs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 47: "OffsetDelete", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 60: "DescribeCluster", 61: "DescribeProducers",
    66: "ListTransactions", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
}  # fmt: skip

# Request latency buckets, in milliseconds (Kafka's TotalTimeMs is a histogram in ms).
_LATENCY_MS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)

# A v2 record batch: its length at byte 8 (counting from byte 12), its record count at 57.
_BATCH_LENGTH_AT, _RECORD_COUNT_AT, _BATCH_HEADER = 8, 57, 61


def record_count(batches: bytes | memoryview) -> int:
    """How many records the v2 record batches in ``batches`` hold (from their headers);
    what is not a whole batch header counts nothing."""
    view = memoryview(batches)
    count = at = 0
    while at + _BATCH_HEADER <= len(view):
        length = int.from_bytes(view[at + _BATCH_LENGTH_AT : at + _BATCH_LENGTH_AT + 4], "big")
        count += int.from_bytes(view[at + _RECORD_COUNT_AT : at + _RECORD_COUNT_AT + 4], "big")
        at += 12 + length
    return count


@dataclass(frozen=True)
class NodeState:
    """Where a scrape reads the node's state: its id, metadata image, the partitions it
    leads with their topics' min.insync.replicas, and whether it is the active controller."""

    node_id: int
    image: Callable[[], MetadataImage]
    min_insync_replicas: Callable[[str], int]
    active_controller: Callable[[], bool]
    partition_count: Callable[[], int]


class BrokerMetrics:
    """See the module doc. ``state`` is read at each scrape; without it (a controller-only
    node) only counters and the controller's gauges are exported."""

    def __init__(self, state: NodeState) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes appended by producers (BytesInPerSec)",
            ["topic"],
            registry=r,
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Bytes sent to consumers and followers (BytesOutPerSec)",
            ["topic"],
            registry=r,
        )
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended by producers (MessagesInPerSec)",
            ["topic"],
            registry=r,
        )
        self.requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests answered, by Kafka request name (RequestsPerSec)",
            ["request"],
            registry=r,
        )
        self.errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Requests answered with an error, by request and error (ErrorsPerSec)",
            ["request", "error"],
            registry=r,
        )
        self.total_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its answer, in ms (TotalTimeMs)",
            ["request"],
            buckets=_LATENCY_MS,
            registry=r,
        )
        r.register(_StateCollector(state))

    def record_produce(self, topic: str, batches: bytes | memoryview) -> None:
        size, count = len(batches), record_count(batches)
        for label in (topic, ""):
            self.bytes_in.labels(label).inc(size)
            self.messages_in.labels(label).inc(count)

    def record_fetch(self, sizes: Mapping[str, int]) -> None:
        total = 0
        for topic, size in sizes.items():
            if size:
                self.bytes_out.labels(topic).inc(size)
                total += size
        if total:
            self.bytes_out.labels("").inc(total)

    def record_request(self, api_key: int, elapsed_ms: float, error: str | None = None) -> None:
        name = API_NAMES.get(api_key, str(api_key))
        self.requests.labels(name).inc()
        self.total_time.labels(name).observe(elapsed_ms)
        if error is not None:
            self.errors.labels(name, error).inc()


class _StateCollector(Collector):
    """The gauges read from the node's state at each scrape."""

    def __init__(self, state: NodeState) -> None:
        self.state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self.state
        image = s.image()
        leader = under_replicated = under_min_isr = offline = 0
        for topic in image.topics():
            for reg in topic.partitions.values():
                if reg.leader == NO_LEADER:
                    offline += 1
                    continue
                if reg.leader != s.node_id:
                    continue
                leader += 1
                if len(reg.isr) < len(reg.replicas):
                    under_replicated += 1
                if len(reg.isr) < s.min_insync_replicas(topic.name):
                    under_min_isr += 1
        active = s.active_controller()
        yield _gauge(
            "kafka_server_replicamanager_leadercount", "Partitions this broker leads", leader
        )
        yield _gauge(
            "kafka_server_replicamanager_partitioncount",
            "Partitions this broker holds a replica of",
            s.partition_count(),
        )
        yield _gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions this broker leads whose ISR is smaller than their replicas",
            under_replicated,
        )
        yield _gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions this broker leads whose ISR is below min.insync.replicas",
            under_min_isr,
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, 0 elsewhere",
            1 if active else 0,
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (reported by the active controller)",
            offline if active else 0,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
