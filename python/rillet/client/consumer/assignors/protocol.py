"""Kafka's embedded consumer protocol, byte for byte: what a classic group member puts in
JoinGroup (a ``ConsumerProtocolSubscription`` per assignor it supports) and what the leader
sends back through SyncGroup (a ``ConsumerProtocolAssignment`` per member). The group
coordinator treats both as opaque bytes; only the consumers read them, so a Rillet consumer and
a Kafka consumer in one classic group must write exactly what Kafka's ``ConsumerProtocol``
writes.

Layout (Kafka's ``clients/src/main/resources/common/message/ConsumerProtocolSubscription.json``
and ``ConsumerProtocolAssignment.json``; versions 0-3, never flexible), big-endian::

    version            int16     prefixed to both structs

    ConsumerProtocolSubscription
    topics             int32 count, then per topic: int16 length + UTF-8
    user_data          int32 length + bytes, or int32 -1 for null
    owned_partitions   v1+: int32 count, then per topic: string topic,
                       int32 count + int32 partitions
    generation_id      v2+: int32 (-1: none)
    rack_id            v3+: int16 length + UTF-8, or int16 -1 for null

    ConsumerProtocolAssignment
    assigned_partitions  int32 count, then per topic: string topic, int32 count + int32 partitions
    user_data            int32 length + bytes, or int32 -1 for null

Kafka's rule for versions: a newer version than this code knows is read as the newest one it
knows (later versions may only append fields), and trailing bytes are ignored; a negative one
is refused. Writing a field at a version that lacks it drops it silently, as Kafka does for
fields its schema marks ignorable (owned_partitions, generation_id, rack_id).

Also here: ``StickyAssignorUserData`` (the user data Kafka's eager ``StickyAssignor`` sends
before KIP-429 put owned partitions in the subscription) and the ``CooperativeStickyAssignor``'s
user data (its generation). Neither has a version prefix: Kafka writes them with a bare
``Schema``.

Malformed bytes raise :class:`rillet.errors.CorruptRecordError` (Kafka's ``SchemaException``
has no error code of its own). Pure functions; thread safe.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from rillet.errors import CorruptRecordError
from rillet.types import TopicPartition

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "DEFAULT_GENERATION",
    "HIGHEST_SUPPORTED_VERSION",
    "LOWEST_SUPPORTED_VERSION",
    "Assignment",
    "StickyAssignorUserData",
    "Subscription",
    "decode_assignment",
    "decode_cooperative_sticky_user_data",
    "decode_sticky_assignor_user_data",
    "decode_subscription",
    "decode_version",
    "encode_assignment",
    "encode_cooperative_sticky_user_data",
    "encode_sticky_assignor_user_data",
    "encode_subscription",
    "java_order",
]

#: The ``protocol_type`` of consumer groups in JoinGroup and SyncGroup.
CONSUMER_PROTOCOL_TYPE = "consumer"
LOWEST_SUPPORTED_VERSION = 0
HIGHEST_SUPPORTED_VERSION = 3
#: A member that has never completed a rebalance (``AbstractStickyAssignor.DEFAULT_GENERATION``).
DEFAULT_GENERATION = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_STRING_LENGTH_MAX = 0x7FFF

T = TypeVar("T")


def java_order(s: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does (by UTF-16 code
    unit), so ids outside the Basic Multilingual Plane sort as in a Kafka client's leader."""
    return s.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's ``ConsumerProtocolSubscription`` (Kafka's ``ConsumerPartitionAssignor.
    Subscription``): the topics it subscribes to, the assignor's opaque ``user_data``, the
    partitions it owns now (v1+, KIP-429), the generation in which it got them (v2+;
    :data:`DEFAULT_GENERATION` when it has none) and its ``client.rack`` (v3+, KIP-881)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """A member's ``ConsumerProtocolAssignment``: the partitions the leader gave it and the
    assignor's opaque ``user_data`` (None from all four built-in assignors)."""

    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class StickyAssignorUserData:
    """What Kafka's eager ``StickyAssignor`` puts in its subscription's user data: the
    member's previous assignment and (v1) the generation it belongs to; None at v0."""

    previous_assignment: tuple[TopicPartition, ...]
    generation: int | None = None


