"""ControllerService and broker-lifecycle messages survive the trip broker -> wire ->
controller -> wire -> broker unchanged, errors included."""

from __future__ import annotations

import uuid

import pytest

from rillet.controller import (
    AlterConfigOp,
    AlterPartitionResult,
    AlterPartitionState,
    CreatableTopic,
    ElectionType,
    HeartbeatResult,
    TopicResult,
)
from rillet.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from rillet.errors import (
    ElectionNotNeededError,
    FencedLeaderEpochError,
    InvalidConfigurationError,
    InvalidRequestError,
    NotControllerError,
    StaleBrokerEpochError,
    TopicAlreadyExistsError,
)
from rillet.metadata.records import BrokerEndpoint, ConfigResourceType
from rillet.protocol.admin import (
    alter_configs_request_from_pb,
    alter_configs_response,
    create_partitions_response,
    create_topics_request_from_pb,
    create_topics_response,
    delete_topics_response,
    elect_leaders_request_from_pb,
    elect_leaders_response,
)
from rillet.protocol.controller import (
    alter_configs_request_to_pb,
    alter_configs_results_from_pb,
    alter_partition_request_from_pb,
    alter_partition_request_to_pb,
    alter_partition_response,
    alter_partition_results_from_pb,
    create_partitions_request_from_pb,
    create_partitions_request_to_pb,
    create_partitions_results_from_pb,
    create_topics_request_to_pb,
    create_topics_results_from_pb,
    delete_topics_request_to_pb,
    delete_topics_results_from_pb,
    elect_leaders_request_to_pb,
    elect_leaders_results_from_pb,
)
from rillet.protocol.gen.v1 import admin_pb2
from rillet.protocol.quorum import (
    broker_heartbeat_from_pb,
    broker_heartbeat_request_to_pb,
    broker_heartbeat_response,
    broker_heartbeat_result_from_pb,
    broker_registration_from_pb,
    broker_registration_request_to_pb,
    describe_quorum_from_pb,
    describe_quorum_response,
)
from rillet.raft.node import QuorumInfo
from rillet.raft.state import ReplicaState

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def _same_error(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    return type(a) is type(b) and str(a) == str(b)


def test_create_topics_round_trip() -> None:
    topics = [
        CreatableTopic("a"),
        CreatableTopic("b", 3, 1, None, {"retention.ms": "1000"}),
        CreatableTopic("c", assignment={0: [2, 1], 1: [1, 2]}),
    ]
    assert create_topics_request_from_pb(create_topics_request_to_pb(topics, True)) == topics
    assert create_topics_request_to_pb(topics, True).validate_only
    results = [
        TopicResult("a", None, TOPIC_ID, 1, 1),
        TopicResult("b", TopicAlreadyExistsError("Topic 'b' already exists.")),
    ]
    back = create_topics_results_from_pb(create_topics_response(results))
    assert [(r.name, r.topic_id, r.num_partitions) for r in back] == [
        ("a", TOPIC_ID, 1),
        ("b", None, -1),
    ]
    assert all(_same_error(x.error, y.error) for x, y in zip(back, results, strict=True))


def test_delete_topics_round_trip() -> None:
    assert delete_topics_request_to_pb(["x", "y"]).topic_names == ["x", "y"]
    results = [TopicResult("x", None, TOPIC_ID), TopicResult("y", NotControllerError("moved"))]
    back = delete_topics_results_from_pb(delete_topics_response(results, []))
    assert back[0] == results[0]
    assert _same_error(back[1].error, results[1].error)


def test_create_partitions_keep_partition_numbers() -> None:
    wanted = [("t", 4, {2: [1], 3: [2]}), ("u", 2, None)]
    assert create_partitions_request_from_pb(create_partitions_request_to_pb(wanted, False)) == [
        ("t", 4, {2: [1], 3: [2]}),
        ("u", 2, None),
    ]
    back = create_partitions_results_from_pb(
        create_partitions_response([TopicResult("t"), TopicResult("u", NotControllerError("x"))])
    )
    assert back[0].error is None and isinstance(back[1].error, NotControllerError)


def test_alter_configs_round_trip() -> None:
    resources = [
        (ConfigResourceType.TOPIC, "t", [AlterConfigOp("retention.ms", "SET", "5")]),
        (ConfigResourceType.BROKER, "1", [AlterConfigOp("log.retention.ms", "DELETE")]),
    ]
    request = alter_configs_request_to_pb(resources, False)
    assert alter_configs_request_from_pb(request) == resources
    errors = [None, InvalidConfigurationError("no")]
    back = alter_configs_results_from_pb(alter_configs_response(request, errors))
    assert back[0] is None and _same_error(back[1], errors[1])


def test_alter_partition_round_trip() -> None:
    changes = [AlterPartitionState(TOPIC_ID, 0, 3, 7, (1, 2))]
    assert alter_partition_request_from_pb(alter_partition_request_to_pb(4, 99, changes)) == (
        4,
        99,
        changes,
    )
    results = [
        AlterPartitionResult(TOPIC_ID, 0, None, 1, 3, (1, 2), 8),
        AlterPartitionResult(TOPIC_ID, 1, FencedLeaderEpochError("old")),
    ]
    back = alter_partition_results_from_pb(alter_partition_response(results))
    assert isinstance(back, list)
    assert back[0] == results[0]
    assert _same_error(back[1].error, results[1].error)
    whole = alter_partition_results_from_pb(alter_partition_response(StaleBrokerEpochError("s")))
    assert isinstance(whole, StaleBrokerEpochError)


def test_broker_lifecycle_round_trip() -> None:
    reg = BrokerRegistrationRequest(
        5, uuid.uuid4(), (BrokerEndpoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),), "rack-a"
    )
    pb = broker_registration_request_to_pb(reg, "cluster")
    assert pb.cluster_id == "cluster"
    assert broker_registration_from_pb(pb) == reg
    hb = BrokerHeartbeatRequest(5, 10, 42, want_fence=True)
    assert broker_heartbeat_from_pb(broker_heartbeat_request_to_pb(hb)) == hb
    result = HeartbeatResult(is_caught_up=True, is_fenced=False, should_shutdown=False)
    assert broker_heartbeat_result_from_pb(broker_heartbeat_response(result)) == result
    refused = broker_heartbeat_result_from_pb(broker_heartbeat_response(NotControllerError("n")))
    assert isinstance(refused, NotControllerError)


