"""rillet._core.decode_arrow: fetched RecordBatch v2 bytes to one pyarrow.RecordBatch in Spark's
Kafka source schema, checked column by column against ``rillet.decode_batches``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rillet import BatchBuilder, decode_batches
from rillet._core import decode_arrow
from rillet.errors import CorruptRecordError

pa = pytest.importorskip("pyarrow", reason="decode_arrow returns pyarrow batches")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
END = 2**63 - 1

Headers = list[tuple[str, bytes | None]]
Row = tuple[int, bytes | None, bytes | None, Headers]

# KafkaRecordToRowConverter.kafkaSchema in Spark's Kafka connector, as PySpark's
# to_arrow_schema gives it: every field nullable, TimestampType as timestamp[us, tz=UTC],
# ArrayType's element named "element".
KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
)
HEADERS_FIELD = pa.field(
    "headers",
    pa.list_(
        pa.field(
            "element",
            pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]),
        )
    ),
)


def batch(rows: list[Row], codec: str = "none", *, base_offset: int = 0, **kwargs: Any) -> bytes:
    b = BatchBuilder(codec, base_offset=base_offset, **kwargs)
    for ts, k, v, h in rows:
        b.append(ts, k, v, h)
    return b.build()


def sample_rows(n: int, start: int = 0) -> list[Row]:
    """Null keys every 3rd, null values every 5th, 0-2 headers (one with a null value)."""
    rows: list[Row] = []
    for i in range(start, start + n):
        headers: Headers = [
            (f"h{j}", None if j == 1 else f"{i}.{j}".encode()) for j in range(i % 3)
        ]
        rows.append(
            (
                1_700_000_000_000 + i,
                None if i % 3 == 0 else f"key-{i}".encode(),
                None if i % 5 == 0 else f"value-{i}".encode() * (i % 4),
                headers,
            )
        )
    return rows


def several_batches(codec: str) -> bytes:
    """Offsets 0..9 in CreateTime, 10..14 in LogAppendTime, a control batch at 15, 16..23."""
    return b"".join(
        [
            batch(sample_rows(10), codec),
            batch(sample_rows(5, 10), codec, base_offset=10, timestamp_type="LogAppendTime"),
            batch(
                [(1_700_000_000_100, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])],
                base_offset=15,
                is_control=True,
                is_transactional=True,
            ),
            batch(sample_rows(8, 16), codec, base_offset=16),
        ]
    )


def expected(
    data: bytes, from_offset: int, until_offset: int, *, include_headers: bool
) -> list[dict[str, Any]]:
    """What decode_arrow should give, from decode_batches: one dict per record, in the
    batch's columns, with timestamps as integer microseconds."""
    out = []
    for b in decode_batches(data, allow_partial=True):
        if b.is_control:
            continue
        for r in b.records:
            if not from_offset <= r.offset < until_offset:
                continue
            row = {
                "key": r.key,
                "value": r.value,
                "topic": "events",
                "partition": 7,
                "offset": r.offset,
                "timestamp": r.timestamp * 1000,
                "timestampType": 1 if b.timestamp_type == "LogAppendTime" else 0,
            }
            if include_headers:
                # Spark's converter gives null, not an empty array, for no headers.
                row["headers"] = [{"key": k, "value": v} for k, v in r.headers] or None
            out.append(row)
    return out


def rows_of(rb: Any) -> list[dict[str, Any]]:
    """The batch's rows, timestamps as integer microseconds."""
    ts = rb.column(rb.schema.get_field_index("timestamp")).cast(pa.int64())
    rb = rb.set_column(rb.schema.get_field_index("timestamp"), "timestamp", ts)
    rows: list[dict[str, Any]] = rb.to_pylist()
    return rows


def decode(
    data: bytes,
    from_offset: int = 0,
    until_offset: int = END,
    *,
    include_headers: bool = False,
    verify_crc: bool = True,
) -> tuple[Any, int]:
    got = decode_arrow(
        data,
        "events",
        7,
        from_offset,
        until_offset,
        include_headers=include_headers,
        verify_crc=verify_crc,
    )
    return got.batch, got.next_offset


