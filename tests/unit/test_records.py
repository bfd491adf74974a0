"""RecordBatch v2: BatchBuilder / decode_batches / validate_record_batches / crc32c.

Layout reminder (offsets into one batch)::

    0 baseOffset(8) 8 batchLength(4) 12 partitionLeaderEpoch(4) 16 magic(1) 17 crc(4)
    21 attributes(2) 23 lastOffsetDelta(4) 27 baseTimestamp(8) 35 maxTimestamp(8)
    43 producerId(8) 51 producerEpoch(2) 53 baseSequence(4) 57 recordCount(4) 61 records

The CRC (CRC-32C) covers bytes 21..end; baseOffset and partitionLeaderEpoch are outside it by
design (the log stamps them without recomputing the CRC).
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rillet import BatchBuilder, crc32c, decode_batches, validate_record_batches
from rillet._core import BatchSpan
from rillet.errors import (
    CorruptRecordError,
    InvalidConfigurationError,
    InvalidRequestError,
    KafkaError,
    UnsupportedCompressionTypeError,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

OFF_BASE_OFFSET = 0
OFF_LENGTH = 8
OFF_LEADER_EPOCH = 12
OFF_MAGIC = 16
OFF_CRC = 17
OFF_ATTRIBUTES = 21
OFF_LAST_OFFSET_DELTA = 23
OFF_BASE_TIMESTAMP = 27
OFF_MAX_TIMESTAMP = 35
OFF_PRODUCER_ID = 43
OFF_RECORD_COUNT = 57
HEADER_SIZE = 61


# ---------------------------------------------------------------------------------------------
# helpers


def put(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    """``data`` with the big-endian field ``fmt`` at ``offset`` set to ``value``."""
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


def get(data: bytes, offset: int, fmt: str) -> int:
    return struct.unpack_from(fmt, data, offset)[0]


def recrc(batch: bytes) -> bytes:
    """Recompute the CRC of one batch, so a structural lie is not caught by the CRC alone."""
    return put(batch, OFF_CRC, ">I", crc32c(batch[OFF_ATTRIBUTES:]))


def sample_batch(codec: str = "none", n: int = 5, **kwargs: object) -> bytes:
    b = BatchBuilder(codec, **kwargs)  # type: ignore[arg-type]
    for i in range(n):
        b.append(
            1_700_000_000_000 + i,
            f"key-{i}".encode(),
            f"value-{i}-".encode() * 4,
            [("h", f"{i}".encode())],
        )
    return b.build()


def records_of(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    return [
        (r.offset, r.timestamp, r.key, r.value, r.headers)
        for batch in decode_batches(data)
        for r in batch.records
    ]


# ---------------------------------------------------------------------------------------------
# crc32c


def test_crc32c_known_vector() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_crc32c_empty_and_other_vectors() -> None:
    assert crc32c(b"") == 0
    # RFC 3720 (iSCSI) B.4 test vectors for CRC-32C.
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E


def test_batch_crc_field_is_crc32c_of_bytes_21_to_end() -> None:
    data = sample_batch("zstd")
    (batch,) = decode_batches(data)
    assert batch.crc == get(data, OFF_CRC, ">I") == crc32c(data[OFF_ATTRIBUTES:])


# ---------------------------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_field(codec: str) -> None:
    b = BatchBuilder(
        codec,
        base_offset=1000,
        partition_leader_epoch=7,
        producer_id=123_456_789_012,
        producer_epoch=3,
        base_sequence=42,
        is_transactional=True,
    )
    rows = [
        (1_700_000_000_000, b"k0", b"v0", [("h1", b"x"), ("h2", None)]),
        (1_700_000_000_005, None, b"null key", []),
        (1_699_999_999_990, b"tombstone", None, [("only", b"")]),
        (1_700_000_000_003, b"", b"", [("ключ", "значение".encode())]),
        (1_700_000_000_004, None, None, None),
        (1_700_000_000_001, b"\x00\xff" * 50, bytes(range(256)) * 20, [("bin", b"\x00\x01")]),
    ]
    for i, (ts, k, v, h) in enumerate(rows):
        assert b.append(ts, k, v, h) == i
    assert len(b) == len(rows)
    assert b.compression == codec
    data = b.build()

    batches = decode_batches(data)
    assert len(batches) == 1
    batch = batches[0]
    assert batch.base_offset == 1000
    assert batch.last_offset == 1000 + len(rows) - 1
    assert batch.partition_leader_epoch == 7
    assert batch.magic == 2
    assert batch.compression == codec
    assert batch.attributes & 0x07 == CODECS.index(codec)
    assert batch.timestamp_type == "CreateTime"
    assert batch.is_transactional is True
    assert batch.is_control is False
    assert batch.base_timestamp == rows[0][0]
    assert batch.max_timestamp == max(r[0] for r in rows)
    assert batch.producer_id == 123_456_789_012
    assert batch.producer_epoch == 3
    assert batch.base_sequence == 42
    assert batch.record_count == len(rows)
    assert batch.size_in_bytes == len(data)
    assert batch.crc == crc32c(data[OFF_ATTRIBUTES:])

    assert len(batch.records) == len(rows)
    for i, (rec, (ts, k, v, h)) in enumerate(zip(batch.records, rows, strict=True)):
        assert rec.offset == 1000 + i
        assert rec.timestamp == ts
        assert rec.key == k
        assert rec.value == v
        assert rec.headers == (h or [])
        assert rec.attributes == 0

    assert validate_record_batches(data) == [BatchSpan(0, 1000, 1000 + len(rows) - 1, len(rows))]


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_defaults(codec: str) -> None:
    b = BatchBuilder(codec)
    b.append(5, b"k", b"v")
    (batch,) = decode_batches(b.build())
    assert batch.base_offset == 0
    assert batch.last_offset == 0
    assert batch.partition_leader_epoch == -1
    assert batch.producer_id == -1
    assert batch.producer_epoch == -1
    assert batch.base_sequence == -1
    assert batch.is_transactional is False
    assert batch.is_control is False
    assert batch.timestamp_type == "CreateTime"
    assert batch.attributes == CODECS.index(codec)
    (rec,) = batch.records
    assert (rec.offset, rec.timestamp, rec.key, rec.value, rec.headers) == (0, 5, b"k", b"v", [])


@pytest.mark.parametrize("codec", CODECS)
def test_control_batch_roundtrip(codec: str) -> None:
    # An end-transaction marker: key = (version, type), value = (version, coordinator epoch).
    b = BatchBuilder(
        codec,
        producer_id=9,
        producer_epoch=2,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
    )
    b.append(1_000, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))
    (batch,) = decode_batches(b.build())
    assert batch.is_control is True
    assert batch.is_transactional is True
    assert batch.attributes == CODECS.index(codec) | 0x10 | 0x20
    assert batch.producer_id == 9
    assert batch.producer_epoch == 2
    (rec,) = batch.records
    assert struct.unpack(">hh", rec.key) == (0, 1)
    assert struct.unpack(">hi", rec.value) == (0, 5)


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_batch_uses_max_timestamp(codec: str) -> None:
    b = BatchBuilder(codec, timestamp_type="LogAppendTime")
    for ts in (100, 300, 200):
        b.append(ts, None, b"v")
    (batch,) = decode_batches(b.build())
    assert batch.timestamp_type == "LogAppendTime"
    assert batch.attributes & 0x08
    assert batch.max_timestamp == 300
    # Kafka: with LogAppendTime every record reports the batch's max timestamp.
    assert [r.timestamp for r in batch.records] == [300, 300, 300]


@pytest.mark.parametrize("codec", CODECS)
def test_large_batch_spans_many_compression_blocks(codec: str) -> None:
    # > 64 KiB (lz4 block) and > 32 KiB (xerial snappy block) of records.
    values = [bytes([i % 251]) * 3000 + i.to_bytes(4, "big") for i in range(100)]
    b = BatchBuilder(codec)
    for i, v in enumerate(values):
        b.append(i, str(i).encode(), v)
    data = b.build()
    if codec != "none":
        assert len(data) < sum(map(len, values))
    (batch,) = decode_batches(data)
    assert [r.value for r in batch.records] == values
    assert [r.key for r in batch.records] == [str(i).encode() for i in range(100)]


@pytest.mark.parametrize("codec", CODECS)
def test_many_batches_concatenated(codec: str) -> None:
    parts = [sample_batch(codec, n=n, base_offset=base) for n, base in ((1, 0), (3, 1), (7, 4))]
    data = b"".join(parts)
    batches = decode_batches(data)
    assert [(b.base_offset, b.last_offset, b.record_count) for b in batches] == [
        (0, 0, 1),
        (1, 3, 3),
        (4, 10, 7),
    ]
    assert [r.offset for b in batches for r in b.records] == list(range(11))
    positions = [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert validate_record_batches(data) == [
        BatchSpan(positions[0], 0, 0, 1),
        BatchSpan(positions[1], 1, 3, 3),
        BatchSpan(positions[2], 4, 10, 7),
    ]


def test_empty_input_is_no_batches() -> None:
    assert decode_batches(b"") == []
    assert decode_batches(b"", allow_partial=True) == []
    assert validate_record_batches(b"") == []


def test_empty_batch_decodes_to_no_records() -> None:
    # Compaction can leave a batch with no records (kept for its producer state).
    data = sample_batch("none", n=1, base_offset=10)
    empty = data[:HEADER_SIZE]
    empty = put(empty, OFF_LENGTH, ">i", HEADER_SIZE - 12)
    empty = put(empty, OFF_RECORD_COUNT, ">i", 0)
    empty = recrc(empty)
    (batch,) = decode_batches(empty)
    assert batch.record_count == 0
    assert batch.records == []
    assert batch.base_offset == 10


def test_negative_and_out_of_order_timestamps() -> None:
    b = BatchBuilder()
    for ts in (1_000, 10, 5_000, 999):
        b.append(ts, None, b"x")
    (batch,) = decode_batches(b.build())
    assert [r.timestamp for r in batch.records] == [1_000, 10, 5_000, 999]
    assert batch.base_timestamp == 1_000
    assert batch.max_timestamp == 5_000


def test_compression_name_uncompressed_alias() -> None:
    assert BatchBuilder("uncompressed").compression == "none"
    assert BatchBuilder("GZIP").compression == "gzip"


# ---------------------------------------------------------------------------------------------
# append_values


@pytest.mark.parametrize("codec", CODECS)
def test_append_values_equals_per_record_appends(codec: str) -> None:
    values = [b"a", None, b"", b"x" * 1000, bytes(range(256))]
    keys = [b"k1", b"k2", None, b"", b"k5"]
    kwargs = {"producer_id": 4, "producer_epoch": 0, "base_sequence": 17, "base_offset": 3}

    bulk = BatchBuilder(codec, **kwargs)  # type: ignore[arg-type]
    assert bulk.append_values(values, 123, keys) == len(values)
    one = BatchBuilder(codec, **kwargs)  # type: ignore[arg-type]
    for k, v in zip(keys, values, strict=True):
        one.append(123, k, v)
    assert len(bulk) == len(one) == len(values)
    assert bulk.estimated_size() == one.estimated_size()
    assert bulk.build() == one.build()

    bulk.append_values(values, 99)  # no keys: every key is null
    for v in values:
        one.append(99, None, v)
    data = bulk.build()
    assert data == one.build()
    assert [(r.key, r.value, r.timestamp) for r in decode_batches(data)[0].records] == [
        (None, v, 99) for v in values
    ]


def test_append_values_mixed_with_append() -> None:
    a = BatchBuilder()
    a.append(1, b"k", b"first", [("h", b"v")])
    a.append_values([b"second", b"third"], 2, [b"k2", None])
    a.append(3, None, b"fourth")
    b = BatchBuilder()
    b.append(1, b"k", b"first", [("h", b"v")])
    b.append(2, b"k2", b"second")
    b.append(2, None, b"third")
    b.append(3, None, b"fourth")
    assert a.build() == b.build()


def test_append_values_key_count_mismatch() -> None:
    b = BatchBuilder()
    with pytest.raises(InvalidRequestError, match="keys"):
        b.append_values([b"a", b"b"], 0, [b"k"])
    assert len(b) == 0


def test_append_values_empty_list() -> None:
    b = BatchBuilder()
    assert b.append_values([], 0) == 0
    assert len(b) == 0


# ---------------------------------------------------------------------------------------------
# builder state


@pytest.mark.parametrize("codec", CODECS)
def test_builder_resets_after_build(codec: str) -> None:
    b = BatchBuilder(codec, base_offset=50, producer_id=8, producer_epoch=1, base_sequence=0)
    empty_size = b.estimated_size()
    assert empty_size == HEADER_SIZE
    b.append(1_000, b"a", b"1")
    b.append(2_000, b"b", b"2")
    first = b.build()
    assert len(b) == 0
    assert b.estimated_size() == empty_size

    b.append(500, b"c", b"3")
    second = b.build()
    (b1,) = decode_batches(first)
    (b2,) = decode_batches(second)
    assert (b1.record_count, b1.base_timestamp, b1.max_timestamp) == (2, 1_000, 2_000)
    # The second batch starts afresh: its own base/max timestamp, one record at delta 0.
    assert (b2.record_count, b2.base_timestamp, b2.max_timestamp) == (1, 500, 500)
    assert (b2.base_offset, b2.last_offset) == (50, 50)
    assert [r.key for r in b2.records] == [b"c"]
    # The batch-level settings carry over.
    assert (b2.producer_id, b2.producer_epoch, b2.compression) == (8, 1, codec)

    # Building the same records again gives the same bytes.
    b.append(500, b"c", b"3")
    assert b.build() == second


def test_build_empty_builder_refused() -> None:
    b = BatchBuilder()
    with pytest.raises(InvalidRequestError, match="no records"):
        b.build()
    b.append(0, None, b"x")
    b.build()
    with pytest.raises(InvalidRequestError):
        b.build()


def test_estimated_size_is_uncompressed_size() -> None:
    b = BatchBuilder()
    for i in range(10):
        b.append(i, b"k", b"v" * i, [("h", None)])
    size = b.estimated_size()
    assert len(b.build()) == size


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"compression": "brotli"}, InvalidConfigurationError, "brotli"),
        ({"timestamp_type": "Sometime"}, InvalidConfigurationError, "Sometime"),
        ({"base_offset": -1}, InvalidRequestError, "base_offset"),
    ],
)
def test_builder_bad_arguments(kwargs: dict, error: type[KafkaError], match: str) -> None:
    with pytest.raises(error, match=match):
        BatchBuilder(**kwargs)


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00",
        b"garbage",
        b"\xff" * 12,
        b"\x00" * 61,
        b"\x00" * 200,
        b"\xff" * 200,
        bytes(range(256)),
    ],
)
def test_garbage_is_corrupt(garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError) as e:
        decode_batches(garbage)
    assert str(e.value).startswith("[CORRUPT_MESSAGE] ")
    assert e.value.code == 2
    with pytest.raises(CorruptRecordError):
        validate_record_batches(garbage)


@pytest.mark.parametrize("codec", CODECS)
def test_wrong_crc(codec: str) -> None:
    data = sample_batch(codec)
    stored = get(data, OFF_CRC, ">I")
    bad = put(data, OFF_CRC, ">I", stored ^ 0xDEADBEEF)
    with pytest.raises(CorruptRecordError, match="crc"):
        validate_record_batches(bad)
    with pytest.raises(CorruptRecordError, match="crc"):
        decode_batches(bad)
    # Without CRC verification the (otherwise intact) batch decodes.
    (batch,) = decode_batches(bad, verify_crc=False)
    assert batch.crc == stored ^ 0xDEADBEEF
    assert records_of(data) == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records
    ]


@pytest.mark.parametrize("magic", [0, 1, 3, -1, 127])
def test_wrong_magic(magic: int) -> None:
    bad = put(sample_batch(), OFF_MAGIC, ">b", magic)
    for fn in (decode_batches, validate_record_batches):
        with pytest.raises(CorruptRecordError, match="magic"):
            fn(bad)
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_batches(bad, verify_crc=False)


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 1, 48])
def test_negative_or_too_small_batch_length(length: int) -> None:
    bad = put(sample_batch(), OFF_LENGTH, ">i", length)
    for fn in (decode_batches, validate_record_batches):
        with pytest.raises(CorruptRecordError, match="length"):
            fn(bad)
    with pytest.raises(CorruptRecordError, match="length"):
        decode_batches(bad, verify_crc=False, allow_partial=True)


@pytest.mark.parametrize("delta", [1, 1000, None])
def test_batch_length_claims_more_than_present(delta: int | None) -> None:
    data = sample_batch()
    length = 2**31 - 1 if delta is None else get(data, OFF_LENGTH, ">i") + delta
    bad = put(data, OFF_LENGTH, ">i", length)
    with pytest.raises(CorruptRecordError, match="claims"):
        decode_batches(bad)
    with pytest.raises(CorruptRecordError, match="claims"):
        validate_record_batches(bad)


def test_batch_length_claims_less_than_present() -> None:
    data = sample_batch()
    bad = put(data, OFF_LENGTH, ">i", get(data, OFF_LENGTH, ">i") - 3)
    with pytest.raises(CorruptRecordError):
        decode_batches(bad)
    with pytest.raises(CorruptRecordError):
        decode_batches(bad, verify_crc=False)
    with pytest.raises(CorruptRecordError):
        validate_record_batches(bad)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("count", [0, 4, 6, 1000, 2**31 - 1, -1])
def test_lying_record_count(codec: str, count: int) -> None:
    data = sample_batch(codec, n=5)
    lie = put(data, OFF_RECORD_COUNT, ">i", count)
    # The CRC catches it ...
    with pytest.raises(CorruptRecordError):
        validate_record_batches(lie)
    with pytest.raises(CorruptRecordError):
        decode_batches(lie)
    # ... and so does the structure, even with a matching CRC and lastOffsetDelta.
    lie = put(lie, OFF_LAST_OFFSET_DELTA, ">i", max(count - 1, 4))
    lie = recrc(lie)
    with pytest.raises(CorruptRecordError):
        decode_batches(lie)
    with pytest.raises(CorruptRecordError):
        decode_batches(lie, verify_crc=False, allow_partial=True)


def test_record_count_above_last_offset_delta_plus_one_is_refused() -> None:
    data = recrc(put(sample_batch(n=5), OFF_RECORD_COUNT, ">i", 6))
    with pytest.raises(CorruptRecordError, match="lastOffsetDelta"):
        validate_record_batches(data)


def test_negative_last_offset_delta() -> None:
    data = recrc(put(sample_batch(), OFF_LAST_OFFSET_DELTA, ">i", -1))
    with pytest.raises(CorruptRecordError, match="lastOffsetDelta"):
        decode_batches(data)


def test_negative_base_offset() -> None:
    data = put(sample_batch(), OFF_BASE_OFFSET, ">q", -5)
    with pytest.raises(CorruptRecordError, match="base offset"):
        decode_batches(data)
    with pytest.raises(CorruptRecordError, match="base offset"):
        validate_record_batches(data)


def test_unknown_codec_with_valid_crc() -> None:
    data = sample_batch()
    attrs = get(data, OFF_ATTRIBUTES, ">h")
    bad = recrc(put(data, OFF_ATTRIBUTES, ">h", (attrs & ~0x07) | 6))
    with pytest.raises(UnsupportedCompressionTypeError, match="6"):
        decode_batches(bad)
    with pytest.raises(UnsupportedCompressionTypeError):
        validate_record_batches(bad)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_garbage_compressed_payload_is_corrupt(codec: str) -> None:
    data = sample_batch(codec)
    junk = data[:HEADER_SIZE] + bytes([0x13, 0x37, 0xFF, 0x00, 0x42, 0x99, 0x01]) * 4
    junk = recrc(put(junk, OFF_LENGTH, ">i", len(junk) - 12))
    validate_record_batches(junk)  # header and CRC are fine
    with pytest.raises(CorruptRecordError, match=codec):
        decode_batches(junk)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_payload_decoding_to_wrong_records(codec: str) -> None:
    # A well-compressed payload that holds fewer records than the header claims.
    two = sample_batch(codec, n=2)
    three = sample_batch(codec, n=3)
    spliced = three[:HEADER_SIZE] + two[HEADER_SIZE:]
    spliced = recrc(put(spliced, OFF_LENGTH, ">i", len(spliced) - 12))
    with pytest.raises(CorruptRecordError):
        decode_batches(spliced)


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_is_corrupt_and_a_partial_tail_with_allow_partial(codec: str) -> None:
    data = sample_batch(codec)
    for cut in range(1, len(data)):
        part = data[:cut]
        with pytest.raises(CorruptRecordError):
            decode_batches(part)
        with pytest.raises(CorruptRecordError):
            validate_record_batches(part)
        assert decode_batches(part, allow_partial=True) == []


@pytest.mark.parametrize("codec", CODECS)
def test_allow_partial_ignores_only_the_trailing_partial_batch(codec: str) -> None:
    whole = [sample_batch(codec, n=2, base_offset=0), sample_batch(codec, n=3, base_offset=2)]
    tail = sample_batch(codec, n=4, base_offset=5)
    for cut in (1, 11, 12, 17, 60, 61, len(tail) - 1):
        data = b"".join(whole) + tail[:cut]
        batches = decode_batches(data, allow_partial=True)
        assert [(b.base_offset, b.record_count) for b in batches] == [(0, 2), (2, 3)]
        with pytest.raises(CorruptRecordError):
            decode_batches(data)
    assert len(decode_batches(b"".join([*whole, tail]), allow_partial=True)) == 3


def test_allow_partial_does_not_hide_a_corrupt_batch_before_the_tail() -> None:
    good = sample_batch(n=2)
    bad = put(good, OFF_CRC, ">I", get(good, OFF_CRC, ">I") ^ 1)
    tail = sample_batch(n=2, base_offset=2)[:30]
    with pytest.raises(CorruptRecordError, match="crc"):
        decode_batches(good + bad + tail, allow_partial=True)


def test_allow_partial_does_not_hide_a_whole_header_with_a_negative_length() -> None:
    tail = put(sample_batch(n=4), OFF_LENGTH, ">i", -1)
    assert len(tail) > HEADER_SIZE
    with pytest.raises(CorruptRecordError, match="length"):
        decode_batches(sample_batch(n=1) + tail, allow_partial=True)


def test_allow_partial_does_not_hide_a_short_tail_with_a_negative_length() -> None:
    tail = put(sample_batch(n=4), OFF_LENGTH, ">i", -1)[:20]
    with pytest.raises(CorruptRecordError):
        decode_batches(sample_batch(n=1) + tail, allow_partial=True)


def _flip_cases(codec: str) -> tuple[bytes, list[tuple[int, int]]]:
    data = sample_batch(codec, producer_id=11, producer_epoch=1, base_sequence=0)
    return data, [(i, m) for i in range(len(data)) for m in (0x01, 0x80, 0xFF)]


@pytest.mark.parametrize("codec", CODECS)
def test_every_flipped_byte_in_the_checked_region_fails_validation(codec: str) -> None:
    data, cases = _flip_cases(codec)
    assert validate_record_batches(data) == [BatchSpan(0, 0, 4, 5)]
    accepted = []
    for i, mask in cases:
        if i < OFF_LENGTH or OFF_LEADER_EPOCH <= i < OFF_MAGIC:
            continue  # baseOffset and partitionLeaderEpoch: not covered by the CRC
        bad = bytearray(data)
        bad[i] ^= mask
        try:
            validate_record_batches(bytes(bad))
        except KafkaError as e:
            assert str(e)  # a message, not just a class
            assert isinstance(e, CorruptRecordError | UnsupportedCompressionTypeError), e
        else:
            accepted.append((i, mask))
        with pytest.raises(KafkaError):
            decode_batches(bytes(bad))
    assert accepted == []


@pytest.mark.parametrize("codec", CODECS)
def test_flips_outside_the_crc_change_base_offset_or_epoch_only(codec: str) -> None:
    data = sample_batch(codec, base_offset=100, partition_leader_epoch=4)
    expect = [(r[2], r[3], r[4]) for r in records_of(data)]
    for i in [*range(OFF_LENGTH), *range(OFF_LEADER_EPOCH, OFF_MAGIC)]:
        bad = bytearray(data)
        bad[i] ^= 0x01
        span = validate_record_batches(bytes(bad))[0]
        pos, base, last, count = (
            span.position,
            span.base_offset,
            span.last_offset,
            span.record_count,
        )
        (batch,) = decode_batches(bytes(bad))
        assert (pos, count) == (0, 5)
        assert (batch.base_offset, batch.partition_leader_epoch) == (
            get(bad, OFF_BASE_OFFSET, ">q"),
            get(bad, OFF_LEADER_EPOCH, ">i"),
        )
        assert (base, last) == (batch.base_offset, batch.base_offset + 4)
        assert [(r.key, r.value, r.headers) for r in batch.records] == expect


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_crc_mismatch_with_corrupted_codec_bits_is_corrupt_message(codec: str) -> None:
    data = sample_batch(codec)
    bad = bytearray(data)
    bad[OFF_ATTRIBUTES + 1] |= 0x07  # codec id 7; the CRC no longer matches
    with pytest.raises(CorruptRecordError):
        validate_record_batches(bytes(bad))


def test_error_messages_say_where() -> None:
    good = sample_batch(n=2)
    bad = put(good, OFF_CRC, ">I", 0)
    with pytest.raises(CorruptRecordError) as e:
        validate_record_batches(good + bad)
    msg = str(e.value)
    assert f"at byte {len(good)}" in msg
    assert "crc" in msg


# ---------------------------------------------------------------------------------------------
# fuzzing


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.booleans(), st.booleans())
def test_arbitrary_bytes_decode_or_raise_kafka_error(
    data: bytes, verify_crc: bool, allow_partial: bool
) -> None:
    try:
        batches = decode_batches(data, verify_crc=verify_crc, allow_partial=allow_partial)
    except KafkaError as e:
        assert str(e)
    else:
        for b in batches:
            assert len(b.records) == b.record_count
    with contextlib.suppress(KafkaError):
        validate_record_batches(data)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(CODECS),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=6),
    st.booleans(),
)
def test_mutated_batches_decode_or_raise_kafka_error(
    codec: str, mutations: list[tuple[int, int]], fix_crc: bool
) -> None:
    data = bytearray(sample_batch(codec))
    for i, v in mutations:
        data[i % len(data)] = v
    mutated = recrc(bytes(data)) if fix_crc else bytes(data)
    for verify_crc in (True, False):
        with contextlib.suppress(KafkaError):
            decode_batches(mutated, verify_crc=verify_crc)


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(CODECS),
    st.lists(
        st.tuples(
            st.integers(-(2**40), 2**40),
            st.none() | st.binary(max_size=50),
            st.none() | st.binary(max_size=200),
            st.lists(
                st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3
            ),
        ),
        min_size=1,
        max_size=20,
    ),
)
def test_roundtrip_property(codec: str, rows: list) -> None:
    b = BatchBuilder(codec)
    for ts, k, v, h in rows:
        b.append(ts, k, v, h)
    (batch,) = decode_batches(b.build())
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)
    ]
