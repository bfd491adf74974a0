"""MetadataImage / MetadataDelta: replaying KIP-631 records."""

from __future__ import annotations

import uuid

import pytest

from rillet.errors import KafkaStorageError
from rillet.metadata.image import MetadataDelta, MetadataImage, PartitionRegistration
from rillet.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)

T1 = uuid.UUID(int=1)
EP = (BrokerEndpoint("PLAINTEXT", "localhost", 9092),)


def image_with_topic() -> MetadataImage:
    return MetadataImage().replay(
        [
            (0, RegisterBrokerRecord(1, uuid.UUID(int=9), 1, EP, None, True)),
            (1, UnfenceBrokerRecord(1, 1)),
            (2, TopicRecord("orders", T1)),
            (3, PartitionRecord(T1, 0, (1,), (1,), 1)),
            (4, PartitionRecord(T1, 1, (1,), (1,), 1)),
            (5, ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", "1000")),
        ]
    )


def test_replay_builds_topics_partitions_brokers_and_configs() -> None:
    img = image_with_topic()
    assert img.offset == 5
    topic = img.topic("orders")
    assert topic is not None and topic.topic_id == T1
    assert img.partition("orders", 1) == PartitionRegistration((1,), (1,), 1)
    assert img.unfenced_brokers() == [1]
    assert dict(img.topic_config("orders")) == {"retention.ms": "1000"}
    assert img.brokers[1].endpoint("PLAINTEXT") == EP[0]


def test_partition_change_bumps_epochs_and_reports_changes() -> None:
    img = image_with_topic()
    delta = MetadataDelta(img)
    delta.replay(6, PartitionChangeRecord(T1, 0, leader=-1))
    delta.replay(7, PartitionChangeRecord(T1, 1, isr=(1,)))
    new = delta.apply()
    p0 = new.partition("orders", 0)
    assert p0 is not None and (p0.leader, p0.leader_epoch, p0.partition_epoch) == (-1, 1, 1)
    p1 = new.partition("orders", 1)
    assert p1 is not None and (p1.leader_epoch, p1.partition_epoch) == (0, 1)
    changes = delta.partition_changes()
    assert [(c.partition, c.before is not None, c.after is not None) for c in changes] == [
        (0, True, True),
        (1, True, True),
    ]
    # The old image is untouched.
    assert img.partition("orders", 0) == PartitionRegistration((1,), (1,), 1)


def test_remove_topic_drops_partitions_and_configs() -> None:
    img = image_with_topic()
    delta = MetadataDelta(img)
    delta.replay(6, RemoveTopicRecord(T1))
    new = delta.apply()
    assert new.topic("orders") is None
    assert dict(new.topic_config("orders")) == {}
    assert delta.removed_topics() == ["orders"]
    assert {(c.partition, c.after) for c in delta.partition_changes()} == {(0, None), (1, None)}


def test_fence_and_config_delete() -> None:
    img = image_with_topic().replay(
        [
            (6, FenceBrokerRecord(1, 1)),
            (7, ConfigRecord(ConfigResourceType.TOPIC, "orders", "retention.ms", None)),
        ]
    )
    assert img.unfenced_brokers() == []
    assert dict(img.topic_config("orders")) == {}


@pytest.mark.parametrize(
    "record",
    [
        PartitionRecord(uuid.UUID(int=7), 0, (1,), (1,), 1),
        PartitionChangeRecord(T1, 5, leader=1),
        RemoveTopicRecord(uuid.UUID(int=7)),
        TopicRecord("orders", uuid.UUID(int=8)),
        FenceBrokerRecord(2, 1),
    ],
)
def test_contradicting_records_are_refused(record: object) -> None:
    delta = MetadataDelta(image_with_topic())
    with pytest.raises(KafkaStorageError):
        delta.replay(6, record)  # type: ignore[arg-type]


def test_offsets_must_increase() -> None:
    delta = MetadataDelta(image_with_topic())
    with pytest.raises(KafkaStorageError):
        delta.replay(5, UnfenceBrokerRecord(1, 1))
