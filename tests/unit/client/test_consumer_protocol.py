"""Kafka's embedded consumer protocol (ConsumerProtocolSubscription / ConsumerProtocolAssignment
v0-3, StickyAssignorUserData, the cooperative-sticky user data): bytes computed by hand from
the schemas, round trips at every version, Kafka's rules for newer versions, malformed input,
and byte-for-byte agreement with kafka-python's encoder (an independent reading of the same
JSON schemas)."""

from __future__ import annotations

import contextlib
import struct
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rillet.client.consumer.assignors.protocol import (
    DEFAULT_GENERATION,
    Assignment,
    StickyAssignorUserData,
    Subscription,
    decode_assignment,
    decode_cooperative_sticky_user_data,
    decode_sticky_assignor_user_data,
    decode_subscription,
    decode_version,
    encode_assignment,
    encode_cooperative_sticky_user_data,
    encode_sticky_assignor_user_data,
    encode_subscription,
    java_order,
)
from rillet.errors import CorruptRecordError
from rillet.types import TopicPartition

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData as KpUserData
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment as KpAssignment,
    )
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolSubscription as KpSubscription,
    )

TP = TopicPartition


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s(text: str) -> bytes:
    raw = text.encode()
    return i16(len(raw)) + raw


# -- hand-computed bytes -----------------------------------------------------------------------

SUBSCRIPTION = Subscription(
    topics=("t1", "t0"),
    user_data=b"\x01\x02",
    owned_partitions=(TP("t1", 0), TP("t0", 2), TP("t0", 1)),
    generation_id=7,
    rack_id="rack-a",
)
# Topics sorted; owned partitions sorted by topic then partition, grouped by topic.
_TOPICS = i32(2) + s("t0") + s("t1")
_USER_DATA = i32(2) + b"\x01\x02"
_OWNED = i32(2) + s("t0") + i32(2) + i32(1) + i32(2) + s("t1") + i32(1) + i32(0)
SUBSCRIPTION_BYTES = {
    0: i16(0) + _TOPICS + _USER_DATA,
    1: i16(1) + _TOPICS + _USER_DATA + _OWNED,
    2: i16(2) + _TOPICS + _USER_DATA + _OWNED + i32(7),
    3: i16(3) + _TOPICS + _USER_DATA + _OWNED + i32(7) + s("rack-a"),
}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_match_the_schema(version: int) -> None:
    assert encode_subscription(SUBSCRIPTION, version) == SUBSCRIPTION_BYTES[version]


def test_subscription_defaults_are_null_user_data_no_generation_and_null_rack() -> None:
    raw = encode_subscription(Subscription(topics=("t",)))
    assert raw == i16(3) + i32(1) + s("t") + i32(-1) + i32(0) + i32(-1) + i16(-1)
    assert decode_subscription(raw) == Subscription(topics=("t",))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_decodes_what_each_version_carries(version: int) -> None:
    decoded = decode_subscription(SUBSCRIPTION_BYTES[version])
    assert decoded.topics == ("t0", "t1")
    assert decoded.user_data == b"\x01\x02"
    assert decoded.owned_partitions == (
        (TP("t0", 1), TP("t0", 2), TP("t1", 0)) if version >= 1 else ()
    )
    assert decoded.generation_id == (7 if version >= 2 else DEFAULT_GENERATION)
    assert decoded.rack_id == ("rack-a" if version >= 3 else None)


def test_assignment_bytes_match_the_schema() -> None:
    assignment = Assignment((TP("b", 3), TP("a", 0), TP("b", 1)), user_data=None)
    body = (
        i32(2) + s("b") + i32(2) + i32(3) + i32(1) + s("a") + i32(1) + i32(0) + i32(-1)
    )  # grouped by topic in order of first appearance, as Kafka writes it
    for version in range(4):
        assert encode_assignment(assignment, version) == i16(version) + body
    assert decode_assignment(i16(3) + body) == Assignment((TP("b", 3), TP("b", 1), TP("a", 0)))
    empty = encode_assignment(Assignment(user_data=b"u"))
    assert empty == i16(3) + i32(0) + i32(1) + b"u"


