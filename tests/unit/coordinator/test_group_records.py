"""The ``__consumer_offsets`` record codec (rillet.coordinator.group.records and codec):
Kafka's bytes, checked by hand and against kafka-python's independent schema codec reading
Kafka's own JSON schemas; every version Kafka defines is read; corrupt input is refused."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
import warnings
from typing import Any

import kafka_schemas
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rillet.coordinator.group import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from rillet.coordinator.group import records as r
from rillet.errors import CorruptRecordError

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_data import ApiData  # type: ignore[import-untyped]
    from kafka.protocol.consumer.metadata import (  # type: ignore[import-untyped]
        ConsumerProtocolAssignment as KafkaAssignment,
    )
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolSubscription as KafkaSubscription,
    )

    # kafka-python's schema-driven codec over Kafka's JSON files, one class per struct.
    KAFKA: dict[str, Any] = {
        name: type(name, (ApiData,), {}, load_json=kafka_schemas)
        for name in (
            "OffsetCommitKey",
            "OffsetCommitValue",
            "GroupMetadataKey",
            "GroupMetadataValue",
            "ConsumerGroupMetadataKey",
            "ConsumerGroupMetadataValue",
            "ConsumerGroupPartitionMetadataKey",
            "ConsumerGroupPartitionMetadataValue",
            "ConsumerGroupMemberMetadataKey",
            "ConsumerGroupMemberMetadataValue",
            "ConsumerGroupTargetAssignmentMetadataKey",
            "ConsumerGroupTargetAssignmentMetadataValue",
            "ConsumerGroupTargetAssignmentMemberKey",
            "ConsumerGroupTargetAssignmentMemberValue",
            "ConsumerGroupCurrentMemberAssignmentKey",
            "ConsumerGroupCurrentMemberAssignmentValue",
        )
    }

names = st.text(min_size=1, max_size=12)
maybe = st.none() | names
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
# Kafka reserves the zero uuid (ZERO_UUID reads as null).
uuids = st.builds(uuid.UUID, int=st.integers(1, 2**128 - 1))
topic_partitions = st.builds(
    r.TopicPartitions, uuids, st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)
)
tps = st.lists(topic_partitions, max_size=3).map(tuple)

RECORDS = st.one_of(
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.OffsetCommitKey, names, names, int32s),
        st.none() | st.builds(r.OffsetCommitValue, int64s, int32s, st.text(max_size=20), int64s),
    ),
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.GroupMetadataKey, names),
        st.none()
        | st.builds(
            r.GroupMetadataValue,
            st.text(max_size=10),
            int32s,
            maybe,
            maybe,
            int64s,
            st.lists(
                st.builds(
                    r.GroupMetadataMember,
                    names,
                    maybe,
                    st.text(max_size=5),
                    st.text(max_size=5),
                    int32s,
                    int32s,
                    st.binary(max_size=10),
                    st.binary(max_size=10),
                ),
                max_size=3,
            ).map(tuple),
        ),
    ),
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.ConsumerGroupMetadataKey, names),
        st.none() | st.builds(r.ConsumerGroupMetadataValue, int32s),
    ),
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.ConsumerGroupPartitionMetadataKey, names),
        st.none()
        | st.builds(
            r.ConsumerGroupPartitionMetadataValue,
            st.lists(st.builds(r.TopicMetadata, uuids, names, int32s), max_size=3).map(tuple),
        ),
    ),
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.ConsumerGroupMemberMetadataKey, names, names),
        st.none()
        | st.builds(
            r.ConsumerGroupMemberMetadataValue,
            maybe,
            maybe,
            st.text(max_size=5),
            st.text(max_size=5),
            st.lists(names, max_size=3).map(tuple),
            maybe,
            int32s,
            maybe,
        ),
    ),
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.ConsumerGroupTargetAssignmentMetadataKey, names),
        st.none() | st.builds(r.ConsumerGroupTargetAssignmentMetadataValue, int32s),
    ),
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.ConsumerGroupTargetAssignmentMemberKey, names, names),
        st.none() | st.builds(r.ConsumerGroupTargetAssignmentMemberValue, tps),
    ),
    st.builds(
        r.CoordinatorRecord,
        st.builds(r.ConsumerGroupCurrentMemberAssignmentKey, names, names),
        st.none()
        | st.builds(
            r.ConsumerGroupCurrentMemberAssignmentValue,
            int32s,
            int32s,
            st.integers(-128, 127),
            tps,
            tps,
        ),
    ),
)


def plain(value: Any) -> Any:
    """A record struct as kafka-python's ``to_dict()`` shows it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return value


