"""ISR changes (KIP-497 AlterPartition, the ISR half of Kafka's ReplicationControlManager):
a partition leader asks the controller to shrink or expand its ISR, and the controller
validates the request against the registration it holds before writing the change.

The leader never changes its ISR itself: only the controller's PartitionChangeRecord does,
and the leader applies it when it arrives through the metadata log. The checks follow
ReplicationControlManager.validateAlterPartitionData: the requester must be the leader, in
the current leader epoch, at the current partition epoch; the new ISR must be drawn from the
replicas, include the leader, and hold only usable brokers.

Pure functions over a :class:`~rillet.metadata.image.MetadataImage`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from rillet import errors
from rillet.controller import reassignment
from rillet.controller.elections import is_usable
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage, PartitionRegistration
from rillet.metadata.records import MetadataRecord, PartitionChangeRecord

__all__ = ["AlterPartitionResult", "AlterPartitionState", "alter_partition"]


@dataclass(frozen=True)
class AlterPartitionState:
    """One partition's ISR as its leader asks for it, with the epochs it knows."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True)
class AlterPartitionResult:
    """The partition's registration after the request (or the error that refused it)."""

    topic_id: uuid.UUID
    partition: int
    error: KafkaError | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


def alter_partition(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    changes: Sequence[AlterPartitionState],
) -> ControllerResult[list[AlterPartitionResult]]:
    """Validate and apply each change. A requester that is not registered with
    ``broker_epoch`` fails the whole request (STALE_BROKER_EPOCH); everything else is
    answered per partition. A change to the ISR the partition already has writes
    nothing."""
    b = image.brokers.get(broker_id)
    if b is None or b.broker_epoch != broker_epoch:
        raise errors.StaleBrokerEpochError(
            f"Broker {broker_id} is not registered with epoch {broker_epoch}."
        )
    by_id = {t.topic_id: t for t in image.topics()}
    records: list[MetadataRecord] = []
    results: list[AlterPartitionResult] = []
    for change in changes:
        topic = by_id.get(change.topic_id)
        if topic is None:
            err: KafkaError = errors.UnknownTopicIdError(
                f"This server does not host topic ID {change.topic_id}."
            )
            results.append(AlterPartitionResult(change.topic_id, change.partition, err))
            continue
        reg = topic.partitions.get(change.partition)
        if reg is None:
            err = errors.UnknownTopicOrPartitionError(
                f"{topic.name}-{change.partition} does not exist."
            )
            results.append(AlterPartitionResult(change.topic_id, change.partition, err))
            continue
        refused = _validate(image, broker_id, f"{topic.name}-{change.partition}", reg, change)
        if refused is not None:
            results.append(AlterPartitionResult(change.topic_id, change.partition, refused))
            continue
        if change.new_isr != reg.isr:
            record = PartitionChangeRecord(change.topic_id, change.partition, isr=change.new_isr)
            after = reg.merge(record)
            # The replicas a reassignment adds may now all be in sync: it completes in
            # this same change (KIP-455).
            done = reassignment.completed(image, after)
            if done is not None:
                record = reassignment.change_record(change.topic_id, change.partition, reg, done)
            records.append(record)
            reg = reg.merge(record)
        results.append(
            AlterPartitionResult(
                change.topic_id,
                change.partition,
                None,
                reg.leader,
                reg.leader_epoch,
                reg.isr,
                reg.partition_epoch,
            )
        )
    return ControllerResult(records, results)


def _validate(
    image: MetadataImage,
    broker_id: int,
    name: str,
    reg: PartitionRegistration,
    change: AlterPartitionState,
) -> KafkaError | None:
    if broker_id != reg.leader:
        return errors.InvalidRequestError(
            f"Broker {broker_id} is not the leader of {name} (leader: {reg.leader})."
        )
    if change.leader_epoch > reg.leader_epoch:
        # The requester knows a leader epoch this controller has not seen: this controller
        # is behind, so the leader should retry with the active one.
        return errors.NotControllerError(
            f"{name}: leader epoch {change.leader_epoch} is newer than the controller's "
            f"{reg.leader_epoch}."
        )
    if change.leader_epoch < reg.leader_epoch:
        return errors.FencedLeaderEpochError(
            f"{name}: leader epoch {change.leader_epoch} is older than {reg.leader_epoch}."
        )
    if change.partition_epoch != reg.partition_epoch:
        return errors.InvalidUpdateVersionError(
            f"{name}: partition epoch {change.partition_epoch} is not the current "
            f"{reg.partition_epoch}."
        )
    isr = change.new_isr
    if len(set(isr)) != len(isr) or any(r not in reg.replicas for r in isr):
        return errors.InvalidRequestError(
            f"{name}: the ISR {list(isr)} must be distinct replicas of {list(reg.replicas)}."
        )
    if reg.leader not in isr:
        return errors.InvalidRequestError(
            f"{name}: the ISR {list(isr)} must include the leader {reg.leader}."
        )
    ineligible = [r for r in isr if not is_usable(image, r)]
    if ineligible:
        return errors.IneligibleReplicaError(
            f"{name}: replicas {ineligible} are fenced or not registered and cannot join the ISR."
        )
    return None
