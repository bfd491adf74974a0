"""Kafka's admin api keys over its protocol: CreateTopics, DeleteTopics, CreatePartitions,
DeleteRecords, OffsetForLeaderEpoch, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs (:mod:`~rillet.server.kafka.admin_configs`), DescribeCluster,
DescribeLogDirs, ElectLeaders, DescribeProducers and ListTransactions, each at every
version its schema knows.

Writes to metadata go to the controller through the same
:class:`~rillet.broker.apis.BrokerApis` handlers the gRPC admin service uses; this module
does what Kafka's broker (``KafkaApis``) and its controller's request layer
(``ControllerApis``) do around them: a topic named twice is refused (INVALID_REQUEST
``Duplicate topic name.``), DeleteTopics resolves topic ids (v6+) and refuses ids it does
not know (UNKNOWN_TOPIC_ID), CreateTopics checks names, counts, manual assignments and
configs with Kafka's messages before forwarding and answers v5+ with the topic's partition
count, replication factor and effective configs. ``timeout_ms`` bounds the wait for the
controller (REQUEST_TIMED_OUT after it). DeleteTopics honours ``delete.topic.enable``
(TOPIC_DELETION_DISABLED; INVALID_REQUEST before v3).

The others are answered from this broker's own state, as Kafka's are: DeleteRecords and
OffsetForLeaderEpoch from the partitions it leads, DescribeProducers from the replicas it
holds (NOT_LEADER_OR_FOLLOWER for a partition it cannot answer for,
UNKNOWN_TOPIC_OR_PARTITION for one the metadata does not have), ListTransactions from the
transaction coordinator partitions it leads, DescribeLogDirs from its log directories,
DescribeCluster from its metadata (the live brokers with an endpoint on the request's
listener; every cluster operation when ``include_cluster_authorized_operations`` asks, as
Kafka answers without an authorizer).

Differences from Kafka:

- DeleteRecords answers once the leader's log start offset moved; followers move theirs
  at their next fetch, and the low watermark answered is the leader's (Kafka waits, up to
  ``timeout_ms``, for every live replica's log start to pass the offset).
- DescribeCluster names the controller only when it is one of the brokers listed (combined
  mode), else this broker, which forwards the controller's requests (Kafka's KRaft brokers
  name a random live broker).
- A ``timeout_ms`` of 0 or less (CreateTopics, DeleteTopics, CreatePartitions) waits until
  the controller answers, as ZooKeeper-era brokers did; Kafka's KRaft controller times such
  a request out at once.
- Error messages are Rillet's where Kafka's controller would word them differently (replica
  placement, topic name rules); codes are always Kafka's.

With an authorizer each request is checked as Kafka's KafkaApis checks it: CREATE (on the
cluster or the topic), DELETE, ALTER (CreatePartitions) and DELETE (DeleteRecords) on each
topic, DESCRIBE on the topic for OffsetForLeaderEpoch (CLUSTER_ACTION for a replica) and READ
for DescribeProducers, DESCRIBE on the cluster for DescribeCluster and DescribeLogDirs, ALTER
on it for ElectLeaders, and DESCRIBE on each transactional id ListTransactions shows.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from rillet.broker.apis import BrokerApis
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.config import config_value_to_string, resolve_topic_config
from rillet.controller import CreatableTopic, ElectionResults, ElectionType, TopicResult
from rillet.errors import (
    ClusterAuthorizationFailedError,
    FencedLeaderEpochError,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    MismatchedEndpointTypeError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    UnknownLeaderEpochError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedEndpointTypeError,
)
from rillet.metadata.image import MetadataImage
from rillet.metadata.topic_names import METADATA_TOPIC, validate_topic_name
from rillet.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from rillet.server.kafka import admin_configs
from rillet.server.kafka.request import Body, KafkaRequest, Served
from rillet.types import TopicPartition

__all__ = ["KafkaAdmin"]

T = TypeVar("T")

_ZERO_UUID = uuid.UUID(int=0)
# Kafka's Topic.isInternal: the topics whose records DeleteRecords refuses to delete.
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# ConfigResource.Type's code of a topic.
_TOPIC_RESOURCE = 2
# DescribeCluster's endpoint types (Kafka's EndpointType).
_BROKERS, _CONTROLLERS = 1, 2
# DescribeCluster's cluster_authorized_operations when they are not asked for. (The
# operations on the CLUSTER resource, Kafka's AclEntry.supportedOperations, are CREATE, ALTER,
# DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS and IDEMPOTENT_WRITE.)
_NOT_ASKED = -(2**31)


def _error(err: KafkaError | None) -> tuple[int, str | None]:
    """An error's code and message (null when it has none, as Kafka sends it)."""
    if err is None:
        return 0, None
    return err.code, err.message or None