# -- writing -----------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_INT16.pack(v))

    def int32(self, v: int) -> None:
        try:
            self.parts.append(_INT32.pack(v))
        except struct.error:
            raise ValueError(f"{v} does not fit an int32") from None

    def string(self, s: str | None) -> None:
        if s is None:
            self.int16(-1)
            return
        raw = s.encode("utf-8")
        if len(raw) > _STRING_LENGTH_MAX:
            raise ValueError(f"string of {len(raw)} bytes is longer than an int16 length allows")
        self.int16(len(raw))
        self.parts.append(raw)

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.int32(-1)
        else:
            self.int32(len(b))
            self.parts.append(bytes(b))

    def topic_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """``[]TopicPartition`` (topic, []int32), one entry per topic in order of first
        appearance, as Kafka's ``find(topic)``-then-append builds it."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        self.int32(len(by_topic))
        for topic, numbers in by_topic.items():
            self.string(topic)
            self.int32(len(numbers))
            for n in numbers:
                self.int32(n)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _check_encode_version(version: int, what: str) -> int:
    if version < LOWEST_SUPPORTED_VERSION:
        raise ValueError(f"Unsupported {what} version: {version}")
    return min(version, HIGHEST_SUPPORTED_VERSION)


def encode_subscription(
    subscription: Subscription, version: int = HIGHEST_SUPPORTED_VERSION
) -> bytes:
    """Kafka's ``ConsumerProtocol.serializeSubscription``: the version, then the struct, with
    topics sorted and owned partitions sorted by topic and partition (so equal subscriptions
    are equal bytes). A version above 3 writes version 3."""
    version = _check_encode_version(version, "subscription")
    w = _Writer()
    w.int16(version)
    topics = sorted(subscription.topics, key=java_order)
    w.int32(len(topics))
    for topic in topics:
        w.string(topic)
    w.nullable_bytes(subscription.user_data)
    if version >= 1:
        owned = sorted(
            subscription.owned_partitions, key=lambda tp: (java_order(tp.topic), tp.partition)
        )
        w.topic_partitions(owned)
    if version >= 2:
        w.int32(subscription.generation_id)
    if version >= 3:
        w.string(subscription.rack_id)
    return w.getvalue()


def encode_assignment(assignment: Assignment, version: int = HIGHEST_SUPPORTED_VERSION) -> bytes:
    """Kafka's ``ConsumerProtocol.serializeAssignment``: partitions grouped by topic in the
    order given (the assignors here give them sorted). Every version has the same fields."""
    version = _check_encode_version(version, "assignment")
    w = _Writer()
    w.int16(version)
    w.topic_partitions(assignment.partitions)
    w.nullable_bytes(assignment.user_data)
    return w.getvalue()


def encode_sticky_assignor_user_data(data: StickyAssignorUserData) -> bytes:
    """``StickyAssignor.serializeTopicPartitionAssignment``: v1 when ``generation`` is set (as
    Kafka always writes it), v0 otherwise; no version prefix. Topics in sorted order."""
    w = _Writer()
    w.topic_partitions(
        sorted(data.previous_assignment, key=lambda tp: (java_order(tp.topic), tp.partition))
    )
    if data.generation is not None:
        w.int32(data.generation)
    return w.getvalue()


def encode_cooperative_sticky_user_data(generation: int) -> bytes:
    """``CooperativeStickyAssignor.subscriptionUserData``: the member's generation, an int32,
    for leaders that read subscriptions older than v2 (which carry no ``generation_id``)."""
    w = _Writer()
    w.int32(generation)
    return w.getvalue()


# -- reading -----------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise CorruptRecordError(
                f"Buffer underflow while parsing consumer protocol's {self.what}"
            )
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def int16(self) -> int:
        v: int = _INT16.unpack(self._take(2))[0]
        return v

    def int32(self) -> int:
        v: int = _INT32.unpack(self._take(4))[0]
        return v

    def _text(self, n: int) -> str:
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(f"Invalid UTF-8 in consumer protocol's {self.what}") from None

    def string(self, field: str) -> str:
        n = self.int16()
        if n < 0:
            raise CorruptRecordError(f"non-nullable field {field} was serialized as null")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._text(n)

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else bytes(self._take(n))

    def array(self, field: str, read: Callable[[], T]) -> list[T]:
        n = self.int32()
        if n < 0:
            raise CorruptRecordError(f"non-nullable field {field} was serialized as null")
        # Every element takes at least 2 bytes (an empty string's length): a count larger than
        # the rest allows is corrupt, and is refused before a list of that size is built.
        if n > (len(self.data) - self.pos) // 2:
            raise CorruptRecordError(
                f"Buffer underflow while parsing consumer protocol's {self.what}"
            )
        return [read() for _ in range(n)]

    def topic_partitions(self, field: str) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []

        def entry() -> None:
            topic = self.string("topic")
            out.extend(TopicPartition(topic, p) for p in self.array("partitions", self.int32))

        self.array(field, entry)
        return tuple(out)


def decode_version(data: bytes) -> int:
    """``ConsumerProtocol.deserializeVersion``: the int16 version that prefixes both structs."""
    return _Reader(data, "header").int16()


def _read_version(r: _Reader, what: str) -> int:
    version = r.int16()
    if version < LOWEST_SUPPORTED_VERSION:
        raise CorruptRecordError(f"Unsupported {what} version: {version}")
    return min(version, HIGHEST_SUPPORTED_VERSION)


def decode_subscription(data: bytes) -> Subscription:
    """``ConsumerProtocol.deserializeSubscription``: fields a version lacks take their
    defaults (no owned partitions, :data:`DEFAULT_GENERATION`, no rack); an empty rack reads
    as None, as in Kafka."""
    r = _Reader(bytes(data), "subscription")
    version = _read_version(r, "subscription")
    topics = tuple(r.array("topics", lambda: r.string("topics")))
    user_data = r.nullable_bytes()
    owned = r.topic_partitions("owned_partitions") if version >= 1 else ()
    generation_id = r.int32() if version >= 2 else DEFAULT_GENERATION
    rack_id = r.nullable_string() if version >= 3 else None
    return Subscription(topics, user_data, owned, generation_id, rack_id or None)


def decode_assignment(data: bytes) -> Assignment:
    """``ConsumerProtocol.deserializeAssignment``: the partitions in the order written."""
    r = _Reader(bytes(data), "assignment")
    _read_version(r, "assignment")
    partitions = r.topic_partitions("assigned_partitions")
    return Assignment(partitions, r.nullable_bytes())


def decode_sticky_assignor_user_data(data: bytes) -> StickyAssignorUserData | None:
    """``StickyAssignor.deserializeTopicPartitionAssignment``: read as v1, else as v0 (no
    generation); None when neither parses, and the leader then ignores the member's previous
    assignment, as Kafka's does."""
    for with_generation in (True, False):
        r = _Reader(bytes(data), "sticky assignor user data")
        try:
            previous = r.topic_partitions("previous_assignment")
            generation = r.int32() if with_generation else None
        except CorruptRecordError:
            continue
        return StickyAssignorUserData(previous, generation)
    return None


def decode_cooperative_sticky_user_data(data: bytes) -> int:
    """The generation in a ``CooperativeStickyAssignor``'s user data, or
    :data:`DEFAULT_GENERATION` when it does not parse (as Kafka's ``memberData`` falls back)."""
    try:
        return _Reader(bytes(data), "cooperative sticky user data").int32()
    except CorruptRecordError:
        return DEFAULT_GENERATION
