"""The records of ``__consumer_offsets``, in Kafka's own binary format.

Each record's key is an int16 *version* followed by the key struct, and the key version is
the record's type (Kafka's ``CoordinatorRecordType``); the value is an int16 version followed
by the value struct, or null (a tombstone, which deletes what the key names). The schemas are
Kafka's, from ``group-coordinator/src/main/resources/common/message/*.json``, so Kafka's
tooling (``kafka-dump-log --offsets-decoder``) and a Kafka broker could read what Rillet
writes:

=====  ==========================================  ============  =======================
type   key / value                                 value writes  value flexible from
=====  ==========================================  ============  =======================
0, 1   OffsetCommitKey / OffsetCommitValue         v3 (v1 with   v4
                                                   an expiry)
2      GroupMetadataKey / GroupMetadataValue       v3            v4
       (classic groups)
3      ConsumerGroupMetadataKey / Value            v0            v0 (group epoch)
4      ConsumerGroupPartitionMetadataKey / Value   v0            v0 (subscribed topics)
5      ConsumerGroupMemberMetadataKey / Value      v0            v0 (subscription)
6      ConsumerGroupTargetAssignmentMetadataKey    v0            v0 (assignment epoch)
7      ConsumerGroupTargetAssignmentMemberKey      v0            v0 (target of a member)
8      ConsumerGroupCurrentMemberAssignmentKey     v0            v0 (member epoch, state)
=====  ==========================================  ============  =======================

Keys are never flexible. The value versions written are the ones a Kafka 4.0 broker writes
(``MetadataVersion.offsetCommitValueVersion`` and ``groupMetadataValueVersion`` pick the
highest non-flexible version); every version Kafka defines is read. Share-group and other
record types are refused with :class:`~rillet.errors.CorruptRecordError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rillet.coordinator.group.codec import (
    Array,
    Field,
    Reader,
    StructSchema,
    Writer,
    decode_struct,
    encode_struct,
    schema_fields,
)
from rillet.errors import CorruptRecordError

__all__ = [
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "CoordinatorRecord",
    "GroupMetadataKey",
    "GroupMetadataMember",
    "GroupMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionRacks",
    "RecordKey",
    "RecordValue",
    "TopicMetadata",
    "TopicPartitions",
    "decode_record",
    "from_topic_partitions",
    "to_topic_partitions",
]

_V = (0, 0x7FFF)


def _since(v: int) -> tuple[int, int]:
    return (v, 0x7FFF)


# -- offsets (types 0 and 1) -----------------------------------------------------------------


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetCommitValue:
    """A committed offset; ``leader_epoch`` -1 when unknown, ``expire_timestamp`` -1 unless
    the commit asked for its own retention (only version 1 carries it)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


_OFFSET_COMMIT_KEY = StructSchema(
    "OffsetCommitKey",
    schema_fields(group="string", topic="string", partition="int32"),
    OffsetCommitKey,
)
_OFFSET_COMMIT_VALUE = StructSchema(
    "OffsetCommitValue",
    (
        Field("offset", "int64"),
        Field("leader_epoch", "int32", _since(3), default=-1),
        Field("metadata", "string"),
        Field("commit_timestamp", "int64"),
        Field("expire_timestamp", "int64", (1, 1), default=-1),
    ),
    OffsetCommitValue,
    flexible_from=4,
)

# -- classic groups (type 2) -----------------------------------------------------------------


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class GroupMetadataMember:
    """A classic member as persisted: its subscription is its metadata for the group's
    selected protocol and its assignment what the leader gave it (both opaque bytes)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[GroupMetadataMember, ...]


_GROUP_METADATA_KEY = StructSchema(
    "GroupMetadataKey", schema_fields(group="string"), GroupMetadataKey
)
_GROUP_METADATA_MEMBER = StructSchema(
    "MemberMetadata",
    (
        Field("member_id", "string"),
        Field("group_instance_id", "string", _since(3), _since(3)),
        Field("client_id", "string"),
        Field("client_host", "string"),
        Field("rebalance_timeout", "int32", _since(1), default=-1),
        Field("session_timeout", "int32"),
        Field("subscription", "bytes"),
        Field("assignment", "bytes"),
    ),
    GroupMetadataMember,
    flexible_from=4,
)
_GROUP_METADATA_VALUE = StructSchema(
    "GroupMetadataValue",
    (
        Field("protocol_type", "string"),
        Field("generation", "int32"),
        Field("protocol", "string", nullable_versions=_V),
        Field("leader", "string", nullable_versions=_V),
        Field("current_state_timestamp", "int64", _since(2), default=-1),
        Field("members", Array(_GROUP_METADATA_MEMBER)),
    ),
    GroupMetadataValue,
    flexible_from=4,
)

# -- consumer groups (types 3 to 8) ----------------------------------------------------------


@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    """The group epoch."""

    epoch: int


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True)
class PartitionRacks:
    partition: int
    racks: tuple[str, ...]


@dataclass(frozen=True)
class TopicMetadata:
    """A subscribed topic as the group last saw it; the racks per partition are deprecated
    in Kafka and Rillet writes none."""

    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionRacks, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    """A member's subscription (topic names sorted, as Kafka writes them)."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    """Where a member is in its reconciliation: ``state`` is a ``MemberState`` value."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


