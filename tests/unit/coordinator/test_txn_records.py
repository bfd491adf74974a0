"""The ``__transaction_state`` record codec (rillet.coordinator.transaction.records): Kafka's
bytes, checked by hand and against kafka-python's independent schema codec reading Kafka's own
``TransactionLogKey.json`` / ``TransactionLogValue.json``; both value versions are read and
written; corrupt input is refused."""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from typing import Any

import kafka_schemas
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rillet.coordinator.transaction import (
    TransactionCoordinatorShard,
    TransactionMetadata,
    TransactionState,
)
from rillet.coordinator.transaction import records as r
from rillet.errors import CorruptRecordError
from rillet.types import TopicPartition as TP


def _tagged_versions_are_versions(metacls: Any, json: dict[str, Any]) -> dict[str, Any]:
    # Kafka's generator takes a tagged field's versions from its taggedVersions when it has
    # none; kafka-python wants them spelled out.
    for f in json["fields"]:
        if "taggedVersions" in f and "versions" not in f:
            f["versions"] = f["taggedVersions"]
    return json


with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_data import ApiData  # type: ignore[import-untyped]

    KafkaKey: Any = type("TransactionLogKey", (ApiData,), {}, load_json=kafka_schemas)
    KafkaValue: Any = type(
        "TransactionLogValue",
        (ApiData,),
        {"json_patch": classmethod(_tagged_versions_are_versions)},
        load_json=kafka_schemas,
    )

names = st.text(min_size=1, max_size=12)
int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(
    st.builds(r.TransactionLogPartitions, names, st.lists(int32s, max_size=4).map(tuple)),
    max_size=3,
).map(tuple)


def values(version: int) -> st.SearchStrategy[r.TransactionLogValue]:
    tagged: dict[str, Any] = {}
    if version >= 1:
        tagged = {
            "previous_producer_id": int64s,
            "next_producer_id": int64s,
            "client_transaction_version": int16s,
        }
    return st.builds(
        r.TransactionLogValue,
        producer_id=int64s,
        producer_epoch=int16s,
        transaction_timeout_ms=int32s,
        transaction_status=st.integers(-128, 127),
        transaction_partitions=st.none() | partitions,
        transaction_last_update_timestamp_ms=int64s,
        transaction_start_timestamp_ms=int64s,
        **tagged,
    )


RECORDS = st.one_of(
    *(
        st.builds(
            r.TransactionRecord,
            st.builds(r.TransactionLogKey, names),
            values(version),
            st.just(version),
        )
        for version in (0, 1)
    ),
    st.builds(r.TransactionRecord, st.builds(r.TransactionLogKey, names), st.none()),
)


def as_kafka_dict(value: r.TransactionLogValue) -> dict[str, Any]:
    parts = value.transaction_partitions
    return {
        "producer_id": value.producer_id,
        "previous_producer_id": value.previous_producer_id,
        "next_producer_id": value.next_producer_id,
        "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.transaction_timeout_ms,
        "transaction_status": value.transaction_status,
        "transaction_partitions": None
        if parts is None
        else [(p.topic, list(p.partition_ids)) for p in parts],
        "transaction_last_update_timestamp_ms": value.transaction_last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.transaction_start_timestamp_ms,
        "client_transaction_version": value.client_transaction_version,
    }


def kafka_dict(theirs: Any) -> dict[str, Any]:
    parts = theirs.transaction_partitions
    return {
        name: getattr(theirs, name)
        for name in (
            "producer_id",
            "previous_producer_id",
            "next_producer_id",
            "producer_epoch",
            "transaction_timeout_ms",
            "transaction_status",
            "transaction_last_update_timestamp_ms",
            "transaction_start_timestamp_ms",
            "client_transaction_version",
        )
    } | {
        "transaction_partitions": None
        if parts is None
        else [(p.topic, list(p.partition_ids)) for p in parts]
    }


@settings(deadline=None)
@given(RECORDS)
def test_every_record_reads_back_as_written(record: r.TransactionRecord) -> None:
    assert r.decode_record(record.key_bytes(), record.value_bytes()) == record


@settings(deadline=None)
@given(RECORDS)
def test_kafka_reads_the_same_fields_from_rillets_bytes_and_writes_the_same_bytes(
    record: r.TransactionRecord,
) -> None:
    key = KafkaKey.decode(record.key_bytes())
    assert key.transactional_id == record.key.transactional_id
    assert key.encode(version=key.version) == record.key_bytes()
    data = record.value_bytes()
    if record.value is None:
        assert data is None
        return
    assert data is not None
    value = KafkaValue.decode(data)
    assert value.version == record.version
    assert kafka_dict(value) == as_kafka_dict(record.value)
    assert value.encode(version=value.version) == data


@settings(deadline=None)
@given(values(1))
def test_rillet_reads_what_kafka_writes_in_both_versions(value: r.TransactionLogValue) -> None:
    fields = as_kafka_dict(value)
    parts = fields.pop("transaction_partitions")
    theirs = KafkaValue(**fields)
    theirs.transaction_partitions = (
        None if parts is None else [{"topic": t, "partition_ids": ids} for t, ids in parts]
    )
    key = r.TransactionRecord(r.TransactionLogKey("t"), None).key_bytes()
    v1 = r.decode_record(key, theirs.encode(version=1))
    assert (v1.version, v1.value) == (1, value)
    v0 = r.decode_record(key, theirs.encode(version=0))
    untagged = dataclasses.replace(
        value, previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0
    )
    assert (v0.version, v0.value) == (0, untagged)