# ---------------------------------------------------------------------------------------------
# schema


@pytest.mark.parametrize("include_headers", [False, True])
def test_schema_is_sparks_kafka_schema(include_headers: bool) -> None:
    rb, _ = decode(several_batches("none"), include_headers=include_headers)
    want = KAFKA_SCHEMA.append(HEADERS_FIELD) if include_headers else KAFKA_SCHEMA
    assert rb.schema.equals(want, check_metadata=True)
    assert [str(f.type) for f in rb.schema] == [str(f.type) for f in want]
    assert all(f.nullable for f in rb.schema)
    assert rb.schema.field("timestamp").type.tz == "UTC"


def test_schema_matches_pysparks_arrow_conversion() -> None:
    types = pytest.importorskip("pyspark.sql.types", reason="compares with PySpark's schema")
    spark_types = pytest.importorskip(
        "pyspark.sql.pandas.types", reason="compares with PySpark's schema"
    )
    fields = [
        types.StructField("key", types.BinaryType()),
        types.StructField("value", types.BinaryType()),
        types.StructField("topic", types.StringType()),
        types.StructField("partition", types.IntegerType()),
        types.StructField("offset", types.LongType()),
        types.StructField("timestamp", types.TimestampType()),
        types.StructField("timestampType", types.IntegerType()),
        types.StructField(
            "headers",
            types.ArrayType(
                types.StructType(
                    [
                        types.StructField("key", types.StringType()),
                        types.StructField("value", types.BinaryType()),
                    ]
                )
            ),
        ),
    ]
    rb, _ = decode(several_batches("none"), include_headers=True)
    assert rb.schema.equals(spark_types.to_arrow_schema(types.StructType(fields)))


# ---------------------------------------------------------------------------------------------
# contents


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("include_headers", [False, True])
def test_every_codec_matches_decode_batches(codec: str, include_headers: bool) -> None:
    data = several_batches(codec)
    rb, next_offset = decode(data, include_headers=include_headers)
    assert next_offset == 24
    assert rb.num_rows == 23  # 24 offsets less the control record
    assert rows_of(rb) == expected(data, 0, END, include_headers=include_headers)


def test_columns_in_detail() -> None:
    rows: list[Row] = [
        (1_700_000_000_000, b"k0", b"v0", [("h1", b"x"), ("h2", None)]),
        (1_700_000_000_005, None, b"null key", []),
        (1_699_999_999_990, b"tombstone", None, [("only", b"")]),
        (1_700_000_000_003, b"", b"", [("ключ", "значение".encode())]),
        (1_700_000_000_004, None, None, None),
    ]
    rb, next_offset = decode(batch(rows, "zstd", base_offset=100), include_headers=True)
    assert next_offset == 105
    assert rb.column("key").to_pylist() == [b"k0", None, b"tombstone", b"", None]
    assert rb.column("value").to_pylist() == [b"v0", b"null key", None, b"", None]
    assert rb.column("key").null_count == 2
    assert rb.column("topic").to_pylist() == ["events"] * 5
    assert rb.column("partition").to_pylist() == [7] * 5
    assert rb.column("offset").to_pylist() == [100, 101, 102, 103, 104]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [
        ts * 1000 for ts, _, _, _ in rows
    ]
    assert rb.column("timestampType").to_pylist() == [0] * 5
    assert rb.column("headers").to_pylist() == [
        [{"key": "h1", "value": b"x"}, {"key": "h2", "value": None}],
        None,
        [{"key": "only", "value": b""}],
        [{"key": "ключ", "value": "значение".encode()}],
        None,
    ]


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    rows: list[Row] = [(1_000, b"a", b"1", []), (3_000, b"b", b"2", []), (2_000, b"c", b"3", [])]
    rb, _ = decode(batch(rows, "lz4", timestamp_type="LogAppendTime"))
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [3_000_000] * 3
    assert rb.column("timestampType").to_pylist() == [1] * 3


