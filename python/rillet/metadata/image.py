"""MetadataImage: the cluster metadata as of one offset of the metadata log, and
MetadataDelta: the records of one committed batch applied to an image.

An image is immutable; a delta replays records on top of one and yields the next image plus
what changed (partitions whose leader, replicas or ISR moved, topics removed), which the
broker turns into become-leader / become-follower actions. Replaying the same records in the
same order always gives the same image: the metadata log is the single source of truth.

A record that contradicts the image (a partition of an unknown topic, a change to an unknown
partition) means the metadata log is corrupt; replay raises rather than guessing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from rillet.errors import KafkaStorageError
from rillet.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerEndpoint,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntity,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

__all__ = [
    "BrokerRegistration",
    "MetadataDelta",
    "MetadataImage",
    "PartitionRegistration",
    "ProducerIdsImage",
    "TopicImage",
]


@dataclass(frozen=True)
class PartitionRegistration:
    """Where one partition lives: its replicas (the first is the preferred leader), ISR,
    leader (-1 for none) and epochs."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # A reassignment in progress (KIP-455): ``replicas`` is the target followed by
    # ``removing_replicas``; ``adding_replicas`` are in the target and not yet caught up.
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # Eligible leader replicas (KIP-966): out of the ISR, but holding every record below the
    # high watermark, because they left it while it was smaller than min.insync.replicas.
    elr: tuple[int, ...] = ()

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        leader = self.leader if change.leader is None else change.leader
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else change.replicas,
            isr=self.isr if change.isr is None else change.isr,
            leader=leader,
            leader_epoch=self.leader_epoch + (1 if leader != self.leader else 0),
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=(
                self.removing_replicas
                if change.removing_replicas is None
                else change.removing_replicas
            ),
            adding_replicas=(
                self.adding_replicas if change.adding_replicas is None else change.adding_replicas
            ),
            elr=self.elr if change.elr is None else change.elr,
        )

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where a reassignment in progress moves the partition (``replicas`` otherwise)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """Where a reassignment in progress moves the partition from."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.name == listener), None)


@dataclass(frozen=True)
class ProducerIdsImage:
    """Where the next block of producer ids starts (Kafka's ProducerIdsImage, KIP-730):
    every id below ``next_producer_id`` has been given to some broker. -1 until the first
    block is given (the first block then starts at 0)."""

    next_producer_id: int = -1

    @property
    def is_empty(self) -> bool:
        return self.next_producer_id < 0


@dataclass(frozen=True)
class MetadataImage:
    """The whole cluster metadata at ``offset`` (the last record applied; -1 when empty)."""

    offset: int = -1
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(
        default_factory=lambda: MappingProxyType({})
    )
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: MappingProxyType({}))
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: MappingProxyType({}))
    configs: Mapping[tuple[ConfigResourceType, str], Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    features: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    producer_ids: ProducerIdsImage = ProducerIdsImage()
    # ACLs by id, and SCRAM credentials by (user, mechanism code). Each is replaced as a
    # whole when a batch changes it, so a reader can tell a change by identity.
    acls: Mapping[uuid.UUID, AccessControlEntryRecord] = field(
        default_factory=lambda: MappingProxyType({})
    )
    scram_credentials: Mapping[tuple[str, int], UserScramCredentialRecord] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Client quotas: each entity's quota values by key (producer_byte_rate, say).
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def topic(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids.get(name)
        return None if topic_id is None else self.topics_by_id[topic_id]

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topic(topic)
        return None if t is None else t.partitions.get(partition)

    def topics(self) -> Iterator[TopicImage]:
        return iter(self.topics_by_id.values())

    def unfenced_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def topic_config(self, name: str) -> Mapping[str, str]:
        return self.configs.get((ConfigResourceType.TOPIC, name), MappingProxyType({}))

    def broker_config(self, broker: str = "") -> Mapping[str, str]:
        return self.configs.get((ConfigResourceType.BROKER, broker), MappingProxyType({}))

    def replay(self, records: Iterable[tuple[int, MetadataRecord]]) -> MetadataImage:
        """Shorthand: the image after ``records`` (``(offset, record)`` pairs)."""
        delta = MetadataDelta(self)
        for offset, record in records:
            delta.replay(offset, record)
        return delta.apply()


@dataclass(frozen=True)
class PartitionChange:
    """One partition before and after a delta (``None``: it did not or no longer exists)."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    before: PartitionRegistration | None
    after: PartitionRegistration | None


class MetadataDelta:
    """Records replayed on top of ``image``; :meth:`apply` gives the next image.

    Not thread safe; one delta per committed batch (or per snapshot load)."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._offset = image.offset
        self._topics: dict[uuid.UUID, TopicImage] = dict(image.topics_by_id)
        self._partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}
        self._brokers: dict[int, BrokerRegistration] = dict(image.brokers)
        self._configs: dict[tuple[ConfigResourceType, str], dict[str, str]] = {}
        self._removed_topics: dict[uuid.UUID, TopicImage] = {}
        self._features: dict[str, int] = dict(image.features)
        self._next_producer_id = image.producer_ids.next_producer_id
        self._acls: dict[uuid.UUID, AccessControlEntryRecord] | None = None
        self._scram: dict[tuple[str, int], UserScramCredentialRecord] | None = None
        self._quotas: dict[QuotaEntity, Mapping[str, float]] | None = None
        self._snapshot_end: int | None = None

    @classmethod
    def for_snapshot(cls, image: MetadataImage, end_offset: int) -> MetadataDelta:
        """A delta whose records (a snapshot's, replayed with offsets counting from 0)
        replace ``image`` altogether: what they do not recreate is removed. The image it
        applies to stands at ``end_offset - 1``, the snapshot's last offset."""
        delta = cls(image)
        delta._offset = -1
        delta._snapshot_end = end_offset
        delta._topics = {}
        delta._brokers = {}
        delta._features = {}
        delta._next_producer_id = -1
        delta._configs = {key: {} for key in image.configs}
        delta._acls = {}
        delta._scram = {}
        delta._quotas = {}
        return delta

    # -- replay --------------------------------------------------------------------------

    def replay(self, offset: int, record: MetadataRecord) -> None:
        if offset <= self._offset:
            raise KafkaStorageError(
                f"metadata record at offset {offset} replayed after offset {self._offset}"
            )
        self._offset = offset
        match record:
            case TopicRecord(name=name, topic_id=topic_id):
                if topic_id in self._topics or self._topic_id(name) is not None:
                    raise KafkaStorageError(f"metadata log creates topic {name} twice")
                self._topics[topic_id] = TopicImage(name, topic_id, MappingProxyType({}))
                self._partitions[topic_id] = {}
            case PartitionRecord():
                parts = self._mutable_partitions(record.topic_id, record)
                parts[record.partition_id] = PartitionRegistration(
                    record.replicas,
                    record.isr,
                    record.leader,
                    record.leader_epoch,
                    record.partition_epoch,
                    record.removing_replicas,
                    record.adding_replicas,
                    record.elr,
                )
            case PartitionChangeRecord():
                parts = self._mutable_partitions(record.topic_id, record)
                current = parts.get(record.partition_id)
                if current is None:
                    raise KafkaStorageError(f"metadata log changes unknown partition {record}")
                parts[record.partition_id] = current.merge(record)
            case RemoveTopicRecord(topic_id=topic_id):
                topic = self._topics.pop(topic_id, None)
                if topic is None:
                    raise KafkaStorageError(f"metadata log removes unknown topic {topic_id}")
                self._partitions.pop(topic_id, None)
                self._removed_topics[topic_id] = self.image.topics_by_id.get(topic_id, topic)
                key = (ConfigResourceType.TOPIC, topic.name)
                self._configs[key] = {}
            case ConfigRecord():
                key = (record.resource_type, record.resource_name)
                configs = self._configs.setdefault(key, dict(self.image.configs.get(key, {})))
                if record.value is None:
                    configs.pop(record.name, None)
                else:
                    configs[record.name] = record.value
            case RegisterBrokerRecord():
                self._brokers[record.broker_id] = BrokerRegistration(
                    record.broker_id,
                    record.incarnation_id,
                    record.broker_epoch,
                    record.endpoints,
                    record.rack,
                    record.fenced,
                )
            case UnregisterBrokerRecord(broker_id=broker_id):
                self._brokers.pop(broker_id, None)
            case FenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch):
                self._set_fenced(broker_id, epoch, True)
            case UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch):
                self._set_fenced(broker_id, epoch, False)
            case FeatureLevelRecord(name=name, feature_level=level):
                if level == 0:
                    self._features.pop(name, None)
                else:
                    self._features[name] = level
            case ProducerIdsRecord(next_producer_id=next_id):
                # Blocks only move forward: a record that does not is a corrupt log, and
                # replaying it would hand out ids twice.
                if next_id <= self._next_producer_id:
                    raise KafkaStorageError(
                        f"metadata log moves the next producer id back from "
                        f"{self._next_producer_id} to {next_id}"
                    )
                self._next_producer_id = next_id
            case AccessControlEntryRecord():
                acls = self._mutable_acls()
                if record.id in acls:
                    raise KafkaStorageError(f"metadata log creates ACL {record.id} twice")
                acls[record.id] = record
            case RemoveAccessControlEntryRecord(id=acl_id):
                if self._mutable_acls().pop(acl_id, None) is None:
                    raise KafkaStorageError(f"metadata log removes unknown ACL {acl_id}")
            case UserScramCredentialRecord(name=name, mechanism=mechanism):
                self._mutable_scram()[(name, mechanism)] = record
            case RemoveUserScramCredentialRecord(name=name, mechanism=mechanism):
                self._mutable_scram().pop((name, mechanism), None)
            case ClientQuotaRecord(entity=entity, key=key, value=value):
                quotas = self._mutable_quotas()
                values = dict(quotas.get(entity, {}))
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
                if values:
                    quotas[entity] = MappingProxyType(values)
                else:
                    quotas.pop(entity, None)
            case NoOpRecord():
                pass
            case _:
                raise KafkaStorageError(f"unknown metadata record {record!r}")

    def _topic_id(self, name: str) -> uuid.UUID | None:
        return next((t.topic_id for t in self._topics.values() if t.name == name), None)

    def _mutable_partitions(
        self, topic_id: uuid.UUID, record: MetadataRecord
    ) -> dict[int, PartitionRegistration]:
        if topic_id not in self._topics:
            raise KafkaStorageError(f"metadata log refers to unknown topic in {record}")
        if topic_id not in self._partitions:
            self._partitions[topic_id] = dict(self._topics[topic_id].partitions)
        return self._partitions[topic_id]

    def _mutable_acls(self) -> dict[uuid.UUID, AccessControlEntryRecord]:
        if self._acls is None:
            self._acls = dict(self.image.acls)
        return self._acls

    def _mutable_scram(self) -> dict[tuple[str, int], UserScramCredentialRecord]:
        if self._scram is None:
            self._scram = dict(self.image.scram_credentials)
        return self._scram

    def _mutable_quotas(self) -> dict[QuotaEntity, Mapping[str, float]]:
        if self._quotas is None:
            self._quotas = dict(self.image.client_quotas)
        return self._quotas

    def _set_fenced(self, broker_id: int, epoch: int, fenced: bool) -> None:
        b = self._brokers.get(broker_id)
        if b is None or b.broker_epoch != epoch:
            raise KafkaStorageError(f"metadata log (un)fences unknown broker {broker_id}/{epoch}")
        self._brokers[broker_id] = replace(b, fenced=fenced)

    # -- results -------------------------------------------------------------------------

    def _finish_snapshot(self) -> None:
        if self._snapshot_end is not None:
            # Whatever the snapshot did not recreate is gone.
            for topic_id, topic in self.image.topics_by_id.items():
                if topic_id not in self._topics:
                    self._removed_topics[topic_id] = topic

    def apply(self) -> MetadataImage:
        self._finish_snapshot()
        topics = dict(self._topics)
        for topic_id, parts in self._partitions.items():
            topics[topic_id] = replace(topics[topic_id], partitions=MappingProxyType(dict(parts)))
        configs = dict(self.image.configs)
        for key, values in self._configs.items():
            if values:
                configs[key] = MappingProxyType(dict(values))
            else:
                configs.pop(key, None)
        return MetadataImage(
            offset=self._offset if self._snapshot_end is None else self._snapshot_end - 1,
            topics_by_id=MappingProxyType(topics),
            topic_ids=MappingProxyType({t.name: t.topic_id for t in topics.values()}),
            brokers=MappingProxyType(dict(self._brokers)),
            configs=MappingProxyType(configs),
            features=MappingProxyType(dict(self._features)),
            producer_ids=(
                self.image.producer_ids
                if self._next_producer_id == self.image.producer_ids.next_producer_id
                else ProducerIdsImage(self._next_producer_id)
            ),
            acls=self.image.acls if self._acls is None else MappingProxyType(self._acls),
            scram_credentials=(
                self.image.scram_credentials
                if self._scram is None
                else MappingProxyType(self._scram)
            ),
            client_quotas=(
                self.image.client_quotas if self._quotas is None else MappingProxyType(self._quotas)
            ),
        )

    def partition_changes(self) -> list[PartitionChange]:
        """Every partition created, changed or removed by this delta."""
        self._finish_snapshot()
        out: list[PartitionChange] = []
        for topic_id, parts in self._partitions.items():
            name = self._topics[topic_id].name
            old = self.image.topics_by_id.get(topic_id)
            for p, reg in sorted(parts.items()):
                before = old.partitions.get(p) if old else None
                if before != reg:
                    out.append(PartitionChange(name, topic_id, p, before, reg))
        for topic_id, topic in self._removed_topics.items():
            old = self.image.topics_by_id.get(topic_id)
            if old is None:
                continue
            for p, reg in sorted(old.partitions.items()):
                out.append(PartitionChange(topic.name, topic_id, p, reg, None))
        return out

    def removed_topics(self) -> list[str]:
        self._finish_snapshot()
        return sorted(
            t.name for tid, t in self._removed_topics.items() if tid in self.image.topics_by_id
        )