def test_keys_and_v0_values_are_kafkas_bytes() -> None:
    record = r.TransactionRecord(
        r.TransactionLogKey("tx"),
        r.TransactionLogValue(
            producer_id=5,
            producer_epoch=1,
            transaction_timeout_ms=60_000,
            transaction_status=TransactionState.ONGOING.id,
            transaction_partitions=(r.TransactionLogPartitions("t", (0, 1)),),
            transaction_last_update_timestamp_ms=10,
            transaction_start_timestamp_ms=9,
        ),
        version=0,
    )
    assert record.key_bytes() == bytes.fromhex("0000" + "0002" + b"tx".hex())
    assert record.value_bytes() == bytes.fromhex(
        "0000"  # version 0
        "0000000000000005 0001 0000ea60 01"  # producer id, epoch, timeout, Ongoing
        "00000001 0001 74 00000002 00000000 00000001"  # [t: [0, 1]]
        "000000000000000a 0000000000000009"  # last update, start
    )


def test_v1_values_are_compact_and_end_with_the_tagged_fields_that_differ() -> None:
    value = r.TransactionLogValue(
        producer_id=5,
        producer_epoch=1,
        transaction_timeout_ms=60_000,
        transaction_status=TransactionState.ONGOING.id,
        transaction_partitions=(r.TransactionLogPartitions("t", (0, 1)),),
        transaction_last_update_timestamp_ms=10,
        transaction_start_timestamp_ms=9,
        previous_producer_id=3,
    )
    data = r.TransactionRecord(r.TransactionLogKey("tx"), value, version=1).value_bytes()
    assert data == bytes.fromhex(
        "0001"
        "0000000000000005 0001 0000ea60 01"
        "02 0274 03 00000000 00000001 00"  # one topic "t", [0, 1], no tagged fields
        "000000000000000a 0000000000000009"
        "01 00 08 0000000000000003"  # one tagged field: tag 0, 8 bytes, 3
    )
    empty = r.TransactionLogValue(5, 1, 60_000, 0, None, 10, -1)
    data = r.TransactionRecord(r.TransactionLogKey("tx"), empty, version=1).value_bytes()
    assert data is not None and data[17:18] == b"\x00"  # null partitions: compact 0


def test_v0_cannot_carry_the_tagged_fields_and_reads_them_as_defaults() -> None:
    value = r.TransactionLogValue(5, 1, 60_000, 0, None, 10, -1, previous_producer_id=4)
    record = r.TransactionRecord(r.TransactionLogKey("tx"), value, version=0)
    decoded = r.decode_record(record.key_bytes(), record.value_bytes()).value
    assert decoded is not None and decoded.previous_producer_id == -1


def test_tagged_fields_of_a_newer_writer_are_skipped() -> None:
    value = r.TransactionLogValue(5, 1, 60_000, 0, None, 10, -1, client_transaction_version=2)
    data = r.TransactionRecord(r.TransactionLogKey("t"), value, version=1).value_bytes()
    assert data is not None and data.endswith(bytes.fromhex("01 02 02 0002"))
    newer = data[:-5] + bytes.fromhex("02 02 02 0002 09 03 abcdef")
    key = r.TransactionRecord(r.TransactionLogKey("t"), None).key_bytes()
    assert r.decode_record(key, newer).value == value


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"\x00", None),  # truncated key version
        (bytes.fromhex("0001" + "000174"), None),  # unknown key version
        (bytes.fromhex("0000" + "000574"), None),  # string longer than the data
        (bytes.fromhex("0000" + "0001ff"), None),  # not UTF-8
        (bytes.fromhex("0000" + "000174" + "00"), None),  # bytes after the key
        (bytes.fromhex("0000" + "000174"), bytes.fromhex("0002" + "00" * 40)),  # version 2
        (bytes.fromhex("0000" + "000174"), bytes.fromhex("0000" + "00" * 10)),  # truncated
        (
            bytes.fromhex("0000" + "000174"),
            bytes.fromhex("0001" + "00" * 15 + "00" + "00" * 16 + "01" + "00" + "04" + "00000001"),
        ),  # tag 0 (an int64) with 4 bytes
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


def test_a_shard_skips_keys_of_an_unknown_version_as_kafkas_loader_does() -> None:
    shard = TransactionCoordinatorShard(0, 0, producer_ids=lambda: 1)
    shard.replay(bytes.fromhex("0007" + "000174"), b"whatever")
    assert shard.skipped_records == 1 and not shard.state.transactions


def test_an_empty_id_has_null_partitions_and_a_transaction_its_topics_grouped_and_sorted() -> None:
    m = TransactionMetadata("t", 7, 1000, TransactionState.EMPTY, 5, producer_epoch=0)
    assert (
        m.prepare_increment_producer_epoch(1000, None, 6).to_record_value().transaction_partitions
        is None
    )
    ongoing = m.prepare_add_partitions([TP("b", 2), TP("a", 1), TP("b", 0)], 7)
    assert ongoing.to_record_value().transaction_partitions == (
        r.TransactionLogPartitions("a", (1,)),
        r.TransactionLogPartitions("b", (0, 2)),
    )