@pytest.mark.parametrize(
    ("from_offset", "until_offset"),
    [(0, 1), (3, 12), (9, 10), (10, 15), (12, 17), (15, 16), (5, 23), (23, 99), (30, 40), (4, 4)],
)
def test_range_cuts_inside_batches(from_offset: int, until_offset: int) -> None:
    data = several_batches("snappy")
    rb, next_offset = decode(data, from_offset, until_offset, include_headers=True)
    want = expected(data, from_offset, until_offset, include_headers=True)
    assert rows_of(rb) == want
    assert [r["offset"] for r in want] == [
        o for o in range(from_offset, min(until_offset, 24)) if o != 15
    ]
    # After the last whole batch, whatever the range; never below from_offset.
    assert next_offset == max(24, from_offset)


def test_control_batch_alone_gives_no_rows_but_moves_on() -> None:
    data = batch([(5, b"\x00\x00\x00\x00", b"\x00" * 6, [])], base_offset=41, is_control=True)
    rb, next_offset = decode(data, 41)
    assert rb.num_rows == 0
    assert rb.schema.equals(KAFKA_SCHEMA)
    assert next_offset == 42


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_partial_trailing_batch_is_ignored(codec: str) -> None:
    whole = batch(sample_rows(4), codec)
    tail = batch(sample_rows(4, 4), codec, base_offset=4)
    for cut in [1, 11, 12, 17, 61, len(tail) - 1]:
        rb, next_offset = decode(whole + tail[:cut])
        assert rb.num_rows == 4
        assert next_offset == 4
    rb, next_offset = decode(tail[:30], 4)
    assert (rb.num_rows, next_offset) == (0, 4)
    rb, next_offset = decode(b"", 9)
    assert (rb.num_rows, next_offset) == (0, 9)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_corrupt_byte_raises_unless_crc_is_skipped(codec: str) -> None:
    first = batch(sample_rows(4), codec)
    second = bytearray(batch([(1_000, b"key", b"value", [])], "none", base_offset=4))
    second[-3] ^= 0x01  # inside the value: only the CRC can tell
    data = first + bytes(second)
    # A damaged batch raises even when it lies outside the range asked for.
    for from_offset, until_offset in [(0, END), (0, 2)]:
        with pytest.raises(CorruptRecordError, match="crc"):
            decode(data, from_offset, until_offset)
    rb, next_offset = decode(data, verify_crc=False)
    assert rb.column("value").to_pylist()[-1] == b"valte"
    assert next_offset == 5


def test_corrupt_length_raises() -> None:
    data = bytearray(batch(sample_rows(3)))
    data[61] = 0x7F  # the first record's length varint
    with pytest.raises(CorruptRecordError):
        decode(bytes(data), verify_crc=False)


def test_columns_are_not_copied_into_pyarrows_pool() -> None:
    data = batch(sample_rows(200), "zstd")
    before = pa.total_allocated_bytes()
    rb, _ = decode(data, include_headers=True)
    assert rb.num_rows == 200
    assert pa.total_allocated_bytes() == before
    rb.validate(full=True)


def test_the_batch_outlives_its_input() -> None:
    data = bytearray(batch(sample_rows(20)))
    rb, _ = decode(bytes(data))
    want = rows_of(rb)
    del data
    assert rows_of(rb) == want
    assert rb.column("value").to_pylist()[1] == b"value-1"


# ---------------------------------------------------------------------------------------------
# property


rows_strategy = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=40),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.tuples(rows_strategy, st.sampled_from(CODECS), st.booleans()), max_size=4),
    from_offset=st.integers(-3, 40),
    length=st.integers(0, 40),
    include_headers=st.booleans(),
)
def test_any_batches_and_range_match_decode_batches(
    batches: list[tuple[list[Row], str, bool]],
    from_offset: int,
    length: int,
    include_headers: bool,
) -> None:
    data = b""
    base = 0
    for rows, codec, log_append in batches:
        data += batch(
            rows,
            codec,
            base_offset=base,
            timestamp_type="LogAppendTime" if log_append else "CreateTime",
        )
        base += len(rows)
    until = from_offset + length
    rb, next_offset = decode(data, from_offset, until, include_headers=include_headers)
    assert rows_of(rb) == expected(data, from_offset, until, include_headers=include_headers)
    assert next_offset == (max(base, from_offset) if batches else from_offset)
