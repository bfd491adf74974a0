"""The records of ``__transaction_state``, in Kafka's own binary format.

One record per transactional id and state change; the topic is compacted, so the last record
of an id is its state, and a tombstone (null value) removes an expired id. The schemas are
Kafka's ``TransactionLogKey.json`` and ``TransactionLogValue.json``
(``transaction-coordinator/src/main/resources/common/message/``), so Kafka's tooling and a
Kafka broker could read what Rillet writes. All integers are big-endian.

Key (never flexible): int16 version 0, then ``TransactionalId`` as a string (int16 length,
UTF-8 bytes).

Value: int16 version (0 or 1), then::

    ProducerId                        int64
    ProducerEpoch                     int16
    TransactionTimeoutMs              int32
    TransactionStatus                 int8   (TransactionState.id)
    TransactionPartitions             array of {Topic: string, PartitionIds: [int32]},
                                      null when the state is Empty
    TransactionLastUpdateTimestampMs  int64
    TransactionStartTimestampMs       int64  (-1 before the first partition is added)

Version 1 is flexible (KIP-482): strings and arrays are compact (unsigned varint of
length + 1, 0 for null), each PartitionsSchema element ends with an (empty) tagged-field
section, and the value ends with its tagged fields (unsigned varint count, then per field
its tag, its size and its data), written only when they differ from their defaults, in tag
order: 0 ``PreviousProducerId`` int64 (-1), 1 ``NextProducerId`` int64 (-1),
2 ``ClientTransactionVersion`` int16 (0). Version 0 cannot carry them: they are not written
and read back as their defaults. Unknown tags are skipped, as Kafka's generated code does.
Truncated or malformed input raises :class:`~rillet.errors.CorruptRecordError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rillet.coordinator.group.codec import Reader, Writer
from rillet.errors import CorruptRecordError

__all__ = [
    "TransactionLogKey",
    "TransactionLogPartitions",
    "TransactionLogValue",
    "TransactionRecord",
    "decode_record",
]

KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)

_PREVIOUS_PRODUCER_ID_TAG = 0
_NEXT_PRODUCER_ID_TAG = 1
_CLIENT_TRANSACTION_VERSION_TAG = 2


@dataclass(frozen=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True)
class TransactionLogPartitions:
    """Kafka's ``PartitionsSchema``: the partitions of one topic in the transaction."""

    topic: str
    partition_ids: tuple[int, ...]


