"""Leader elections: preferred and unclean ElectLeaders, unclean.leader.election.enable
resolved per topic, and automatic preferred leader balancing."""

from __future__ import annotations

import logging
import uuid

import pytest

from rillet import errors
from rillet.controller import AlterConfigOp, CreatableTopic, ElectionType, QuorumController
from rillet.controller.elections import imbalanced_brokers, unclean_enabled
from rillet.metadata.image import PartitionRegistration
from rillet.metadata.records import ConfigResourceType, PartitionChangeRecord
from tests.unit.controller.test_quorum_controller import EP, cluster, commit


def _part(c: QuorumController, topic: str, p: int = 0) -> PartitionRegistration:
    reg = c.image.partition(topic, p)
    assert reg is not None
    return reg


def _fence(c: QuorumController, broker: int, now_ms: int) -> None:
    """Every other broker heartbeats at ``now_ms``; ``broker`` has not since 0."""
    for b, reg in c.image.brokers.items():
        if b != broker and not reg.fenced:
            c.broker_heartbeat(b, reg.broker_epoch, now_ms=now_ms)
    commit(c, c.fence_stale_brokers(now_ms=now_ms))
    assert c.image.brokers[broker].fenced


def _return(c: QuorumController, broker: int, now_ms: int) -> None:
    """``broker`` restarts: registers again and is unfenced."""
    epoch = c.register_broker(broker, uuid.UUID(int=100 + now_ms), EP, None, now_ms=now_ms)
    commit(c, epoch.records)
    commit(c, c.broker_heartbeat(broker, epoch.response, now_ms=now_ms).records)


def _set_unclean(c: QuorumController, rtype: ConfigResourceType, name: str, value: str) -> None:
    res = c.incremental_alter_configs(
        [(rtype, name, [AlterConfigOp("unclean.leader.election.enable", "SET", value)])]
    )
    assert res.response == [None]
    commit(c, res.records)


def test_preferred_election_moves_leadership_back_once_the_replica_is_in_sync() -> None:
    c = cluster(2, broker_session_timeout_ms=1000)
    commit(c, c.create_topics([CreatableTopic("t", 2, 2)]).records)
    topic = c.image.topic("t")
    assert topic is not None
    # Nothing to do: for every partition the results leave the partitions out (Kafka does),
    # for named ones they say ELECTION_NOT_NEEDED.
    assert c.elect_leaders(ElectionType.PREFERRED).response == {}
    named = c.elect_leaders(ElectionType.PREFERRED, [("t", 0)]).response
    assert isinstance(named[("t", 0)], errors.ElectionNotNeededError)
    _fence(c, 1, now_ms=1600)
    moved = [p for p, r in topic.partitions.items() if r.preferred_leader == 1]
    assert moved and all(_part(c, "t", p).leader == 2 for p in moved)
    _return(c, 1, now_ms=1700)
    # Not yet back in the ISR: the preferred leader is not available.
    res = c.elect_leaders(ElectionType.PREFERRED, [("t", moved[0]), ("nope", 0)])
    assert isinstance(res.response[("t", moved[0])], errors.PreferredLeaderNotAvailableError)
    assert isinstance(res.response[("nope", 0)], errors.UnknownTopicOrPartitionError)
    assert res.records == []
    # The leaders add it back to the ISR (AlterPartition), then the election moves leadership.
    commit(c, [PartitionChangeRecord(topic.topic_id, p, isr=(2, 1)) for p in moved])
    res = c.elect_leaders(ElectionType.PREFERRED)
    assert res.response == {("t", p): None for p in moved}
    commit(c, res.records)
    assert all(_part(c, "t", p).leader == 1 for p in moved)


def _leaderless(c: QuorumController) -> None:
    """Topic ``t`` (replicas 1, 2): broker 2 leaves the ISR, then leader 1 is fenced. With
    unclean elections off, the partition has no leader and keeps 1 as its ISR."""
    commit(c, c.create_topics([CreatableTopic("t", assignment={0: [1, 2]})]).records)
    topic = c.image.topic("t")
    assert topic is not None
    commit(c, [PartitionChangeRecord(topic.topic_id, 0, isr=(1,))])
    _fence(c, 1, now_ms=1600)
    assert _part(c, "t").leader == -1 and _part(c, "t").isr == (1,)


def test_unclean_election_on_request_picks_an_out_of_sync_replica(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    _leaderless(c)
    ok = c.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])
    # A partition with a leader needs no unclean election; an operator's request elects one
    # out of the ISR whatever the topic's config says, and the ISR is then the new leader.
    with caplog.at_level(logging.WARNING, logger="rillet.controller.elections"):
        assert ok.response == {("t", 0): None}
    commit(c, ok.records)
    assert (_part(c, "t").leader, _part(c, "t").isr) == (2, (2,))
    assert any("using an unclean election" in m for m in caplog.messages)
    again = c.elect_leaders(ElectionType.UNCLEAN, [("t", 0)]).response[("t", 0)]
    assert isinstance(again, errors.ElectionNotNeededError)


