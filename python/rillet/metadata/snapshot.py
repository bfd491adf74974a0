"""Metadata snapshots (KIP-630): an image written as the records that rebuild it, and the
policy that decides when a node writes one.

A snapshot holds the fewest records that replay into the same image: the finalized features,
every broker registration (with its fenced state), where the next block of producer ids
starts, every topic with its partitions (leader and partition epochs included, and a
reassignment in progress) and every config. Replaying
them on an empty image gives the image back (``image_from_records``), which is how a node
starts from its latest snapshot and how a node that fetched one from the leader catches up.

On disk (and in FetchSnapshot) a snapshot is RecordBatch v2 bytes, as the metadata log is:
each record one ``MetadataRecord`` envelope, every batch CRC-checked when read.
"""

from __future__ import annotations

from collections.abc import Sequence

from rillet._core import BatchBuilder, decode_batches
from rillet.errors import KafkaStorageError
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntity,
    RegisterBrokerRecord,
    TopicRecord,
)
from rillet.protocol.metadata_records import decode_record, encode_record

__all__ = [
    "SnapshotPolicy",
    "decode_snapshot",
    "encode_snapshot",
    "image_from_records",
    "image_records",
]

_BATCH_RECORDS = 500


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """The records that rebuild ``image`` from nothing, in a stable order."""
    out: list[MetadataRecord] = [
        FeatureLevelRecord(name, level) for name, level in sorted(image.features.items())
    ]
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        out.append(
            RegisterBrokerRecord(
                b.broker_id, b.incarnation_id, b.broker_epoch, b.endpoints, b.rack, b.fenced
            )
        )
    if not image.producer_ids.is_empty:
        # As Kafka's ProducerIdsImage writes it: no broker, only where the next block starts.
        out.append(ProducerIdsRecord(-1, -1, image.producer_ids.next_producer_id))
    for topic in sorted(image.topics(), key=lambda t: t.name):
        out.append(TopicRecord(topic.name, topic.topic_id))
        for p, reg in sorted(topic.partitions.items()):
            out.append(
                PartitionRecord(
                    topic.topic_id,
                    p,
                    reg.replicas,
                    reg.isr,
                    reg.leader,
                    reg.leader_epoch,
                    reg.partition_epoch,
                    reg.removing_replicas,
                    reg.adding_replicas,
                    reg.elr,
                )
            )
    for (rtype, name), values in sorted(image.configs.items()):
        for key, value in sorted(values.items()):
            out.append(ConfigRecord(rtype, name, key, value))
    out.extend(image.scram_credentials[key] for key in sorted(image.scram_credentials))
    out.extend(image.acls[acl_id] for acl_id in sorted(image.acls))
    for entity in sorted(image.client_quotas, key=_entity_key):
        quotas = image.client_quotas[entity]
        out.extend(ClientQuotaRecord(entity, key, quotas[key]) for key in sorted(quotas))
    return out


def _entity_key(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    """A quota entity's sort key (a default's name is None)."""
    return tuple((kind, name is not None, name or "") for kind, name in entity)


def image_from_records(
    records: Sequence[MetadataRecord], end_offset: int, before: MetadataImage | None = None
) -> tuple[MetadataImage, MetadataDelta]:
    """The image a snapshot ending at ``end_offset`` holds, and the delta from ``before``
    (the image it replaces; empty by default) to it, for whoever acts on what changed."""
    delta = MetadataDelta.for_snapshot(before or MetadataImage(), end_offset)
    for i, record in enumerate(records):
        delta.replay(i, record)
    return delta.apply(), delta


def encode_snapshot(image: MetadataImage, now_ms: int) -> bytes:
    """``image`` as snapshot bytes: RecordBatches of its records, timestamped ``now_ms``."""
    records = image_records(image)
    data = bytearray()
    for start in range(0, len(records), _BATCH_RECORDS):
        b = BatchBuilder(base_offset=start)
        for record in records[start : start + _BATCH_RECORDS]:
            b.append(now_ms, None, encode_record(record))
        data += b.build()
    return bytes(data)


def decode_snapshot(data: bytes) -> list[MetadataRecord]:
    """The records of snapshot bytes; a torn or corrupt snapshot is a KafkaStorageError."""
    try:
        batches = decode_batches(data, allow_partial=False)
    except Exception as e:
        raise KafkaStorageError(f"corrupt metadata snapshot: {e}") from e
    return [decode_record(r.value or b"") for batch in batches for r in batch.records]


class SnapshotPolicy:
    """When to write a snapshot (Kafka's SnapshotGenerator): once the records applied since
    the last one reach ``max_bytes`` (``metadata.log.max.record.bytes.between.snapshots``),
    or ``max_interval_ms`` (``metadata.log.max.snapshot.interval.ms``, 0 = off) after the
    first record since the last one. Pure: sizes and times come in as arguments."""

    def __init__(self, max_bytes: int, max_interval_ms: int) -> None:
        self.max_bytes = max_bytes
        self.max_interval_ms = max_interval_ms
        self.bytes_since = 0
        self.first_since_ms: int | None = None

    def record_applied(self, size: int, now_ms: int) -> None:
        self.bytes_since += size
        if self.first_since_ms is None:
            self.first_since_ms = now_ms

    def due(self, now_ms: int) -> bool:
        if self.bytes_since == 0:
            return False
        if self.bytes_since >= self.max_bytes:
            return True
        return (
            self.max_interval_ms > 0
            and self.first_since_ms is not None
            and now_ms - self.first_since_ms >= self.max_interval_ms
        )

    def reset(self) -> None:
        """A snapshot was written (or loaded): count afresh."""
        self.bytes_since = 0
        self.first_since_ms = None
