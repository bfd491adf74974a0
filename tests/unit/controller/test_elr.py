"""Eligible leader replicas (KIP-966) and unclean-shutdown detection in the controller: a
replica that leaves an ISR smaller than min.insync.replicas may lead later; a broker that
restarts without a clean-shutdown epoch leaves the ISRs and ELRs it was in."""

from __future__ import annotations

import uuid

from rillet.controller import AlterPartitionState, CreatableTopic, ElectionType, QuorumController
from rillet.controller.elr import maintain_elr, min_insync_replicas, next_elr
from rillet.metadata.image import MetadataImage, PartitionRegistration
from rillet.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    PartitionChangeRecord,
    TopicRecord,
)
from rillet.protocol.metadata_records import decode_record, encode_record
from tests.unit.controller.test_quorum_controller import EP, cluster, commit

TID = uuid.UUID(int=5)


def _topic(c: QuorumController, min_isr: int = 2) -> PartitionRegistration:
    created = c.create_topics(
        [CreatableTopic("t", 1, 3, configs={"min.insync.replicas": str(min_isr)})]
    )
    commit(c, created.records)
    return _reg(c)


def _reg(c: QuorumController) -> PartitionRegistration:
    reg = c.image.partition("t", 0)
    assert reg is not None
    return reg


def _shrink(c: QuorumController, isr: tuple[int, ...]) -> None:
    reg = _reg(c)
    topic = c.image.topic("t")
    assert topic is not None
    leader_epoch = c.image.brokers[reg.leader].broker_epoch
    change = AlterPartitionState(topic.topic_id, 0, reg.leader_epoch, reg.partition_epoch, isr)
    res = c.alter_partition(reg.leader, leader_epoch, [change])
    assert res.response[0].error is None
    commit(c, res.records)


def _fence(c: QuorumController, broker: int, now_ms: int) -> None:
    for b, reg in c.image.brokers.items():
        if b != broker and not reg.fenced:
            c.broker_heartbeat(b, reg.broker_epoch, now_ms=now_ms)
    commit(c, c.fence_stale_brokers(now_ms=now_ms))
    assert c.image.brokers[broker].fenced


def _register(c: QuorumController, broker: int, now_ms: int, previous_epoch: int) -> int:
    res = c.register_broker(
        broker, uuid.UUID(int=1000 + now_ms), EP, None, now_ms, previous_broker_epoch=previous_epoch
    )
    commit(c, res.records)
    return res.response


def _unfence(c: QuorumController, broker: int, epoch: int, now_ms: int) -> None:
    commit(c, c.broker_heartbeat(broker, epoch, now_ms=now_ms).records)


def test_next_elr_follows_kip_966() -> None:
    before = PartitionRegistration((1, 2, 3), (1, 2), 1)
    # Shrinking below min.insync.replicas: the replica that left may lead later.
    shrink = PartitionChangeRecord(TID, 0, isr=(1,))
    assert next_elr(before, shrink, 2) == (2,)
    # At or above min.insync.replicas nobody outside the ISR is eligible.
    assert next_elr(before, PartitionChangeRecord(TID, 0, isr=(1, 2, 3)), 2) == ()
    assert next_elr(before, shrink, 1) == ()
    # An ELR member that rejoins the ISR leaves the ELR; one named explicitly is kept as named.
    small = PartitionRegistration((1, 2, 3), (1,), 1, elr=(2, 3))
    assert next_elr(small, PartitionChangeRecord(TID, 0, leader=2, isr=(2,)), 2) == (1, 3)
    assert next_elr(small, PartitionChangeRecord(TID, 0, elr=(3,)), 2) == (3,)


