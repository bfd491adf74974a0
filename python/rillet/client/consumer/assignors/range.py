"""Kafka's ``RangeAssignor`` (``range``, the default ``partition.assignment.strategy``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rillet.client.consumer.assignors.abstract import (
    ConsumerPartitionAssignor,
    GroupMember,
    member_order,
)
from rillet.types import TopicPartition

__all__ = ["RangeAssignor"]


class RangeAssignor(ConsumerPartitionAssignor):
    """Per topic, the partitions in numeric order are cut into contiguous ranges, one per
    subscribed member in :func:`~.abstract.member_order` (static members by
    ``group.instance.id`` first, then the others by member id); with ``n`` partitions and
    ``m`` members each gets ``n // m`` and the first ``n % m`` one more.

    Kafka's javadoc example: members C0 and C1, topics t0 and t1 of 3 partitions each, gives
    C0 [t0p0, t0p1, t1p0, t1p1] and C1 [t0p2, t1p2]. Topics with the same subscribers are
    co-partitioned (partition i of each goes to the same member), which joins rely on; the
    price is imbalance across topics (the first members get every topic's extra partition).

    EAGER only. Kafka 3.5's rack-aware variant (KIP-881), which needs each partition's replica
    racks, is not implemented."""

    name = "range"

    def assign_partitions(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        ordered = sorted(members, key=member_order)
        subscribed = [frozenset(m.subscription.topics) for m in ordered]
        for topic, n in partitions_per_topic.items():
            subscribers = [
                m for m, topics in zip(ordered, subscribed, strict=True) if topic in topics
            ]
            if not subscribers:
                continue
            each, extra = divmod(n, len(subscribers))
            start = 0
            for i, member in enumerate(subscribers):
                length = each + (1 if i < extra else 0)
                assignment[member.member_id].extend(
                    TopicPartition(topic, p) for p in range(start, start + length)
                )
                start += length
        return assignment
