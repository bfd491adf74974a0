"""Topics and partitions (the topic half of Kafka's ReplicationControlManager): create and
delete topics, add partitions, with Kafka's validation of names, counts, assignments and
configs.

Pure functions over a :class:`~rillet.metadata.image.MetadataImage`; replica placement
randomness comes from the caller's seeded ``random.Random``.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rillet import errors
from rillet.config import resolve_topic_config
from rillet.controller.elections import is_usable
from rillet.controller.placement import place_replicas, validate_assignment
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import (
    NO_LEADER,
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from rillet.metadata.topic_names import METADATA_TOPIC, validate_topic_name

__all__ = [
    "CreatableTopic",
    "TopicDefaults",
    "TopicResult",
    "create_partitions",
    "create_topics",
    "delete_topics",
]


@dataclass(frozen=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicResult:
    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True)
class TopicDefaults:
    """``num.partitions``, ``default.replication.factor`` and the broker's topic-config
    synonyms, for topics created without them."""

    num_partitions: int = 1
    replication_factor: int = 1
    broker_config: Mapping[str, object] = field(default_factory=dict)


def _collision_key(name: str) -> str:
    # Kafka: '.' and '_' collide in metric names, so topics differing only there collide.
    return name.replace(".", "_")


def create_topics(
    image: MetadataImage,
    defaults: TopicDefaults,
    rng: random.Random,
    topics: Sequence[CreatableTopic],
    validate_only: bool = False,
) -> ControllerResult[list[TopicResult]]:
    records: list[MetadataRecord] = []
    results: list[TopicResult] = []
    taken = {_collision_key(t.name) for t in image.topics()}
    for t in topics:
        try:
            recs, result = _create_topic(image, defaults, rng, t, taken)
        except KafkaError as e:
            results.append(TopicResult(t.name if isinstance(t.name, str) else "", e))
            continue
        results.append(result)
        taken.add(_collision_key(t.name))
        if not validate_only:
            records.extend(recs)
    return ControllerResult(records, results)


def _create_topic(
    image: MetadataImage,
    defaults: TopicDefaults,
    rng: random.Random,
    t: CreatableTopic,
    taken: set[str],
) -> tuple[list[MetadataRecord], TopicResult]:
    validate_topic_name(t.name)
    if t.name == METADATA_TOPIC:
        raise errors.InvalidRequestError(
            f"Creation of internal topic {METADATA_TOPIC} is prohibited."
        )
    if image.topic(t.name) is not None:
        raise errors.TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
    if _collision_key(t.name) in taken:
        raise errors.InvalidTopicError(
            f"Topic '{t.name}' collides with an existing topic: '.' and '_' collide."
        )
    resolve_topic_config(defaults.broker_config, t.configs)
    registered = sorted(image.brokers)
    if t.assignment is not None:
        if t.num_partitions not in (-1, len(t.assignment)) or t.replication_factor != -1:
            raise errors.InvalidRequestError(
                "a replica assignment cannot be combined with a partition count or a "
                "replication factor"
            )
        assignment = validate_assignment(t.assignment, registered)
    else:
        n = t.num_partitions if t.num_partitions != -1 else defaults.num_partitions
        rf = t.replication_factor if t.replication_factor != -1 else defaults.replication_factor
        if n <= 0:
            raise errors.InvalidPartitionsError("Number of partitions must be larger than 0.")
        if rf <= 0:
            raise errors.InvalidReplicationFactorError("Replication factor must be larger than 0.")
        assignment = place_replicas(image.unfenced_brokers(), n, rf, rng, racks=_racks(image))
    topic_id = uuid.UUID(int=rng.getrandbits(128), version=4)
    records: list[MetadataRecord] = [TopicRecord(t.name, topic_id)]
    for p, replicas in sorted(assignment.items()):
        records.append(_new_partition(image, topic_id, p, replicas))
    for name, value in sorted(t.configs.items()):
        records.append(ConfigRecord(ConfigResourceType.TOPIC, t.name, name, value))
    rf = len(next(iter(assignment.values())))
    return records, TopicResult(t.name, None, topic_id, len(assignment), rf)


def _new_partition(
    image: MetadataImage, topic_id: uuid.UUID, partition: int, replicas: Sequence[int]
) -> PartitionRecord:
    """A new partition: its usable replicas are the ISR and the first leads; with none
    usable, every replica is in the ISR and there is no leader until one comes back."""
    live = [b for b in replicas if is_usable(image, b)]
    isr = tuple(live) if live else tuple(replicas)
    leader = live[0] if live else NO_LEADER
    return PartitionRecord(topic_id, partition, tuple(replicas), isr, leader)


def delete_topics(
    image: MetadataImage, names: Sequence[str]
) -> ControllerResult[list[TopicResult]]:
    records: list[MetadataRecord] = []
    results: list[TopicResult] = []
    for name in names:
        topic = image.topic(name)
        if topic is None:
            err = errors.UnknownTopicOrPartitionError(
                "This server does not host this topic-partition."
            )
            results.append(TopicResult(name, err))
            continue
        records.append(RemoveTopicRecord(topic.topic_id))
        results.append(TopicResult(name, None, topic.topic_id, len(topic.partitions)))
    return ControllerResult(records, results)


def create_partitions(
    image: MetadataImage,
    rng: random.Random,
    requests: Sequence[tuple[str, int, Mapping[int, Sequence[int]] | None]],
    validate_only: bool = False,
) -> ControllerResult[list[TopicResult]]:
    """Grow topics to ``count`` partitions: ``(topic, count, assignment of new ones)``."""
    records: list[MetadataRecord] = []
    results: list[TopicResult] = []
    for name, count, assignment in requests:
        try:
            recs = _create_partitions(image, rng, name, count, assignment)
        except KafkaError as e:
            results.append(TopicResult(name, e))
            continue
        results.append(TopicResult(name, None, num_partitions=count))
        if not validate_only:
            records.extend(recs)
    return ControllerResult(records, results)


def _create_partitions(
    image: MetadataImage,
    rng: random.Random,
    name: str,
    count: int,
    assignment: Mapping[int, Sequence[int]] | None,
) -> list[MetadataRecord]:
    topic = image.topic(name)
    if topic is None:
        raise errors.UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
    current = len(topic.partitions)
    if count < current:
        raise errors.InvalidPartitionsError(
            f"Topic currently has {current} partitions, which is higher than the requested {count}."
        )
    if count == current:
        raise errors.InvalidPartitionsError(f"Topic already has {current} partitions.")
    if assignment is not None:
        new = validate_assignment(assignment, sorted(image.brokers), current)
    else:
        rf = len(topic.partitions[0].replicas) if topic.partitions else 1
        new = place_replicas(
            image.unfenced_brokers(), count - current, rf, rng, current, _racks(image)
        )
    return [_new_partition(image, topic.topic_id, p, r) for p, r in sorted(new.items())]


def _racks(image: MetadataImage) -> dict[int, str | None]:
    """Each registered broker's ``broker.rack``."""
    return {b: reg.rack for b, reg in image.brokers.items()}
