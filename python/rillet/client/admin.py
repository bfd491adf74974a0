"""AdminClient, shaped like kafka-python's ``KafkaAdminClient``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from rillet.broker.apis import LogDirDescription
from rillet.client.cluster import GRPC_OPTIONS
from rillet.client.configs import merge_configs, parse_bootstrap
from rillet.client.group_admin import ConsumerGroupAdmin
from rillet.client.security import (
    SECURITY_DEFAULTS,
    client_sasl,
    client_tls,
    open_channel,
    refusal,
    unreachable,
)
from rillet.client.security_admin import SecurityAdmin
from rillet.client.txn_admin import TransactionAdmin
from rillet.controller.elections import ElectionType
from rillet.controller.reassignment import OngoingReassignment
from rillet.errors import (
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    SslAuthenticationError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from rillet.protocol import admin_pb2, admin_pb2_grpc, metadata_pb2, metadata_pb2_grpc, quorum_pb2
from rillet.protocol.admin import (
    describe_log_dirs_request_to_pb,
    list_reassignments_request_to_pb,
    log_dirs_from_pb,
    reassignment_requests_to_pb,
    reassignment_results_from_pb,
    reassignments_from_pb,
)
from rillet.protocol.controller import elect_leaders_request_to_pb, elect_leaders_results_from_pb
from rillet.protocol.quorum import describe_quorum_from_pb
from rillet.raft.node import QuorumInfo
from rillet.types import TopicPartition

__all__ = [
    "AdminClient",
    "ConfigResource",
    "ConfigResourceType",
    "NewPartitions",
    "NewTopic",
    "PartitionInfo",
    "TopicDescription",
]

_FAIL_OVER = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignments: Mapping[int, Sequence[int]] | None = None
    topic_configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NewPartitions:
    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


class ConfigResourceType:
    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True)
class ConfigResource:
    resource_type: int
    name: str
    configs: Mapping[str, str | None] | None = None


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: KafkaError | None
    # Eligible leader replicas (KIP-966): may lead when no ISR member can.
    elr: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]
    error: KafkaError | None


def _raise(results: Mapping[str, KafkaError | None]) -> None:
    errors = {k: e for k, e in results.items() if e is not None}
    if len(errors) == 1:
        raise next(iter(errors.values()))
    if errors:
        first = next(iter(errors.values()))
        raise type(first)("; ".join(f"{k}: {e}" for k, e in errors.items()))


class AdminClient(ConsumerGroupAdmin, TransactionAdmin, SecurityAdmin):
    """Administer topics, partitions, configs, consumer groups, transactions, ACLs and SCRAM
    credentials (:class:`~rillet.client.security_admin.SecurityAdmin`). Errors raise
    Kafka's error classes; with several failures the message names each resource."""

    DEFAULT_CONFIG: Mapping[str, Any] = {
        "bootstrap_servers": "localhost:9092",
        "client_id": "rillet-admin",
        "request_timeout_ms": 30000,
        **SECURITY_DEFAULTS,
    }

    def __init__(self, configs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = merge_configs(self.DEFAULT_CONFIG, configs, kwargs, "admin")
        self._servers = parse_bootstrap(self.config["bootstrap_servers"])
        self._tls = client_tls(self.config)
        self._sasl = client_sasl(self.config)
        self._channel: grpc.Channel | None = None
        self._timeout = self.config["request_timeout_ms"] / 1000

    def _stubs(
        self,
    ) -> tuple[admin_pb2_grpc.AdminServiceStub, metadata_pb2_grpc.MetadataServiceStub]:
        if self._channel is None:
            self._channel = open_channel(self._servers[0], self._tls, GRPC_OPTIONS, self._sasl)
        return (
            admin_pb2_grpc.AdminServiceStub(self._channel),
            metadata_pb2_grpc.MetadataServiceStub(self._channel),
        )

    def _call(self, name: str, request: Any) -> Any:
        """Send ``name`` to the current bootstrap server; one that cannot be reached or
        does not answer within ``request_timeout_ms`` (a paused broker) is dropped for the next
        one in ``bootstrap_servers`` (every broker answers admin requests), as Kafka's admin
        client retries a timed-out call on another node."""
        last: KafkaError | None = None
        for _ in range(len(self._servers)):
            admin, metadata = self._stubs()
            method = getattr(admin, name, None) or getattr(metadata, name)
            try:
                return method(request, timeout=self._timeout)
            except grpc.RpcError as e:
                last = unreachable(self._servers[0], e, self._tls)
                if e.code() not in _FAIL_OVER or len(self._servers) == 1:
                    raise last from None
                self._servers.append(self._servers.pop(0))
                self.close()
        if isinstance(last, SslAuthenticationError):
            raise last
        raise KafkaTimeoutError(
            f"no bootstrap server answered: {', '.join(self._servers)} (last: {last})"
        )

    def _leader_address(self, tp: TopicPartition) -> tuple[int, str]:
        """The partition's leader (node id, address); NOT_LEADER_OR_FOLLOWER while it has
        none, UNKNOWN_TOPIC_OR_PARTITION when it does not exist."""
        (topic,) = self.describe_topics([tp.topic])
        found = [p for p in topic.partitions if p.partition == tp.partition]
        if not found:
            raise UnknownTopicOrPartitionError(f"This server does not host {tp}.")
        leader = found[0].leader
        address = self._brokers().get(leader)
        if address is None:
            raise NotLeaderOrFollowerError(f"{tp} has no live leader (leader: {leader})")
        return leader, address

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topics ----------------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> dict[str, KafkaError | None]:
        request = admin_pb2.CreateTopicsRequest(
            timeout_ms=timeout_ms or 0, validate_only=validate_only
        )
        for t in new_topics:
            topic = request.topics.add(name=t.name, configs=dict(t.topic_configs))
            if t.replica_assignments:
                for p, brokers in sorted(t.replica_assignments.items()):
                    topic.assignments.add(partition=p, broker_ids=list(brokers))
            else:
                if t.num_partitions != -1:
                    topic.num_partitions = t.num_partitions
                if t.replication_factor != -1:
                    topic.replication_factor = t.replication_factor
        response = self._call("CreateTopics", request)
        results = {
            t.name: error_for_code(t.error_code)(t.error_message) if t.error_code else None
            for t in response.topics
        }
        _raise(results)
        return results

    def delete_topics(self, topics: Sequence[str], timeout_ms: int | None = None) -> None:
        response = self._call(
            "DeleteTopics",
            admin_pb2.DeleteTopicsRequest(topic_names=list(topics), timeout_ms=timeout_ms or 0),
        )
        _raise(
            {
                t.name: error_for_code(t.error_code)(t.error_message) if t.error_code else None
                for t in response.topics
            }
        )

    def create_partitions(
        self,
        topic_partitions: Mapping[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> None:
        request = admin_pb2.CreatePartitionsRequest(
            timeout_ms=timeout_ms or 0, validate_only=validate_only
        )
        for name, np in topic_partitions.items():
            t = request.topics.add(name=name, count=np.total_count)
            for brokers in np.new_assignments or ():
                t.assignments.add(broker_ids=list(brokers))
        response = self._call("CreatePartitions", request)
        _raise(
            {
                t.name: error_for_code(t.error_code)(t.error_message) if t.error_code else None
                for t in response.topics
            }
        )

    def list_topics(self) -> list[str]:
        return sorted(d.name for d in self.describe_topics() if d.error is None)

    def describe_topics(self, topics: Sequence[str] | None = None) -> list[TopicDescription]:
        response = self._call("Metadata", metadata_pb2.MetadataRequest(topics=list(topics or [])))
        out = []
        for t in response.topics:
            out.append(
                TopicDescription(
                    t.name,
                    uuid.UUID(bytes=t.topic_id) if len(t.topic_id) == 16 else None,
                    t.is_internal,
                    tuple(
                        PartitionInfo(
                            p.partition,
                            p.leader_id,
                            p.leader_epoch,
                            tuple(p.replica_nodes),
                            tuple(p.isr_nodes),
                            tuple(p.offline_replicas),
                            error_for_code(p.error_code)(p.error_message) if p.error_code else None,
                            tuple(p.eligible_leader_replicas),
                        )
                        for p in t.partitions
                    ),
                    error_for_code(t.error_code)(t.error_message) if t.error_code else None,
                )
            )
        return out

    def describe_cluster(self) -> dict[str, Any]:
        r = self._call("DescribeCluster", admin_pb2.DescribeClusterRequest())
        return {
            "cluster_id": r.cluster_id,
            "controller_id": r.controller_id,
            "brokers": [
                {
                    "node_id": b.node_id,
                    "host": b.host,
                    "port": b.port,
                    "rack": b.rack if b.HasField("rack") else None,
                    "is_fenced": b.is_fenced,
                }
                for b in r.brokers
            ],
        }

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Start moving each partition to its target replicas, or cancel its move (None)
        (Kafka's ``alterPartitionReassignments``, KIP-455). Returns each partition's outcome
        (None: started or cancelled); an error for the request as a whole is raised. The
        move itself goes on in the background: see :meth:`list_partition_reassignments`."""
        requests = [(tp.topic, tp.partition, target) for tp, target in reassignments.items()]
        answered = reassignment_results_from_pb(
            self._call(
                "AlterPartitionReassignments",
                reassignment_requests_to_pb(requests, timeout_ms or 0),
            )
        )
        if isinstance(answered, KafkaError):
            raise answered
        return {TopicPartition(t, p): err for t, p, err in answered}

    def list_partition_reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, OngoingReassignment]:
        """The reassignments in progress (of ``partitions`` only, when given): each
        partition's replicas now and the ones being added and removed."""
        wanted = None if partitions is None else [(tp.topic, tp.partition) for tp in partitions]
        ongoing = reassignments_from_pb(
            self._call("ListPartitionReassignments", list_reassignments_request_to_pb(wanted))
        )
        if isinstance(ongoing, KafkaError):
            raise ongoing
        return {TopicPartition(t, p): r for (t, p), r in ongoing.items()}

    def describe_log_dirs(
        self,
        broker_ids: Sequence[int] | None = None,
        topic_partitions: Sequence[TopicPartition] | None = None,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log directories and the replicas in them (Kafka's
        ``describeLogDirs``; DescribeLogDirs goes to every broker itself): broker id ->
        directory -> description. ``broker_ids`` None means every registered broker, and
        ids that name none are left out; ``topic_partitions`` None means every replica."""
        topics: dict[str, list[int]] | None = None
        if topic_partitions is not None:
            topics = {}
            for tp in topic_partitions:
                topics.setdefault(tp.topic, []).append(tp.partition)
        request = describe_log_dirs_request_to_pb(topics)
        out: dict[int, dict[str, LogDirDescription]] = {}
        for b in self.describe_cluster()["brokers"]:
            if broker_ids is not None and b["node_id"] not in broker_ids:
                continue
            address = f"{b['host']}:{b['port']}"
            with open_channel(address, self._tls, GRPC_OPTIONS, self._sasl) as channel:
                try:
                    response = admin_pb2_grpc.AdminServiceStub(channel).DescribeLogDirs(
                        request, timeout=self._timeout
                    )
                except grpc.RpcError as e:
                    raise refusal(e) or KafkaTimeoutError(
                        f"broker {b['node_id']} at {address} did not answer: {e.code()}"
                    ) from None
            dirs = log_dirs_from_pb(response)
            if isinstance(dirs, KafkaError):
                raise dirs
            out[b["node_id"]] = {d.path: d for d in dirs}
        return out

    def describe_metadata_quorum(self) -> QuorumInfo:
        """The metadata quorum as its leader sees it (Kafka's ``describeMetadataQuorum``):
        the leader, its epoch and high watermark, and each voter's and observer's progress."""
        info = describe_quorum_from_pb(
            self._call("DescribeQuorum", quorum_pb2.DescribeQuorumRequest())
        )
        if isinstance(info, KafkaError):
            raise info
        return info

    def perform_leader_election(
        self,
        election_type: int | str,
        topic_partitions: Sequence[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elect leaders (kafka-python's ``perform_leader_election``, Kafka's
        ``electLeaders``): ``election_type`` 0 or "PREFERRED" elects each partition's
        preferred replica, 1 or "UNCLEAN" gives a leaderless partition any live replica.
        ``topic_partitions`` None means every partition; then those that need no election
        are left out. Returns each partition's outcome (None: elected); an error for the
        request as a whole is raised."""
        if isinstance(election_type, str):
            try:
                kind = ElectionType[election_type.upper()]
            except KeyError:
                raise ValueError(f"unknown election type {election_type!r}") from None
        else:
            kind = ElectionType(election_type)
        partitions = (
            None
            if topic_partitions is None
            else [(tp.topic, tp.partition) for tp in topic_partitions]
        )
        results = elect_leaders_results_from_pb(
            self._call(
                "ElectLeaders", elect_leaders_request_to_pb(kind, partitions, timeout_ms or 0)
            )
        )
        if isinstance(results, KafkaError):
            raise results
        return {TopicPartition(t, p): err for (t, p), err in results.items()}

    # -- configs ---------------------------------------------------------------------------

    def describe_configs(
        self, config_resources: Sequence[ConfigResource]
    ) -> dict[tuple[int, str], dict[str, tuple[str | None, str]]]:
        """``{(type, name): {config: (value, source)}}``."""
        request = admin_pb2.DescribeConfigsRequest()
        for r in config_resources:
            request.resources.add(
                resource_type=r.resource_type,
                resource_name=r.name,
                configuration_keys=list(r.configs or {}),
            )
        response = self._call("DescribeConfigs", request)
        out: dict[tuple[int, str], dict[str, tuple[str | None, str]]] = {}
        errors: dict[str, KafkaError | None] = {}
        for res in response.results:
            if res.error_code:
                errors[res.resource_name] = error_for_code(res.error_code)(res.error_message)
                continue
            out[(res.resource_type, res.resource_name)] = {
                c.name: (
                    c.value if c.HasField("value") else None,
                    admin_pb2.ConfigSource.Name(c.source).removeprefix("CONFIG_SOURCE_"),
                )
                for c in res.configs
            }
        _raise(errors)
        return out

    def alter_configs(
        self, config_resources: Sequence[ConfigResource], validate_only: bool = False
    ) -> None:
        """Set each given config (a value of None deletes the override)."""
        request = admin_pb2.AlterConfigsRequest(validate_only=validate_only)
        for r in config_resources:
            res = request.resources.add(resource_type=r.resource_type, resource_name=r.name)
            for name, value in (r.configs or {}).items():
                c = res.configs.add(
                    name=name,
                    config_operation=admin_pb2.ALTER_CONFIG_OP_DELETE
                    if value is None
                    else admin_pb2.ALTER_CONFIG_OP_SET,
                )
                if value is not None:
                    c.value = value
        response = self._call("AlterConfigs", request)
        _raise(
            {
                r.resource_name: error_for_code(r.error_code)(r.error_message)
                if r.error_code
                else None
                for r in response.results
            }
        )
