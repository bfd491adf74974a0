"""Log compaction on segments written the way Kafka writes them, built with kafka-python's
record builder (``kafka.record``): batches of every codec, with tombstones, with the offset
gaps Kafka's own cleaner leaves inside batches, stamped with base offsets and leader epochs as
a Kafka broker stores them. The log opens them (recovering their indexes), compacts them as
the model says, and what it writes back reads in kafka-python with valid CRCs, the same
offsets and timestamps, and KIP-534's delete horizon on batches that keep a tombstone."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import pytest

from rillet import Log, LogConfig, decode_batches
from rillet._core import CleanerConfig, clean_log

with warnings.catch_warnings():
    # kafka/__init__ pulls in modules that use deprecated importlib.resources APIs.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DELETE_HORIZON_BIT = 0x40
T0 = 1_700_000_000_000
NOW = T0 + 60_000
RETENTION = 10_000
CONFIG = LogConfig(compact=True, delete_retention_ms=RETENTION, segment_ms=10**12)

# offset, timestamp, key, value
Rec = tuple[int, int, bytes, bytes | None]


def kafka_batch(
    codec: str, base_offset: int, epoch: int, records: list[Rec], producer_id: int = -1
) -> bytes:
    """A batch as a Kafka broker stores it: kafka-python builds it (offset deltas may skip,
    as after Kafka's cleaner), then the broker's base offset and leader epoch go in (the CRC
    does not cover them)."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 24,
    )
    for offset, ts, key, value in records:
        assert b.append(offset - base_offset, timestamp=ts, key=key, value=value, headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base_offset)
    struct.pack_into(">i", raw, 12, epoch)
    assert DefaultRecordBatch(bytes(raw)).validate_crc()
    return bytes(raw)


def kafka_segments() -> list[list[tuple[int, list[Rec]]]]:
    """Three segments of batches over keys k0..k5: some offsets already compacted away
    (gaps), tombstones for k1 and k4, every codec in turn."""
    segments: list[list[tuple[int, list[Rec]]]] = []
    offset = 0
    for _ in range(3):
        batches = []
        for _ in range(4):
            recs: list[Rec] = []
            for i in range(5):
                o = offset + i
                if o % 7 == 3:
                    continue  # removed by an earlier (Kafka) cleaning
                key = b"k%d" % (o % 6)
                value = None if o % 11 in (1, 4) else b"value-%d" % o
                recs.append((o, T0 + o, key, value))
            batches.append((offset, recs))
            offset += 5
        segments.append(batches)
    return segments


def write_kafka_log(path: Path, codecs: list[str]) -> list[Rec]:
    path.mkdir(parents=True)
    written: list[Rec] = []
    k = 0
    for batches in kafka_segments():
        base = batches[0][0]
        data = b""
        for first, recs in batches:
            data += kafka_batch(codecs[k % len(codecs)], first, 3, recs, producer_id=-1)
            written.extend(recs)
            k += 1
        (path / f"{base:020}.log").write_bytes(data)
    return written


def model(written: list[Rec], end: int, now: int, horizons: dict[int, int]) -> list[Rec]:
    """Below ``end``, the newest record per key; tombstones go once their batch's horizon
    (``horizons``: batch base -> horizon) has passed."""
    newest = {r[2]: r[0] for r in written if r[0] < end}
    out = []
    for r in written:
        if r[0] < end:
            if newest[r[2]] != r[0]:
                continue
            h = horizons.get(r[0] // 5 * 5)
            if r[3] is None and h is not None and now >= h:
                continue
        out.append(r)
    return out


def read_with_kafka_python(log: Log) -> tuple[list[Rec], list[DefaultRecordBatch]]:
    data = log.read(log.log_start_offset, 1 << 30).read_all()
    recs: list[Rec] = []
    batches = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)  # batchLength
        raw = data[pos : pos + 12 + length]
        b = DefaultRecordBatch(raw)
        assert b.validate_crc()
        batches.append(b)
        recs.extend((r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(raw))
        pos += 12 + length
    assert decode_batches(data)  # and rillet agrees they are whole, CRC-valid batches
    return recs, batches


@pytest.mark.parametrize(
    "codecs", [["none"], ["gzip"], ["snappy"], ["lz4"], ["zstd"], list(CODECS)]
)
def test_kafkas_segments_compact_as_the_model_says(tmp_path: Path, codecs: list[str]) -> None:
    path = tmp_path / "topic-0"
    written = write_kafka_log(path, codecs)
    # kafka-python ends a batch at its last record (offset 59 is one compacted away).
    end = written[-1][0] + 1
    log = Log.open(path, CONFIG, clean_shutdown=False, recovery_point=0, now_ms=NOW)
    try:
        assert log.recovery_info.truncated_bytes == 0
        assert log.log_end_offset == end
        log.roll(now_ms=NOW)
        got, _ = read_with_kafka_python(log)
        assert got == written

        stats = clean_log(log, CleanerConfig(), now_ms=NOW)
        assert stats.end_offset == end
        # First pass: superseded records go, the tombstones kept get a delete horizon.
        want = model(written, end, NOW, {})
        got, batches = read_with_kafka_python(log)
        assert got == want
        horizon = NOW + RETENTION
        for b in batches:
            tombstones = any(r.value is None for r in DefaultRecordBatch(b._buffer))
            assert bool(b.attributes & DELETE_HORIZON_BIT) == tombstones
            if tombstones:
                assert b.first_timestamp == horizon  # KIP-534: the horizon is the base time
            assert b.leader_epoch == 3
        assert stats.latest_delete_horizon_ms == (
            horizon if any(r[3] is None for r in want) else -1
        )

        # Before the horizon nothing more goes; at it, the tombstones do.
        clean_log(log, CleanerConfig(), last_clean_offset=end, now_ms=horizon - 1)
        assert read_with_kafka_python(log)[0] == want
        late = clean_log(log, CleanerConfig(), last_clean_offset=end, now_ms=horizon)
        tombstone_batches = {r[0] // 5 * 5: horizon for r in want if r[3] is None}
        final = model(written, end, horizon, tombstone_batches)
        assert late.tombstones_removed == len(want) - len(final) > 0
        assert read_with_kafka_python(log)[0] == final
        assert all(r[3] is not None for r in final)
        assert log.log_end_offset == end  # offsets never renumbered
    finally:
        log.close()