def test_sticky_assignor_user_data_bytes() -> None:
    data = StickyAssignorUserData((TP("t", 2), TP("t", 1), TP("a", 0)), generation=5)
    body = i32(2) + s("a") + i32(1) + i32(0) + s("t") + i32(2) + i32(1) + i32(2)
    assert encode_sticky_assignor_user_data(data) == body + i32(5)  # v1: no version prefix
    assert decode_sticky_assignor_user_data(body + i32(5)) == StickyAssignorUserData(
        (TP("a", 0), TP("t", 1), TP("t", 2)), 5
    )
    # v0 (no generation) is what v1 falls back to.
    assert decode_sticky_assignor_user_data(body) == StickyAssignorUserData(
        (TP("a", 0), TP("t", 1), TP("t", 2)), None
    )
    v0 = encode_sticky_assignor_user_data(StickyAssignorUserData((TP("a", 0),)))
    assert v0 == i32(1) + s("a") + i32(1) + i32(0)
    assert decode_sticky_assignor_user_data(b"\x00\x00") is None
    assert decode_sticky_assignor_user_data(i32(-1)) is None


def test_cooperative_sticky_user_data_is_the_generation() -> None:
    assert encode_cooperative_sticky_user_data(12) == i32(12)
    assert decode_cooperative_sticky_user_data(i32(12)) == 12
    assert decode_cooperative_sticky_user_data(b"\x00") == DEFAULT_GENERATION


# -- Kafka's version rules ---------------------------------------------------------------------


def test_a_newer_version_is_read_as_version_3_and_trailing_bytes_are_ignored() -> None:
    v4 = i16(4) + SUBSCRIPTION_BYTES[3][2:] + i32(99) + s("a field from the future")
    assert decode_version(v4) == 4
    assert decode_subscription(v4) == decode_subscription(SUBSCRIPTION_BYTES[3])
    assignment = encode_assignment(Assignment((TP("t", 0),)))
    assert decode_assignment(i16(9) + assignment[2:] + b"\xff\xff") == Assignment((TP("t", 0),))


def test_encoding_above_version_3_writes_version_3() -> None:
    assert encode_subscription(SUBSCRIPTION, 7) == SUBSCRIPTION_BYTES[3]
    assert encode_assignment(Assignment(), 5)[:2] == i16(3)


def test_a_negative_version_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="Unsupported subscription version"):
        decode_subscription(i16(-1) + SUBSCRIPTION_BYTES[0][2:])
    with pytest.raises(CorruptRecordError, match="Unsupported assignment version"):
        decode_assignment(i16(-2) + i32(0) + i32(-1))
    with pytest.raises(ValueError):
        encode_subscription(SUBSCRIPTION, -1)


# -- malformed input ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_truncation_is_a_corrupt_record(version: int) -> None:
    full = SUBSCRIPTION_BYTES[version]
    for end in range(len(full)):
        with pytest.raises(CorruptRecordError):
            decode_subscription(full[:end])


def test_null_where_the_schema_forbids_it() -> None:
    with pytest.raises(CorruptRecordError, match="topics was serialized as null"):
        decode_subscription(i16(0) + i32(-1) + i32(-1))
    with pytest.raises(CorruptRecordError, match="topic was serialized as null"):
        decode_assignment(i16(0) + i32(1) + i16(-1))


def test_a_huge_count_is_refused_before_allocating() -> None:
    with pytest.raises(CorruptRecordError, match="underflow"):
        decode_assignment(i16(0) + i32(1) + s("t") + i32(0x7FFFFFFF))


def test_invalid_utf8_is_a_corrupt_record() -> None:
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode_subscription(i16(0) + i32(1) + i16(1) + b"\xff" + i32(-1))


