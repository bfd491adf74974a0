"""Kafka's ``CooperativeStickyAssignor`` (``cooperative-sticky``, KIP-429)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from rillet.client.consumer.assignors.abstract import GroupMember, RebalanceProtocol
from rillet.client.consumer.assignors.protocol import (
    DEFAULT_GENERATION,
    Assignment,
    Subscription,
    decode_cooperative_sticky_user_data,
    encode_cooperative_sticky_user_data,
)
from rillet.client.consumer.assignors.sticky import AbstractStickyAssignor, MemberData, StickyTarget
from rillet.types import TopicPartition

__all__ = ["CooperativeStickyAssignor", "partitions_transferring_ownership"]


def partitions_transferring_ownership(target: StickyTarget) -> dict[TopicPartition, str]:
    """The partitions the target moves to a new owner while another member still owns them:
    partition -> the member it is meant for. A partition is withheld from member M when M
    did not validly own it and some other member claims it in its ``owned_partitions``
    (a current owner losing it, members of one generation both claiming it, or a claimant
    whose claim an older or newer generation overrode: each still holds it until it revokes).

    This covers Kafka's two cases (the constrained builder's ``partitionsTransferringOwnership``
    and ``computePartitionsTransferringOwnership`` over raw owned partitions), so the result
    always passes :func:`~.abstract.validate_cooperative_assignment`."""
    claimed_by: dict[TopicPartition, set[str]] = {}
    for member_id, claims in target.claims.items():
        for tp in claims:
            claimed_by.setdefault(tp, set()).add(member_id)
    out: dict[TopicPartition, str] = {}
    for member_id, partitions in target.assignment.items():
        owned = target.owned.get(member_id, frozenset())
        for tp in partitions:
            if tp not in owned and claimed_by.get(tp, set()) - {member_id}:
                out[tp] = member_id
    return out


class CooperativeStickyAssignor(AbstractStickyAssignor):
    """Kafka's ``CooperativeStickyAssignor``: the sticky assignment under the COOPERATIVE
    protocol (KIP-429). Members keep their partitions while they rebalance, so a partition the
    sticky assignment moves from one member to another is only taken away in this generation
    (the old owner, not finding it in its assignment, revokes it and rejoins) and given to its
    new owner by the follow-up rebalance, when nobody owns it. Members whose partitions do not
    move never stop consuming.

    Supports COOPERATIVE and EAGER (in that order of preference), so it can share a group with
    eager members while a group upgrades. A member's past is its subscription's owned
    partitions and generation (v2+); with an older subscription, the generation comes from this
    assignor's user data (an int32), as in Kafka."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self) -> None:
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._generation = generation_id

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        return encode_cooperative_sticky_user_data(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        generation = subscription.generation_id
        if generation < 0 and subscription.user_data is not None:
            generation = decode_cooperative_sticky_user_data(subscription.user_data)
        return MemberData(subscription.owned_partitions, generation)

    def assign_partitions(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> dict[str, list[TopicPartition]]:
        target = self.sticky_target(partitions_per_topic, members)
        withheld = partitions_transferring_ownership(target)
        return {
            member_id: [tp for tp in partitions if tp not in withheld]
            for member_id, partitions in target.assignment.items()
        }