def _group_key(name: str, cls: type[Any]) -> StructSchema:
    return StructSchema(name, schema_fields(group_id="string"), cls)


def _member_key(name: str, cls: type[Any]) -> StructSchema:
    return StructSchema(name, schema_fields(group_id="string", member_id="string"), cls)


_TOPIC_PARTITIONS = StructSchema(
    "TopicPartitions",
    schema_fields(topic_id="uuid", partitions=Array("int32")),
    TopicPartitions,
    flexible_from=0,
)
_PARTITION_RACKS = StructSchema(
    "PartitionMetadata",
    schema_fields(partition="int32", racks=Array("string")),
    PartitionRacks,
    flexible_from=0,
)
_TOPIC_METADATA = StructSchema(
    "TopicMetadata",
    schema_fields(
        topic_id="uuid",
        topic_name="string",
        num_partitions="int32",
        partition_metadata=Array(_PARTITION_RACKS),
    ),
    TopicMetadata,
    flexible_from=0,
)
_MEMBER_METADATA_VALUE = StructSchema(
    "ConsumerGroupMemberMetadataValue",
    (
        Field("instance_id", "string", nullable_versions=_V),
        Field("rack_id", "string", nullable_versions=_V),
        Field("client_id", "string"),
        Field("client_host", "string"),
        Field("subscribed_topic_names", Array("string")),
        Field("subscribed_topic_regex", "string", nullable_versions=_V),
        Field("rebalance_timeout_ms", "int32", default=-1),
        Field("server_assignor", "string", nullable_versions=_V),
        # ClassicMemberMetadata is tagged field 0: never written here, skipped when read.
    ),
    ConsumerGroupMemberMetadataValue,
    flexible_from=0,
)
_CURRENT_ASSIGNMENT_VALUE = StructSchema(
    "ConsumerGroupCurrentMemberAssignmentValue",
    schema_fields(
        member_epoch="int32",
        previous_member_epoch="int32",
        state="int8",
        assigned_partitions=Array(_TOPIC_PARTITIONS),
        partitions_pending_revocation=Array(_TOPIC_PARTITIONS),
    ),
    ConsumerGroupCurrentMemberAssignmentValue,
    flexible_from=0,
)

RecordKey = (
    OffsetCommitKey
    | GroupMetadataKey
    | ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)
RecordValue = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)


@dataclass(frozen=True)
class _RecordType:
    type_id: int
    key: StructSchema
    value: StructSchema
    value_versions: tuple[int, int]


