"""QuorumController: admin requests and broker lifecycle as metadata records."""

from __future__ import annotations

import random
import uuid

import pytest

from rillet import errors
from rillet.controller import (
    AlterConfigOp,
    ControllerConfig,
    CreatableTopic,
    QuorumController,
)
from rillet.controller.placement import place_replicas, validate_assignment
from rillet.metadata.records import (
    BrokerEndpoint,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataRecord,
)

EP = (BrokerEndpoint("PLAINTEXT", "localhost", 9092),)


def commit(c: QuorumController, records: list[MetadataRecord]) -> None:
    first = c.image.offset + 1
    c.apply_appended(first, records)
    c.replay_committed((first + i, r) for i, r in enumerate(records))


def cluster(n: int, **cfg: object) -> QuorumController:
    c = QuorumController(ControllerConfig(**cfg), random.Random(7))  # type: ignore[arg-type]
    for b in range(1, n + 1):
        reg = c.register_broker(b, uuid.UUID(int=b), EP, None, now_ms=0)
        commit(c, reg.records)
        hb = c.broker_heartbeat(b, reg.response, now_ms=0)
        commit(c, hb.records)
        assert not hb.response.is_fenced
    return c


def test_placement_is_round_robin_from_a_random_start() -> None:
    got = place_replicas([3, 1, 2], 4, 2, random.Random(0))
    start = random.Random(0).randrange(3)
    brokers = [1, 2, 3]
    for p, replicas in got.items():
        assert replicas == (brokers[(start + p) % 3], brokers[(start + p + 1) % 3])
    # Leaders are spread evenly.
    assert sorted(r[0] for r in place_replicas([1, 2, 3], 6, 3, random.Random(1)).values()) == [
        1, 1, 2, 2, 3, 3,
    ]  # fmt: skip
    with pytest.raises(errors.InvalidReplicationFactorError, match="only 3 broker"):
        place_replicas([1, 2, 3], 1, 4, random.Random(0))


@pytest.mark.parametrize(
    "assignment",
    [{0: [1, 1]}, {0: [1], 1: [1, 2]}, {1: [1]}, {0: [9]}, {0: []}],
)
def test_bad_manual_assignments(assignment: dict[int, list[int]]) -> None:
    with pytest.raises(errors.InvalidReplicaAssignmentError):
        validate_assignment(assignment, [1, 2, 3])


def test_create_topic_with_placement_and_configs() -> None:
    c = cluster(3)
    res = c.create_topics([CreatableTopic("orders", 6, 3, configs={"retention.ms": "5000"})])
    [result] = res.response
    assert result.error is None and result.num_partitions == 6 and result.replication_factor == 3
    commit(c, res.records)
    topic = c.image.topic("orders")
    assert topic is not None and len(topic.partitions) == 6
    for reg in topic.partitions.values():
        assert len(set(reg.replicas)) == 3 and reg.leader == reg.replicas[0]
        assert reg.isr == reg.replicas
    assert dict(c.image.topic_config("orders")) == {"retention.ms": "5000"}


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (CreatableTopic("a/b"), errors.InvalidTopicError),
        (CreatableTopic(".."), errors.InvalidTopicError),
        (CreatableTopic("__cluster_metadata"), errors.InvalidRequestError),
        (CreatableTopic("t", 0), errors.InvalidPartitionsError),
        (CreatableTopic("t", 1, 0), errors.InvalidReplicationFactorError),
        (CreatableTopic("t", 1, 4), errors.InvalidReplicationFactorError),
        (CreatableTopic("t", configs={"retention.ms": "soon"}), errors.InvalidConfigurationError),
        (CreatableTopic("t", configs={"no.such.key": "1"}), errors.InvalidConfigurationError),
        (CreatableTopic("t", assignment={0: [7]}), errors.InvalidReplicaAssignmentError),
    ],
)
def test_create_topic_errors(topic: CreatableTopic, error: type[Exception]) -> None:
    c = cluster(3)
    res = c.create_topics([topic])
    assert res.records == []
    assert isinstance(res.response[0].error, error)


