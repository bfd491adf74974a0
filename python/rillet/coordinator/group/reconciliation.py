"""KIP-848 reconciliation: move one member one step toward its target assignment (Kafka's
``CurrentAssignmentBuilder``).

A member converges on its target in steps, one per heartbeat, so that a partition never has
two owners and members whose partitions do not move never stop:

1. Partitions of the member's current assignment that are not in its target are *revoked*:
   the member stays at its epoch in UNREVOKED_PARTITIONS, keeping the partitions it may
   still consume, until a heartbeat reports it no longer owns the revoked ones.
2. Once nothing is left to revoke, the member moves to the target epoch and gets the target
   partitions that are free; a partition still owned by another member (assigned to it or
   pending its revocation) is held back, the member is in UNRELEASED_PARTITIONS, and it gets
   the partition on a later heartbeat once the other member released it.
3. A member whose target did not change at all simply moves to the new epoch, STABLE.

A partition the member itself still owns is not "unreleased" to it (apache/kafka#20781,
KAFKA-19449): a partition pending its own revocation that the new target gives back to it is
kept rather than waited for.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

from rillet.coordinator.group.assignors import Assignment
from rillet.coordinator.group.consumer_group import ConsumerGroupMember, MemberState
from rillet.coordinator.group.messages import OwnedTopicPartitions
from rillet.errors import FencedMemberEpochError

__all__ = ["reconcile"]

# (topic id, partition) -> owner member id, or None when the partition is free.
OwnerOf = Callable[[uuid.UUID, int], str | None]


def _owns_any(owned: Sequence[OwnedTopicPartitions] | None, revoked: Assignment) -> bool:
    """Whether the member, by what it reported, still owns any of ``revoked``; a member
    that did not report its partitions is assumed to still own them."""
    if owned is None:
        return True
    for tp in owned:
        pending = revoked.get(tp.topic_id)
        if pending and any(p in pending for p in tp.partitions):
            return True
    return False


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owner_of: OwnerOf,
    owned: Sequence[OwnedTopicPartitions] | None,
) -> ConsumerGroupMember:
    """The member after one reconciliation step toward ``target`` at ``target_epoch`` (the
    member itself when no step is possible). ``owned`` is what its heartbeat reported."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owner_of, owned)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next_assignment(
            member, member.member_epoch + 1, target_epoch, target, owner_of, owned
        )
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, owner_of, owned)
    # UNKNOWN: written by a newer coordinator; start the member over from nothing.
    if owned is None or owned:
        raise FencedMemberEpochError(
            "the member is in an unknown state; it must abandon its partitions and rejoin"
        )
    return _next_assignment(member, target_epoch, target_epoch, target, owner_of, owned)


def _next_assignment(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    owner_of: OwnerOf,
    owned: Sequence[OwnedTopicPartitions] | None,
) -> ConsumerGroupMember:
    current = member.assigned_partitions
    has_unreleased = False
    new_assigned: dict[uuid.UUID, frozenset[int]] = {}
    pending_revocation: dict[uuid.UUID, frozenset[int]] = {}
    pending_assignment: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id in sorted(set(target) | set(current), key=lambda t: t.bytes):
        wanted = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        kept = have & wanted
        revoked = have - kept
        to_assign = set()
        for p in sorted(wanted - kept):
            owner = owner_of(topic_id, p)
            if owner is None or owner == member.member_id:
                to_assign.add(p)
            else:
                has_unreleased = True
        if kept:
            new_assigned[topic_id] = kept
        if revoked:
            pending_revocation[topic_id] = revoked
        if to_assign:
            pending_assignment[topic_id] = frozenset(to_assign)

    # Kafka's updateMemberEpoch: the previous epoch is the one the member had, even when the
    # epoch does not change (then only the current epoch is accepted).
    if pending_revocation and _owns_any(owned, pending_revocation):
        return replace(
            member,
            member_epoch=member_epoch,
            previous_member_epoch=member.member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=new_assigned,
            partitions_pending_revocation=pending_revocation,
        )
    for topic_id, partitions in pending_assignment.items():
        new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
    return replace(
        member,
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        state=MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE,
        assigned_partitions=new_assigned,
        partitions_pending_revocation={},
    )
