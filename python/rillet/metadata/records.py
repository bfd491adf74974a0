"""KRaft metadata records (KIP-631), as immutable domain values.

The controller writes these to the ``__cluster_metadata`` log; every broker replays them, in
log order, into a :class:`~rillet.metadata.image.MetadataImage`. On the wire and on disk each
record is one ``rillet.v1.MetadataRecord`` protobuf envelope (``metadata_records.proto``);
:mod:`rillet.protocol.metadata_records` converts between the two.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "NO_LEADER",
    "AccessControlEntryRecord",
    "BrokerEndpoint",
    "ClientQuotaRecord",
    "ConfigRecord",
    "ConfigResourceType",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "QuotaEntity",
    "RegisterBrokerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "UserScramCredentialRecord",
]

NO_LEADER = -1


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes."""

    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True)
class BrokerEndpoint:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True)
class PartitionRecord:
    topic_id: uuid.UUID
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # A reassignment in progress (KIP-455): the replicas it removes and adds.
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # Eligible leader replicas (KIP-966).
    elr: tuple[int, ...] = ()


@dataclass(frozen=True)
class PartitionChangeRecord:
    """A change to one partition; ``None`` fields are unchanged. A new leader bumps the
    leader epoch; every change bumps the partition epoch."""

    topic_id: uuid.UUID
    partition_id: int
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    elr: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ConfigRecord:
    """Set (``value``) or delete (``None``) one config of a topic or broker. An empty
    ``resource_name`` with BROKER means the cluster-wide default."""

    resource_type: ConfigResourceType
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True)
class RemoveTopicRecord:
    topic_id: uuid.UUID


@dataclass(frozen=True)
class RegisterBrokerRecord:
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    fenced: bool = True


@dataclass(frozen=True)
class UnregisterBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class FenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class UnfenceBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class FeatureLevelRecord:
    """A finalized feature version (KIP-584), e.g. ``metadata.version``."""

    name: str
    feature_level: int


@dataclass(frozen=True)
class ProducerIdsRecord:
    """The active controller gave a block of producer ids to ``broker_id`` (KIP-730): every
    id below ``next_producer_id`` is taken. A snapshot writes one with ``broker_id`` and
    ``broker_epoch`` -1 to carry ``next_producer_id`` alone."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True)
class AccessControlEntryRecord:
    """An ACL was created (Kafka's AccessControlEntryRecord): its id, resource pattern and
    entry. The enums hold Kafka's codes (:mod:`rillet.security.acls`)."""

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class RemoveAccessControlEntryRecord:
    """The ACL ``id`` was deleted."""

    id: uuid.UUID


@dataclass(frozen=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's code: 1 SCRAM-SHA-256, 2
    SCRAM-SHA-512) was set; it replaces the user's earlier one for that mechanism. The
    password itself is never stored."""

    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class RemoveUserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism was deleted."""

    name: str
    mechanism: int


# A client quota entity (Kafka's ClientQuotaEntity): (entity type, name) pairs sorted by
# type, each type one of "user", "client-id" and "ip", a name of None being that type's
# default ("<default>" in the tools).
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class ClientQuotaRecord:
    """One quota of a client entity was set to ``value``, or removed (``None``)."""

    entity: QuotaEntity
    key: str
    value: float | None


@dataclass(frozen=True)
class NoOpRecord:
    """Written by a new controller to commit its epoch; changes nothing."""


MetadataRecord = (
    TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ConfigRecord
    | RemoveTopicRecord
    | RegisterBrokerRecord
    | UnregisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | ClientQuotaRecord
    | NoOpRecord
)
