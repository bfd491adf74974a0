"""Partition leader election: who leads when a broker goes away or comes back, elections an
admin asks for (ElectLeaders, KIP-460), and automatic preferred leader balancing (Kafka's
PartitionChangeBuilder election rules and ReplicationControlManager's elections).

A leader comes from the ISR (clean election), else from the eligible leader replicas (KIP-966,
see :mod:`~rillet.controller.elr`), which hold every committed record too. When none of
those is usable the partition has no leader (-1), unless ``unclean.leader.election.enable``
for its topic lets an out-of-sync replica lead, at the cost of the records it lacks; the ISR
is then the new leader alone, and the election is logged. The last ISR member stays in the
ISR while it is down (it has every committed record), so that it can lead again.

``unclean.leader.election.enable`` is resolved per topic: the topic's own config, else the
cluster-wide dynamic broker default, else the controller's static config.

Pure functions over a :class:`~rillet.metadata.image.MetadataImage`: they return records,
they change nothing (they log the unclean elections they decide).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence

from rillet import errors
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from rillet.metadata.records import NO_LEADER, MetadataRecord, PartitionChangeRecord

__all__ = [
    "UNCLEAN_KEY",
    "ElectionResults",
    "ElectionType",
    "balance_partition_leaders",
    "choose_leader",
    "elect_leaders",
    "elect_on_unfence",
    "elect_unclean_leaders",
    "imbalanced_brokers",
    "is_usable",
    "leave_isrs",
    "unclean_enabled",
]

_log = logging.getLogger(__name__)

UNCLEAN_KEY = "unclean.leader.election.enable"

ElectionResults = dict[tuple[str, int], KafkaError | None]


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (Kafka's ElectionType values)."""

    PREFERRED = 0
    UNCLEAN = 1


def is_usable(image: MetadataImage, broker_id: int) -> bool:
    """Registered and unfenced: may lead and may be in an ISR."""
    b = image.brokers.get(broker_id)
    return b is not None and not b.fenced


def unclean_enabled(image: MetadataImage, topic: str, static_default: bool) -> bool:
    """``unclean.leader.election.enable`` for ``topic``: its own config, else the cluster-wide
    dynamic default, else ``static_default``. Values were validated as booleans when set."""
    value = image.topic_config(topic).get(UNCLEAN_KEY)
    if value is None:
        value = image.broker_config("").get(UNCLEAN_KEY)
    if value is None:
        return static_default
    return value.strip().lower() == "true"


def choose_leader(
    image: MetadataImage,
    reg: PartitionRegistration,
    isr: Sequence[int],
    *,
    unclean: bool,
    exclude: int = NO_LEADER,
) -> int:
    """The first usable replica (in assignment order) that is in ``isr``, else in the ELR;
    with ``unclean`` the first usable replica at all; else NO_LEADER."""
    for b in reg.replicas:
        if b in isr and b != exclude and is_usable(image, b):
            return b
    for b in reg.replicas:
        if b in reg.elr and b != exclude and is_usable(image, b):
            return b
    if unclean:
        for b in reg.replicas:
            if b != exclude and is_usable(image, b):
                return b
    return NO_LEADER


def _change(
    topic: TopicImage, p: int, reg: PartitionRegistration, leader: int, isr: Sequence[int]
) -> PartitionChangeRecord | None:
    """The record moving ``reg`` to ``leader`` and ``isr`` (a leader outside ``isr`` makes
    itself the whole ISR: an eligible leader replica, or an unclean leader, which is logged);
    None when nothing changes."""
    isr = tuple(isr)
    elr: tuple[int, ...] | None = None
    if leader != NO_LEADER and leader not in isr and leader in reg.elr:
        _log.info(
            "Setting new leader for topic %s partition %d to %d from the eligible leader "
            "replicas %s (ISR was %s)",
            topic.name,
            p,
            leader,
            list(reg.elr),
            list(reg.isr),
        )
        isr = (leader,)
    elif leader != NO_LEADER and leader not in isr:
        _log.warning(
            "Setting new leader for topic %s partition %d to %d using an unclean election "
            "(ISR was %s): records it lacks are lost",
            topic.name,
            p,
            leader,
            list(reg.isr),
        )
        isr = (leader,)
        # The new leader's log is the partition's now: nobody else is eligible any more.
        elr = ()
    if leader == reg.leader and isr == reg.isr:
        return None
    return PartitionChangeRecord(
        topic.topic_id,
        p,
        isr=isr if isr != reg.isr else None,
        leader=leader if leader != reg.leader else None,
        elr=elr,
    )


def leave_isrs(
    image: MetadataImage, broker_id: int, *, static_unclean: bool
) -> list[MetadataRecord]:
    """Move leadership and ISR membership away from ``broker_id``."""
    out: list[MetadataRecord] = []
    for topic in image.topics():
        unclean: bool | None = None
        for p, reg in sorted(topic.partitions.items()):
            if broker_id not in reg.isr and reg.leader != broker_id:
                continue
            # The last ISR member stays in the ISR (it has every committed record) even
            # while it is down, so that it can lead again when it returns.
            isr = tuple(b for b in reg.isr if b != broker_id) or reg.isr
            leader = reg.leader
            if leader == broker_id:
                if unclean is None:
                    unclean = unclean_enabled(image, topic.name, static_unclean)
                leader = choose_leader(image, reg, isr, unclean=unclean, exclude=broker_id)
            record = _change(topic, p, reg, leader, isr)
            if record is not None:
                out.append(record)
    return out