def test_describe_quorum_round_trip() -> None:
    info = QuorumInfo(
        2,
        7,
        120,
        (ReplicaState(2, 130, 1000, 1000), ReplicaState(1, 100, 990, None)),
        (ReplicaState(4, 0, None, None),),
    )
    assert describe_quorum_from_pb(describe_quorum_response(info)) == info
    assert isinstance(
        describe_quorum_from_pb(describe_quorum_response(NotControllerError("n"))),
        NotControllerError,
    )


# -- ElectLeaders ------------------------------------------------------------------------------


def test_elect_leaders_requests_survive_the_trip() -> None:

    named = [("a", 0), ("b", 2), ("a", 1)]
    request = elect_leaders_request_to_pb(ElectionType.UNCLEAN, named, timeout_ms=500)
    assert request.timeout_ms == 500
    election_type, partitions = elect_leaders_request_from_pb(request)
    assert election_type is ElectionType.UNCLEAN and sorted(partitions or []) == sorted(named)
    every = elect_leaders_request_from_pb(elect_leaders_request_to_pb(ElectionType.PREFERRED, None))
    assert every == (ElectionType.PREFERRED, None)
    # An empty list is no partitions, not all of them.
    assert elect_leaders_request_from_pb(
        elect_leaders_request_to_pb(ElectionType.PREFERRED, [])
    ) == (ElectionType.PREFERRED, [])


def test_bad_elect_leaders_requests_are_refused() -> None:

    twice = admin_pb2.ElectLeadersRequest()
    twice.topic_partitions.add(topic="a", partitions=[0, 0])
    with pytest.raises(InvalidRequestError, match="a-0 is named more than once"):
        elect_leaders_request_from_pb(twice)
    unknown = admin_pb2.ElectLeadersRequest()
    unknown.election_type = 7  # type: ignore[assignment]
    with pytest.raises(InvalidRequestError, match="unknown election type 7"):
        elect_leaders_request_from_pb(unknown)


def test_elect_leaders_results_survive_the_trip() -> None:

    results = elect_leaders_results_from_pb(
        elect_leaders_response({("a", 1): None, ("a", 0): ElectionNotNeededError("leads")})
    )
    assert isinstance(results, dict) and results[("a", 1)] is None
    assert isinstance(results[("a", 0)], ElectionNotNeededError)
    assert str(results[("a", 0)]).endswith("leads")
    refused = elect_leaders_results_from_pb(elect_leaders_response(NotControllerError("no")))
    assert isinstance(refused, NotControllerError)
