"""Interop with kafka-python's RecordBatch v2 code (``kafka.record``): batches built by either
side decode identically on the other, for every codec both support, CRCs included."""

from __future__ import annotations

import struct
import warnings

import pytest

from rillet import BatchBuilder, crc32c, decode_batches, validate_record_batches
from rillet._core import BatchSpan
from rillet.errors import CorruptRecordError

with warnings.catch_warnings():
    # kafka/__init__ pulls in modules that use deprecated importlib.resources APIs.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import (
        ControlRecord,
        DefaultRecordBatch,
        DefaultRecordBatchBuilder,
    )
    from kafka.record.memory_records import MemoryRecords
    from kafka.record.util import calc_crc32c

# kafka-python's codec ids are Kafka's.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

Row = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]

BASE_TS = 1_700_000_000_000


def rows(n: int = 12) -> list[Row]:
    """Compressible records with keys, null keys, null values, headers and uneven timestamps."""
    out: list[Row] = []
    for i in range(n):
        key = None if i % 4 == 1 else f"key-{i}".encode()
        value = None if i % 5 == 3 else (f"value {i} " * 20).encode()
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 0:
            headers = [("trace", f"t{i}".encode()), ("nil", None), ("ünï", b"\x00\xff")]
        ts = BASE_TS + (i * 37) % 11 - 3
        out.append((ts, key, value, headers))
    return out


def kafka_python_batch(
    codec: str,
    data: list[Row],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 24,
    )
    for offset, (ts, k, v, h) in enumerate(data):
        assert b.append(offset, timestamp=ts, key=k, value=v, headers=h) is not None
    return bytes(b.build())


def rillet_batch(codec: str, data: list[Row], **kwargs: object) -> bytes:
    b = BatchBuilder(codec, **kwargs)  # type: ignore[arg-type]
    for ts, k, v, h in data:
        b.append(ts, k, v, h)
    return b.build()


def kp_records(
    batch: DefaultRecordBatch,
) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


# ---------------------------------------------------------------------------------------------
# kafka-python -> rillet


@pytest.mark.parametrize("codec", list(CODECS))
def test_kafka_python_batches_decode_in_rillet(codec: str) -> None:
    data = rows()
    raw = kafka_python_batch(codec, data)

    kp = DefaultRecordBatch(raw)
    assert kp.compression_type == CODECS[codec]  # kafka-python did compress (no fallback)
    assert kp.validate_crc()

    (batch,) = decode_batches(raw)
    assert validate_record_batches(raw) == [BatchSpan(0, 0, len(data) - 1, len(data))]
    assert batch.compression == codec
    assert batch.magic == 2
    assert batch.crc == kp.crc == crc32c(raw[21:])
    assert batch.base_offset == kp.base_offset == 0
    assert batch.last_offset == kp.last_offset == len(data) - 1
    assert batch.partition_leader_epoch == kp.leader_epoch
    assert batch.attributes == kp.attributes
    assert batch.timestamp_type == "CreateTime"
    assert batch.base_timestamp == kp.first_timestamp == data[0][0]
    assert batch.max_timestamp == kp.max_timestamp == max(r[0] for r in data)
    assert batch.producer_id == kp.producer_id == -1
    assert batch.producer_epoch == kp.producer_epoch == -1
    assert batch.base_sequence == kp.base_sequence == -1
    assert batch.record_count == kp.records_count == len(data)
    assert batch.size_in_bytes == kp.size_in_bytes == len(raw)

    expected = [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(data)]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == expected
    assert kp_records(DefaultRecordBatch(raw)) == expected


@pytest.mark.parametrize("codec", list(CODECS))
def test_kafka_python_idempotent_and_transactional_batches(codec: str) -> None:
    data = rows(5)
    raw = kafka_python_batch(
        codec, data, producer_id=4242, producer_epoch=7, base_sequence=100, transactional=True
    )
    (batch,) = decode_batches(raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 100)
    assert batch.is_transactional is True
    assert batch.is_control is False
    assert batch.attributes == CODECS[codec] | 0x10
    kp = DefaultRecordBatch(raw)
    assert kp.last_sequence == 104


@pytest.mark.parametrize("codec", list(CODECS))
def test_identical_bytes_for_uncompressed_records(codec: str) -> None:
    # Both builders encode records identically; only the (compressed) payload and the fields
    # kafka-python leaves to the broker may differ.
    data = rows()
    ours = rillet_batch(codec, data, partition_leader_epoch=0)
    theirs = kafka_python_batch(codec, data)
    if codec == "none":
        assert ours == theirs
    (a,) = decode_batches(ours)
    (b,) = decode_batches(theirs)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in a.records] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records
    ]


def test_kafka_python_batches_concatenated() -> None:
    parts = [kafka_python_batch(c, rows(3)) for c in CODECS]
    batches = decode_batches(b"".join(parts))
    assert [b.compression for b in batches] == list(CODECS)
    assert all(b.record_count == 3 for b in batches)