def test_existing_and_colliding_topics_and_validate_only() -> None:
    c = cluster(1)
    commit(c, c.create_topics([CreatableTopic("a.b")]).records)
    res = c.create_topics([CreatableTopic("a.b"), CreatableTopic("a_b"), CreatableTopic("x")])
    assert isinstance(res.response[0].error, errors.TopicAlreadyExistsError)
    assert isinstance(res.response[1].error, errors.InvalidTopicError)
    assert res.response[2].error is None
    dry = c.create_topics([CreatableTopic("y")], validate_only=True)
    assert dry.records == [] and dry.response[0].error is None


def test_delete_topics_and_create_partitions() -> None:
    c = cluster(2)
    commit(c, c.create_topics([CreatableTopic("t", 2, 2)]).records)
    res = c.create_partitions([("t", 5, None), ("t", 1, None), ("nope", 3, None)])
    assert res.response[0].error is None
    assert isinstance(res.response[1].error, errors.InvalidPartitionsError)
    assert isinstance(res.response[2].error, errors.UnknownTopicOrPartitionError)
    commit(c, res.records)
    topic = c.image.topic("t")
    assert topic is not None and sorted(topic.partitions) == [0, 1, 2, 3, 4]
    assert all(len(r.replicas) == 2 for r in topic.partitions.values())
    res = c.delete_topics(["t", "nope"])
    assert res.response[0].error is None
    assert isinstance(res.response[1].error, errors.UnknownTopicOrPartitionError)
    commit(c, res.records)
    assert c.image.topic("t") is None


def test_incremental_alter_configs() -> None:
    c = cluster(1)
    commit(c, c.create_topics([CreatableTopic("t", configs={"cleanup.policy": "delete"})]).records)
    ops = [
        AlterConfigOp("retention.ms", "SET", "100"),
        AlterConfigOp("cleanup.policy", "APPEND", "delete"),
    ]
    res = c.incremental_alter_configs([(ConfigResourceType.TOPIC, "t", ops)])
    assert res.response == [None]
    commit(c, res.records)
    assert dict(c.image.topic_config("t")) == {
        "retention.ms": "100",
        "cleanup.policy": "delete",
    }
    # APPEND and SUBTRACT edit a list config, each value checked.
    compact = c.incremental_alter_configs(
        [(ConfigResourceType.TOPIC, "t", [AlterConfigOp("cleanup.policy", "APPEND", "compact")])]
    )
    assert compact.response == [None]
    commit(c, compact.records)
    assert c.image.topic_config("t")["cleanup.policy"] == "delete,compact"
    bogus = c.incremental_alter_configs(
        [(ConfigResourceType.TOPIC, "t", [AlterConfigOp("cleanup.policy", "APPEND", "shred")])]
    )
    assert isinstance(bogus.response[0], errors.InvalidConfigurationError)
    assert bogus.records == []
    for value, left in (("delete", "compact"), ("compact", "")):
        shed = c.incremental_alter_configs(
            [(ConfigResourceType.TOPIC, "t", [AlterConfigOp("cleanup.policy", "SUBTRACT", value)])]
        )
        commit(c, shed.records)
        assert c.image.topic_config("t")["cleanup.policy"] == left
    bad = c.incremental_alter_configs(
        [(ConfigResourceType.TOPIC, "t", [AlterConfigOp("retention.ms", "SET", "x")])]
    )
    assert isinstance(bad.response[0], errors.InvalidConfigurationError) and bad.records == []
    res = c.incremental_alter_configs(
        [(ConfigResourceType.TOPIC, "t", [AlterConfigOp("retention.ms", "DELETE")])]
    )
    commit(c, res.records)
    assert "retention.ms" not in c.image.topic_config("t")