def kafka_fields(theirs: Any, ours: Any) -> Any:
    """kafka-python's decoded object, read field by field as :func:`plain` reads ours."""
    if dataclasses.is_dataclass(ours) and not isinstance(ours, type):
        return {
            f.name: kafka_fields(getattr(theirs, f.name), getattr(ours, f.name))
            for f in dataclasses.fields(ours)
        }
    if isinstance(ours, tuple | list):
        assert len(theirs) == len(ours)
        return [kafka_fields(t, o) for t, o in zip(theirs, ours, strict=True)]
    return _scalar(theirs)


@settings(deadline=None)
@given(RECORDS)
def test_every_record_reads_back_as_written(record: r.CoordinatorRecord) -> None:
    assert r.decode_record(record.key_bytes(), record.value_bytes()) == record


@settings(deadline=None)
@given(RECORDS)
def test_kafka_reads_the_same_fields_from_rillets_bytes_and_writes_the_same_bytes(
    record: r.CoordinatorRecord,
) -> None:
    key_name = type(record.key).__name__
    key = KAFKA[key_name].decode(record.key_bytes())
    assert kafka_fields(key, record.key) == plain(record.key)
    assert key.encode(version=key.version) == record.key_bytes()
    data = record.value_bytes()
    if record.value is None:
        assert data is None
        return
    assert data is not None
    value = KAFKA[type(record.value).__name__].decode(data)
    expected = plain(record.value)
    if isinstance(record.value, r.OffsetCommitValue):
        expected["expire_timestamp"] = -1  # only in version 1, not written: the default
    if isinstance(record.value, r.ConsumerGroupMemberMetadataValue):
        assert value.classic_member_metadata is None  # tagged field 0, not written
    assert kafka_fields(value, record.value) == expected
    assert value.encode(version=value.version) == data


def test_offset_commit_records_are_kafkas_bytes() -> None:
    record = r.CoordinatorRecord(
        r.OffsetCommitKey("g", "t", 7), r.OffsetCommitValue(5, 3, "", 1000)
    )
    assert record.key_bytes() == bytes.fromhex("0001" + "000167" + "000174" + "00000007")
    assert record.value_bytes() == bytes.fromhex(
        "0003" + "0000000000000005" + "00000003" + "0000" + "00000000000003e8"
    )


def test_flexible_values_use_compact_strings_and_end_with_tagged_fields() -> None:
    value = r.ConsumerGroupMemberMetadataValue(None, "r", "c", "h", ("a",), None, 5, "uniform")
    data = r.CoordinatorRecord(r.ConsumerGroupMemberMetadataKey("g", "m"), value).value_bytes()
    assert (
        data
        == bytes.fromhex(
            "0000"  # version 0, flexible
            "00" + "0272" + "0263" + "0268"  # null instance id, "r", "c", "h": length + 1
            "02" + "0261"  # one topic name, "a"
            "00" + "00000005" + "08" + b"uniform".hex() + "00"  # null regex, 5, "uniform", no tags
        )
    )


@pytest.mark.parametrize("version", range(5))
def test_every_offset_commit_value_version_is_read(version: int) -> None:
    kafka = KAFKA["OffsetCommitValue"](
        offset=42, leader_epoch=7, metadata="m", commit_timestamp=1000, expire_timestamp=2000
    )
    decoded = r.decode_record(
        r.CoordinatorRecord(r.OffsetCommitKey("g", "t", 0), None).key_bytes(),
        kafka.encode(version=version),
    ).value
    assert isinstance(decoded, r.OffsetCommitValue)
    assert (decoded.offset, decoded.metadata, decoded.commit_timestamp) == (42, "m", 1000)
    assert decoded.leader_epoch == (7 if version >= 3 else -1)
    assert decoded.expire_timestamp == (2000 if version == 1 else -1)