def elect_on_unfence(
    image: MetadataImage, broker_id: int, *, static_unclean: bool
) -> list[MetadataRecord]:
    """Leaderless partitions that ``broker_id`` can lead get it as leader."""
    out: list[MetadataRecord] = []
    for topic in image.topics():
        for p, reg in sorted(topic.partitions.items()):
            if reg.has_leader or broker_id not in reg.replicas:
                continue
            if (
                broker_id in reg.isr
                or (broker_id in reg.elr and not any(is_usable(image, b) for b in reg.isr))
                or unclean_enabled(image, topic.name, static_unclean)
            ):
                record = _change(topic, p, reg, broker_id, reg.isr)
                if record is not None:
                    out.append(record)
    return out


def elect_unclean_leaders(image: MetadataImage, static_unclean: bool) -> list[MetadataRecord]:
    """Every leaderless partition whose topic allows unclean elections gets a leader if any
    replica is usable (Kafka's maybeElectUncleanLeaders: run when the config is turned on
    and every ``unclean.leader.election.interval.ms``)."""
    out: list[MetadataRecord] = []
    for topic in image.topics():
        if not unclean_enabled(image, topic.name, static_unclean):
            continue
        for p, reg in sorted(topic.partitions.items()):
            if reg.has_leader:
                continue
            leader = choose_leader(image, reg, reg.isr, unclean=True)
            record = _change(topic, p, reg, leader, reg.isr)
            if record is not None:
                _log.warning(
                    "Triggered unclean leader election for offline partition %s-%d", topic.name, p
                )
                out.append(record)
    return out


def _elect_one(
    image: MetadataImage, name: str, p: int, election_type: ElectionType
) -> PartitionChangeRecord | KafkaError:
    topic = image.topic(name)
    reg = topic.partitions.get(p) if topic else None
    if topic is None or reg is None:
        return errors.UnknownTopicOrPartitionError(f"No such partition as {name}-{p}.")
    if election_type == ElectionType.PREFERRED:
        preferred = reg.preferred_leader
        if reg.leader == preferred:
            return errors.ElectionNotNeededError(
                f"Leader is already the preferred replica for {name}-{p}."
            )
        if preferred not in reg.isr or not is_usable(image, preferred):
            return errors.PreferredLeaderNotAvailableError(
                f"The preferred leader {preferred} of {name}-{p} is not in the ISR or not alive."
            )
        return PartitionChangeRecord(topic.topic_id, p, leader=preferred)
    if reg.has_leader:
        return errors.ElectionNotNeededError(f"{name}-{p} already has a leader.")
    record = _change(topic, p, reg, choose_leader(image, reg, reg.isr, unclean=True), reg.isr)
    if record is None:
        return errors.EligibleLeadersNotAvailableError(
            f"No replica of {name}-{p} is alive to lead it (replicas {list(reg.replicas)})."
        )
    return record


def elect_leaders(
    image: MetadataImage,
    election_type: ElectionType,
    partitions: Sequence[tuple[str, int]] | None = None,
) -> ControllerResult[ElectionResults]:
    """ElectLeaders (KIP-460). PREFERRED moves leadership to each partition's first replica
    where it is alive and in sync; UNCLEAN gives a leaderless partition a leader, from the
    ISR if it can, else any live replica, whatever the topic's config says (an operator
    asked). ``None`` means every partition, and then partitions that need no election are
    left out of the results, as Kafka leaves them out."""
    records: list[MetadataRecord] = []
    results: ElectionResults = {}
    wanted = partitions
    if wanted is None:
        wanted = [(t.name, p) for t in image.topics() for p in sorted(t.partitions)]
    for name, p in wanted:
        outcome = _elect_one(image, name, p, election_type)
        if isinstance(outcome, KafkaError):
            if partitions is None and isinstance(outcome, errors.ElectionNotNeededError):
                continue
            results[(name, p)] = outcome
        else:
            records.append(outcome)
            results[(name, p)] = None
    return ControllerResult(records, results)


def imbalanced_brokers(image: MetadataImage, percentage: int) -> dict[int, float]:
    """Each broker whose leader imbalance ratio (partitions it is the preferred leader of but
    does not lead, over partitions it is the preferred leader of) exceeds ``percentage``
    (``leader.imbalance.per.broker.percentage``), with that ratio."""
    preferred: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for topic in image.topics():
        for reg in topic.partitions.values():
            b = reg.preferred_leader
            preferred[b] = preferred.get(b, 0) + 1
            if reg.leader != b:
                not_leading[b] = not_leading.get(b, 0) + 1
    return {
        b: not_leading[b] / preferred[b]
        for b in sorted(not_leading)
        if not_leading[b] * 100 > percentage * preferred[b]
    }


def balance_partition_leaders(image: MetadataImage, percentage: int) -> list[MetadataRecord]:
    """Automatic preferred leader election (``auto.leader.rebalance.enable``): for every
    broker whose imbalance ratio exceeds ``percentage``, move back to it the partitions it
    is the preferred leader of, where it is alive and in sync."""
    brokers = imbalanced_brokers(image, percentage)
    out: list[MetadataRecord] = []
    for topic in image.topics():
        for p, reg in sorted(topic.partitions.items()):
            b = reg.preferred_leader
            if b in brokers and reg.leader != b and b in reg.isr and is_usable(image, b):
                out.append(PartitionChangeRecord(topic.topic_id, p, leader=b))
    return out
