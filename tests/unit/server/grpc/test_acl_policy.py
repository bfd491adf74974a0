"""The gRPC ACL policy (rillet.server.grpc.acl_policy) over a real BrokerAuthorizer and a
small MetadataImage: one permitted and one refused principal per method family, prefixed
patterns, DENY precedence, super users, listing filters, and a table that covers every RPC."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from google.protobuf.message import Message

from rillet.broker.authorizer import BrokerAuthorizer
from rillet.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    error_for_name,
)
from rillet.metadata.image import MetadataImage, TopicImage
from rillet.metadata.records import AccessControlEntryRecord
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
from rillet.protocol.produce import read_produce_request
from rillet.security.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from rillet.security.principal import KafkaPrincipal
from rillet.server.grpc.acl_policy import (
    CHECKS,
    FILTERS,
    CallSession,
    check_call,
    filter_response,
    metadata_plan,
    topic_refusals,
)

Op, Res = AclOperation, ResourceType
WRITE = AclOperation.WRITE
V1 = "/rillet.v1."

ORDERS_ID = uuid.UUID(int=1)
SECRET_ID = uuid.UUID(int=2)
UNKNOWN_ID = uuid.UUID(int=99)


def acl(
    principal: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    pattern: PatternType = PatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        uuid.uuid4(), resource_type, name, pattern, principal, "*", operation, permission
    )


ACLS = [
    # alice: everything on the orders* topics but one, a group and a transactional id.
    acl("User:alice", Op.ALL, Res.TOPIC, "orders", PatternType.PREFIXED),
    acl("User:alice", Op.WRITE, Res.TOPIC, "orders-secret", permission=AclPermissionType.DENY),
    acl("User:alice", Op.READ, Res.GROUP, "g1"),
    acl("User:alice", Op.WRITE, Res.TRANSACTIONAL_ID, "tx1"),
    # bob: may only describe the orders topic and the g1 group.
    acl("User:bob", Op.DESCRIBE, Res.TOPIC, "orders"),
    acl("User:bob", Op.DESCRIBE, Res.GROUP, "g1"),
    acl("User:bob", Op.DESCRIBE, Res.TRANSACTIONAL_ID, "tx1"),
    # carol: may describe new-* topics, and write idempotently.
    acl("User:carol", Op.DESCRIBE, Res.TOPIC, "new-", PatternType.PREFIXED),
    acl("User:carol", Op.IDEMPOTENT_WRITE, Res.CLUSTER, "kafka-cluster"),
    # ops: describes and alters the cluster; broker: the inter-node principal.
    acl("User:ops", Op.DESCRIBE, Res.CLUSTER, "kafka-cluster"),
    acl("User:ops", Op.ALTER, Res.CLUSTER, "kafka-cluster"),
    acl("User:ops", Op.ALTER_CONFIGS, Res.CLUSTER, "kafka-cluster"),
    acl("User:broker", Op.CLUSTER_ACTION, Res.CLUSTER, "kafka-cluster"),
]


def image() -> MetadataImage:
    topics = {
        ORDERS_ID: TopicImage("orders", ORDERS_ID, {}),
        SECRET_ID: TopicImage("orders-secret", SECRET_ID, {}),
    }
    return MetadataImage(
        topics_by_id=MappingProxyType(topics),
        topic_ids=MappingProxyType({t.name: i for i, t in topics.items()}),
        acls=MappingProxyType({a.id: a for a in ACLS}),
    )


AUTHORIZER = BrokerAuthorizer(image, ["User:admin"], allow_everyone_if_no_acl_found=False)


def session(name: str, with_image: bool = True) -> CallSession:
    return CallSession(
        KafkaPrincipal("User", name), "10.0.0.1", AUTHORIZER, image if with_image else None
    )


def check(name: str, method: str, request: Any, with_image: bool = True) -> str | None:
    return check_call(V1 + method, request, session(name, with_image))


def refused(refusal: str | None, error: type[KafkaError], message: str) -> None:
    """``refusal`` is ``error`` with ``message``, and reads back as that class."""
    assert refusal == f"{error.name}: {message}"
    name, _, _ = refusal.partition(": ")
    assert error_for_name(name) is error


def topics_refused(refusal: str | None, *names: str) -> None:
    refused(
        refusal,
        TopicAuthorizationFailedError,
        f"Not authorized to access topics: [{', '.join(names)}]",
    )


def cluster_refused(refusal: str | None, operation: AclOperation) -> None:
    refused(
        refusal,
        ClusterAuthorizationFailedError,
        f"Not authorized to perform {operation.name} on the cluster",
    )


# -- the table covers every RPC ------------------------------------------------------------


def test_every_rpc_of_the_broker_and_controller_services_has_a_rule() -> None:
    modules = (
        produce_pb2,
        fetch_pb2,
        metadata_pb2,
        admin_pb2,
        group_pb2,
        transaction_pb2,
        quorum_pb2,
        controller_pb2,
    )
    rpcs = {
        f"/{service.full_name}/{method.name}"
        for module in modules
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert rpcs - set(CHECKS) == set()
    assert set(CHECKS) - rpcs == set()  # no rule for an RPC that does not exist
    assert set(FILTERS) <= rpcs


def test_unknown_methods_are_refused_and_health_and_reflection_are_open() -> None:
    refusal = check_call("/rillet.v1.NewService/Anything", None, session("admin"))
    refused(
        refusal,
        ClusterAuthorizationFailedError,
        "Not authorized to call /rillet.v1.NewService/Anything: no ACL rule covers it",
    )
    assert check_call("/grpc.health.v1.Health/Check", None, session("nobody")) is None
    reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    assert check_call(reflection, None, session("nobody")) is None


# -- produce, fetch, metadata --------------------------------------------------------------


def produce_request(
    *topics: str, transactional_id: str | None = None
) -> produce_pb2.ProduceRequest:
    return produce_pb2.ProduceRequest(
        acks=-1,
        transactional_id=transactional_id,
        topics=[
            produce_pb2.ProduceRequest.Topic(
                name=t,
                partitions=[produce_pb2.ProduceRequest.Partition(partition=0, record_batches=b"x")],
            )
            for t in topics
        ],
    )


def structured_request(*topics: str) -> produce_pb2.ProduceRequest:
    record = common_pb2.Record(value=b"v")
    partition = produce_pb2.ProduceRequest.Partition(partition=0, records=[record])
    return produce_pb2.ProduceRequest(
        acks=1,
        topics=[produce_pb2.ProduceRequest.Topic(name=t, partitions=[partition]) for t in topics],
    )


def refused_topics(name: str, operation: AclOperation, *topics: str) -> list[str]:
    """The topics :func:`topic_refusals` answers TOPIC_AUTHORIZATION_FAILED, each error's
    message checked."""
    refusals = topic_refusals(session(name), operation, topics)
    for topic, error in refusals.items():
        assert error.message == f"Not authorized to access topics: [{topic}]"
    return sorted(refusals)


@pytest.mark.parametrize("build", [produce_request, structured_request])
def test_produce_checks_write_per_topic_in_the_handler(
    build: Callable[..., produce_pb2.ProduceRequest],
) -> None:
    """The call itself is served (its topics are answered one by one)."""
    wire = read_produce_request(build("zeta", "orders", "payments", "zeta").SerializeToString())
    assert check("alice", "ProduceService/Produce", wire) is None
    assert refused_topics("alice", WRITE, "zeta", "orders", "payments", "zeta") == [
        "payments",
        "zeta",
    ]
    # bob may describe orders (no WRITE); DENY wins over alice's prefixed ALLOW ALL.
    assert refused_topics("bob", WRITE, "orders", "orders-2") == ["orders", "orders-2"]
    assert refused_topics("alice", WRITE, "orders-secret") == ["orders-secret"]
    assert topic_refusals(None, WRITE, ["anything"]) == {}  # no authorizer


def test_produce_transactional_id_is_checked_first() -> None:
    ok = produce_request("orders", transactional_id="tx1")
    assert check("alice", "ProduceService/Produce", ok) is None
    assert (
        check("alice", "ProduceService/Produce", read_produce_request(ok.SerializeToString()))
        is None
    )
    wire = read_produce_request(
        produce_request("payments", transactional_id="tx2").SerializeToString()
    )
    refused(
        check("alice", "ProduceService/Produce", wire),
        TransactionalIdAuthorizationFailedError,
        "Not authorized to use transactional id tx2",
    )


def test_fetch_reads_per_topic_and_a_follower_needs_cluster_action() -> None:
    def fetch(*topics: str, replica_id: int | None = None) -> fetch_pb2.FetchRequest:
        return fetch_pb2.FetchRequest(
            replica_id=replica_id, topics=[fetch_pb2.FetchRequest.Topic(name=t) for t in topics]
        )

    assert check("bob", "FetchService/Fetch", fetch("orders", replica_id=-1)) is None
    assert refused_topics("bob", AclOperation.READ, "orders") == ["orders"]
    assert refused_topics("alice", AclOperation.READ, "orders") == []
    follower = fetch("orders", replica_id=1)
    refused(
        check("alice", "FetchService/Fetch", follower),
        ClusterAuthorizationFailedError,
        "Not authorized to fetch as a replica",
    )
    assert check("broker", "FetchService/Fetch", follower) is None
    assert (
        filter_response(V1 + "FetchService/Fetch", follower, b"\x00wire", session("x"))
        == b"\x00wire"
    )


def test_list_offsets_needs_describe() -> None:
    request = fetch_pb2.ListOffsetsRequest(
        topics=[fetch_pb2.ListOffsetsRequest.Topic(name="orders")]
    )
    assert check("bob", "FetchService/ListOffsets", request) is None
    topics_refused(check("carol", "FetchService/ListOffsets", request), "orders")


def test_metadata_named_topics_need_describe_and_auto_creation_create() -> None:
    method = "MetadataService/Metadata"
    assert check("bob", method, metadata_pb2.MetadataRequest(topics=["payments"])) is None

    def plan(name: str, topics: list[str], auto: bool, with_image: bool = True) -> Any:
        refusals, auto_create = metadata_plan(session(name, with_image), topics, auto)
        return sorted(refusals), auto_create

    assert plan("bob", ["orders", "payments"], False) == (["payments"], False)
    assert plan("bob", ["orders"], True) == ([], True)  # it exists: nothing to create
    # carol may describe new-* but not create them: refused only when asking to create.
    assert plan("carol", ["new-a"], True) == (["new-a"], True)
    assert plan("carol", ["new-a"], False) == ([], False)
    # alice may create orders-*; without an image every topic counts as missing.
    assert plan("alice", ["orders-new"], True) == ([], True)
    assert plan("bob", ["orders"], True, with_image=False) == (["orders"], True)
    assert metadata_plan(None, ["x"], True) == ({}, True)  # no authorizer


def test_metadata_for_every_topic_lists_only_describable_ones_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = metadata_pb2.MetadataRequest()
    assert check("bob", "MetadataService/Metadata", request) is None
    response = metadata_pb2.MetadataResponse(
        cluster_id="c",
        topics=[
            metadata_pb2.MetadataResponse.Topic(name=n) for n in ("orders", "orders-secret", "x")
        ],
    )
    with caplog.at_level(logging.INFO, logger="rillet.authorizer"):
        shown = filter_response(V1 + "MetadataService/Metadata", request, response, session("bob"))
    assert [t.name for t in shown.topics] == ["orders"]
    assert shown.cluster_id == "c"
    assert len(response.topics) == 3  # the handler's response is not changed
    assert caplog.records == []
    everything = filter_response(
        V1 + "MetadataService/Metadata", request, response, session("admin")
    )
    assert len(everything.topics) == 3


# -- admin ---------------------------------------------------------------------------------


def test_create_topics_needs_create_on_the_cluster_or_each_topic() -> None:
    request = admin_pb2.CreateTopicsRequest(
        topics=[admin_pb2.CreateTopicsRequest.Topic(name=n) for n in ("orders-1", "payments")]
    )
    topics_refused(check("alice", "AdminService/CreateTopics", request), "payments")
    assert check("admin", "AdminService/CreateTopics", request) is None
    # The resulting configs need DESCRIBE_CONFIGS on the topic.
    response = admin_pb2.CreateTopicsResponse(
        topics=[
            admin_pb2.CreateTopicsResponse.Topic(name=n, configs=[admin_pb2.ConfigEntry(name="k")])
            for n in ("orders-1", "payments")
        ]
    )
    shown = filter_response(V1 + "AdminService/CreateTopics", request, response, session("alice"))
    assert [len(t.configs) for t in shown.topics] == [1, 0]


def test_delete_topics_by_name_and_id() -> None:
    def delete(*names: str, ids: tuple[uuid.UUID, ...] = ()) -> admin_pb2.DeleteTopicsRequest:
        return admin_pb2.DeleteTopicsRequest(topic_names=names, topic_ids=[i.bytes for i in ids])

    assert check("alice", "AdminService/DeleteTopics", delete("orders-1", ids=(ORDERS_ID,))) is None
    # bob may describe orders (so it is named) but not delete it; carol may not even
    # describe it, so the refusal names its id; an unknown id is the handler's to answer.
    topics_refused(
        check("bob", "AdminService/DeleteTopics", delete(ids=(ORDERS_ID, UNKNOWN_ID))), "orders"
    )
    topics_refused(
        check("carol", "AdminService/DeleteTopics", delete(ids=(ORDERS_ID,))), str(ORDERS_ID)
    )
    topics_refused(
        check("alice", "AdminService/DeleteTopics", delete(ids=(ORDERS_ID,)), with_image=False),
        str(ORDERS_ID),
    )


def test_configs_are_authorized_by_resource_type() -> None:
    def resources(
        *pairs: tuple[common_pb2.ConfigResourceType.ValueType, str],
    ) -> admin_pb2.DescribeConfigsRequest:
        return admin_pb2.DescribeConfigsRequest(
            resources=[
                admin_pb2.DescribeConfigsRequest.Resource(resource_type=t, resource_name=n)
                for t, n in pairs
            ]
        )

    topic = (common_pb2.CONFIG_RESOURCE_TYPE_TOPIC, "orders")
    broker = (common_pb2.CONFIG_RESOURCE_TYPE_BROKER, "1")
    group = (common_pb2.CONFIG_RESOURCE_TYPE_GROUP, "g1")
    assert check("alice", "AdminService/DescribeConfigs", resources(topic)) is None
    cluster_refused(
        check("alice", "AdminService/DescribeConfigs", resources(topic, broker)),
        Op.DESCRIBE_CONFIGS,
    )
    refused(
        check("alice", "AdminService/DescribeConfigs", resources(group)),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g1",
    )
    topics_refused(check("bob", "AdminService/DescribeConfigs", resources(topic)), "orders")
    alter = admin_pb2.AlterConfigsRequest(
        resources=[
            admin_pb2.AlterConfigsRequest.Resource(resource_type=broker[0], resource_name="")
        ]
    )
    assert check("ops", "AdminService/AlterConfigs", alter) is None  # ALTER_CONFIGS
    cluster_refused(check("alice", "AdminService/AlterConfigs", alter), Op.ALTER_CONFIGS)


CLUSTER_RULES = {
    "AdminService/DescribeCluster": Op.DESCRIBE,
    "AdminService/DescribeQuorum": Op.DESCRIBE,
    "AdminService/ElectLeaders": Op.ALTER,
    "AdminService/DescribeLogDirs": Op.DESCRIBE,
    "AdminService/AlterPartitionReassignments": Op.ALTER,
    "AdminService/ListPartitionReassignments": Op.DESCRIBE,
    "AdminService/CreateAcls": Op.ALTER,
    "AdminService/DescribeAcls": Op.DESCRIBE,
    "AdminService/DeleteAcls": Op.ALTER,
    "AdminService/DescribeUserScramCredentials": Op.DESCRIBE,
    "AdminService/AlterUserScramCredentials": Op.ALTER,
    "AdminService/DescribeClientQuotas": Op.DESCRIBE_CONFIGS,
    "AdminService/AlterClientQuotas": Op.ALTER_CONFIGS,
    "TransactionService/WriteTxnMarkers": Op.CLUSTER_ACTION,
    "QuorumService/DescribeQuorum": Op.DESCRIBE,
    "ControllerService/DescribeQuorum": Op.DESCRIBE,
    **{
        f"{s.name}/{m.name}": Op.CLUSTER_ACTION
        for module in (quorum_pb2, controller_pb2)
        for s in module.DESCRIPTOR.services_by_name.values()
        for m in s.methods
        if m.name != "DescribeQuorum"
    },
}


@pytest.mark.parametrize(("method", "operation"), CLUSTER_RULES.items())
def test_cluster_level_calls(method: str, operation: AclOperation) -> None:
    request = Message()  # these rules read nothing of the request
    allowed = "broker" if operation == Op.CLUSTER_ACTION else "ops"
    # DESCRIBE_CONFIGS is implied by ops' ALTER_CONFIGS.
    assert check(allowed, method, request) is None
    assert check("admin", method, request) is None
    cluster_refused(check("alice", method, request), operation)


# -- groups --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "request_type"),
    [
        ("JoinGroup", group_pb2.JoinGroupRequest),
        ("SyncGroup", group_pb2.SyncGroupRequest),
        ("Heartbeat", group_pb2.HeartbeatRequest),
        ("LeaveGroup", group_pb2.LeaveGroupRequest),
    ],
)
def test_classic_group_calls_need_read_on_the_group(method: str, request_type: type[Any]) -> None:
    assert check("alice", f"GroupService/{method}", request_type(group_id="g1")) is None
    refused(
        check("bob", f"GroupService/{method}", request_type(group_id="g1")),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g1",
    )


def test_consumer_group_heartbeat_checks_subscribed_topics() -> None:
    def heartbeat(group: str, *topics: str) -> group_pb2.ConsumerGroupHeartbeatRequest:
        names = group_pb2.ConsumerGroupHeartbeatRequest.TopicNames(names=topics)
        return group_pb2.ConsumerGroupHeartbeatRequest(group_id=group, subscribed_topic_names=names)

    assert check("alice", "GroupService/ConsumerGroupHeartbeat", heartbeat("g1", "orders")) is None
    refused(
        check("alice", "GroupService/ConsumerGroupHeartbeat", heartbeat("g1", "b", "orders", "a")),
        TopicAuthorizationFailedError,
        "The following topics are not authorized: a, b",
    )
    refused(
        check("alice", "GroupService/ConsumerGroupHeartbeat", heartbeat("g2", "a")),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g2",
    )


def test_offset_commit_and_txn_offset_commit_order() -> None:
    topics = [group_pb2.OffsetCommitRequest.Topic(name=n) for n in ("orders", "payments")]
    commit = group_pb2.OffsetCommitRequest(group_id="g1", topics=topics[:1])
    assert check("alice", "GroupService/OffsetCommit", commit) is None
    commit = group_pb2.OffsetCommitRequest(group_id="g1", topics=topics)
    # The call is served; payments is answered per partition by the handler.
    assert check("alice", "GroupService/OffsetCommit", commit) is None
    assert refused_topics("alice", AclOperation.READ, "orders", "payments") == ["payments"]
    txn_topics = topics[:1]
    txn = group_pb2.TxnOffsetCommitRequest(transactional_id="tx1", group_id="g1", topics=txn_topics)
    assert check("alice", "GroupService/TxnOffsetCommit", txn) is None
    txn.transactional_id = "tx2"
    refused(
        check("alice", "GroupService/TxnOffsetCommit", txn),
        TransactionalIdAuthorizationFailedError,
        "Not authorized to access transactional id: tx2",
    )


def test_offset_fetch_and_its_filter() -> None:
    named = group_pb2.OffsetFetchRequest.Topics(
        topics=[group_pb2.OffsetFetchRequest.Topic(name="orders-secret")]
    )
    request = group_pb2.OffsetFetchRequest(
        groups=[group_pb2.OffsetFetchRequest.Group(group_id="g1")]
    )
    assert check("bob", "GroupService/OffsetFetch", request) is None
    request.groups.add(group_id="g2", topics=named)
    refused(
        check("bob", "GroupService/OffsetFetch", request),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g2",
    )
    request.groups[1].group_id = "g3"
    refused(
        check("carol", "GroupService/OffsetFetch", request),
        GroupAuthorizationFailedError,
        "Not authorized to access groups: [g1, g3]",
    )
    # Every topic of g1: those bob may not describe are left out.
    response = group_pb2.OffsetFetchResponse(
        groups=[
            group_pb2.OffsetFetchResponse.Group(
                group_id="g1",
                topics=[group_pb2.OffsetFetchResponse.Topic(name=n) for n in ("orders", "x")],
            )
        ]
    )
    shown = filter_response(V1 + "GroupService/OffsetFetch", request, response, session("bob"))
    assert [t.name for t in shown.groups[0].topics] == ["orders"]


def test_group_admin_calls() -> None:
    describe = group_pb2.DescribeGroupsRequest(groups=["g1"])
    assert check("bob", "GroupService/DescribeGroups", describe) is None
    delete = group_pb2.DeleteGroupsRequest(groups_names=["g1"])
    refused(
        check("bob", "GroupService/DeleteGroups", delete),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g1",
    )
    offsets = group_pb2.OffsetDeleteRequest(group_id="g1")
    refused(
        check("alice", "GroupService/OffsetDelete", offsets),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g1",
    )
    assert check("admin", "GroupService/OffsetDelete", offsets) is None


def test_find_coordinator_by_key_type() -> None:
    def find(key_type: int, *keys: str) -> group_pb2.FindCoordinatorRequest:
        return group_pb2.FindCoordinatorRequest(key_type=key_type, coordinator_keys=keys)

    assert check("bob", "GroupService/FindCoordinator", find(0, "g1")) is None
    refused(
        check("bob", "GroupService/FindCoordinator", find(0, "g1", "g2")),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g2",
    )
    assert check("alice", "GroupService/FindCoordinator", find(1, "tx1")) is None
    refused(
        check("bob", "GroupService/FindCoordinator", find(1, "tx9", "tx8")),
        TransactionalIdAuthorizationFailedError,
        "Not authorized to access transactional ids: [tx8, tx9]",
    )
    cluster_refused(check("alice", "GroupService/FindCoordinator", find(7, "k")), Op.CLUSTER_ACTION)


def test_list_groups_and_consumer_group_describe_filters() -> None:
    request = group_pb2.ListGroupsRequest()
    assert check("bob", "GroupService/ListGroups", request) is None
    response = group_pb2.ListGroupsResponse(
        groups=[group_pb2.ListGroupsResponse.Group(group_id=g) for g in ("g1", "g2")]
    )
    method = V1 + "GroupService/ListGroups"
    assert [
        g.group_id for g in filter_response(method, request, response, session("bob")).groups
    ] == ["g1"]
    # DESCRIBE on the cluster shows every group.
    assert len(filter_response(method, request, response, session("ops")).groups) == 2

    by_name = group_pb2.ConsumerGroupDescribeResponse.TopicPartitionsByName
    member = group_pb2.ConsumerGroupDescribeResponse.Member(
        member_id="m",
        assignment=[by_name(topic_name="orders")],
        target_assignment=[by_name(topic_name="x")],
    )
    described = group_pb2.ConsumerGroupDescribeResponse(
        groups=[group_pb2.ConsumerGroupDescribeResponse.Group(group_id="g1", members=[member])]
    )
    request_cgd = group_pb2.ConsumerGroupDescribeRequest(group_ids=["g1"])
    assert check("bob", "GroupService/ConsumerGroupDescribe", request_cgd) is None
    shown = filter_response(
        V1 + "GroupService/ConsumerGroupDescribe", request_cgd, described, session("bob")
    )
    (g,) = shown.groups
    assert (g.group_id, g.error_code, list(g.members)) == (
        "g1",
        common_pb2.TOPIC_AUTHORIZATION_FAILED,
        [],
    )
    kept = filter_response(
        V1 + "GroupService/ConsumerGroupDescribe", request_cgd, described, session("admin")
    )
    assert kept.groups[0].members[0].member_id == "m"


# -- transactions --------------------------------------------------------------------------


def test_init_producer_id() -> None:
    method = "TransactionService/InitProducerId"
    assert (
        check("alice", method, transaction_pb2.InitProducerIdRequest(transactional_id="tx1"))
        is None
    )
    refused(
        check("bob", method, transaction_pb2.InitProducerIdRequest(transactional_id="tx1")),
        TransactionalIdAuthorizationFailedError,
        "Not authorized to access transactional id: tx1",
    )
    idempotent = transaction_pb2.InitProducerIdRequest()
    assert check("alice", method, idempotent) is None  # WRITE on some topic (KIP-679)
    assert check("carol", method, idempotent) is None  # IDEMPOTENT_WRITE on the cluster
    refused(
        check("bob", method, idempotent),
        ClusterAuthorizationFailedError,
        "Not authorized to write idempotently: neither IDEMPOTENT_WRITE on the cluster nor "
        "WRITE on any topic",
    )


def test_add_partitions_and_offsets_to_txn() -> None:
    Txn = transaction_pb2.AddPartitionsToTxnRequest.Transaction

    def add(*transactions: Any) -> transaction_pb2.AddPartitionsToTxnRequest:
        return transaction_pb2.AddPartitionsToTxnRequest(transactions=transactions)

    topics = [
        transaction_pb2.TxnTopic(name="orders"),
        transaction_pb2.TxnTopic(name="orders-secret"),
    ]
    assert (
        check(
            "alice",
            "TransactionService/AddPartitionsToTxn",
            add(Txn(transactional_id="tx1", topics=topics[:1])),
        )
        is None
    )
    topics_refused(
        check(
            "alice",
            "TransactionService/AddPartitionsToTxn",
            add(Txn(transactional_id="tx1", topics=topics)),
        ),
        "orders-secret",
    )
    verify = add(Txn(transactional_id="tx1", verify_only=True))
    cluster_refused(
        check("alice", "TransactionService/AddPartitionsToTxn", verify), Op.CLUSTER_ACTION
    )
    assert check("broker", "TransactionService/AddPartitionsToTxn", verify) is None

    offsets = transaction_pb2.AddOffsetsToTxnRequest(transactional_id="tx1", group_id="g2")
    refused(
        check("alice", "TransactionService/AddOffsetsToTxn", offsets),
        GroupAuthorizationFailedError,
        "Not authorized to access group: g2",
    )
    end = transaction_pb2.EndTxnRequest(transactional_id="tx1")
    assert check("alice", "TransactionService/EndTxn", end) is None
    refused(
        check("bob", "TransactionService/EndTxn", end),
        TransactionalIdAuthorizationFailedError,
        "Not authorized to access transactional id: tx1",
    )


def test_transaction_listings_and_describe_producers() -> None:
    listing = transaction_pb2.ListTransactionsRequest()
    assert check("nobody", "TransactionService/ListTransactions", listing) is None
    State = transaction_pb2.ListTransactionsResponse.TransactionState
    response = transaction_pb2.ListTransactionsResponse(
        transaction_states=[State(transactional_id=t) for t in ("tx1", "tx2")]
    )
    shown = filter_response(
        V1 + "TransactionService/ListTransactions", listing, response, session("bob")
    )
    assert [t.transactional_id for t in shown.transaction_states] == ["tx1"]

    describe = transaction_pb2.DescribeTransactionsRequest(transactional_ids=["tx1"])
    assert check("bob", "TransactionService/DescribeTransactions", describe) is None
    described = transaction_pb2.DescribeTransactionsResponse(
        transaction_states=[
            transaction_pb2.DescribeTransactionsResponse.TransactionState(
                transactional_id="tx1",
                topics=[transaction_pb2.TxnTopic(name=n) for n in ("orders", "x")],
            )
        ]
    )
    shown_d = filter_response(
        V1 + "TransactionService/DescribeTransactions", describe, described, session("bob")
    )
    assert [t.name for t in shown_d.transaction_states[0].topics] == ["orders"]

    producers = transaction_pb2.DescribeProducersRequest(
        topics=[transaction_pb2.TxnTopic(name="orders")]
    )
    assert check("alice", "TransactionService/DescribeProducers", producers) is None
    topics_refused(check("bob", "TransactionService/DescribeProducers", producers), "orders")


def test_a_super_user_is_allowed_everything() -> None:
    requests = {
        "ProduceService/Produce": read_produce_request(
            produce_request("any", transactional_id="t").SerializeToString()
        ),
        "FetchService/Fetch": fetch_pb2.FetchRequest(replica_id=3),
        "MetadataService/Metadata": metadata_pb2.MetadataRequest(
            topics=["new"], allow_auto_topic_creation=True
        ),
        "AdminService/DeleteTopics": admin_pb2.DeleteTopicsRequest(topic_ids=[SECRET_ID.bytes]),
        "GroupService/JoinGroup": group_pb2.JoinGroupRequest(group_id="any"),
        "TransactionService/InitProducerId": transaction_pb2.InitProducerIdRequest(),
    }
    for method, request in requests.items():
        assert check("admin", method, request) is None, method