@pytest.mark.parametrize("version", range(5))
def test_every_group_metadata_value_version_is_read(version: int) -> None:
    member = {
        "member_id": "a",
        "group_instance_id": "i" if version >= 3 else None,
        "client_id": "c",
        "client_host": "h",
        "rebalance_timeout": 9,
        "session_timeout": 8,
        "subscription": b"s",
        "assignment": b"x",
    }
    kafka = KAFKA["GroupMetadataValue"](
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="a",
        current_state_timestamp=77,
        members=[member],
    )
    key = r.CoordinatorRecord(r.GroupMetadataKey("g"), None).key_bytes()
    decoded = r.decode_record(key, kafka.encode(version=version)).value
    assert isinstance(decoded, r.GroupMetadataValue)
    assert decoded.generation == 3 and decoded.protocol == "range" and decoded.leader == "a"
    assert decoded.current_state_timestamp == (77 if version >= 2 else -1)
    (m,) = decoded.members
    assert m.rebalance_timeout == (9 if version >= 1 else -1)
    assert m.group_instance_id == member["group_instance_id"]
    assert (m.subscription, m.assignment, m.session_timeout) == (b"s", b"x", 8)


def test_tagged_fields_of_a_newer_writer_are_skipped() -> None:
    key = r.CoordinatorRecord(r.ConsumerGroupMetadataKey("g"), None).key_bytes()
    # Epoch 9, then one tagged field (tag 1, 2 bytes) that this reader does not know.
    value = bytes.fromhex("0000" + "00000009" + "01" + "01" + "02" + "abcd")
    decoded = r.decode_record(key, value)
    assert decoded.value == r.ConsumerGroupMetadataValue(9)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"\x00", None),  # truncated key version
        (bytes.fromhex("0009" + "000167"), None),  # a share-group record type
        (bytes.fromhex("0003" + "000567"), None),  # string longer than the data
        (bytes.fromhex("0003" + "000167"), bytes.fromhex("0000" + "000000")),  # short value
        (bytes.fromhex("0003" + "000167"), bytes.fromhex("0007" + "00000001" + "00")),  # version
        (bytes.fromhex("0003" + "000167"), bytes.fromhex("0000" + "00000001" + "00" + "ff")),
        (bytes.fromhex("0003" + "0001ff"), None),  # not UTF-8
    ],
)
def test_corrupt_records_are_refused(key: bytes, value: bytes | None) -> None:
    with pytest.raises(CorruptRecordError):
        r.decode_record(key, value)


@settings(deadline=None)
@given(st.binary(max_size=64), st.none() | st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_are_refused_as_corrupt(key: bytes, value: bytes | None) -> None:
    with contextlib.suppress(CorruptRecordError):
        r.decode_record(key, value)


# -- the embedded consumer protocol of classic groups ---------------------------------------


@settings(deadline=None)
@given(
    st.lists(names, max_size=4).map(tuple),
    st.none() | st.binary(max_size=8),
    st.dictionaries(names, st.lists(st.integers(0, 100), max_size=3).map(tuple), max_size=3),
    int32s,
    maybe,
    st.integers(0, 3),
)
def test_subscriptions_are_kafka_clients_bytes(
    topics: tuple[str, ...],
    user_data: bytes | None,
    owned: dict[str, tuple[int, ...]],
    generation: int,
    rack: str | None,
    version: int,
) -> None:
    ours = ConsumerProtocolSubscription(topics, user_data, owned, generation, rack)
    data = encode_subscription(ours, version)
    theirs = KafkaSubscription.decode(data)
    assert list(theirs.topics) == list(topics)
    assert theirs.user_data == user_data
    assert theirs.encode(version=version) == data
    back = decode_subscription(data)
    assert back.topics == topics
    if version >= 1:
        assert dict(back.owned_partitions or {}) == owned
    if version >= 3:
        assert back.rack_id == rack


@settings(deadline=None)
@given(
    st.dictionaries(names, st.lists(st.integers(0, 100), max_size=3).map(tuple), max_size=3),
    st.none() | st.binary(max_size=8),
)
def test_assignments_are_kafka_clients_bytes(
    partitions: dict[str, tuple[int, ...]], user_data: bytes | None
) -> None:
    data = encode_assignment(ConsumerProtocolAssignment(partitions, user_data))
    theirs = KafkaAssignment.decode(data)
    assert theirs.encode(version=3) == data
    assert decode_assignment(data) == ConsumerProtocolAssignment(partitions, user_data)


def test_a_newer_subscription_version_is_read_as_the_latest_known() -> None:
    data = encode_subscription(ConsumerProtocolSubscription(("a", "b")), 3)
    newer = b"\x00\x07" + data[2:] + b"trailing fields of version 7"
    assert decode_subscription(newer).topics == ("a", "b")
    assert decode_assignment(b"") == ConsumerProtocolAssignment({})
