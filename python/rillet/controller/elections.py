"""Partition leader election: who leads when a broker goes away or comes back, and preferred
leader election (Kafka's PartitionChangeBuilder election rules).

A leader comes from the ISR (clean election). When no in-sync replica is usable the
partition has no leader (-1), unless ``unclean.leader.election.enable`` lets an
out-of-sync replica lead, at the cost of the records it lacks. The last ISR member stays in
the ISR while it is down (it has every committed record), so that it can lead again.

Pure functions over a :class:`~rillet.metadata.image.MetadataImage`: they return records,
they change nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from rillet import errors
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage, PartitionRegistration
from rillet.metadata.records import NO_LEADER, MetadataRecord, PartitionChangeRecord

__all__ = [
    "choose_leader",
    "elect_on_unfence",
    "elect_preferred_leaders",
    "is_usable",
    "leave_isrs",
]


def is_usable(image: MetadataImage, broker_id: int) -> bool:
    """Registered and unfenced: may lead and may be in an ISR."""
    b = image.brokers.get(broker_id)
    return b is not None and not b.fenced


def choose_leader(
    image: MetadataImage,
    reg: PartitionRegistration,
    isr: Sequence[int],
    *,
    unclean: bool,
    exclude: int = NO_LEADER,
) -> int:
    """The first usable replica (in assignment order) that is in ``isr``; with ``unclean``
    the first usable replica at all; else NO_LEADER."""
    for b in reg.replicas:
        if b in isr and b != exclude and is_usable(image, b):
            return b
    if unclean:
        for b in reg.replicas:
            if b != exclude and is_usable(image, b):
                return b
    return NO_LEADER


def leave_isrs(image: MetadataImage, broker_id: int, *, unclean: bool) -> list[MetadataRecord]:
    """Move leadership and ISR membership away from ``broker_id``."""
    out: list[MetadataRecord] = []
    for topic in image.topics():
        for p, reg in sorted(topic.partitions.items()):
            if broker_id not in reg.isr and reg.leader != broker_id:
                continue
            # The last ISR member stays in the ISR (it has every committed record) even
            # while it is down, so that it can lead again when it returns.
            isr = tuple(b for b in reg.isr if b != broker_id) or reg.isr
            leader = reg.leader
            if leader == broker_id:
                leader = choose_leader(image, reg, isr, unclean=unclean, exclude=broker_id)
            if isr != reg.isr or leader != reg.leader:
                out.append(
                    PartitionChangeRecord(
                        topic.topic_id,
                        p,
                        isr=isr if isr != reg.isr else None,
                        leader=leader if leader != reg.leader else None,
                    )
                )
    return out


def elect_on_unfence(
    image: MetadataImage, broker_id: int, *, unclean: bool
) -> list[MetadataRecord]:
    """Leaderless partitions that ``broker_id`` can lead get it as leader."""
    out: list[MetadataRecord] = []
    for topic in image.topics():
        for p, reg in sorted(topic.partitions.items()):
            if reg.has_leader or broker_id not in reg.replicas:
                continue
            if broker_id in reg.isr or unclean:
                isr = reg.isr if broker_id in reg.isr else (broker_id,)
                out.append(
                    PartitionChangeRecord(
                        topic.topic_id,
                        p,
                        leader=broker_id,
                        isr=None if isr == reg.isr else isr,
                    )
                )
    return out


def elect_preferred_leaders(
    image: MetadataImage, partitions: Sequence[tuple[str, int]] | None = None
) -> ControllerResult[dict[tuple[str, int], KafkaError | None]]:
    """Move leadership to each partition's preferred (first) replica where it is alive and
    in sync. ``None`` means every partition."""
    records: list[MetadataRecord] = []
    results: dict[tuple[str, int], KafkaError | None] = {}
    wanted = partitions
    if wanted is None:
        wanted = [(t.name, p) for t in image.topics() for p in sorted(t.partitions)]
    for name, p in wanted:
        topic = image.topic(name)
        reg = topic.partitions.get(p) if topic else None
        if topic is None or reg is None:
            results[(name, p)] = errors.UnknownTopicOrPartitionError(f"{name}-{p} does not exist.")
            continue
        preferred = reg.preferred_leader
        if reg.leader == preferred:
            results[(name, p)] = errors.ElectionNotNeededError(
                f"Leader is already the preferred replica for {name}-{p}."
            )
            continue
        if preferred not in reg.isr or not is_usable(image, preferred):
            results[(name, p)] = errors.PreferredLeaderNotAvailableError(
                f"The preferred leader {preferred} of {name}-{p} is not available."
            )
            continue
        records.append(PartitionChangeRecord(topic.topic_id, p, leader=preferred))
        results[(name, p)] = None
    return ControllerResult(records, results)