def test_unclean_election_with_no_live_replica_has_no_eligible_leader() -> None:
    c = cluster(2, broker_session_timeout_ms=1000)
    _leaderless(c)
    _fence(c, 2, now_ms=3000)
    res = c.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])
    assert isinstance(res.response[("t", 0)], errors.EligibleLeadersNotAvailableError)
    assert res.records == []


def test_unclean_config_resolves_topic_then_cluster_default_then_static() -> None:
    c = cluster(1)
    commit(c, c.create_topics([CreatableTopic("t")]).records)
    assert not unclean_enabled(c.image, "t", static_default=False)
    assert unclean_enabled(c.image, "t", static_default=True)
    _set_unclean(c, ConfigResourceType.BROKER, "", "true")
    assert unclean_enabled(c.image, "t", static_default=False)
    _set_unclean(c, ConfigResourceType.TOPIC, "t", "false")
    assert not unclean_enabled(c.image, "t", static_default=True)


def test_turning_unclean_on_for_a_topic_elects_its_leaderless_partitions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    _leaderless(c)
    assert c.elect_unclean_leaders() == []
    with caplog.at_level(logging.WARNING, logger="rillet.controller.elections"):
        _set_unclean(c, ConfigResourceType.TOPIC, "t", "true")
    assert (_part(c, "t").leader, _part(c, "t").isr) == (2, (2,))
    assert any("Triggered unclean leader election" in m for m in caplog.messages)


def test_fencing_the_last_in_sync_leader_elects_uncleanly_where_the_topic_allows_it() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    for name in ("clean", "dirty"):
        res = c.create_topics(
            [
                CreatableTopic(
                    name,
                    assignment={0: [1, 2]},
                    configs={"unclean.leader.election.enable": str(name == "dirty").lower()},
                )
            ]
        )
        commit(c, res.records)
        topic = c.image.topic(name)
        assert topic is not None
        commit(c, [PartitionChangeRecord(topic.topic_id, 0, isr=(1,))])
    _fence(c, 1, now_ms=1600)
    assert _part(c, "clean").leader == -1
    assert (_part(c, "dirty").leader, _part(c, "dirty").isr) == (2, (2,))


def test_a_returning_out_of_sync_replica_leads_only_where_unclean_is_allowed() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    _leaderless(c)
    _fence(c, 2, now_ms=3000)
    _return(c, 2, now_ms=3100)
    assert _part(c, "t").leader == -1
    _fence(c, 2, now_ms=5000)
    _set_unclean(c, ConfigResourceType.BROKER, "", "true")
    _return(c, 2, now_ms=5100)
    assert (_part(c, "t").leader, _part(c, "t").isr) == (2, (2,))


def test_leader_imbalance_ratio_per_broker() -> None:
    c = cluster(2, broker_session_timeout_ms=1000)
    # Ten partitions, broker 1 preferred for all of them.
    assignment = {p: [1, 2] for p in range(10)}
    commit(c, c.create_topics([CreatableTopic("t", assignment=assignment)]).records)
    topic = c.image.topic("t")
    assert topic is not None
    assert imbalanced_brokers(c.image, 10) == {}
    # Broker 2 leads one of them: 10% is not over 10%.
    commit(c, [PartitionChangeRecord(topic.topic_id, 0, leader=2)])
    assert imbalanced_brokers(c.image, 10) == {}
    assert c.balance_partition_leaders() == []
    # Two of them: 20% is.
    commit(c, [PartitionChangeRecord(topic.topic_id, 1, leader=2)])
    assert imbalanced_brokers(c.image, 10) == {1: 0.2}
    assert imbalanced_brokers(c.image, 20) == {}
    records = c.balance_partition_leaders()
    assert records == [
        PartitionChangeRecord(topic.topic_id, 0, leader=1),
        PartitionChangeRecord(topic.topic_id, 1, leader=1),
    ]
    commit(c, records)
    assert all(r.leader == 1 for r in topic.partitions.values())


def test_balancing_skips_a_preferred_replica_that_is_fenced_or_out_of_sync() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    commit(c, c.create_topics([CreatableTopic("t", 3, 3)]).records)
    _fence(c, 1, now_ms=1600)
    moved = [p for p in range(3) if _part(c, "t", p).preferred_leader == 1]
    assert moved and 1 in imbalanced_brokers(c.image, 10)
    assert c.balance_partition_leaders() == []  # fenced
    _return(c, 1, now_ms=1700)
    assert c.balance_partition_leaders() == []  # not back in the ISRs yet
    topic = c.image.topic("t")
    assert topic is not None
    commit(
        c,
        [PartitionChangeRecord(topic.topic_id, p, isr=(*_part(c, "t", p).isr, 1)) for p in moved],
    )
    commit(c, c.balance_partition_leaders())
    assert all(_part(c, "t", p).leader == 1 for p in moved)