def _topic_denied(req: KafkaRequest, operation: AclOperation, name: str) -> KafkaError | None:
    """TOPIC_AUTHORIZATION_FAILED when the sender may not do ``operation`` on topic ``name``."""
    if req.allowed(operation, ResourceType.TOPIC, name):
        return None
    return TopicAuthorizationFailedError(f"Not authorized to access topics: [{name}]")


def _cluster_denied(req: KafkaRequest, operation: AclOperation) -> KafkaError | None:
    if req.allowed_on_cluster(operation):
        return None
    return ClusterAuthorizationFailedError(
        f"Not authorized to perform {operation.name} on the cluster"
    )


def _configs_denied(
    req: KafkaRequest, operation: AclOperation
) -> Callable[[int, str], KafkaError | None]:
    """Whether the sender may do ``operation`` (DESCRIBE_CONFIGS, ALTER_CONFIGS) to a config
    resource: a topic's are the topic's, a broker's and the brokers' default the cluster's."""

    def denied(rtype: int, name: str) -> KafkaError | None:
        if rtype == _TOPIC_RESOURCE:
            return _topic_denied(req, operation, name)
        return _cluster_denied(req, operation)

    return denied


def _cluster_operations(req: KafkaRequest) -> int:
    """The cluster operations the sender may do, as DescribeCluster's bit field."""
    return sum(
        1 << op
        for op in (5, 7, 8, 9, 10, 11, 12)
        if req.allowed_quietly(AclOperation(op), ResourceType.CLUSTER, CLUSTER_NAME)
    )


async def _within(timeout_ms: int, work: Awaitable[T]) -> T | RequestTimedOutError:
    """``work``'s result, or REQUEST_TIMED_OUT when it takes longer than ``timeout_ms``
    (0 or less: no bound)."""
    if timeout_ms <= 0:
        return await work
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            return await work
    except TimeoutError:
        return RequestTimedOutError(f"The request was not answered within {timeout_ms} ms.")