_TYPES: dict[type[Any], _RecordType] = {
    OffsetCommitKey: _RecordType(1, _OFFSET_COMMIT_KEY, _OFFSET_COMMIT_VALUE, (0, 4)),
    GroupMetadataKey: _RecordType(2, _GROUP_METADATA_KEY, _GROUP_METADATA_VALUE, (0, 4)),
    ConsumerGroupMetadataKey: _RecordType(
        3,
        _group_key("ConsumerGroupMetadataKey", ConsumerGroupMetadataKey),
        StructSchema(
            "ConsumerGroupMetadataValue",
            schema_fields(epoch="int32"),
            ConsumerGroupMetadataValue,
            flexible_from=0,
        ),
        (0, 0),
    ),
    ConsumerGroupPartitionMetadataKey: _RecordType(
        4,
        _group_key("ConsumerGroupPartitionMetadataKey", ConsumerGroupPartitionMetadataKey),
        StructSchema(
            "ConsumerGroupPartitionMetadataValue",
            schema_fields(topics=Array(_TOPIC_METADATA)),
            ConsumerGroupPartitionMetadataValue,
            flexible_from=0,
        ),
        (0, 0),
    ),
    ConsumerGroupMemberMetadataKey: _RecordType(
        5,
        _member_key("ConsumerGroupMemberMetadataKey", ConsumerGroupMemberMetadataKey),
        _MEMBER_METADATA_VALUE,
        (0, 0),
    ),
    ConsumerGroupTargetAssignmentMetadataKey: _RecordType(
        6,
        _group_key(
            "ConsumerGroupTargetAssignmentMetadataKey", ConsumerGroupTargetAssignmentMetadataKey
        ),
        StructSchema(
            "ConsumerGroupTargetAssignmentMetadataValue",
            schema_fields(assignment_epoch="int32"),
            ConsumerGroupTargetAssignmentMetadataValue,
            flexible_from=0,
        ),
        (0, 0),
    ),
    ConsumerGroupTargetAssignmentMemberKey: _RecordType(
        7,
        _member_key(
            "ConsumerGroupTargetAssignmentMemberKey", ConsumerGroupTargetAssignmentMemberKey
        ),
        StructSchema(
            "ConsumerGroupTargetAssignmentMemberValue",
            schema_fields(topic_partitions=Array(_TOPIC_PARTITIONS)),
            ConsumerGroupTargetAssignmentMemberValue,
            flexible_from=0,
        ),
        (0, 0),
    ),
    ConsumerGroupCurrentMemberAssignmentKey: _RecordType(
        8,
        _member_key(
            "ConsumerGroupCurrentMemberAssignmentKey", ConsumerGroupCurrentMemberAssignmentKey
        ),
        _CURRENT_ASSIGNMENT_VALUE,
        (0, 0),
    ),
}
_BY_TYPE_ID: dict[int, _RecordType] = {t.type_id: t for t in _TYPES.values()}
_BY_TYPE_ID[0] = _TYPES[OffsetCommitKey]  # OffsetCommitKey v0 has the same layout as v1


def _value_version(value: RecordValue) -> int:
    if isinstance(value, OffsetCommitValue):
        return 1 if value.expire_timestamp != -1 else 3
    if isinstance(value, GroupMetadataValue):
        return 3
    return 0


@dataclass(frozen=True)
class CoordinatorRecord:
    """One record for ``__consumer_offsets``: a typed key and value (None: a tombstone).

    ``key_bytes()`` and ``value_bytes()`` are what the driver appends (the record's key and
    value in a Kafka record batch); :func:`decode_record` reads them back.
    """

    key: RecordKey
    value: RecordValue | None

    def key_bytes(self) -> bytes:
        t = _TYPES[type(self.key)]
        w = Writer()
        w.integer("int16", t.type_id)
        w.raw(encode_struct(t.key, self.key, t.type_id))
        return bytes(w.buffer)

    def value_bytes(self) -> bytes | None:
        if self.value is None:
            return None
        t = _TYPES[type(self.key)]
        version = _value_version(self.value)
        w = Writer()
        w.integer("int16", version)
        w.raw(encode_struct(t.value, self.value, version))
        return bytes(w.buffer)


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """The record whose key and value bytes these are; CorruptRecordError if unreadable."""
    r = Reader(key)
    type_id = r.integer("int16")
    t = _BY_TYPE_ID.get(type_id)
    if t is None:
        raise CorruptRecordError(f"unsupported __consumer_offsets record type {type_id}")
    decoded_key = decode_struct(t.key, r, type_id)
    if value is None:
        return CoordinatorRecord(decoded_key, None)
    rv = Reader(value)
    version = rv.integer("int16")
    if not t.value_versions[0] <= version <= t.value_versions[1]:
        raise CorruptRecordError(f"unsupported {t.value.name} version {version}")
    return CoordinatorRecord(decoded_key, decode_struct(t.value, rv, version))


def to_topic_partitions(
    assignment: Mapping[uuid.UUID, frozenset[int]],
) -> tuple[TopicPartitions, ...]:
    """An assignment (topic id -> partitions) as record structs, in a stable order."""
    return tuple(
        TopicPartitions(topic_id, tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes)
        if partitions
    )


def from_topic_partitions(
    topic_partitions: tuple[TopicPartitions, ...],
) -> dict[uuid.UUID, frozenset[int]]:
    """Record structs as an assignment (topic id -> partitions), empty topics dropped."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in topic_partitions:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out
