"""AlterPartition (KIP-497): a leader's ISR changes, validated by the controller as Kafka's
ReplicationControlManager validates them."""

from __future__ import annotations

import random
import uuid

import pytest

from rillet import errors
from rillet.controller import (
    AlterPartitionResult,
    AlterPartitionState,
    ControllerConfig,
    CreatableTopic,
    QuorumController,
)
from rillet.metadata.records import BrokerEndpoint, MetadataRecord, PartitionChangeRecord

EP = (BrokerEndpoint("PLAINTEXT", "localhost", 9092),)


def commit(c: QuorumController, records: list[MetadataRecord]) -> None:
    first = c.image.offset + 1
    c.apply_appended(first, records)
    c.replay_committed((first + i, r) for i, r in enumerate(records))


@pytest.fixture
def c() -> QuorumController:
    """Brokers 1, 2, 3 registered and unfenced; topic t with partition 0 on (1, 2, 3), led
    by 1, and broker 3 out of the ISR."""
    c = QuorumController(ControllerConfig(), random.Random(3))
    for b in (1, 2, 3):
        reg = c.register_broker(b, uuid.UUID(int=b), EP, None, now_ms=0)
        commit(c, reg.records)
        commit(c, c.broker_heartbeat(b, reg.response, now_ms=0).records)
    commit(c, c.create_topics([CreatableTopic("t", assignment={0: [1, 2, 3]})]).records)
    tid = c.image.topic("t").topic_id  # type: ignore[union-attr]
    commit(c, [PartitionChangeRecord(tid, 0, isr=(1, 2))])
    return c


def state(c: QuorumController, new_isr: tuple[int, ...], **kw: int) -> AlterPartitionState:
    reg = c.image.partition("t", 0)
    assert reg is not None
    return AlterPartitionState(
        c.image.topic("t").topic_id,  # type: ignore[union-attr]
        kw.get("partition", 0),
        kw.get("leader_epoch", reg.leader_epoch),
        kw.get("partition_epoch", reg.partition_epoch),
        new_isr,
    )


def epoch(c: QuorumController, broker: int) -> int:
    return c.image.brokers[broker].broker_epoch


def test_expand_and_shrink_write_the_new_isr_and_bump_the_partition_epoch(
    c: QuorumController,
) -> None:
    before = c.image.partition("t", 0)
    assert before is not None and before.isr == (1, 2)
    r = c.alter_partition(1, epoch(c, 1), [state(c, (1, 2, 3))])
    [res] = r.response
    tid = state(c, ()).topic_id
    assert r.records == [PartitionChangeRecord(tid, 0, isr=(1, 2, 3))]
    assert res == AlterPartitionResult(
        tid, 0, None, 1, before.leader_epoch, (1, 2, 3), before.partition_epoch + 1
    )
    commit(c, r.records)
    after = c.image.partition("t", 0)
    assert after is not None
    assert (after.isr, after.partition_epoch) == ((1, 2, 3), res.partition_epoch)
    assert after.leader_epoch == before.leader_epoch  # an ISR change keeps the leader epoch
    shrink = c.alter_partition(1, epoch(c, 1), [state(c, (1,))])
    commit(c, shrink.records)
    assert c.image.partition("t", 0).isr == (1,)  # type: ignore[union-attr]


def test_an_unchanged_isr_writes_nothing(c: QuorumController) -> None:
    r = c.alter_partition(1, epoch(c, 1), [state(c, (1, 2))])
    assert r.records == [] and r.response[0].error is None
    assert r.response[0].isr == (1, 2)


def test_a_stale_broker_epoch_fails_the_whole_request(c: QuorumController) -> None:
    with pytest.raises(errors.StaleBrokerEpochError):
        c.alter_partition(1, epoch(c, 1) + 1, [state(c, (1,))])
    with pytest.raises(errors.StaleBrokerEpochError):
        c.alter_partition(9, 1, [state(c, (1,))])


@pytest.mark.parametrize(
    ("requester", "change", "error"),
    [
        (2, {"new_isr": (1,)}, errors.InvalidRequestError),  # not the leader
        (1, {"new_isr": (1,), "leader_epoch": 99}, errors.NotControllerError),
        (1, {"new_isr": (1,), "leader_epoch": -1}, errors.FencedLeaderEpochError),
        (1, {"new_isr": (1,), "partition_epoch": 99}, errors.InvalidUpdateVersionError),
        (1, {"new_isr": (1, 4)}, errors.InvalidRequestError),  # 4 is not a replica
        (1, {"new_isr": (1, 1)}, errors.InvalidRequestError),  # duplicates
        (1, {"new_isr": (2, 3)}, errors.InvalidRequestError),  # without the leader
        (1, {"new_isr": ()}, errors.InvalidRequestError),
        (1, {"new_isr": (1,), "partition": 7}, errors.UnknownTopicOrPartitionError),
    ],
)
def test_refusals(
    c: QuorumController, requester: int, change: dict[str, object], error: type[Exception]
) -> None:
    new_isr = change.pop("new_isr")
    assert isinstance(new_isr, tuple)
    s = state(c, new_isr, **change)  # type: ignore[arg-type]
    r = c.alter_partition(requester, epoch(c, requester), [s])
    assert r.records == []
    assert isinstance(r.response[0].error, error)


def test_an_unknown_topic_id_and_a_fenced_replica_are_refused(c: QuorumController) -> None:
    unknown = AlterPartitionState(uuid.UUID(int=77), 0, 0, 0, (1,))
    r = c.alter_partition(1, epoch(c, 1), [unknown])
    assert isinstance(r.response[0].error, errors.UnknownTopicIdError)
    commit(c, c.broker_heartbeat(3, epoch(c, 3), now_ms=1, want_fence=True).records)
    r = c.alter_partition(1, epoch(c, 1), [state(c, (1, 2, 3))])
    assert isinstance(r.response[0].error, errors.IneligibleReplicaError)
    assert r.records == []


def test_the_dispatcher_is_deterministic_for_a_seed() -> None:
    def run(seed: int) -> list[MetadataRecord]:
        c = QuorumController(ControllerConfig(), random.Random(seed))
        out: list[MetadataRecord] = []
        for b in (1, 2, 3):
            reg = c.register_broker(b, uuid.UUID(int=b), EP, None, now_ms=0)
            commit(c, reg.records)
            hb = c.broker_heartbeat(b, reg.response, now_ms=0)
            commit(c, hb.records)
            out += reg.records + hb.records
        created = c.create_topics([CreatableTopic("a", 6, 2), CreatableTopic("b", 3, 3)])
        return out + created.records

    assert run(11) == run(11)
    assert run(11) != run(12)
