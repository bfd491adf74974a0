"""Kafka's ``RoundRobinAssignor`` (``roundrobin``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rillet.client.consumer.assignors.abstract import (
    ConsumerPartitionAssignor,
    GroupMember,
    member_order,
)
from rillet.types import TopicPartition

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(ConsumerPartitionAssignor):
    """All subscribed partitions, sorted by topic then partition, dealt one at a time to the
    members in :func:`~.abstract.member_order` (static members by ``group.instance.id`` first),
    going round in a circle and skipping a member not subscribed to the partition's topic.

    With equal subscriptions the counts differ by at most one. Kafka's javadoc examples: C0 and
    C1 on t0 and t1 of 3 partitions each gives C0 [t0p0, t0p2, t1p1] and C1 [t0p1, t1p0,
    t1p2]; C0 on t0, C1 on t0 and t1, C2 on t0, t1 and t2 (of 1, 2 and 3 partitions) gives C0
    [t0p0], C1 [t1p0] and C2 [t1p1, t2p0, t2p1, t2p2]: unequal subscriptions can leave it
    unbalanced. EAGER only."""

    name = "roundrobin"

    def assign_partitions(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        circle = sorted(members, key=member_order)
        if not circle:
            return assignment
        subscribed = [frozenset(m.subscription.topics) for m in circle]
        # The member the next partition is offered to first (Kafka's CircularIterator).
        turn = 0
        for topic, n in partitions_per_topic.items():  # sorted by topic
            # Some member subscribes to every topic here, so the scan always ends.
            for partition in range(n):
                while topic not in subscribed[turn]:
                    turn = (turn + 1) % len(circle)
                assignment[circle[turn].member_id].append(TopicPartition(topic, partition))
                turn = (turn + 1) % len(circle)
        return assignment
