"""Offsets committed inside transactions that are still open: Kafka's
``OffsetMetadataManager.pendingTransactionalOffsets`` and ``openTransactionsByGroup``.

A TxnOffsetCommit writes ordinary OffsetCommit records, but in a transactional batch of its
producer; until that producer's COMMIT or ABORT marker reaches the partition they are
*pending*: kept here, by producer id, and never answered by OffsetFetch. The marker moves them
into the committed offsets (COMMIT) or drops them (ABORT). A tombstone of a partition (offset
deletion, group deletion) drops the pending offsets of every open transaction of the group for
it, but the producer still counts as an open transaction of the group until its marker
(KAFKA-19164): expiry does not delete a group with open transactions (KAFKA-19163).

The store is pure data; :class:`~rillet.coordinator.group.state.ShardState` changes it only by
replaying records and markers.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from rillet.coordinator.group.state import OffsetAndMetadata

__all__ = ["PendingOffsets", "PendingTransactionalOffsets"]

# group -> topic -> partition -> offset
PendingOffsets: TypeAlias = "dict[str, dict[str, dict[int, OffsetAndMetadata]]]"


@dataclass
class _Saved:
    producer_id: int
    offsets: PendingOffsets | None
    open_groups: frozenset[str]


class PendingTransactionalOffsets:
    """Pending offsets by producer id, and the open transactions of each group."""

    def __init__(self) -> None:
        self.by_producer: dict[int, PendingOffsets] = {}
        self.open_by_group: dict[str, set[int]] = {}

    def put(self, producer_id: int, key: tuple[str, str, int], value: OffsetAndMetadata) -> None:
        group, topic, partition = key
        by_group = self.by_producer.setdefault(producer_id, {})
        by_group.setdefault(group, {}).setdefault(topic, {})[partition] = value
        self.open_by_group.setdefault(group, set()).add(producer_id)

    def get(self, producer_id: int, key: tuple[str, str, int]) -> OffsetAndMetadata | None:
        group, topic, partition = key
        return self.by_producer.get(producer_id, {}).get(group, {}).get(topic, {}).get(partition)

    def remove_partition(self, group: str, topic: str, partition: int) -> None:
        """A tombstone: the partition's pending offsets go from every open transaction of the
        group; the transactions stay open for the group (KAFKA-19164)."""
        for producer_id in self.open_by_group.get(group, ()):
            topics = self.by_producer.get(producer_id, {}).get(group)
            if topics is None or topic not in topics:
                continue
            topics[topic].pop(partition, None)
            if not topics[topic]:
                del topics[topic]

    def pop_producer(self, producer_id: int) -> PendingOffsets | None:
        """The producer's pending offsets, removed (its transaction ended)."""
        offsets = self.by_producer.pop(producer_id, None)
        for group in offsets or {}:
            producers = self.open_by_group.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.open_by_group[group]
        return offsets

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """Kafka's hasPendingTransactionalOffsets."""
        return any(
            partition in self.by_producer.get(p, {}).get(group, {}).get(topic, {})
            for p in self.open_by_group.get(group, ())
        )

    def has_open_transactions(self, group: str) -> bool:
        return group in self.open_by_group

    def partitions_of(self, group: str) -> Iterator[tuple[str, int]]:
        """Every (topic, partition) of the group with a pending offset, in order, once."""
        seen: set[tuple[str, int]] = set()
        for producer_id in sorted(self.open_by_group.get(group, ())):
            for topic, partitions in self.by_producer.get(producer_id, {}).get(group, {}).items():
                seen.update((topic, p) for p in partitions)
        return iter(sorted(seen))

    # -- undo ------------------------------------------------------------------------------

    def save(self, producer_id: int) -> _Saved:
        """What :meth:`restore` needs to put the producer's pending offsets back."""
        return _Saved(
            producer_id,
            copy.deepcopy(self.by_producer.get(producer_id)),
            frozenset(g for g, ps in self.open_by_group.items() if producer_id in ps),
        )

    def restore(self, saved: _Saved) -> None:
        pid = saved.producer_id
        if saved.offsets is None:
            self.by_producer.pop(pid, None)
        else:
            self.by_producer[pid] = saved.offsets
        for group in list(self.open_by_group):
            if group not in saved.open_groups:
                self.open_by_group[group].discard(pid)
                if not self.open_by_group[group]:
                    del self.open_by_group[group]
        for group in saved.open_groups:
            self.open_by_group.setdefault(group, set()).add(pid)