def test_kafka_python_batch_with_flipped_byte_fails_both_crc_checks() -> None:
    raw = bytearray(kafka_python_batch("gzip", rows()))
    raw[len(raw) // 2] ^= 0x10
    assert not DefaultRecordBatch(bytes(raw)).validate_crc()
    with pytest.raises(CorruptRecordError, match="crc"):
        decode_batches(bytes(raw))


# ---------------------------------------------------------------------------------------------
# rillet -> kafka-python


@pytest.mark.parametrize("codec", list(CODECS))
def test_rillet_batches_decode_in_kafka_python(codec: str) -> None:
    data = rows()
    raw = rillet_batch(
        codec,
        data,
        base_offset=500,
        partition_leader_epoch=9,
        producer_id=77,
        producer_epoch=2,
        base_sequence=10,
    )
    kp = DefaultRecordBatch(raw)
    assert kp.validate_crc()
    assert kp.crc == calc_crc32c(raw[21:]) == crc32c(raw[21:])
    assert kp.magic == 2
    assert kp.compression_type == CODECS[codec]
    assert kp.timestamp_type == 0
    assert kp.base_offset == 500
    assert kp.last_offset == 500 + len(data) - 1
    assert kp.leader_epoch == 9
    assert kp.first_timestamp == data[0][0]
    assert kp.max_timestamp == max(r[0] for r in data)
    assert (kp.producer_id, kp.producer_epoch, kp.base_sequence) == (77, 2, 10)
    assert kp.last_sequence == 10 + len(data) - 1
    assert kp.is_transactional is False
    assert kp.is_control_batch is False
    assert kp.records_count == len(data)
    assert kp.size_in_bytes == len(raw)
    assert kp_records(kp) == [(500 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(data)]


@pytest.mark.parametrize("codec", list(CODECS))
def test_rillet_large_batch_in_kafka_python(codec: str) -> None:
    # Several lz4 (64 KiB) and xerial snappy (32 KiB) blocks.
    data: list[Row] = [
        (BASE_TS + i, str(i).encode(), bytes([i % 251]) * 5000 + bytes(4) + str(i).encode(), [])
        for i in range(60)
    ]
    raw = rillet_batch(codec, data)
    kp = DefaultRecordBatch(raw)
    assert kp.validate_crc()
    assert kp_records(kp) == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(data)]


@pytest.mark.parametrize("codec", list(CODECS))
def test_rillet_log_append_time_in_kafka_python(codec: str) -> None:
    data = rows(4)
    raw = rillet_batch(codec, data, timestamp_type="LogAppendTime")
    kp = DefaultRecordBatch(raw)
    assert kp.validate_crc()
    assert kp.timestamp_type == 1
    max_ts = max(r[0] for r in data)
    assert kp.max_timestamp == max_ts
    assert [(r.timestamp, r.timestamp_type) for r in kp] == [(max_ts, 1)] * len(data)
    assert [r.timestamp for r in decode_batches(raw)[0].records] == [max_ts] * len(data)


@pytest.mark.parametrize("codec", list(CODECS))
def test_rillet_control_batch_in_kafka_python(codec: str) -> None:
    b = BatchBuilder(
        codec, producer_id=31, producer_epoch=4, is_transactional=True, is_control=True
    )
    b.append(BASE_TS, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 12))  # COMMIT marker
    raw = b.build()
    kp = DefaultRecordBatch(raw)
    assert kp.validate_crc()
    assert kp.is_control_batch is True
    assert kp.is_transactional is True
    (rec,) = list(kp)
    assert isinstance(rec, ControlRecord)
    assert rec.commit and not rec.abort
    assert rec.version == 0


def test_rillet_batches_through_memory_records() -> None:
    parts = [rillet_batch(codec, rows(3), base_offset=3 * i) for i, codec in enumerate(CODECS)]
    raw = b"".join(parts)
    mr = MemoryRecords(raw)
    seen = []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        seen.append((batch.base_offset, batch.compression_type, [r.offset for r in batch]))
    assert seen == [(3 * i, CODECS[c], [3 * i, 3 * i + 1, 3 * i + 2]) for i, c in enumerate(CODECS)]
    assert mr.valid_bytes() == len(raw)

    # A partial trailing batch is left unread by both.
    mr = MemoryRecords(raw + parts[0][:40])
    count = 0
    while mr.has_next():
        mr.next_batch()
        count += 1
    assert count == len(CODECS)
    assert len(decode_batches(raw + parts[0][:40], allow_partial=True)) == len(CODECS)


def test_rillet_batch_with_flipped_byte_fails_kafka_python_crc() -> None:
    raw = bytearray(rillet_batch("zstd", rows()))
    for i in (21, 30, 60, len(raw) - 1):
        bad = bytearray(raw)
        bad[i] ^= 0x04
        assert not DefaultRecordBatch(bytes(bad)).validate_crc()
        with pytest.raises(CorruptRecordError):
            validate_record_batches(bytes(bad))


def test_stamping_base_offset_and_epoch_keeps_both_crcs_valid() -> None:
    # Kafka's design: baseOffset and partitionLeaderEpoch lie outside the CRC, so a broker
    # stamps them on a kafka-python batch without recomputing it.
    raw = bytearray(kafka_python_batch("lz4", rows()))
    struct.pack_into(">q", raw, 0, 123_456)
    struct.pack_into(">i", raw, 12, 17)
    kp = DefaultRecordBatch(bytes(raw))
    assert kp.validate_crc()
    (batch,) = decode_batches(bytes(raw))
    assert (batch.base_offset, batch.partition_leader_epoch) == (123_456, 17)
    assert [r.offset for r in batch.records] == [r.offset for r in kp]