class KafkaAdmin:
    """The admin handlers of one broker (see the module doc); ``transactions`` is its
    transaction coordinator (None: ListTransactions is refused)."""

    def __init__(self, apis: BrokerApis, transactions: TransactionCoordinator | None) -> None:
        self.apis = apis
        self.transactions = transactions

    def served(self) -> Mapping[int, Served]:
        return {
            19: Served(0, 7, self.create_topics),  # CreateTopics
            20: Served(0, 6, self.delete_topics),  # DeleteTopics
            21: Served(0, 2, self.delete_records),  # DeleteRecords
            23: Served(0, 4, self.offset_for_leader_epoch),  # OffsetForLeaderEpoch
            32: Served(0, 4, self.describe_configs),  # DescribeConfigs
            33: Served(0, 2, self.alter_configs),  # AlterConfigs
            35: Served(0, 4, self.describe_log_dirs),  # DescribeLogDirs
            37: Served(0, 3, self.create_partitions),  # CreatePartitions
            43: Served(0, 2, self.elect_leaders),  # ElectLeaders
            44: Served(0, 1, self.incremental_alter_configs),  # IncrementalAlterConfigs
            60: Served(0, 1, self.describe_cluster),  # DescribeCluster
            61: Served(0, 0, self.describe_producers),  # DescribeProducers
            66: Served(0, 1, self.list_transactions),  # ListTransactions
        }

    # -- CreateTopics -----------------------------------------------------------------------

    async def create_topics(self, req: KafkaRequest) -> Body:
        body = req.body
        topics: list[Body] = body["topics"]
        counts = Counter(t["name"] for t in topics)
        image = self.apis.image()
        answers: dict[str, Body] = {}
        wanted: list[CreatableTopic] = []
        create_any = req.allowed_quietly(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
        for t in topics:
            name = t["name"]
            if counts[name] > 1:
                continue
            err = (
                None if create_any else _topic_denied(req, AclOperation.CREATE, name)
            ) or self._check_new_topic(t, image)
            if err is not None:
                answers[name] = _topic_result(name, err)
                continue
            assignments = t["assignments"]
            wanted.append(
                CreatableTopic(
                    name,
                    t["num_partitions"],
                    t["replication_factor"],
                    {a["partition_index"]: list(a["broker_ids"]) for a in assignments}
                    if assignments
                    else None,
                    {c["name"]: c["value"] for c in t["configs"]},
                )
            )
        validate_only = bool(body.get("validate_only", False))
        results = (
            await _within(body["timeout_ms"], self.apis.handle_create_topics(wanted, validate_only))
            if wanted
            else []
        )
        if isinstance(results, KafkaError):
            results = [TopicResult(topic.name, results) for topic in wanted]
        for topic, result in zip(wanted, results, strict=True):
            answers[topic.name] = self._created(topic, result)
        requested = dict.fromkeys(t["name"] for t in topics)
        out = [answers[name] for name in requested if name in answers]
        out += [
            _topic_result(name, InvalidRequestError("Duplicate topic name."))
            for name, n in counts.items()
            if n > 1
        ]
        return {"topics": out}

    def _check_new_topic(self, t: Body, image: MetadataImage) -> KafkaError | None:
        """What Kafka's controller refuses before placing replicas, in its order, with its
        messages: the name, an existing topic, null or bad configs, counts and manual
        assignments that cannot go together."""
        name = t["name"]
        try:
            validate_topic_name(name)
        except InvalidTopicError as e:
            return e
        if name == METADATA_TOPIC:
            return InvalidRequestError(
                f"Creation of internal topic {METADATA_TOPIC} is prohibited."
            )
        if image.topic(name) is not None:
            return TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        nulls = [c["name"] for c in t["configs"] if c["value"] is None]
        if nulls:
            return InvalidConfigurationError(
                "Null value not supported for topic configs: " + ",".join(nulls)
            )
        try:
            resolve_topic_config(
                self.apis.config.topic_synonyms, {c["name"]: c["value"] for c in t["configs"]}
            )
        except KafkaError as e:
            return e
        partitions, replication = t["num_partitions"], t["replication_factor"]
        if t["assignments"]:
            if replication != -1:
                return InvalidRequestError(
                    "A manual partition assignment was specified, but replication factor was "
                    "not set to -1."
                )
            if partitions != -1:
                return InvalidRequestError(
                    "A manual partition assignment was specified, but numPartitions was not "
                    "set to -1."
                )
            seen: set[int] = set()
            for a in t["assignments"]:
                if a["partition_index"] in seen:
                    return InvalidReplicaAssignmentError(
                        "Found multiple manual partition assignments for partition "
                        f"{a['partition_index']}"
                    )
                seen.add(a["partition_index"])
        elif replication < -1 or replication == 0:
            return InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value."
            )
        elif partitions < -1 or partitions == 0:
            return InvalidPartitionsError(
                "Number of partitions was set to an invalid non-positive value."
            )
        return None

    def _created(self, t: CreatableTopic, result: TopicResult) -> Body:
        if result.error is not None:
            return _topic_result(t.name, result.error)
        resolved = resolve_topic_config(self.apis.config.topic_synonyms, t.configs)
        out = _topic_result(t.name, None)
        out.update(
            topic_id=result.topic_id or _ZERO_UUID,
            num_partitions=result.num_partitions,
            replication_factor=result.replication_factor,
            configs=[
                {
                    "name": name,
                    "value": config_value_to_string(value),
                    "read_only": False,
                    "config_source": admin_configs.CONFIG_SOURCES[resolved.sources[name]],
                    "is_sensitive": False,
                }
                for name, value in sorted(resolved.values.items())
            ],
        )
        return out

    # -- DeleteTopics -----------------------------------------------------------------------

    async def delete_topics(self, req: KafkaRequest) -> Body:
        """By name (v0-5), or by name or id (v6+), with Kafka's ControllerApis checks: one
        of the two per entry, none named twice, names and ids that exist."""
        version, body = req.version, req.body
        if version >= 6:
            entries = [(t.get("name"), t.get("topic_id") or _ZERO_UUID) for t in body["topics"]]
        else:
            entries = [(n, _ZERO_UUID) for n in body["topic_names"]]
        out: list[Body] = []

        def answer(name: str | None, topic_id: uuid.UUID, err: KafkaError | None) -> None:
            code, message = _error(err)
            out.append(
                {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}
            )

        if not self.apis.config.delete_topic_enable:
            disabled: KafkaError = (
                InvalidRequestError("Topic deletion is disabled.")
                if version < 3
                else TopicDeletionDisabledError()
            )
            for name, topic_id in entries:
                answer(name, topic_id, disabled)
            return {"responses": out}
        names = Counter(n for n, i in entries if n is not None and i == _ZERO_UUID)
        ids = Counter(i for n, i in entries if n is None and i != _ZERO_UUID)
        for name, topic_id in entries:
            if name is None and topic_id == _ZERO_UUID:
                answer(
                    None, topic_id, InvalidRequestError("Neither topic name nor id were specified.")
                )
            elif name is not None and topic_id != _ZERO_UUID:
                answer(
                    name,
                    topic_id,
                    InvalidRequestError("You may not specify both topic name and topic id."),
                )
        for name in (n for n, c in names.items() if c > 1):
            answer(name, _ZERO_UUID, InvalidRequestError("Duplicate topic name."))
        for topic_id in (i for i, c in ids.items() if c > 1):
            answer(None, topic_id, InvalidRequestError("Duplicate topic id."))
        image = self.apis.image()
        by_id: dict[uuid.UUID, str] = {}
        for topic_id in (i for i, c in ids.items() if c == 1):
            topic = image.topics_by_id.get(topic_id)
            if topic is None:
                answer(None, topic_id, UnknownTopicIdError())
            else:
                by_id[topic_id] = topic.name
        for name in (n for n, c in names.items() if c == 1):
            topic = image.topic(name)
            if topic is None:
                answer(name, _ZERO_UUID, UnknownTopicOrPartitionError())
            elif topic.topic_id in by_id:
                del by_id[topic.topic_id]
                answer(
                    name,
                    topic.topic_id,
                    InvalidRequestError(
                        "The provided topic name maps to an ID that was already supplied."
                    ),
                )
            else:
                by_id[topic.topic_id] = name
        for topic_id, name in list(by_id.items()):
            denied = _topic_denied(req, AclOperation.DELETE, name)
            if denied is not None:
                del by_id[topic_id]
                answer(name if name in names else None, topic_id, denied)
        names_to_delete = list(by_id.values())
        deleted = await _within(
            body["timeout_ms"], self.apis.handle_delete_topics(names_to_delete, [])
        )
        if isinstance(deleted, KafkaError):
            results = [TopicResult(n, deleted) for n in names_to_delete]
        else:
            results = deleted[0]
        ids_by_name = {n: i for i, n in by_id.items()}
        for r in results:
            answer(r.name, r.topic_id or ids_by_name.get(r.name, _ZERO_UUID), r.error)
        return {"responses": out}

    # -- CreatePartitions -------------------------------------------------------------------

    async def create_partitions(self, req: KafkaRequest) -> Body:
        body = req.body
        topics: list[Body] = body["topics"]
        counts = Counter(t["name"] for t in topics)
        image = self.apis.image()
        errors: dict[str, KafkaError | None] = {}
        wanted: list[tuple[str, int, list[list[int]]]] = []
        for t in topics:
            name, count, assignments = t["name"], t["count"], t["assignments"]
            if counts[name] > 1:
                continue
            err = _topic_denied(req, AclOperation.ALTER, name) or _check_new_partitions(
                image, name, count, assignments
            )
            if err is not None:
                errors[name] = err
            else:
                wanted.append((name, count, [a["broker_ids"] for a in assignments or ()]))
        results = (
            await _within(
                body["timeout_ms"],
                self.apis.handle_create_partitions(wanted, bool(body["validate_only"])),
            )
            if wanted
            else []
        )
        if isinstance(results, KafkaError):
            results = [TopicResult(name, results) for name, _, _ in wanted]
        errors.update((r.name, r.error) for r in results)
        out = []
        for name in dict.fromkeys(t["name"] for t in topics):
            err = InvalidRequestError("Duplicate topic name.") if counts[name] > 1 else errors[name]
            code, message = _error(err)
            out.append({"name": name, "error_code": code, "error_message": message})
        return {"results": out}

    # -- DeleteRecords ----------------------------------------------------------------------

    async def delete_records(self, req: KafkaRequest) -> Body:
        """Move each partition's log start offset to the offset asked (-1: the high
        watermark) on this leader; the low watermark answered is the new log start."""
        image = self.apis.image()
        by_topic: dict[str, dict[int, Body]] = {}
        for t in req.body["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                try:
                    denied = _topic_denied(req, AclOperation.DELETE, tp.topic)
                    if denied is not None:
                        raise denied
                    low_watermark = self._delete_records(tp, p["offset"], image)
                    err = None
                except KafkaError as e:
                    low_watermark, err = -1, e
                by_topic.setdefault(tp.topic, {})[tp.partition] = {
                    "partition_index": tp.partition,
                    "low_watermark": low_watermark,
                    "error_code": _error(err)[0],
                }
        return {
            "topics": [
                {"name": name, "partitions": list(parts.values())}
                for name, parts in by_topic.items()
            ]
        }

    def _delete_records(self, tp: TopicPartition, offset: int, image: MetadataImage) -> int:
        """Kafka's ``deleteRecordsOnLeader``: the partition's new low watermark."""
        topic = image.topic(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            raise UnknownTopicOrPartitionError()
        if tp.topic in _INTERNAL_TOPICS:
            raise InvalidTopicError(f"Cannot delete records of internal topic {tp.topic}")
        p = self.apis.replicas.partitions.get(tp)
        if p is None or not p.is_leader:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {tp} on broker {self.apis.config.node_id}"
            )
        policy = self.apis.replicas.log_manager.topic_config(tp.topic)["cleanup.policy"]
        if "delete" not in policy:
            raise PolicyViolationError(
                f"Records of partition {tp} can not be deleted due to the configured policy"
            )
        target = p.high_watermark if offset == -1 else offset
        if target < 0:
            raise OffsetOutOfRangeError(f"The offset {target} for partition {tp} is not valid")
        if target > p.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {target} of partition {tp} since "
                f"it is larger than the high watermark {p.high_watermark}"
            )
        p.log.maybe_increment_log_start_offset(target)
        return p.log.log_start_offset

    # -- OffsetForLeaderEpoch ---------------------------------------------------------------

    async def offset_for_leader_epoch(self, req: KafkaRequest) -> Body:
        """Where each asked leader epoch ends in this leader's log (KIP-101, KIP-320)."""
        image = self.apis.image()
        denied = (
            _cluster_denied(req, AclOperation.CLUSTER_ACTION)
            if req.body.get("replica_id", -1) >= 0
            else None
        )
        out = []
        for t in req.body["topics"]:
            partitions = []
            for p in t["partitions"]:
                tp = TopicPartition(t["topic"], p["partition"])
                result: Body = {"partition": tp.partition, "leader_epoch": -1, "end_offset": -1}
                try:
                    refused = denied or _topic_denied(req, AclOperation.DESCRIBE, tp.topic)
                    if refused is not None:
                        raise refused
                    epoch, end = self._epoch_end(
                        tp, p.get("current_leader_epoch", -1), p["leader_epoch"], image
                    )
                except KafkaError as e:
                    result["error_code"] = e.code
                else:
                    result.update(error_code=0, leader_epoch=epoch, end_offset=end)
                partitions.append(result)
            out.append({"topic": t["topic"], "partitions": partitions})
        return {"topics": out}

    def _epoch_end(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int, image: MetadataImage
    ) -> tuple[int, int]:
        p = self.apis.replicas.partitions.get(tp)
        if p is None:
            topic = image.topic(tp.topic)
            if topic is not None and tp.partition in topic.partitions:
                raise NotLeaderOrFollowerError()
            raise UnknownTopicOrPartitionError()
        if current_leader_epoch >= 0 and current_leader_epoch < p.leader_epoch:
            raise FencedLeaderEpochError()
        if current_leader_epoch > p.leader_epoch:
            raise UnknownLeaderEpochError()
        if not p.is_leader:
            raise NotLeaderOrFollowerError()
        found = p.log.end_offset_for_epoch(leader_epoch)
        if found.end_offset < 0:
            return -1, -1
        return found.epoch, found.end_offset

    # -- configs ----------------------------------------------------------------------------

    async def describe_configs(self, req: KafkaRequest) -> Body:
        return admin_configs.describe_configs(
            self.apis, req.version, req.body, _configs_denied(req, AclOperation.DESCRIBE_CONFIGS)
        )

    async def alter_configs(self, req: KafkaRequest) -> Body:
        return await admin_configs.alter_configs(
            self.apis, req.body, _configs_denied(req, AclOperation.ALTER_CONFIGS)
        )

    async def incremental_alter_configs(self, req: KafkaRequest) -> Body:
        return await admin_configs.incremental_alter_configs(
            self.apis, req.body, _configs_denied(req, AclOperation.ALTER_CONFIGS)
        )

    # -- the cluster ------------------------------------------------------------------------

    async def describe_cluster(self, req: KafkaRequest) -> Body:
        """The live brokers with an endpoint on the request's listener (v1: only brokers are
        described here, as on Kafka's brokers)."""
        version, body = req.version, req.body
        endpoint_type = body.get("endpoint_type", _BROKERS)
        err: KafkaError | None = None
        if endpoint_type not in (_BROKERS, _CONTROLLERS):
            err = (InvalidRequestError if version == 0 else UnsupportedEndpointTypeError)(
                f"Unsupported endpoint type {endpoint_type}"
            )
        elif endpoint_type == _CONTROLLERS:
            err = (InvalidRequestError if version == 0 else MismatchedEndpointTypeError)(
                "The request was sent to an endpoint of type BROKER, but we wanted an "
                "endpoint of type CONTROLLER"
            )
        else:
            err = _cluster_denied(req, AclOperation.DESCRIBE)
        if err is not None:
            code, message = _error(err)
            return {"error_code": code, "error_message": message, "endpoint_type": _BROKERS}
        cluster = self.apis.handle_describe_cluster(req.listener_name)
        brokers = [b for b in cluster.brokers if not b.is_fenced and b.port >= 0]
        listed = {b.node_id for b in brokers}
        controller = cluster.controller_id
        if controller not in listed:
            controller = self.apis.config.node_id if self.apis.config.node_id in listed else -1
        return {
            "error_code": 0,
            "error_message": None,
            "endpoint_type": _BROKERS,
            "cluster_id": cluster.cluster_id,
            "controller_id": controller,
            "brokers": [
                {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in brokers
            ],
            "cluster_authorized_operations": _cluster_operations(req)
            if body.get("include_cluster_authorized_operations")
            else _NOT_ASKED,
        }

    async def describe_log_dirs(self, req: KafkaRequest) -> Body:
        """Each of this broker's log directories with the replicas in it (those asked for;
        every one for null topics)."""
        denied = _cluster_denied(req, AclOperation.DESCRIBE)
        if denied is not None:
            return {"error_code": denied.code, "results": []}
        topics = req.body.get("topics")
        wanted: dict[str, set[int]] | None = None
        if topics is not None:
            wanted = {}
            for t in topics:
                wanted.setdefault(t["topic"], set()).update(t["partitions"])
        results = []
        for d in self.apis.handle_describe_log_dirs(wanted):
            by_topic: dict[str, list[Body]] = {}
            for r in d.replicas:
                by_topic.setdefault(r.topic, []).append(
                    {
                        "partition_index": r.partition,
                        "partition_size": r.size,
                        "offset_lag": r.offset_lag,
                        "is_future_key": r.is_future,
                    }
                )
            results.append(
                {
                    "error_code": _error(d.error)[0],
                    "log_dir": d.path,
                    "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()],
                    "total_bytes": d.total_bytes,
                    "usable_bytes": d.usable_bytes,
                }
            )
        return {"error_code": 0, "results": results}

    async def elect_leaders(self, req: KafkaRequest) -> Body:
        """Preferred (v0, or election type 0) or unclean (1) elections of the partitions
        named, or of every partition for null topic partitions."""
        body = req.body
        named = body.get("topic_partitions")
        partitions = (
            None
            if named is None
            else list(dict.fromkeys((t["topic"], p) for t in named for p in t["partitions"]))
        )
        outcome: ElectionResults | KafkaError | None = _cluster_denied(req, AclOperation.ALTER)
        try:
            election_type = ElectionType(body.get("election_type", ElectionType.PREFERRED))
        except ValueError:
            outcome = outcome or InvalidRequestError(
                f"Unknown election type {body.get('election_type')}"
            )
        if outcome is None:
            outcome = await self.apis.handle_elect_leaders(
                election_type, partitions, body["timeout_ms"]
            )
        by_topic: dict[str, list[Body]] = {}
        if isinstance(outcome, KafkaError):
            # Kafka's ElectLeadersRequest.getErrorResponse: the error everywhere.
            code, message = _error(outcome)
            for topic, p in partitions or ():
                by_topic.setdefault(topic, []).append(
                    {"partition_id": p, "error_code": code, "error_message": message}
                )
        else:
            code = 0
            for (topic, p), err in sorted(outcome.items()):
                c, message = _error(err)
                by_topic.setdefault(topic, []).append(
                    {"partition_id": p, "error_code": c, "error_message": message}
                )
        return {
            # v0 has no top-level error: its partitions carry it.
            "error_code": code if req.version >= 1 else 0,
            "replica_election_results": [
                {"topic": topic, "partition_result": results} for topic, results in by_topic.items()
            ],
        }

    # -- producers and transactions ---------------------------------------------------------

    async def describe_producers(self, req: KafkaRequest) -> Body:
        """The active producers of each partition this broker holds a replica of (Kafka's
        ``Partition.activeProducerState`` reads the local log, so a follower answers a client
        that asks it by broker id)."""
        image = self.apis.image()
        topics = []
        for t in req.body["topics"]:
            partitions = []
            for index in t["partition_indexes"]:
                out: Body = {"partition_index": index, "active_producers": []}
                try:
                    denied = _topic_denied(req, AclOperation.READ, t["name"])
                    if denied is not None:
                        raise denied
                    out["active_producers"] = self._producers(
                        TopicPartition(t["name"], index), image
                    )
                    out.update(error_code=0, error_message=None)
                except KafkaError as e:
                    out["error_code"], out["error_message"] = _error(e)
                partitions.append(out)
            topics.append({"name": t["name"], "partitions": partitions})
        return {"topics": topics}

    def _producers(self, tp: TopicPartition, image: MetadataImage) -> list[Body]:
        validate_topic_name(tp.topic)
        topic = image.topic(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            raise UnknownTopicOrPartitionError()
        p = self.apis.replicas.partitions.get(tp)
        if p is None:
            raise NotLeaderOrFollowerError(
                f"Broker {self.apis.config.node_id} holds no replica of {tp}."
            )
        return [
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "last_sequence": e.last_sequence,
                "last_timestamp": e.last_timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": -1
                if e.current_txn_start_offset is None
                else e.current_txn_start_offset,
            }
            for e in sorted(p.log.producer_state(), key=lambda e: e.producer_id)
        ]

    async def list_transactions(self, req: KafkaRequest) -> Body:
        """The transactions of the transaction coordinator partitions this broker leads
        (KIP-664), filtered by state, producer id and (v1, KIP-994) duration."""
        body = req.body
        if self.transactions is None:
            err = InvalidRequestError("transactions are not served by this broker")
            return {"error_code": err.code, "unknown_state_filters": [], "transaction_states": []}
        response = await self.transactions.list_transactions(
            body["state_filters"], body["producer_id_filters"], body.get("duration_filter", -1)
        )
        return {
            "error_code": _error(response.error)[0],
            "unknown_state_filters": list(response.unknown_state_filters),
            "transaction_states": [
                {
                    "transactional_id": t.transactional_id,
                    "producer_id": t.producer_id,
                    "transaction_state": t.transaction_state,
                }
                for t in response.transaction_states
                if req.allowed_quietly(
                    AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id
                )
            ],
        }


def _topic_result(name: str, err: KafkaError | None) -> Body:
    """A CreateTopics answer for one topic, with the v5+ fields of a topic not created."""
    code, message = _error(err)
    return {
        "name": name,
        "topic_id": _ZERO_UUID,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
        "topic_config_error_code": 0,
    }


def _check_new_partitions(
    image: MetadataImage, name: str, count: int, assignments: Sequence[Body] | None
) -> KafkaError | None:
    """Kafka's checks of a partition count and assignments against the topic's current
    partitions, with its messages (an unknown topic is the controller's to answer)."""
    topic = image.topic(name)
    if topic is None:
        return None
    current = len(topic.partitions)
    if count == current:
        return InvalidPartitionsError(f"Topic already has {current} partition(s).")
    if count < current:
        return InvalidPartitionsError(
            f"The topic {name} currently has {current} partition(s); {count} would not be "
            "an increase."
        )
    if assignments is not None and len(assignments) != count - current:
        return InvalidReplicaAssignmentError(
            f"Attempted to add {count - current} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified."
        )
    return None
