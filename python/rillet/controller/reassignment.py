"""Partition reassignment (KIP-455, Kafka's ReplicationControlManager and
PartitionReassignmentReplicas): move a partition to a new replica set without losing a
record, as ``rillet reassign-partitions --execute`` asks.

A reassignment first *adds*: the partition's replicas become the target followed by the
replicas it removes (``removing_replicas``), and the new ones (``adding_replicas``) fetch
from the leader like any follower until the leader asks the controller to take them into
the ISR. Once the ISR, leaving out the removing replicas, holds every target replica, it
*completes* in the same change: the replicas become the target, the removing ones leave the
ISR and, if the leader was one of them, the first target replica in the ISR leads. Brokers
that hold a removed replica delete it when they see that change. Cancelling puts the
original replicas back. Nothing here touches a log; it is the metadata of the move.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from rillet import errors
from rillet.controller.elections import is_usable
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage, PartitionRegistration
from rillet.metadata.records import NO_LEADER, MetadataRecord, PartitionChangeRecord

__all__ = [
    "OngoingReassignment",
    "alter_partition_reassignments",
    "change_record",
    "completed",
    "list_partition_reassignments",
]


@dataclass(frozen=True)
class OngoingReassignment:
    """ListPartitionReassignments' answer for one partition."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def alter_partition_reassignments(
    image: MetadataImage, requests: Sequence[tuple[str, int, Sequence[int] | None]]
) -> ControllerResult[list[KafkaError | None]]:
    """Start (a target replica list) or cancel (None) the reassignment of each partition;
    one result per request, in order. A partition named twice is refused."""
    records: list[MetadataRecord] = []
    results: list[KafkaError | None] = []
    named = [(t, p) for t, p, _ in requests]
    for name, p, target in requests:
        topic = image.topic(name)
        reg = topic.partitions.get(p) if topic is not None else None
        if topic is None or reg is None:
            results.append(
                errors.UnknownTopicOrPartitionError(f"Partition {name}-{p} does not exist.")
            )
            continue
        if named.count((name, p)) > 1:
            results.append(errors.InvalidRequestError(f"Partition {name}-{p} is named twice."))
            continue
        change: PartitionRegistration | None
        try:
            if target is None:
                change = _cancel(image, reg)
            else:
                _validate_target(image, name, p, target)
                change = _start(image, reg, tuple(target))
        except KafkaError as e:
            results.append(e)
            continue
        if change is not None:
            records.append(change_record(topic.topic_id, p, reg, change))
        results.append(None)
    return ControllerResult(records, results)


def list_partition_reassignments(
    image: MetadataImage, partitions: Sequence[tuple[str, int]] | None = None
) -> dict[tuple[str, int], OngoingReassignment]:
    """The reassignments in progress (of ``partitions`` only, when given; those that name
    nothing or are not moving are left out)."""
    out: dict[tuple[str, int], OngoingReassignment] = {}
    for topic in image.topics():
        for p, reg in sorted(topic.partitions.items()):
            if partitions is not None and (topic.name, p) not in partitions:
                continue
            if reg.is_reassigning:
                out[(topic.name, p)] = OngoingReassignment(
                    reg.replicas, reg.adding_replicas, reg.removing_replicas
                )
    return out


def completed(image: MetadataImage, reg: PartitionRegistration) -> PartitionRegistration | None:
    """``reg`` with its reassignment completed, when the ISR (less the removing replicas)
    holds every target replica; None otherwise."""
    if not reg.is_reassigning:
        return None
    isr = tuple(r for r in reg.isr if r not in reg.removing_replicas)
    replicas = reg.target_replicas
    if not isr or not replicas or not set(replicas) <= set(isr):
        return None
    return _with(image, reg, replicas, isr, (), ())


def _validate_target(image: MetadataImage, topic: str, p: int, target: Sequence[int]) -> None:
    if not target:
        raise errors.InvalidReplicaAssignmentError(f"The target replicas of {topic}-{p} are empty.")
    if len(set(target)) != len(target):
        raise errors.InvalidReplicaAssignmentError(
            f"The target replicas of {topic}-{p} name a broker twice: {list(target)}."
        )
    unknown = [b for b in target if b not in image.brokers]
    if unknown:
        raise errors.InvalidReplicaAssignmentError(
            f"The target replicas of {topic}-{p} name brokers that are not registered: {unknown}."
        )


def _start(
    image: MetadataImage, reg: PartitionRegistration, target: tuple[int, ...]
) -> PartitionRegistration | None:
    """A new target replaces one in progress: it starts again from the original replicas."""
    original = reg.original_replicas
    if target == original and not reg.is_reassigning:
        return None
    removing = tuple(r for r in original if r not in target)
    adding = tuple(r for r in target if r not in original)
    replicas = target + removing
    isr = tuple(r for r in reg.isr if r in replicas)
    if not isr:
        raise errors.InvalidReplicaAssignmentError(
            "The reassignment would leave no in-sync replica (the ISR holds only replicas a "
            "cancelled target was adding)."
        )
    started = _with(image, reg, replicas, isr, removing, adding)
    return completed(image, started) or started


def _cancel(image: MetadataImage, reg: PartitionRegistration) -> PartitionRegistration:
    if not reg.is_reassigning:
        raise errors.NoReassignmentInProgressError("No reassignment is in progress.")
    original = reg.original_replicas
    isr = tuple(r for r in reg.isr if r in original)
    if not isr:
        raise errors.InvalidReplicaAssignmentError(
            "Cancelling would leave no in-sync replica: only added replicas are in sync."
        )
    return _with(image, reg, original, isr, (), ())


def _with(
    image: MetadataImage,
    reg: PartitionRegistration,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    removing: tuple[int, ...],
    adding: tuple[int, ...],
) -> PartitionRegistration:
    """``reg`` with new replicas and ISR; a leader that is no longer in both is replaced by
    the first usable replica (in the new order) that is in the ISR."""
    leader = reg.leader
    if leader not in replicas or leader not in isr:
        leader = next((r for r in replicas if r in isr and is_usable(image, r)), NO_LEADER)
    return PartitionRegistration(
        replicas, isr, leader, reg.leader_epoch, reg.partition_epoch, removing, adding
    )


def change_record(
    topic_id: uuid.UUID, p: int, old: PartitionRegistration, new: PartitionRegistration
) -> PartitionChangeRecord:
    """The change from ``old`` to ``new``, naming only the fields that differ."""
    return PartitionChangeRecord(
        topic_id,
        p,
        isr=new.isr if new.isr != old.isr else None,
        leader=new.leader if new.leader != old.leader else None,
        replicas=new.replicas if new.replicas != old.replicas else None,
        removing_replicas=(
            new.removing_replicas if new.removing_replicas != old.removing_replicas else None
        ),
        adding_replicas=new.adding_replicas if new.adding_replicas != old.adding_replicas else None,
    )
