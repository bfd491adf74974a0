"""Metadata records round-trip through the protobuf envelope."""

from __future__ import annotations

import uuid

import pytest

from rillet.errors import CorruptRecordError
from rillet.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from rillet.protocol import metadata_records_pb2 as pb
from rillet.protocol.metadata_records import decode_record, encode_record

T = uuid.UUID("0d1f7b5e-8c2a-4b8e-9f1a-2b3c4d5e6f70")

RECORDS: list[MetadataRecord] = [
    TopicRecord("orders", T),
    PartitionRecord(T, 3, (1, 2, 3), (1, 2), 1, 4, 9),
    PartitionChangeRecord(T, 3),
    PartitionChangeRecord(T, 3, isr=(), leader=-1),
    PartitionChangeRecord(T, 3, isr=(2,), leader=0, replicas=(2, 3)),
    PartitionRecord(T, 4, (3, 4, 1), (1,), 1, 0, 0, removing_replicas=(1,), adding_replicas=(3, 4)),
    PartitionChangeRecord(T, 4, replicas=(3, 4, 1), removing_replicas=(1,), adding_replicas=(3, 4)),
    PartitionChangeRecord(T, 4, replicas=(3, 4), removing_replicas=(), adding_replicas=()),
    ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"),
    ConfigRecord(ConfigResourceType.BROKER, "", "log.retention.hours", None),
    RemoveTopicRecord(T),
    RegisterBrokerRecord(
        7,
        uuid.UUID(int=5),
        12,
        (BrokerEndpoint("PLAINTEXT", "h", 9092), BrokerEndpoint("SSL", "h", 9093, "SSL")),
        "rack-a",
        False,
    ),
    RegisterBrokerRecord(8, uuid.UUID(int=6), 13, (), None, True),
    UnregisterBrokerRecord(7, 12),
    FenceBrokerRecord(7, 12),
    UnfenceBrokerRecord(7, 12),
    FeatureLevelRecord("metadata.version", 20),
    ProducerIdsRecord(7, 12, 3000),
    ProducerIdsRecord(-1, -1, (1 << 63) - 1),
    NoOpRecord(),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip(record: MetadataRecord) -> None:
    assert decode_record(encode_record(record)) == record


def test_an_empty_isr_is_not_an_unchanged_isr() -> None:
    assert decode_record(encode_record(PartitionChangeRecord(T, 0, isr=()))).isr == ()  # type: ignore[union-attr]
    assert decode_record(encode_record(PartitionChangeRecord(T, 0))).isr is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xff\xff",
        b"",
        pb.MetadataRecord(topic=pb.TopicRecord(name="x", topic_id=b"short")).SerializeToString(),
    ],
)
def test_garbage_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_record(data)
