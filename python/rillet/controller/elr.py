"""Eligible leader replicas (KIP-966): who may lead when no in-sync replica can.

A replica that leaves the ISR while the ISR is smaller than the topic's
``min.insync.replicas`` joins the partition's ELR. Nothing is acknowledged with acks=all,
and the high watermark does not move, while the ISR is that small, so an ELR member holds
every record below the high watermark: it may lead when no ISR member is usable, and no
acknowledged record is lost. The ELR empties once the ISR is back at min.insync.replicas.

A broker that restarts after an unclean shutdown (kill -9, a power loss: no clean-shutdown
marker with its last broker epoch) may have lost what it never fsynced, so it leaves every
ISR and ELR it was in, unless it is the partition's last candidate (nobody else could lead
without an unclean election; Kafka's last-known-leader recovery would pick it too).

Leadership rules (``choose_leader`` in :mod:`~rillet.controller.elections`) and ISR changes
everywhere build plain records; :func:`maintain_elr` then sets each change's ELR from the
ISR it leaves behind, so the rule lives in one place, as in Kafka's PartitionChangeBuilder.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace

from rillet.controller.elections import is_usable
from rillet.metadata.image import MetadataImage, PartitionRegistration
from rillet.metadata.records import (
    NO_LEADER,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)

__all__ = [
    "MIN_ISR_KEY",
    "leave_after_unclean_shutdown",
    "maintain_elr",
    "min_insync_replicas",
    "next_elr",
]

_log = logging.getLogger(__name__)

MIN_ISR_KEY = "min.insync.replicas"


def min_insync_replicas(
    image: MetadataImage, topic: str, static_config: Mapping[str, object]
) -> int:
    """The topic's ``min.insync.replicas``: its own config, else the cluster-wide dynamic
    default, else the controllers' static config, else 1. Values were validated when set."""
    for value in (
        image.topic_config(topic).get(MIN_ISR_KEY),
        image.broker_config("").get(MIN_ISR_KEY),
        static_config.get(MIN_ISR_KEY),
    ):
        if value is not None:
            return int(str(value))
    return 1


def next_elr(
    before: PartitionRegistration,
    change: PartitionChangeRecord,
    min_isr: int,
) -> tuple[int, ...]:
    """The ELR once ``change`` applies to ``before``: empty when the ISR holds
    min.insync.replicas; else the old ELR plus the replicas that just left the ISR (or, when
    ``change`` names an ELR itself, that one), less the ISR and whatever is no longer a
    replica, in assignment order."""
    after = before.merge(change)
    if len(after.isr) >= min_isr:
        return ()
    if change.elr is not None:
        eligible = set(change.elr)
    else:
        eligible = set(before.elr) | {r for r in before.isr if r not in after.isr}
    return tuple(r for r in after.replicas if r in eligible and r not in after.isr)


def maintain_elr(
    image: MetadataImage,
    records: Sequence[MetadataRecord],
    static_config: Mapping[str, object],
) -> list[MetadataRecord]:
    """``records`` (about to be appended after ``image``) with each partition change's ELR
    set from the ISR it leaves."""
    regs: dict[tuple[uuid.UUID, int], PartitionRegistration] = {}
    names = {t.topic_id: t.name for t in image.topics()}
    out: list[MetadataRecord] = []
    for record in records:
        if isinstance(record, TopicRecord):
            names[record.topic_id] = record.name
        elif isinstance(record, PartitionRecord):
            key = (record.topic_id, record.partition_id)
            regs[key] = PartitionRegistration(
                record.replicas, record.isr, record.leader, elr=record.elr
            )
        elif isinstance(record, PartitionChangeRecord):
            key = (record.topic_id, record.partition_id)
            before = regs.get(key) or _registration(image, record.topic_id, record.partition_id)
            if before is not None and record.topic_id in names:
                min_isr = min_insync_replicas(image, names[record.topic_id], static_config)
                elr = next_elr(before, record, min_isr)
                if elr != before.elr or record.elr is not None:
                    record = replace(record, elr=elr)
                regs[key] = before.merge(record)
        out.append(record)
    return out


def _registration(
    image: MetadataImage, topic_id: uuid.UUID, partition: int
) -> PartitionRegistration | None:
    topic = image.topics_by_id.get(topic_id)
    return topic.partitions.get(partition) if topic is not None else None


def leave_after_unclean_shutdown(image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
    """A broker that restarted after an unclean shutdown leaves every ISR and ELR it is in,
    where another replica remains in them to lead (else it stays, as the partition's last
    candidate). A partition whose ISR it empties gets a usable ELR member as leader, if any."""
    out: list[MetadataRecord] = []
    for topic in image.topics():
        for p, reg in sorted(topic.partitions.items()):
            if broker_id not in reg.isr and broker_id not in reg.elr:
                continue
            isr = tuple(b for b in reg.isr if b != broker_id)
            elr = tuple(b for b in reg.elr if b != broker_id)
            if not isr and not elr:
                _log.info(
                    "Broker %d shut down uncleanly but stays in the ISR of %s-%d: no other "
                    "replica could lead it",
                    broker_id,
                    topic.name,
                    p,
                )
                continue
            leader = reg.leader if reg.leader != broker_id else NO_LEADER
            if not isr:
                leader = next((b for b in elr if is_usable(image, b)), NO_LEADER)
                isr = (leader,) if leader != NO_LEADER else ()
                elr = tuple(b for b in elr if b != leader)
            out.append(
                PartitionChangeRecord(
                    topic.topic_id,
                    p,
                    isr=isr,
                    leader=leader if leader != reg.leader else None,
                    elr=elr,
                )
            )
    _log.warning(
        "Broker %d shut down uncleanly (it names no clean-shutdown broker epoch, so it may have "
        "lost records it never fsynced): it left the ISR and eligible leader replicas of %d "
        "partitions",
        broker_id,
        len(out),
    )
    return out
