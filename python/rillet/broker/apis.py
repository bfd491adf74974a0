"""BrokerApis: the broker's request handling, free of any transport (Kafka's KafkaApis).

Each handler takes a request as domain values and returns domain results: per-partition,
per-topic or per-resource :class:`~rillet.errors.KafkaError` instances for what failed, and
record data as :class:`~rillet._core.FetchDataInfo` file regions, which a transport copies
into its response or sends with ``sendfile``. A transport (``rillet.server.grpc``, later the
Kafka wire protocol) only decodes its requests into these calls and encodes the results.

Reads come from this broker's :class:`~rillet.broker.replica_manager.ReplicaManager` and its
current :class:`~rillet.metadata.image.MetadataImage`; writes to metadata (topics,
partitions, configs, auto topic creation) go to the active controller through the
:class:`~rillet.broker.controller_channel.ControllerChannel`. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from rillet.broker.controller_channel import ControllerChannel
from rillet.broker.metrics import BrokerMetrics
from rillet.broker.quotas import BrokerQuotas
from rillet.broker.replica_manager import (
    FetchedPartition,
    FetchPartition,
    ListedOffset,
    ProducedPartition,
    ReplicaManager,
)
from rillet.broker.txn_verification import TxnVerifier
from rillet.config import BrokerConfig, config_value_to_string, resolve_topic_config
from rillet.controller import (
    AlterConfigOp,
    CreatableTopic,
    ElectionResults,
    ElectionType,
    TopicResult,
)
from rillet.controller.reassignment import OngoingReassignment, list_partition_reassignments
from rillet.errors import (
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    LeaderNotAvailableError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from rillet.metadata.image import MetadataImage, TopicImage
from rillet.metadata.records import ConfigResourceType
from rillet.metadata.topic_names import validate_topic_name
from rillet.raft.node import QuorumInfo
from rillet.types import TopicPartition

__all__ = [
    "BrokerApis",
    "ClusterDescription",
    "ConfigDescription",
    "DescribedConfigs",
    "LogDirDescription",
    "MetadataNode",
    "MetadataPartition",
    "MetadataResult",
    "MetadataTopic",
    "ProduceEntry",
    "ReplicaInfo",
]

# One partition of a produce request: its batches, or the error that refused them while
# the request was decoded.
ProduceEntry = tuple[str, int, bytes | memoryview | KafkaError]


@dataclass(frozen=True)
class MetadataNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    is_fenced: bool = False


@dataclass(frozen=True)
class MetadataPartition:
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: KafkaError | None = None
    elr: tuple[int, ...] = ()


@dataclass(frozen=True)
class MetadataTopic:
    name: str
    error: KafkaError | None = None
    topic: TopicImage | None = None
    partitions: list[MetadataPartition] = field(default_factory=list)


@dataclass(frozen=True)
class MetadataResult:
    cluster_id: str
    controller_id: int
    brokers: list[MetadataNode]
    topics: list[MetadataTopic]


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: list[MetadataNode]


@dataclass(frozen=True, order=True)
class ReplicaInfo:
    """One replica in a log directory (DescribeLogDirs): its size on disk and how far its
    log end is below the high watermark this broker knows."""

    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory of this broker (DescribeLogDirs); sizes of its file system are -1
    when unknown."""

    path: str
    error: KafkaError | None
    replicas: list[ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True)
class ConfigDescription:
    """One config as DescribeConfigs shows it; ``source`` is Kafka's name for where the
    value comes from (DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, ...)."""

    name: str
    value: str | None
    source: str
    read_only: bool


@dataclass(frozen=True)
class DescribedConfigs:
    error: KafkaError | None = None
    entries: list[ConfigDescription] = field(default_factory=list)


