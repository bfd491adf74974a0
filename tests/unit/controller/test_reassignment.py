"""Partition reassignment (KIP-455) in the controller: adding first, completing once the
targets are in sync (in the same change as the ISR expansion), a new leader when the old one
is removed, cancelling back to the original replicas, and refusals."""

from __future__ import annotations

import re

import pytest

from rillet import errors
from rillet.controller import AlterPartitionState, CreatableTopic, QuorumController
from rillet.controller.reassignment import OngoingReassignment, list_partition_reassignments
from rillet.metadata.image import PartitionRegistration
from tests.unit.controller.test_quorum_controller import cluster, commit


def _part(c: QuorumController, p: int = 0) -> PartitionRegistration:
    reg = c.image.partition("t", p)
    assert reg is not None
    return reg


def _topic_on(c: QuorumController, replicas: tuple[int, ...]) -> None:
    commit(c, c.create_topics([CreatableTopic("t", assignment={0: replicas})]).records)


def _reassign(c: QuorumController, target: tuple[int, ...] | None) -> errors.KafkaError | None:
    result = c.alter_partition_reassignments([("t", 0, target)])
    commit(c, result.records)
    return result.response[0]


def _in_sync(c: QuorumController, isr: tuple[int, ...]) -> None:
    """The partition's leader asks for ``isr`` (AlterPartition)."""
    reg = _part(c)
    topic = c.image.topic("t")
    assert topic is not None
    leader = c.image.brokers[reg.leader]
    change = AlterPartitionState(topic.topic_id, 0, reg.leader_epoch, reg.partition_epoch, isr)
    result = c.alter_partition(reg.leader, leader.broker_epoch, [change])
    assert result.response[0].error is None, result.response[0].error
    commit(c, result.records)


def test_a_move_adds_first_and_drops_the_old_replicas_once_the_new_are_in_sync() -> None:
    c = cluster(4)
    _topic_on(c, (1, 2))
    assert _reassign(c, (3, 4)) is None
    reg = _part(c)
    # Target first, then the replicas it removes; the leader stays until the move is done.
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas) == (
        (3, 4, 1, 2),
        (3, 4),
        (1, 2),
    )
    assert reg.isr == (1, 2) and reg.leader == 1
    assert list_partition_reassignments(c.image) == {
        ("t", 0): OngoingReassignment((3, 4, 1, 2), (3, 4), (1, 2))
    }
    _in_sync(c, (1, 2, 3))
    assert _part(c).is_reassigning
    # The last target joins the ISR: the move completes in the same change, and the first
    # target in sync leads.
    _in_sync(c, (1, 2, 3, 4))
    reg = _part(c)
    assert (reg.replicas, reg.isr, reg.leader) == ((3, 4), (3, 4), 3)
    assert not reg.is_reassigning and list_partition_reassignments(c.image) == {}


def test_removing_replicas_already_in_sync_completes_at_once() -> None:
    c = cluster(3)
    _topic_on(c, (1, 2, 3))
    assert _reassign(c, (2, 3)) is None
    reg = _part(c)
    assert (reg.replicas, reg.isr, reg.leader, reg.is_reassigning) == ((2, 3), (2, 3), 2, False)


def test_cancelling_goes_back_to_the_original_replicas() -> None:
    c = cluster(3)
    _topic_on(c, (1, 2))
    assert _reassign(c, (1, 3)) is None
    assert _part(c).replicas == (1, 3, 2)
    assert _reassign(c, None) is None
    reg = _part(c)
    assert (reg.replicas, reg.isr, reg.is_reassigning) == ((1, 2), (1, 2), False)
    assert isinstance(_reassign(c, None), errors.NoReassignmentInProgressError)


def test_a_new_target_replaces_the_one_in_progress() -> None:
    c = cluster(4)
    _topic_on(c, (1, 2))
    assert _reassign(c, (3, 4)) is None
    _in_sync(c, (1, 2, 3))  # 3 was being added and caught up; the new target drops it
    assert _reassign(c, (4, 2)) is None
    reg = _part(c)
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas) == ((4, 2, 1), (4,), (1,))
    assert reg.isr == (1, 2)


@pytest.mark.parametrize(
    ("target", "error", "message"),
    [
        ((), errors.InvalidReplicaAssignmentError, "empty"),
        ((1, 1), errors.InvalidReplicaAssignmentError, "twice"),
        ((1, 9), errors.InvalidReplicaAssignmentError, r"not registered: \[9\]"),
    ],
)
def test_bad_targets_are_refused(
    target: tuple[int, ...], error: type[errors.KafkaError], message: str
) -> None:
    c = cluster(2)
    _topic_on(c, (1, 2))
    got = _reassign(c, target)
    assert isinstance(got, error) and re.search(message, str(got))
    assert not _part(c).is_reassigning


def test_unknown_and_repeated_partitions_are_refused() -> None:
    c = cluster(2)
    _topic_on(c, (1, 2))
    result = c.alter_partition_reassignments([("nope", 0, (1,)), ("t", 0, (2, 1)), ("t", 0, (1,))])
    assert isinstance(result.response[0], errors.UnknownTopicOrPartitionError)
    assert all(isinstance(r, errors.InvalidRequestError) for r in result.response[1:])
    assert result.records == []