@dataclass(frozen=True)
class TransactionLogValue:
    """One transactional id's state, as Kafka's ``TransactionLogValue`` (snake case)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[TransactionLogPartitions, ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


@dataclass(frozen=True)
class TransactionRecord:
    """One record for ``__transaction_state``: the key, and the value (None: a tombstone)
    with the version to write it at.

    ``key_bytes()`` and ``value_bytes()`` are what the driver appends (the record's key and
    value in a Kafka record batch); :func:`decode_record` reads them back.
    """

    key: TransactionLogKey
    value: TransactionLogValue | None
    version: int = 1

    @property
    def transactional_id(self) -> str:
        return self.key.transactional_id

    def key_bytes(self) -> bytes:
        w = Writer()
        w.integer("int16", KEY_VERSION)
        _write_string(w, self.key.transactional_id, compact=False)
        return bytes(w.buffer)

    def value_bytes(self) -> bytes | None:
        if self.value is None:
            return None
        if self.version not in VALUE_VERSIONS:
            raise ValueError(f"TransactionLogValue has no version {self.version}")
        return _encode_value(self.value, self.version)


def _write_string(w: Writer, value: str, *, compact: bool) -> None:
    data = value.encode("utf-8")
    if not compact and len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
    w.length(len(data), compact=compact, wide=False)
    w.raw(data)


def _read_string(r: Reader, *, compact: bool) -> str:
    n = r.length(compact=compact, wide=False)
    if n is None:
        raise CorruptRecordError("null string in a __transaction_state record")
    try:
        return r.raw(n).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptRecordError(f"string is not UTF-8: {e}") from e


def _encode_value(value: TransactionLogValue, version: int) -> bytes:
    flexible = version >= 1
    w = Writer()
    w.integer("int16", version)
    w.integer("int64", value.producer_id)
    w.integer("int16", value.producer_epoch)
    w.integer("int32", value.transaction_timeout_ms)
    w.integer("int8", value.transaction_status)
    partitions = value.transaction_partitions
    w.length(None if partitions is None else len(partitions), compact=flexible, wide=True)
    for p in partitions or ():
        _write_string(w, p.topic, compact=flexible)
        w.length(len(p.partition_ids), compact=flexible, wide=True)
        for partition in p.partition_ids:
            w.integer("int32", partition)
        if flexible:
            w.unsigned_varint(0)  # no tagged fields in PartitionsSchema
    w.integer("int64", value.transaction_last_update_timestamp_ms)
    w.integer("int64", value.transaction_start_timestamp_ms)
    if flexible:
        tagged: list[tuple[int, str, int]] = []
        if value.previous_producer_id != -1:
            tagged.append((_PREVIOUS_PRODUCER_ID_TAG, "int64", value.previous_producer_id))
        if value.next_producer_id != -1:
            tagged.append((_NEXT_PRODUCER_ID_TAG, "int64", value.next_producer_id))
        if value.client_transaction_version != 0:
            tagged.append(
                (_CLIENT_TRANSACTION_VERSION_TAG, "int16", value.client_transaction_version)
            )
        w.unsigned_varint(len(tagged))
        for tag, kind, v in tagged:
            w.unsigned_varint(tag)
            w.unsigned_varint(8 if kind == "int64" else 2)
            w.integer(kind, v)
    return bytes(w.buffer)


def _decode_value(data: bytes) -> tuple[TransactionLogValue, int]:
    r = Reader(data)
    version = r.integer("int16")
    if version not in VALUE_VERSIONS:
        raise CorruptRecordError(f"unsupported TransactionLogValue version {version}")
    flexible = version >= 1
    producer_id = r.integer("int64")
    producer_epoch = r.integer("int16")
    timeout_ms = r.integer("int32")
    status = r.integer("int8")
    count = r.length(compact=flexible, wide=True)
    partitions: tuple[TransactionLogPartitions, ...] | None = None
    if count is not None:
        items = []
        for _ in range(count):
            topic = _read_string(r, compact=flexible)
            n = r.length(compact=flexible, wide=True)
            if n is None:
                raise CorruptRecordError("null PartitionIds in a TransactionLogValue")
            ids = tuple(r.integer("int32") for _ in range(n))
            if flexible:
                _skip_tagged_fields(r)
            items.append(TransactionLogPartitions(topic, ids))
        partitions = tuple(items)
    last_update_ms = r.integer("int64")
    start_ms = r.integer("int64")
    tagged = {"previous_producer_id": -1, "next_producer_id": -1, "client_transaction_version": 0}
    if flexible:
        for _ in range(r.unsigned_varint()):
            tag, size = r.unsigned_varint(), r.unsigned_varint()
            field = Reader(r.raw(size))
            if tag in (_PREVIOUS_PRODUCER_ID_TAG, _NEXT_PRODUCER_ID_TAG):
                name = "previous_producer_id" if tag == 0 else "next_producer_id"
                tagged[name] = field.integer("int64")
            elif tag == _CLIENT_TRANSACTION_VERSION_TAG:
                tagged["client_transaction_version"] = field.integer("int16")
            else:
                continue  # a newer writer's field: skipped
            if not field.at_end():
                raise CorruptRecordError(f"tagged field {tag} has {size} bytes")
    if not r.at_end():
        raise CorruptRecordError(f"{len(r.data) - r.position} bytes after TransactionLogValue")
    value = TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update_ms,
        start_ms,
        **tagged,
    )
    return value, version


def _skip_tagged_fields(r: Reader) -> None:
    for _ in range(r.unsigned_varint()):
        r.unsigned_varint()
        r.raw(r.unsigned_varint())


def decode_record(key: bytes, value: bytes | None) -> TransactionRecord:
    """The record whose key and value bytes these are; CorruptRecordError if unreadable
    (Kafka's loader skips keys of an unknown version; Rillet refuses them loudly)."""
    r = Reader(key)
    version = r.integer("int16")
    if version != KEY_VERSION:
        raise CorruptRecordError(f"unsupported TransactionLogKey version {version}")
    decoded_key = TransactionLogKey(_read_string(r, compact=False))
    if not r.at_end():
        raise CorruptRecordError(f"{len(r.data) - r.position} bytes after TransactionLogKey")
    if value is None:
        return TransactionRecord(decoded_key, None)
    decoded, value_version = _decode_value(value)
    return TransactionRecord(decoded_key, decoded, value_version)