@given(st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_raise_corrupt_record(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(CorruptRecordError):
            decode(data)
    decode_sticky_assignor_user_data(data)  # never raises: undecodable is None
    decode_cooperative_sticky_user_data(data)


def test_encoding_refuses_what_the_format_cannot_hold() -> None:
    with pytest.raises(ValueError, match="int16"):
        encode_subscription(Subscription(topics=("x" * 40_000,)))
    with pytest.raises(ValueError, match="int32"):
        encode_assignment(Assignment((TP("t", 2**31),)))


# -- round trips -------------------------------------------------------------------------------

topics_st = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8)
partitions_st = st.lists(
    st.builds(TP, topics_st, st.integers(0, 2**31 - 1)), max_size=8, unique=True
)
subscriptions_st = st.builds(
    Subscription,
    topics=st.lists(topics_st, max_size=6, unique=True).map(tuple),
    user_data=st.none() | st.binary(max_size=16),
    owned_partitions=partitions_st.map(tuple),
    generation_id=st.integers(-1, 2**31 - 1),
    rack_id=st.none() | topics_st,
)


def order(tp: TopicPartition) -> tuple[bytes, int]:
    return (java_order(tp.topic), tp.partition)


def canonical(sub: Subscription, version: int) -> Subscription:
    """What a subscription reads back as at ``version``: sorted, later fields defaulted."""
    return Subscription(
        topics=tuple(sorted(sub.topics, key=java_order)),
        user_data=sub.user_data,
        owned_partitions=tuple(sorted(sub.owned_partitions, key=order)) if version >= 1 else (),
        generation_id=sub.generation_id if version >= 2 else DEFAULT_GENERATION,
        rack_id=sub.rack_id if version >= 3 else None,
    )


@given(subscriptions_st, st.integers(0, 3))
def test_subscription_round_trips_at_every_version(sub: Subscription, version: int) -> None:
    raw = encode_subscription(sub, version)
    assert decode_version(raw) == version
    assert decode_subscription(raw) == canonical(sub, version)
    # Equal subscriptions are equal bytes, whatever the order they were given in.
    shuffled = Subscription(
        sub.topics[::-1], sub.user_data, sub.owned_partitions[::-1], sub.generation_id, sub.rack_id
    )
    assert encode_subscription(shuffled, version) == raw


@given(partitions_st, st.none() | st.binary(max_size=16), st.integers(0, 3))
def test_assignment_round_trips_at_every_version(
    partitions: list[TopicPartition], user_data: bytes | None, version: int
) -> None:
    ordered = tuple(sorted(partitions, key=order))
    raw = encode_assignment(Assignment(ordered, user_data), version)
    assert decode_assignment(raw) == Assignment(ordered, user_data)


@given(partitions_st, st.none() | st.integers(-1, 2**31 - 1))
def test_sticky_user_data_round_trips(
    partitions: list[TopicPartition], generation: int | None
) -> None:
    data = StickyAssignorUserData(tuple(partitions), generation)
    decoded = decode_sticky_assignor_user_data(encode_sticky_assignor_user_data(data))
    assert decoded is not None
    assert decoded.generation == generation
    assert sorted(decoded.previous_assignment) == sorted(partitions)


# -- kafka-python, an independent encoder of the same schemas ----------------------------------


def grouped(partitions: tuple[TopicPartition, ...]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return list(out.items())


@given(subscriptions_st, st.integers(0, 3))
def test_subscription_bytes_equal_kafka_pythons(sub: Subscription, version: int) -> None:
    c = canonical(sub, version)
    fields: dict[str, object] = {"topics": list(c.topics), "user_data": c.user_data}
    if version >= 1:
        fields["owned_partitions"] = grouped(c.owned_partitions)
    if version >= 2:
        fields["generation_id"] = c.generation_id
    if version >= 3:
        fields["rack_id"] = c.rack_id
    theirs = KpSubscription(version=version, **fields).encode()
    assert encode_subscription(sub, version) == theirs
    decoded = KpSubscription.decode(encode_subscription(sub, version))
    assert list(decoded.topics) == list(c.topics)


@given(partitions_st, st.none() | st.binary(max_size=16), st.integers(0, 3))
def test_assignment_bytes_equal_kafka_pythons(
    partitions: list[TopicPartition], user_data: bytes | None, version: int
) -> None:
    assignment = Assignment(tuple(partitions), user_data)
    theirs = KpAssignment(
        version=version, assigned_partitions=grouped(assignment.partitions), user_data=user_data
    ).encode()
    assert encode_assignment(assignment, version) == theirs
    assert decode_assignment(theirs).partitions == tuple(
        TP(t, p) for t, ps in grouped(assignment.partitions) for p in ps
    )


@given(partitions_st, st.integers(-1, 2**31 - 1))
def test_sticky_user_data_equals_kafka_pythons(
    partitions: list[TopicPartition], generation: int
) -> None:
    ordered = tuple(sorted(partitions, key=order))
    theirs = KpUserData(previous_assignment=grouped(ordered), generation=generation)
    ours = encode_sticky_assignor_user_data(StickyAssignorUserData(ordered, generation))
    assert ours == theirs.encode(header=False)
