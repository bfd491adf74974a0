"""Kafka's embedded consumer protocol: what classic members put in JoinGroup and SyncGroup.

A classic group of protocol type ``consumer`` carries, per member, a
``ConsumerProtocolSubscription`` as the metadata of each protocol (assignor) it supports,
and receives a ``ConsumerProtocolAssignment`` from the leader through SyncGroup. To the
coordinator both are opaque bytes, except that it reads the subscribed topics (to refuse
OffsetDelete on a subscribed topic with GROUP_SUBSCRIBED_TO_TOPIC, and to keep the offsets of
subscribed topics from expiring). Clients use :func:`encode_subscription` and
:func:`encode_assignment` to speak the same bytes as Kafka's clients.

Layout (``clients/src/main/resources/common/message/ConsumerProtocol*.json``, never
flexible): an int16 version, then the struct at that version. A version newer than 3 is read
as version 3 with trailing bytes ignored, as Kafka's ``ConsumerProtocol`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
    "CONSUMER_PROTOCOL_TYPE",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
_LATEST = 3


@dataclass(frozen=True)
class _TopicPartition:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ConsumerProtocolSubscription:
    """A classic consumer's subscription: topics, opaque user data, the partitions it owns
    (cooperative rebalancing, KIP-429), its generation and rack."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: Mapping[str, tuple[int, ...]] | None = None
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class ConsumerProtocolAssignment:
    """What the leader assigned to one member: topic -> partitions, and user data."""

    assigned_partitions: Mapping[str, tuple[int, ...]]
    user_data: bytes | None = None


_TP = StructSchema(
    "TopicPartition", schema_fields(topic="string", partitions=Array("int32")), _TopicPartition
)


@dataclass(frozen=True)
class _Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[_TopicPartition, ...]
    generation_id: int
    rack_id: str | None


@dataclass(frozen=True)
class _Assignment:
    assigned_partitions: tuple[_TopicPartition, ...]
    user_data: bytes | None


_SUBSCRIPTION = StructSchema(
    "ConsumerProtocolSubscription",
    (
        Field("topics", Array("string")),
        Field("user_data", "bytes", nullable_versions=(0, 0x7FFF)),
        Field("owned_partitions", Array(_TP), (1, 0x7FFF), default=()),
        Field("generation_id", "int32", (2, 0x7FFF), default=-1),
        Field("rack_id", "string", (3, 0x7FFF), (3, 0x7FFF)),
    ),
    _Subscription,
)
_ASSIGNMENT = StructSchema(
    "ConsumerProtocolAssignment",
    (
        Field("assigned_partitions", Array(_TP)),
        Field("user_data", "bytes", nullable_versions=(0, 0x7FFF)),
    ),
    _Assignment,
)


def _tps(m: Mapping[str, tuple[int, ...]]) -> tuple[_TopicPartition, ...]:
    return tuple(_TopicPartition(t, tuple(ps)) for t, ps in m.items())


def _versioned(schema: StructSchema, value: object, version: int) -> bytes:
    w = Writer()
    w.integer("int16", version)
    w.raw(encode_struct(schema, value, version))
    return bytes(w.buffer)


def _read(schema: StructSchema, data: bytes) -> object:
    r = Reader(data)
    version = r.integer("int16")
    if version < 0:
        raise CorruptRecordError(f"negative {schema.name} version {version}")
    return decode_struct(schema, r, min(version, _LATEST), allow_trailing=True)


def encode_subscription(subscription: ConsumerProtocolSubscription, version: int = 3) -> bytes:
    s = _Subscription(
        subscription.topics,
        subscription.user_data,
        _tps(subscription.owned_partitions or {}),
        subscription.generation_id,
        subscription.rack_id,
    )
    return _versioned(_SUBSCRIPTION, s, version)


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    s = _read(_SUBSCRIPTION, data)
    assert isinstance(s, _Subscription)
    return ConsumerProtocolSubscription(
        s.topics,
        s.user_data,
        {tp.topic: tp.partitions for tp in s.owned_partitions},
        s.generation_id,
        s.rack_id,
    )


def encode_assignment(assignment: ConsumerProtocolAssignment, version: int = 3) -> bytes:
    a = _Assignment(_tps(assignment.assigned_partitions), assignment.user_data)
    return _versioned(_ASSIGNMENT, a, version)


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """An assignment; empty bytes (a member the leader left out) is an empty assignment."""
    if not data:
        return ConsumerProtocolAssignment({})
    a = _read(_ASSIGNMENT, data)
    assert isinstance(a, _Assignment)
    return ConsumerProtocolAssignment(
        {tp.topic: tp.partitions for tp in a.assigned_partitions}, a.user_data
    )