def test_session_expiry_fences_and_moves_leadership_within_the_isr() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    commit(c, c.create_topics([CreatableTopic("t", 3, 3)]).records)
    for b in (1, 2, 3):
        c.broker_heartbeat(b, c.image.brokers[b].broker_epoch, now_ms=500)
    # Broker 2 stops heartbeating.
    for b in (1, 3):
        c.broker_heartbeat(b, c.image.brokers[b].broker_epoch, now_ms=1400)
    records = c.fence_stale_brokers(now_ms=1600)
    commit(c, records)
    assert c.image.brokers[2].fenced
    topic = c.image.topic("t")
    assert topic is not None
    for reg in topic.partitions.values():
        assert 2 not in reg.isr and reg.leader in (1, 3)
    # Broker 2 comes back: it is unfenced, but re-joins ISRs only through the leaders.
    epoch = c.register_broker(2, uuid.UUID(int=22), EP, None, now_ms=1700)
    commit(c, epoch.records)
    hb = c.broker_heartbeat(2, epoch.response, now_ms=1700)
    commit(c, hb.records)
    assert not c.image.brokers[2].fenced


def test_last_isr_member_keeps_its_place_and_leads_again() -> None:
    c = cluster(1, broker_session_timeout_ms=1000)
    commit(c, c.create_topics([CreatableTopic("t", 1, 1)]).records)
    commit(c, c.fence_stale_brokers(now_ms=5000))
    reg = c.image.partition("t", 0)
    assert reg is not None and reg.leader == -1 and reg.isr == (1,)
    epoch = c.register_broker(1, uuid.UUID(int=99), EP, None, now_ms=6000)
    commit(c, epoch.records)
    commit(c, c.broker_heartbeat(1, epoch.response, now_ms=6000).records)
    reg = c.image.partition("t", 0)
    assert reg is not None and reg.leader == 1 and reg.leader_epoch == 2


def test_heartbeat_errors_and_controlled_shutdown() -> None:
    c = cluster(2)
    with pytest.raises(errors.BrokerIdNotRegisteredError):
        c.broker_heartbeat(9, 1, now_ms=0)
    with pytest.raises(errors.StaleBrokerEpochError):
        c.broker_heartbeat(1, 999, now_ms=0)
    commit(c, c.create_topics([CreatableTopic("t", 2, 2)]).records)
    res = c.broker_heartbeat(1, c.image.brokers[1].broker_epoch, now_ms=1, want_shutdown=True)
    assert res.response.should_shutdown and res.response.is_fenced
    commit(c, res.records)
    topic = c.image.topic("t")
    assert topic is not None and all(r.leader == 2 for r in topic.partitions.values())


def test_duplicate_live_registration_is_refused() -> None:
    c = cluster(1)
    with pytest.raises(errors.DuplicateBrokerRegistrationError):
        c.register_broker(1, uuid.UUID(int=1234), EP, None, now_ms=1)


def test_revert_to_committed_forgets_uncommitted_records() -> None:
    c = cluster(1)
    res = c.create_topics([CreatableTopic("t")])
    c.apply_appended(c.image.offset + 1, res.records)
    assert c.image.topic("t") is not None
    c.revert_to_committed()
    assert c.image.topic("t") is None


def test_a_controller_active_again_starts_every_session_afresh() -> None:
    """Heartbeats went to another controller meanwhile: this one's old timestamps must not
    fence brokers the moment it leads again."""
    c = cluster(3, broker_session_timeout_ms=1000)
    for b in (1, 2, 3):
        c.broker_heartbeat(b, c.image.brokers[b].broker_epoch, now_ms=1000)
    c.activate()  # inactive from 1000 to 60000, then elected again
    assert c.fence_stale_brokers(now_ms=60_000) == []
    # From then on, sessions expire as usual.
    records = c.fence_stale_brokers(now_ms=61_000)
    assert {r.broker_id for r in records if isinstance(r, FenceBrokerRecord)} == {1, 2, 3}
