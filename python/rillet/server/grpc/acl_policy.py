"""Kafka's ACL semantics for every gRPC method: the operations on resources a call needs,
checked as Kafka's ``KafkaApis`` (and ``ControllerApis``) check the same request, and what a
listing call may show. Pure policy, no gRPC and no I/O: the listener's interceptor
authenticates the caller, asks :func:`check_call` before the handler runs and
:func:`filter_response` after it.

Kafka answers each topic, group or partition with its own error, so it refuses one resource
and serves the others. Produce, Fetch, Metadata, OffsetCommit and TxnOffsetCommit do the same
here: their handlers ask
:func:`topic_refusals` (and :func:`metadata_plan`) and answer a refused topic with
TOPIC_AUTHORIZATION_FAILED in its place, so that a producer writing to several topics loses
only the batches it may not write. Other calls are answered as a whole, so a request touching
any resource the principal may not use is refused as a whole: Kafka's error name and message,
naming every refused resource of that kind, sorted (``TOPIC_AUTHORIZATION_FAILED: Not
authorized to access topics: [audit, orders]``). Checks run in Kafka's order (transactional
id, group, topics) and stop at the first kind refused, so no denial is logged that Kafka
would not log. Listing calls are filtered instead, quietly, as Kafka filters them: Metadata
for every topic, ListGroups (all of them to a principal allowed DESCRIBE on the cluster),
ListTransactions, OffsetFetch for every topic, DescribeTransactions' partitions,
CreateTopics' resulting configs (DESCRIBE_CONFIGS on the topic); ConsumerGroupDescribe
answers a group whose assignments name a topic the principal may not describe
TOPIC_AUTHORIZATION_FAILED (KAFKA-18813).

:data:`CHECKS` maps each method to its rule; those worth a word:

- **Produce**: WRITE on the transactional id if given (else the whole call is refused), and
  on each topic, per partition (Kafka 3.0 dropped Produce's IDEMPOTENT_WRITE check, KIP-679).
  **InitProducerId** without a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE on
  some topic (KIP-679).
- **Fetch**: READ on each topic, per partition; a follower's (``replica_id`` >= 0)
  CLUSTER_ACTION for the whole call.
- **Metadata**: DESCRIBE on each topic named, per topic; auto-creating topics the metadata
  lacks needs CREATE on the cluster or on each of them, else TOPIC_AUTHORIZATION_FAILED for
  them and they are not created (Kafka's answer under ``auto.create.topics.enable``).
- **DeleteTopics**: DELETE on each topic; one named by id also needs DESCRIBE, else the
  refusal names the id, not the topic (as Kafka hides it).
- **DescribeConfigs / AlterConfigs**: DESCRIBE_CONFIGS / ALTER_CONFIGS on a topic's or a
  group's resource, on the cluster for a broker, its loggers and client metrics.
- **Groups**: READ on the group to join, sync, heartbeat, leave and commit (and READ on the
  topics committed, per topic; TxnOffsetCommit first WRITE on the transactional id);
  DESCRIBE to find its coordinator, fetch its offsets, describe it; DELETE to delete it or
  its offsets.
  ConsumerGroupHeartbeat also needs DESCRIBE on each topic subscribed to by name.
- **AddPartitionsToTxn**: WRITE on the transactional id and each topic; CLUSTER_ACTION when
  it verifies or batches transactions (Kafka's broker-to-broker v4+, KIP-890).
- **Quorum and controller services** (node to node): CLUSTER_ACTION on the cluster, except
  DescribeQuorum, which Kafka authorizes as DESCRIBE on the cluster.

Topic ids and which topics exist come from ``CallSession.image``; without it, those checks
fail closed (ids are refused, every topic named counts as missing). A method not in
:data:`CHECKS` is refused (CLUSTER_AUTHORIZATION_FAILED); the health and reflection services
are always open, as they say nothing about the data.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from google.protobuf.message import Message

from rillet.broker.authorizer import BrokerAuthorizer
from rillet.broker.coordinator_lookup import COORDINATOR_GROUP, COORDINATOR_TRANSACTION
from rillet.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from rillet.metadata.image import MetadataImage
from rillet.protocol.gen.v1 import (
    admin_pb2,
    common_pb2,
    controller_pb2,
    fetch_pb2,
    group_pb2,
    metadata_pb2,
    produce_pb2,
    quorum_pb2,
    transaction_pb2,
)
from rillet.protocol.produce import ProduceWire
from rillet.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from rillet.security.principal import KafkaPrincipal

__all__ = [
    "CHECKS",
    "FILTERS",
    "OPEN_SERVICES",
    "CallSession",
    "check_call",
    "filter_response",
    "metadata_plan",
    "topic_refusals",
]

# Always served: they say nothing about topics, groups or the cluster's data.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

_READ, _WRITE, _CREATE = AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE
_DELETE, _ALTER, _DESCRIBE = AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE
_CLUSTER_ACTION = AclOperation.CLUSTER_ACTION
_TOPIC, _GROUP = ResourceType.TOPIC, ResourceType.GROUP
_TRANSACTIONAL_ID, _CLUSTER = ResourceType.TRANSACTIONAL_ID, ResourceType.CLUSTER

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class CallSession:
    """Who makes a call: the authenticated principal, the peer's IP, the broker's authorizer
    and, to name topics asked for by id or tell which topics exist, its metadata image
    (without one, those checks fail closed)."""

    principal: KafkaPrincipal
    host: str
    authorizer: BrokerAuthorizer
    image: Callable[[], MetadataImage] | None = None

    def allowed(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """Whether the principal may do ``operation`` on the resource (a denial is logged as
        Kafka's authorizer logs it, unless ``log_denied`` is false)."""
        return self.authorizer.authorize(
            self.principal, self.host, operation, resource_type, name, log_denied=log_denied
        )

    def allowed_on_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type (KIP-679)."""
        return self.authorizer.authorize_any(self.principal, self.host, operation, resource_type)


Check = Callable[[Any, CallSession], str | None]
Filter = Callable[[Any, Any, CallSession], Any]


# -- refusals ------------------------------------------------------------------------------

# Kafka's error for refused resources of a type, and what its message calls one or several.
_REFUSED: Mapping[ResourceType, tuple[type[KafkaError], str, str]] = MappingProxyType(
    {
        _TOPIC: (TopicAuthorizationFailedError, "topics: [{}]", "topics: [{}]"),
        _GROUP: (GroupAuthorizationFailedError, "group: {}", "groups: [{}]"),
        _TRANSACTIONAL_ID: (
            TransactionalIdAuthorizationFailedError,
            "transactional id: {}",
            "transactional ids: [{}]",
        ),
    }
)


def _refusal(error: KafkaError) -> str:
    """What the client reads from the call's status details: Kafka's name and message."""
    return f"{error.name}: {error.message}"


def _naming(resource_type: ResourceType, names: list[str]) -> str:
    """The refusal of the (sorted) resources ``names`` of a type."""
    error, one, several = _REFUSED[resource_type]
    listed = (one if len(names) == 1 else several).format(", ".join(names))
    return _refusal(error(f"Not authorized to access {listed}"))


def _denied(
    s: CallSession, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> list[str]:
    """The resources (each checked once, sorted) the principal may not do ``operation`` on."""
    return sorted(n for n in dict.fromkeys(names) if not s.allowed(operation, resource_type, n))


def _refused(
    s: CallSession, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> str | None:
    """The refusal naming every resource of ``names`` the principal may not do
    ``operation`` on, or None."""
    denied = _denied(s, operation, resource_type, names)
    return _naming(resource_type, denied) if denied else None


def _cluster_denied(s: CallSession, operation: AclOperation, message: str = "") -> str | None:
    if s.allowed(operation, _CLUSTER, CLUSTER_NAME):
        return None
    return _refusal(
        ClusterAuthorizationFailedError(
            message or f"Not authorized to perform {operation.name} on the cluster"
        )
    )


# -- checks: records -----------------------------------------------------------------------


def _produce(request: produce_pb2.ProduceRequest | ProduceWire, s: CallSession) -> str | None:
    """The transactional id; each topic is the handler's (:func:`topic_refusals`)."""
    if isinstance(request, tuple) and not request[1].structured:
        transactional_id = request[1].transactional_id
    else:
        pb = (
            produce_pb2.ProduceRequest.FromString(request[0])
            if isinstance(request, tuple)
            else request
        )
        transactional_id = pb.transactional_id if pb.HasField("transactional_id") else None
    if transactional_id is not None and not s.allowed(_WRITE, _TRANSACTIONAL_ID, transactional_id):
        return _refusal(
            TransactionalIdAuthorizationFailedError(
                f"Not authorized to use transactional id {transactional_id}"
            )
        )
    return None


def _fetch(request: fetch_pb2.FetchRequest, s: CallSession) -> str | None:
    """A follower's fetch; a consumer's topics are the handler's (:func:`topic_refusals`)."""
    if request.HasField("replica_id") and request.replica_id >= 0:
        return _cluster_denied(s, _CLUSTER_ACTION, "Not authorized to fetch as a replica")
    return None


def _metadata(request: metadata_pb2.MetadataRequest, s: CallSession) -> str | None:
    """Nothing for the whole call: the handler answers each topic (:func:`metadata_plan`),
    and a request for every topic is filtered (:func:`filter_response`)."""
    return None


def topic_refusals(
    session: CallSession | None, operation: AclOperation, topics: Iterable[str]
) -> dict[str, TopicAuthorizationFailedError]:
    """The topics of ``topics`` the session's principal may not ``operation``, each with the
    error its partitions are answered with (none without a session: no authorizer)."""
    if session is None:
        return {}
    return {
        name: TopicAuthorizationFailedError(f"Not authorized to access topics: [{name}]")
        for name in dict.fromkeys(topics)
        if not session.allowed(operation, _TOPIC, name)
    }


def metadata_plan(
    session: CallSession | None, topics: Iterable[str], auto_create: bool
) -> tuple[dict[str, TopicAuthorizationFailedError], bool]:
    """For a Metadata request naming ``topics``: the topics answered
    TOPIC_AUTHORIZATION_FAILED instead of being looked up (no DESCRIBE, or missing and to be
    auto-created without CREATE on the cluster or the topic), and whether the rest may still
    be auto-created."""
    refused = topic_refusals(session, _DESCRIBE, topics)
    if session is None or not auto_create:
        return refused, auto_create
    if session.allowed(_CREATE, _CLUSTER, CLUSTER_NAME, log_denied=False):
        return refused, True
    image = session.image() if session.image is not None else None
    missing = [
        n
        for n in dict.fromkeys(topics)
        if n not in refused and (image is None or image.topic(n) is None)
    ]
    refused.update(topic_refusals(session, _CREATE, missing))
    return refused, True


# -- checks: admin -------------------------------------------------------------------------


def _on_cluster(operation: AclOperation) -> Check:
    def check(_request: Any, s: CallSession) -> str | None:
        return _cluster_denied(s, operation)

    return check


def _on(
    operation: AclOperation, resource_type: ResourceType, names: Callable[[Any], Iterable[str]]
) -> Check:
    """``operation`` on each resource of the type the request names."""

    def check(request: Any, s: CallSession) -> str | None:
        return _refused(s, operation, resource_type, names(request))

    return check


def _create_topics(request: admin_pb2.CreateTopicsRequest, s: CallSession) -> str | None:
    if s.allowed(_CREATE, _CLUSTER, CLUSTER_NAME, log_denied=False):
        return None
    return _refused(s, _CREATE, _TOPIC, (t.name for t in request.topics))


def _delete_topics(request: admin_pb2.DeleteTopicsRequest, s: CallSession) -> str | None:
    """DELETE on each topic. A topic named by an id the principal may not describe is named
    by its id in the refusal, as Kafka hides its name; an id the metadata does not have is
    left to the handler (UNKNOWN_TOPIC_ID)."""
    names = list(request.topic_names)
    hidden: list[str] = []
    image = s.image() if s.image is not None and request.topic_ids else None
    for raw in request.topic_ids:
        topic_id = uuid.UUID(bytes=raw) if len(raw) == 16 else None
        topic = image.topics_by_id.get(topic_id) if image and topic_id else None
        if image is None:
            hidden.append(str(topic_id or raw.hex()))  # fail closed
        elif topic is not None and s.allowed(_DESCRIBE, _TOPIC, topic.name):
            names.append(topic.name)
        elif topic is not None:
            hidden.append(str(topic_id))
    denied = sorted({*hidden, *_denied(s, _DELETE, _TOPIC, names)})
    return _naming(_TOPIC, denied) if denied else None


# A config resource's ACL resource type: a topic's and a group's are their own, the others'
# (a broker, its loggers, client metrics) the cluster's.
_CONFIG_RESOURCES = {
    common_pb2.CONFIG_RESOURCE_TYPE_TOPIC: _TOPIC,
    common_pb2.CONFIG_RESOURCE_TYPE_GROUP: _GROUP,
}


def _configs(operation: AclOperation) -> Check:
    """DescribeConfigs / AlterConfigs: ``operation`` on each resource."""

    def check(
        request: admin_pb2.DescribeConfigsRequest | admin_pb2.AlterConfigsRequest, s: CallSession
    ) -> str | None:
        by_type: dict[ResourceType, list[str]] = {}
        for r in request.resources:
            kind = _CONFIG_RESOURCES.get(r.resource_type, _CLUSTER)
            by_type.setdefault(kind, []).append(r.resource_name)
        return (
            (_cluster_denied(s, operation) if _CLUSTER in by_type else None)
            or _refused(s, operation, _GROUP, by_type.get(_GROUP, ()))
            or _refused(s, operation, _TOPIC, by_type.get(_TOPIC, ()))
        )

    return check


# -- checks: groups ------------------------------------------------------------------------


def _find_coordinator(request: group_pb2.FindCoordinatorRequest, s: CallSession) -> str | None:
    keys = request.coordinator_keys
    if request.key_type == COORDINATOR_GROUP:
        return _refused(s, _DESCRIBE, _GROUP, keys)
    if request.key_type == COORDINATOR_TRANSACTION:
        return _refused(s, _DESCRIBE, _TRANSACTIONAL_ID, keys)
    # A key type with no rule here names no resource that could be checked: fail closed.
    return _cluster_denied(s, _CLUSTER_ACTION)


def _consumer_group_heartbeat(
    request: group_pb2.ConsumerGroupHeartbeatRequest, s: CallSession
) -> str | None:
    """As Kafka 4.0: READ on the group, then DESCRIBE on each topic subscribed to by name
    (a regex subscription is resolved by the coordinator)."""
    denied = _refused(s, _READ, _GROUP, [request.group_id])
    if denied is not None or not request.HasField("subscribed_topic_names"):
        return denied
    hidden = _denied(s, _DESCRIBE, _TOPIC, request.subscribed_topic_names.names)
    if not hidden:
        return None
    message = "The following topics are not authorized: " + ", ".join(hidden)
    return _refusal(TopicAuthorizationFailedError(message))


def _offset_commit(
    request: group_pb2.OffsetCommitRequest | group_pb2.TxnOffsetCommitRequest, s: CallSession
) -> str | None:
    """The group; each topic is the handler's (:func:`topic_refusals`)."""
    return _refused(s, _READ, _GROUP, [request.group_id])


def _txn_offset_commit(request: group_pb2.TxnOffsetCommitRequest, s: CallSession) -> str | None:
    return _refused(s, _WRITE, _TRANSACTIONAL_ID, [request.transactional_id]) or _offset_commit(
        request, s
    )


def _offset_fetch(request: group_pb2.OffsetFetchRequest, s: CallSession) -> str | None:
    groups = request.groups
    return _refused(s, _DESCRIBE, _GROUP, (g.group_id for g in groups)) or _refused(
        s,
        _DESCRIBE,
        _TOPIC,
        (t.name for g in groups if g.HasField("topics") for t in g.topics.topics),
    )


def _offset_delete(request: group_pb2.OffsetDeleteRequest, s: CallSession) -> str | None:
    return _refused(s, _DELETE, _GROUP, [request.group_id]) or _refused(
        s, _READ, _TOPIC, (t.name for t in request.topics)
    )


# -- checks: transactions ------------------------------------------------------------------


def _init_producer_id(request: transaction_pb2.InitProducerIdRequest, s: CallSession) -> str | None:
    if request.HasField("transactional_id"):
        return _refused(s, _WRITE, _TRANSACTIONAL_ID, [request.transactional_id])
    # Kafka does not log the cluster's denial here.
    if s.allowed(
        AclOperation.IDEMPOTENT_WRITE, _CLUSTER, CLUSTER_NAME, log_denied=False
    ) or s.allowed_on_any(_WRITE, _TOPIC):
        return None
    return _refusal(
        ClusterAuthorizationFailedError(
            "Not authorized to write idempotently: neither IDEMPOTENT_WRITE on the cluster "
            "nor WRITE on any topic"
        )
    )


def _add_partitions_to_txn(
    request: transaction_pb2.AddPartitionsToTxnRequest, s: CallSession
) -> str | None:
    transactions = request.transactions
    if len(transactions) > 1 or any(t.verify_only for t in transactions):
        # A partition leader verifying (or batching) for producers: Kafka's v4+.
        return _cluster_denied(s, _CLUSTER_ACTION)
    return _refused(
        s, _WRITE, _TRANSACTIONAL_ID, (t.transactional_id for t in transactions)
    ) or _refused(s, _WRITE, _TOPIC, (topic.name for t in transactions for topic in t.topics))


def _add_offsets_to_txn(
    request: transaction_pb2.AddOffsetsToTxnRequest, s: CallSession
) -> str | None:
    return _refused(s, _WRITE, _TRANSACTIONAL_ID, [request.transactional_id]) or _refused(
        s, _READ, _GROUP, [request.group_id]
    )


def _filtered_only(_request: Any, _s: CallSession) -> str | None:
    """A listing call: anyone may call it; what it shows is filtered."""
    return None


def _topic_names(request: Any) -> Iterable[str]:
    return (t.name for t in request.topics)


# -- the table -----------------------------------------------------------------------------

_V1 = "/rillet.v1."
# Node to node (Kafka's ControllerApis): every method of the quorum's and the controller's
# services needs CLUSTER_ACTION, DescribeQuorum aside (below).
_NODE_TO_NODE = [
    f"/{service.full_name}/{method.name}"
    for module in (quorum_pb2, controller_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
    for method in service.methods
]

# What each method needs, by its full gRPC name.
CHECKS: Mapping[str, Check] = MappingProxyType(
    {
        f"{_V1}ProduceService/Produce": _produce,
        f"{_V1}FetchService/Fetch": _fetch,
        f"{_V1}FetchService/ListOffsets": _on(_DESCRIBE, _TOPIC, _topic_names),
        f"{_V1}MetadataService/Metadata": _metadata,
        f"{_V1}AdminService/CreateTopics": _create_topics,
        f"{_V1}AdminService/DeleteTopics": _delete_topics,
        f"{_V1}AdminService/CreatePartitions": _on(_ALTER, _TOPIC, _topic_names),
        f"{_V1}AdminService/DescribeCluster": _on_cluster(_DESCRIBE),
        f"{_V1}AdminService/DescribeConfigs": _configs(AclOperation.DESCRIBE_CONFIGS),
        f"{_V1}AdminService/AlterConfigs": _configs(AclOperation.ALTER_CONFIGS),
        f"{_V1}AdminService/DescribeQuorum": _on_cluster(_DESCRIBE),
        f"{_V1}AdminService/ElectLeaders": _on_cluster(_ALTER),
        f"{_V1}AdminService/DescribeLogDirs": _on_cluster(_DESCRIBE),
        f"{_V1}AdminService/AlterPartitionReassignments": _on_cluster(_ALTER),
        f"{_V1}AdminService/ListPartitionReassignments": _on_cluster(_DESCRIBE),
        f"{_V1}AdminService/CreateAcls": _on_cluster(_ALTER),
        f"{_V1}AdminService/DescribeAcls": _on_cluster(_DESCRIBE),
        f"{_V1}AdminService/DeleteAcls": _on_cluster(_ALTER),
        f"{_V1}AdminService/DescribeUserScramCredentials": _on_cluster(_DESCRIBE),
        f"{_V1}AdminService/AlterUserScramCredentials": _on_cluster(_ALTER),
        f"{_V1}AdminService/DescribeClientQuotas": _on_cluster(AclOperation.DESCRIBE_CONFIGS),
        f"{_V1}AdminService/AlterClientQuotas": _on_cluster(AclOperation.ALTER_CONFIGS),
        f"{_V1}GroupService/FindCoordinator": _find_coordinator,
        f"{_V1}GroupService/ConsumerGroupHeartbeat": _consumer_group_heartbeat,
        **{
            f"{_V1}GroupService/{m}": _on(_READ, _GROUP, lambda r: [r.group_id])
            for m in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup")
        },
        f"{_V1}GroupService/OffsetCommit": _offset_commit,
        f"{_V1}GroupService/TxnOffsetCommit": _txn_offset_commit,
        f"{_V1}GroupService/OffsetFetch": _offset_fetch,
        f"{_V1}GroupService/OffsetDelete": _offset_delete,
        f"{_V1}GroupService/ListGroups": _filtered_only,
        f"{_V1}GroupService/DescribeGroups": _on(_DESCRIBE, _GROUP, lambda r: r.groups),
        f"{_V1}GroupService/ConsumerGroupDescribe": _on(_DESCRIBE, _GROUP, lambda r: r.group_ids),
        f"{_V1}GroupService/DeleteGroups": _on(_DELETE, _GROUP, lambda r: r.groups_names),
        f"{_V1}TransactionService/InitProducerId": _init_producer_id,
        f"{_V1}TransactionService/AddPartitionsToTxn": _add_partitions_to_txn,
        f"{_V1}TransactionService/AddOffsetsToTxn": _add_offsets_to_txn,
        f"{_V1}TransactionService/EndTxn": _on(
            _WRITE, _TRANSACTIONAL_ID, lambda r: [r.transactional_id]
        ),
        f"{_V1}TransactionService/WriteTxnMarkers": _on_cluster(_CLUSTER_ACTION),
        f"{_V1}TransactionService/DescribeTransactions": _on(
            _DESCRIBE, _TRANSACTIONAL_ID, lambda r: r.transactional_ids
        ),
        f"{_V1}TransactionService/ListTransactions": _filtered_only,
        f"{_V1}TransactionService/DescribeProducers": _on(_READ, _TOPIC, _topic_names),
        **{m: _on_cluster(_CLUSTER_ACTION) for m in _NODE_TO_NODE},
        f"{_V1}QuorumService/DescribeQuorum": _on_cluster(_DESCRIBE),
        f"{_V1}ControllerService/DescribeQuorum": _on_cluster(_DESCRIBE),
    }
)


def check_call(method: str, request: Any, session: CallSession) -> str | None:
    """None when the call may be served; else the refusal: Kafka's error name, a colon, and
    Kafka's message, e.g. ``TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics:
    [orders]``. ``request`` is what the method's request deserializer produced."""
    if method.startswith(OPEN_SERVICES):
        return None
    check = CHECKS.get(method)
    if check is None:
        message = f"Not authorized to call {method}: no ACL rule covers it"
        return _refusal(ClusterAuthorizationFailedError(message))
    return check(request, session)


# -- filters -------------------------------------------------------------------------------


def _copy(message: M) -> M:
    out = type(message)()
    out.CopyFrom(message)
    return out


def _keep(items: Any, keep: Callable[[Any], bool]) -> None:
    """Leave in the repeated message field ``items`` only the elements ``keep`` accepts."""
    kept = [x for x in items if keep(x)]
    if len(kept) != len(items):
        del items[:]
        items.extend(kept)


def _visible(
    s: CallSession, operation: AclOperation, resource_type: ResourceType
) -> Callable[[str], bool]:
    """Whether the principal may see a resource of the type: a hidden one logs no denial."""
    return lambda name: s.allowed(operation, resource_type, name, log_denied=False)


def _filter_metadata(
    request: metadata_pb2.MetadataRequest, response: metadata_pb2.MetadataResponse, s: CallSession
) -> metadata_pb2.MetadataResponse:
    if request.topics:
        return response  # each topic named was checked
    out, visible = _copy(response), _visible(s, _DESCRIBE, _TOPIC)
    _keep(out.topics, lambda t: visible(t.name))
    return out


def _filter_create_topics(
    request: admin_pb2.CreateTopicsRequest, response: admin_pb2.CreateTopicsResponse, s: CallSession
) -> admin_pb2.CreateTopicsResponse:
    out, visible = _copy(response), _visible(s, AclOperation.DESCRIBE_CONFIGS, _TOPIC)
    for t in out.topics:
        if t.configs and not visible(t.name):
            del t.configs[:]
    return out


def _filter_list_groups(
    request: group_pb2.ListGroupsRequest, response: group_pb2.ListGroupsResponse, s: CallSession
) -> group_pb2.ListGroupsResponse:
    if s.allowed(_DESCRIBE, _CLUSTER, CLUSTER_NAME, log_denied=False):
        return response
    out, visible = _copy(response), _visible(s, _DESCRIBE, _GROUP)
    _keep(out.groups, lambda g: visible(g.group_id))
    return out


def _filter_offset_fetch(
    request: group_pb2.OffsetFetchRequest, response: group_pb2.OffsetFetchResponse, s: CallSession
) -> group_pb2.OffsetFetchResponse:
    every_topic = {g.group_id for g in request.groups if not g.HasField("topics")}
    if not every_topic:
        return response  # each topic named was checked
    out, visible = _copy(response), _visible(s, _DESCRIBE, _TOPIC)
    for g in out.groups:
        if g.group_id in every_topic:
            _keep(g.topics, lambda t: visible(t.name))
    return out


def _filter_consumer_group_describe(
    request: group_pb2.ConsumerGroupDescribeRequest,
    response: group_pb2.ConsumerGroupDescribeResponse,
    s: CallSession,
) -> group_pb2.ConsumerGroupDescribeResponse:
    """A group whose members' assignments name a topic the principal may not describe is
    answered TOPIC_AUTHORIZATION_FAILED, described no further (Kafka 4.0, KAFKA-18813)."""
    out = _copy(response)
    for g in out.groups:
        assigned = (t for m in g.members for t in (*m.assignment, *m.target_assignment))
        topics = sorted({t.topic_name for t in assigned if t.topic_name})
        if g.error_code or all(s.allowed(_DESCRIBE, _TOPIC, t) for t in topics):
            continue
        group_id = g.group_id
        g.Clear()
        g.group_id = group_id
        g.error_code = common_pb2.TOPIC_AUTHORIZATION_FAILED
        g.error_message = (
            "The group has described topic(s) that the client is not authorized to describe."
        )
    return out


def _filter_describe_transactions(
    request: transaction_pb2.DescribeTransactionsRequest,
    response: transaction_pb2.DescribeTransactionsResponse,
    s: CallSession,
) -> transaction_pb2.DescribeTransactionsResponse:
    out, visible = _copy(response), _visible(s, _DESCRIBE, _TOPIC)
    for state in out.transaction_states:
        _keep(state.topics, lambda t: visible(t.name))
    return out


def _filter_list_transactions(
    request: transaction_pb2.ListTransactionsRequest,
    response: transaction_pb2.ListTransactionsResponse,
    s: CallSession,
) -> transaction_pb2.ListTransactionsResponse:
    out, visible = _copy(response), _visible(s, _DESCRIBE, _TRANSACTIONAL_ID)
    _keep(out.transaction_states, lambda t: visible(t.transactional_id))
    return out


# What each listing method's response may show the principal.
FILTERS: Mapping[str, Filter] = MappingProxyType(
    {
        f"{_V1}MetadataService/Metadata": _filter_metadata,
        f"{_V1}AdminService/CreateTopics": _filter_create_topics,
        f"{_V1}GroupService/ListGroups": _filter_list_groups,
        f"{_V1}GroupService/OffsetFetch": _filter_offset_fetch,
        f"{_V1}GroupService/ConsumerGroupDescribe": _filter_consumer_group_describe,
        f"{_V1}TransactionService/DescribeTransactions": _filter_describe_transactions,
        f"{_V1}TransactionService/ListTransactions": _filter_list_transactions,
    }
)


def filter_response(method: str, request: Any, response: Any, session: CallSession) -> Any:
    """The response with what the principal may not see removed (for listing calls), else
    the response unchanged. A response already serialized (Fetch's bytes) is left alone."""
    f = FILTERS.get(method)
    if f is None or not isinstance(response, Message):
        return response
    return f(request, response, session)