def test_min_insync_replicas_resolves_topic_then_cluster_then_static() -> None:
    image = MetadataImage().replay(
        enumerate(
            [
                TopicRecord("t", TID),
                ConfigRecord(ConfigResourceType.BROKER, "", "min.insync.replicas", "2"),
            ]
        )
    )
    assert min_insync_replicas(image, "t", {"min.insync.replicas": 3}) == 2
    assert min_insync_replicas(MetadataImage(), "t", {"min.insync.replicas": 3}) == 3
    assert min_insync_replicas(MetadataImage(), "t", {}) == 1
    image = image.replay(
        [(2, ConfigRecord(ConfigResourceType.TOPIC, "t", "min.insync.replicas", "1"))]
    )
    assert min_insync_replicas(image, "t", {}) == 1


def test_the_elr_is_a_metadata_field_that_survives_encoding() -> None:
    change = PartitionChangeRecord(TID, 0, isr=(1,), elr=(2, 3))
    assert decode_record(encode_record(change)) == change
    assert decode_record(encode_record(PartitionChangeRecord(TID, 0, isr=(1,)))).elr is None
    assert maintain_elr(MetadataImage(), [change], {}) == [change]  # unknown partition: as is


def test_a_replica_out_of_a_small_isr_leads_when_the_isr_cannot() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    reg = _topic(c)
    leader = reg.leader
    others = [b for b in reg.replicas if b != leader]
    _shrink(c, (leader, others[0]))
    assert _reg(c).elr == ()  # still at min.insync.replicas
    _shrink(c, (leader,))
    assert _reg(c).elr == (others[0],)  # left an ISR below min.insync.replicas
    # The leader dies: its ISR partner is gone, but the ELR member has every record.
    _fence(c, leader, now_ms=1600)
    after = _reg(c)
    assert after.leader == others[0] and after.isr == (others[0],)
    assert after.elr == (leader,)  # the old leader left the (too small) ISR in its turn


def test_a_broker_back_from_an_unclean_shutdown_leaves_isr_and_elr() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    reg = _topic(c)
    leader = reg.leader
    follower = next(b for b in reg.replicas if b != leader)
    _shrink(c, (leader, follower))
    # The follower loses power and comes back after its session expired: no clean-shutdown
    # epoch, so what it acknowledged may be gone.
    _fence(c, follower, now_ms=1600)
    assert _reg(c).isr == (leader,) and _reg(c).elr == (follower,)
    epoch = _register(c, follower, now_ms=1700, previous_epoch=-1)
    assert _reg(c).elr == ()
    _unfence(c, follower, epoch, now_ms=1700)
    assert _reg(c).leader == leader


def test_a_clean_restart_keeps_the_broker_eligible() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    reg = _topic(c)
    leader = reg.leader
    follower = next(b for b in reg.replicas if b != leader)
    _shrink(c, (leader, follower))
    _fence(c, follower, now_ms=1600)
    old_epoch = c.image.brokers[follower].broker_epoch
    _register(c, follower, now_ms=1700, previous_epoch=old_epoch)
    assert _reg(c).elr == (follower,)


def test_the_last_candidate_stays_after_an_unclean_shutdown() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    reg = _topic(c, min_isr=1)
    leader = reg.leader
    _shrink(c, (leader,))  # min.insync.replicas 1: nobody joins the ELR
    _fence(c, leader, now_ms=1600)
    assert _reg(c).isr == (leader,) and _reg(c).leader == -1
    epoch = _register(c, leader, now_ms=1700, previous_epoch=-1)
    assert _reg(c).isr == (leader,)  # no one else could lead it
    _unfence(c, leader, epoch, now_ms=1700)
    assert _reg(c).leader == leader


def test_an_unclean_election_empties_the_elr() -> None:
    c = cluster(3, broker_session_timeout_ms=1000)
    reg = _topic(c)
    leader = reg.leader
    a, b = (r for r in reg.replicas if r != leader)
    _shrink(c, (leader, a))
    _shrink(c, (leader,))
    _fence(c, a, now_ms=1600)
    _fence(c, leader, now_ms=3200)
    assert _reg(c).leader == -1 and _reg(c).elr == (a,)  # a is fenced: cannot lead yet
    res = c.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])
    commit(c, res.records)
    assert _reg(c).leader == b and _reg(c).isr == (b,) and _reg(c).elr == ()
