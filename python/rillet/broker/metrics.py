"""A node's metrics, with Kafka's names in the form Prometheus' JMX exporter gives them
(``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``).

Counters and histograms are counted where the work is done, at the cost of an increment or
an observation (:meth:`BrokerMetrics.record_produce`, :meth:`record_fetch`,
:meth:`record_request`, :meth:`grpc_method`, and :attr:`log_flush_time_ms` and
:attr:`raft_commit_latency_ms` handed to the log flusher and the Raft driver as callables);
gauges are computed at each scrape from the node's state (the metadata image, the
partitions it holds, the controller, the quorum, the purgatories, the groups it
coordinates), on the event loop, so they never see a half-made change. Topic counters have a
``topic`` label, and the all-topics total (Kafka's BrokerTopicMetrics without a topic) is the
series ``topic=""``.

Where Kafka has no name, the series take the names operators know from elsewhere: gRPC
calls as go-grpc-prometheus counts them (``grpc_server_handled_total{grpc_service,
grpc_method,grpc_code}``, ``grpc_server_handling_seconds``), consumer-group lag as
kafka_exporter and Kafka's consumer-groups tool compute it
(``kafka_consumergroup_lag{group,topic,partition}``), and the node's id and roles as
``rillet_node_info``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from rillet.broker.purgatory import Purgatory
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import NO_LEADER
from rillet.raft.driver import QuorumStatus
from rillet.types import TopicPartition

__all__ = ["BROKER_STATES", "BrokerMetrics", "GrpcMethodMetrics", "NodeState", "record_count"]

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
    44: "IncrementalAlterConfigs", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 60: "DescribeCluster", 61: "DescribeProducers",
    66: "ListTransactions", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
}  # fmt: skip

# Request latency buckets, in milliseconds (Kafka's TotalTimeMs is a histogram in ms).
_LATENCY_MS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# The same, in seconds, for gRPC calls (go-grpc-prometheus' unit).
_LATENCY_S = tuple(ms / 1000 for ms in _LATENCY_MS)
# An fsync: from a page-cache no-op to a slow disk.
_FLUSH_MS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000)

# Kafka's BrokerState values (kafka.server:type=KafkaServer,name=BrokerState).
BROKER_STATES = {
    "NOT_RUNNING": 0,
    "STARTING": 1,
    "RECOVERY": 2,
    "RUNNING": 3,
    "PENDING_CONTROLLED_SHUTDOWN": 6,
    "SHUTTING_DOWN": 7,
    "UNKNOWN": 127,
}

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


def _nothing() -> None:
    return None


def _no_offsets() -> Iterable[tuple[str, TopicPartition, int]]:
    return ()


def _no_end_offset(tp: TopicPartition) -> int | None:
    return None


@dataclass(frozen=True)
class NodeState:
    """Where a scrape reads the node's state: its id, metadata image, the partitions it
    leads with their topics' min.insync.replicas, whether it is the active controller; its
    ``process.roles``, its broker's state (a :data:`BROKER_STATES` name; None on a
    controller-only node), its view of the metadata quorum, its produce and fetch
    purgatories, the offsets committed by the groups it coordinates (group, partition,
    offset) and the end offset a consumer sees of a partition it holds a replica of (its
    high watermark; None where it holds none)."""

    node_id: int
    image: Callable[[], MetadataImage]
    min_insync_replicas: Callable[[str], int]
    active_controller: Callable[[], bool]
    partition_count: Callable[[], int]
    process_roles: Sequence[str] = ("broker",)
    broker_state: Callable[[], str | None] = _nothing
    quorum: Callable[[], QuorumStatus | None] = _nothing
    purgatories: Sequence[Purgatory] = ()
    committed_offsets: Callable[[], Iterable[tuple[str, TopicPartition, int]]] = _no_offsets
    end_offset: Callable[[TopicPartition], int | None] = _no_end_offset


@dataclass
class GrpcMethodMetrics:
    """One gRPC method's series, resolved once so that a call costs two increments and an
    observation: ``started`` and ``handling_seconds``, and :meth:`handled` by status code."""

    started: Counter
    handling_seconds: Histogram
    _handled: Counter
    _labels: tuple[str, str, str]
    _by_code: dict[str, Counter] = field(default_factory=dict)

    def handled(self, code: str) -> Counter:
        child = self._by_code.get(code)
        if child is None:
            child = self._by_code[code] = self._handled.labels(*self._labels, code)
        return child


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
        self.log_flush = Histogram(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Time a flush (fsync) of a partition log took, in ms (LogFlushRateAndTimeMs)",
            buckets=_FLUSH_MS,
            registry=r,
        )
        self.raft_commit_latency = Histogram(
            "kafka_server_raft_metrics_commit_latency_ms",
            "Time from the quorum leader's append of metadata records to their commit, in ms "
            "(raft-metrics commit-latency)",
            buckets=_LATENCY_MS,
            registry=r,
        )
        self.grpc_started = Counter(
            "grpc_server_started",
            "gRPC calls started on this node's listeners",
            ["grpc_type", "grpc_service", "grpc_method"],
            registry=r,
        )
        self.grpc_handled = Counter(
            "grpc_server_handled",
            "gRPC calls completed, by status code",
            ["grpc_type", "grpc_service", "grpc_method", "grpc_code"],
            registry=r,
        )
        self.grpc_handling = Histogram(
            "grpc_server_handling_seconds",
            "Time from a gRPC call's arrival to its answer, in seconds",
            ["grpc_type", "grpc_service", "grpc_method"],
            buckets=_LATENCY_S,
            registry=r,
        )
        self._grpc_methods: dict[str, GrpcMethodMetrics] = {}
        r.register(_StateCollector(state))

    @property
    def log_flush_time_ms(self) -> Callable[[float], None]:
        """For the log flusher: observe one flush's duration in ms."""
        return self.log_flush.observe

    @property
    def raft_commit_latency_ms(self) -> Callable[[float], None]:
        """For the Raft driver: observe one commit latency in ms."""
        return self.raft_commit_latency.observe

    def grpc_method(self, full_method: str) -> GrpcMethodMetrics:
        """The series of a unary method named as gRPC names it
        (``/rillet.v1.ProduceService/Produce``); made on its first call, then reused."""
        found = self._grpc_methods.get(full_method)
        if found is None:
            service, _, method = full_method.lstrip("/").rpartition("/")
            labels = ("unary", service, method)
            found = self._grpc_methods[full_method] = GrpcMethodMetrics(
                self.grpc_started.labels(*labels),
                self.grpc_handling.labels(*labels),
                self.grpc_handled,
                labels,
            )
        return found

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

    def collect(self) -> Iterator[Metric]:
        s = self.state
        yield InfoMetricFamily(
            "rillet_node",
            "This node's id and process.roles",
            value={"node_id": str(s.node_id), "process_roles": ",".join(s.process_roles)},
        )
        yield from self._partitions()
        yield from self._quorum()
        yield from self._purgatories()
        yield from self._consumer_groups()

    def _partitions(self) -> Iterator[Metric]:
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
        broker_state = s.broker_state()
        if broker_state is not None:
            yield _gauge(
                "kafka_server_kafkaserver_brokerstate",
                "The broker's state as Kafka numbers it: 1 STARTING, 2 RECOVERY (fenced), "
                "3 RUNNING, 6 PENDING_CONTROLLED_SHUTDOWN, 7 SHUTTING_DOWN",
                BROKER_STATES.get(broker_state, BROKER_STATES["UNKNOWN"]),
            )

    def _quorum(self) -> Iterator[Metric]:
        q = self.state.quorum()
        if q is None:
            return
        state = GaugeMetricFamily(
            "kafka_server_raft_metrics_current_state",
            "1 for this replica's state in the metadata quorum",
            labels=["state"],
        )
        state.add_metric([q.state], 1)
        yield state
        yield _gauge(
            "kafka_server_raft_metrics_current_leader",
            "The metadata quorum's leader as this replica knows it (-1: none)",
            q.leader_id,
        )
        yield _gauge("kafka_server_raft_metrics_current_epoch", "The quorum's epoch", q.epoch)
        yield _gauge(
            "kafka_server_raft_metrics_high_watermark",
            "The metadata log's high watermark (committed and applied below it)",
            q.high_watermark,
        )
        yield _gauge(
            "kafka_server_raft_metrics_log_end_offset",
            "The metadata log's end offset on this replica",
            q.log_end_offset,
        )

    def _purgatories(self) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Delayed operations watched, once per partition each watches (PurgatorySize)",
            labels=["delayedOperation"],
        )
        waiting = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "Delayed operations waiting (NumDelayedOperations)",
            labels=["delayedOperation"],
        )
        for p in self.state.purgatories:
            size.add_metric([p.name], p.watched)
            waiting.add_metric([p.name], len(p))
        yield size
        yield waiting

    def _consumer_groups(self) -> Iterator[Metric]:
        labels = ["group", "topic", "partition"]
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "The offset a group coordinated here committed for a partition",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "The partition's end offset (high watermark) minus the offset the group "
            "committed, for partitions this node holds a replica of",
            labels=labels,
        )
        end_offset = self.state.end_offset
        for group, tp, offset in self.state.committed_offsets():
            values = [group, tp.topic, str(tp.partition)]
            current.add_metric(values, offset)
            end = end_offset(tp)
            if end is not None:
                lag.add_metric(values, max(end - offset, 0))
        yield current
        yield lag


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