class BrokerApis:
    """See the module docstring. ``image`` returns the broker's current metadata image."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster_id: str,
        replicas: ReplicaManager,
        image: Callable[[], MetadataImage],
        channel: ControllerChannel,
        *,
        txn_verifier: TxnVerifier | None = None,
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.replicas = replicas
        self.image = image
        self.channel = channel
        # KIP-890: transactional produce requests are verified with their coordinator.
        self.txn_verifier = txn_verifier
        # The node's metrics (bytes and records in and out), when it exports them.
        self.metrics: BrokerMetrics | None = None
        # Client quotas, enforced by the transports (None: no client is ever throttled).
        self.quotas: BrokerQuotas | None = None

    @property
    def controller_id(self) -> int:
        leader = self.channel.controller_id
        return -1 if leader is None else leader

    # -- produce, fetch, list offsets ------------------------------------------------------

    async def handle_produce(
        self,
        entries: Sequence[ProduceEntry],
        acks: int,
        timeout_ms: int,
        transactional_id: str | None = None,
    ) -> list[ProducedPartition]:
        """Append each entry's batches; one result per entry, in the request's order. A
        partition may appear once per request: a second entry for it is refused
        (INVALID_REQUEST) rather than silently replacing the first. A transactional
        producer's request (``transactional_id``) is verified first
        (:mod:`rillet.broker.txn_verification`)."""
        appends: dict[TopicPartition, bytes | memoryview] = {}
        refused: list[KafkaError | None] = []
        for topic, partition, records in entries:
            tp = TopicPartition(topic, partition)
            if isinstance(records, KafkaError):
                refused.append(records)
            elif tp in appends:
                refused.append(
                    InvalidRequestError(
                        f"{tp} is listed more than once in the request; send its batches one "
                        "after the other in one record_batches"
                    )
                )
            elif not len(records):
                refused.append(InvalidRequestError(f"{tp}: the entry has no record batches"))
            else:
                appends[tp] = records
                refused.append(None)
        unverified: dict[TopicPartition, KafkaError] = {}
        verification = None
        if transactional_id is not None and self.txn_verifier is not None and appends:
            verification = await self.txn_verifier.verify_produce(transactional_id, appends)
            # No await between this check and the append (a marker may end the transaction).
            unverified = verification.errors_before_append()
            for tp in unverified:
                appends.pop(tp, None)
        results = await self.replicas.append_records(appends, acks, timeout_ms)
        if self.metrics is not None:
            for tp, r in results.items():
                if r.error is None:
                    self.metrics.record_produce(tp.topic, appends[tp])
        if verification is not None:
            verification.appended({tp: r.error for tp, r in results.items()})
        results.update({tp: ProducedPartition(e) for tp, e in unverified.items()})
        return [
            ProducedPartition(err) if err is not None else results[TopicPartition(t, p)]
            for (t, p, _), err in zip(entries, refused, strict=True)
        ]

    async def handle_fetch(
        self,
        wanted: Mapping[TopicPartition, FetchPartition],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
    ) -> dict[TopicPartition, FetchedPartition]:
        fetched = await self.replicas.fetch(
            wanted,
            replica_id=replica_id,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
        )
        if self.metrics is not None and replica_id < 0:
            # BytesOutPerSec counts what consumers read (followers' is replication).
            sizes: dict[str, int] = {}
            for tp, r in fetched.items():
                sizes[tp.topic] = sizes.get(tp.topic, 0) + r.size
            self.metrics.record_fetch(sizes)
        return fetched

    def handle_list_offsets(
        self, wanted: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ListedOffset]:
        return self.replicas.list_offsets(wanted)

    # -- metadata --------------------------------------------------------------------------

    async def handle_metadata(
        self, topics: Sequence[str], allow_auto_topic_creation: bool, listener_name: str
    ) -> MetadataResult:
        """Brokers (their ``listener_name`` endpoints) and the named topics (every topic
        when none is named). Named topics that do not exist are created first when the
        request and ``auto.create.topics.enable`` allow it."""
        image = self.image()
        names = list(topics) or sorted(t.name for t in image.topics())
        missing = [n for n in names if image.topic(n) is None]
        if missing and allow_auto_topic_creation and self.config.auto_create_topics_enable:
            legal = []
            for n in missing:
                try:
                    legal.append(validate_topic_name(n))
                except InvalidTopicError:
                    continue
            if legal:
                await self.channel.create_topics([CreatableTopic(n) for n in legal])
                image = self.image()
        live = {b.broker_id for b in image.brokers.values() if not b.fenced}
        result_topics = []
        for name in names:
            topic = image.topic(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                    err: KafkaError = UnknownTopicOrPartitionError(
                        f"This server does not host this topic-partition: {name}."
                    )
                except InvalidTopicError as e:
                    err = e
                result_topics.append(MetadataTopic(name, err))
                continue
            result_topics.append(MetadataTopic(name, None, topic, _partitions(topic, live)))
        brokers = [b for b in self._nodes(image, listener_name) if not b.is_fenced]
        return MetadataResult(self.cluster_id, self.controller_id, brokers, result_topics)

    @staticmethod
    def _nodes(image: MetadataImage, listener_name: str) -> list[MetadataNode]:
        """Every registered broker with an endpoint on ``listener_name``, by id."""
        out = []
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint(listener_name)
            if ep is not None:
                out.append(MetadataNode(b.broker_id, ep.host, ep.port, b.rack, b.fenced))
        return out

    def handle_describe_cluster(self, listener_name: str) -> ClusterDescription:
        image = self.image()
        brokers = []
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint(listener_name)
            brokers.append(
                MetadataNode(
                    b.broker_id,
                    ep.host if ep else "",
                    ep.port if ep else -1,
                    b.rack,
                    b.fenced,
                )
            )
        return ClusterDescription(self.cluster_id, self.controller_id, brokers)

    async def handle_describe_quorum(self) -> QuorumInfo | KafkaError:
        """The metadata quorum as its leader sees it (forwarded to the active controller)."""
        try:
            return await self.channel.describe_quorum()
        except KafkaError as e:
            return e

    async def handle_elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Sequence[tuple[str, int]] | None,
        timeout_ms: int = 0,
    ) -> ElectionResults | KafkaError:
        """ElectLeaders, forwarded to the active controller; answered once the new leaders
        are committed, or REQUEST_TIMED_OUT after ``timeout_ms`` (0: 30000 ms)."""
        timeout_s = (timeout_ms if timeout_ms > 0 else 30_000) / 1000
        try:
            async with asyncio.timeout(timeout_s):
                return await self.channel.elect_leaders(election_type, partitions)
        except TimeoutError:
            return RequestTimedOutError(
                f"The elections were not committed within {timeout_s * 1000:.0f} ms."
            )
        except KafkaError as e:
            return e

    async def handle_alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, Sequence[int] | None]], timeout_ms: int = 0
    ) -> list[KafkaError | None] | KafkaError:
        """AlterPartitionReassignments, forwarded to the active controller; answered once
        the change is committed, or REQUEST_TIMED_OUT after ``timeout_ms`` (0: 30000 ms)."""
        timeout_s = (timeout_ms if timeout_ms > 0 else 30_000) / 1000
        try:
            async with asyncio.timeout(timeout_s):
                return await self.channel.alter_partition_reassignments(requests)
        except TimeoutError:
            return RequestTimedOutError(
                f"The reassignments were not committed within {timeout_s * 1000:.0f} ms."
            )
        except KafkaError as e:
            return e

    def handle_list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], OngoingReassignment]:
        """ListPartitionReassignments, from this broker's metadata image."""
        return list_partition_reassignments(self.image(), partitions)

    def handle_describe_log_dirs(
        self, wanted: Mapping[str, Collection[int]] | None
    ) -> list[LogDirDescription]:
        """DescribeLogDirs: each of ``log.dirs`` with the replicas in it (those of
        ``wanted``, by topic; None: all)."""
        log_manager = self.replicas.log_manager
        out = []
        for d in log_manager.open_dirs:
            error: KafkaError | None = None
            try:
                usage = shutil.disk_usage(d)
                total, usable = usage.total, usage.free
            except OSError as e:
                total = usable = -1
                error = KafkaStorageError(f"Log directory {d} cannot be read: {e}")
            replicas = []
            for tp, log in log_manager.logs_in(d):
                if wanted is not None and tp.partition not in wanted.get(tp.topic, ()):
                    continue
                p = self.replicas.partitions.get(tp)
                leo = log.log_end_offset
                lag = max((p.high_watermark if p is not None else leo) - leo, 0)
                replicas.append(ReplicaInfo(tp.topic, tp.partition, log.size_in_bytes, lag))
            out.append(LogDirDescription(str(d), error, sorted(replicas), total, usable))
        return out

    # -- topics and partitions (forwarded to the controller) --------------------------------

    async def handle_create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool
    ) -> list[TopicResult]:
        try:
            return await self.channel.create_topics(topics, validate_only)
        except KafkaError as e:
            return [TopicResult(t.name, e) for t in topics]

    async def handle_delete_topics(
        self, names: Sequence[str], topic_ids: Sequence[bytes]
    ) -> tuple[list[TopicResult], list[tuple[bytes, KafkaError]]]:
        """Delete topics named by name or by id. Returns the results by name, and the ids
        that name no topic."""
        by_id = {t.topic_id.bytes: t.name for t in self.image().topics()}
        unknown: list[tuple[bytes, KafkaError]] = [
            (i, UnknownTopicOrPartitionError("This server does not host this topic ID."))
            for i in topic_ids
            if i not in by_id
        ]
        all_names = [*names, *(by_id[i] for i in topic_ids if i in by_id)]
        try:
            results = await self.channel.delete_topics(all_names)
        except KafkaError as e:
            results = [TopicResult(n, e) for n in all_names]
        return results, unknown

    async def handle_create_partitions(
        self,
        topics: Sequence[tuple[str, int, Sequence[Sequence[int]]]],
        validate_only: bool,
    ) -> list[TopicResult]:
        """Grow each ``(topic, count, assignments of the new partitions)``."""
        image = self.image()
        wanted = []
        for name, count, assignments in topics:
            assignment = None
            if assignments:
                topic = image.topic(name)
                first = len(topic.partitions) if topic else 0
                assignment = {first + i: list(a) for i, a in enumerate(assignments)}
            wanted.append((name, count, assignment))
        try:
            return await self.channel.create_partitions(wanted, validate_only)
        except KafkaError as e:
            return [TopicResult(name, e) for name, _, _ in topics]

    # -- configs ---------------------------------------------------------------------------

    def handle_describe_configs(
        self, resources: Sequence[tuple[ConfigResourceType | KafkaError, str, Sequence[str]]]
    ) -> list[DescribedConfigs]:
        """Each ``(type, name, keys)`` resource's configs (all of them when ``keys`` is
        empty), or the error that stopped it; a type the request could not name arrives as
        that error."""
        image = self.image()
        out = []
        for rtype, name, keys in resources:
            try:
                if isinstance(rtype, KafkaError):
                    raise rtype
                entries = self._config_entries(rtype, name, image)
            except KafkaError as e:
                out.append(DescribedConfigs(e))
                continue
            wanted = set(keys)
            read_only = rtype == ConfigResourceType.BROKER
            out.append(
                DescribedConfigs(
                    None,
                    [
                        ConfigDescription(k, v, source, read_only)
                        for k, v, source in entries
                        if not wanted or k in wanted
                    ],
                )
            )
        return out

    def _config_entries(
        self, rtype: ConfigResourceType, name: str, image: MetadataImage
    ) -> list[tuple[str, str | None, str]]:
        if rtype == ConfigResourceType.TOPIC:
            if image.topic(name) is None:
                raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
            resolved = resolve_topic_config(
                self.config.topic_synonyms, dict(image.topic_config(name))
            )
            return [
                (k, config_value_to_string(v), resolved.sources[k])
                for k, v in sorted(resolved.values.items())
            ]
        if name not in ("", str(self.config.node_id)):
            raise InvalidRequestError(f"This is broker {self.config.node_id}, not {name}.")
        dynamic: Mapping[str, str] = image.broker_config(name)
        out: list[tuple[str, str | None, str]] = []
        for e in self.config.describe():
            if e.name in dynamic:
                out.append((e.name, dynamic[e.name], "DYNAMIC_BROKER_CONFIG"))
            else:
                out.append((e.name, e.value, e.source))
        return out

    async def handle_alter_configs(
        self,
        resources: Sequence[tuple[ConfigResourceType | KafkaError, str, Sequence[AlterConfigOp]]],
        validate_only: bool,
    ) -> list[KafkaError | None]:
        """IncrementalAlterConfigs: one result per resource, in order."""
        results: list[KafkaError | None] = [
            rtype if isinstance(rtype, KafkaError) else None for rtype, _, _ in resources
        ]
        valid = [
            (i, (rtype, name, ops))
            for i, (rtype, name, ops) in enumerate(resources)
            if not isinstance(rtype, KafkaError)
        ]
        try:
            answers = await self.channel.incremental_alter_configs(
                [r for _, r in valid], validate_only
            )
        except KafkaError as e:
            answers = [e] * len(valid)
        for (i, _), answer in zip(valid, answers, strict=True):
            results[i] = answer
        return results


def _partitions(topic: TopicImage, live: set[int]) -> list[MetadataPartition]:
    out = []
    for p, reg in sorted(topic.partitions.items()):
        out.append(
            MetadataPartition(
                p,
                reg.leader,
                reg.leader_epoch,
                reg.replicas,
                reg.isr,
                tuple(r for r in reg.replicas if r not in live),
                None
                if reg.has_leader
                else LeaderNotAvailableError(f"There is no leader for {topic.name}-{p}."),
                reg.elr,
            )
        )
    return out
