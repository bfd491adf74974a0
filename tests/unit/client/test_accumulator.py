"""The producer's Rust record accumulator, driven from Python."""

from __future__ import annotations

import pytest

from rillet._core import RecordAccumulator, decode_batches
from rillet.errors import InvalidConfigurationError, RecordTooLargeError


def test_records_batch_per_partition_and_drain_as_valid_batches() -> None:
    acc = RecordAccumulator(batch_size=1024, linger_ms=10, compression="zstd")
    placed = [acc.append(i % 3, 1000 + i, b"k%d" % i, b"v" * 100, now_ms=0) for i in range(30)]
    assert all(p is not None for p in placed)
    ready, wait = acc.ready(0)
    assert ready == [0, 1, 2]  # each partition already has a full batch queued
    drained = acc.drain(ready, 1 << 20)
    for partition, _batch_id, records, count, reserved in drained:
        (batch,) = decode_batches(records)
        assert batch.compression == "zstd" and batch.record_count == count
        keys = [r.key or b"" for r in batch.records]
        assert all(k.startswith(b"k") and int(k[1:]) % 3 == partition for k in keys)
        acc.release(reserved)
    # Tails wait for linger.ms unless flushed.
    ready, wait = acc.ready(3)
    assert ready == [] and wait == 7
    assert acc.ready(3, flush=True)[0] == [0, 1, 2]


def test_buffer_memory_back_pressure() -> None:
    acc = RecordAccumulator(batch_size=1024, linger_ms=0, buffer_memory=2048)
    assert acc.append(0, 0, None, b"x" * 900, now_ms=0) is not None
    assert acc.append(1, 0, None, b"x" * 900, now_ms=0) is not None
    assert acc.append(2, 0, None, b"x" * 900, now_ms=0) is None
    assert acc.used_memory == 2048
    [(_, _, _, _, reserved)] = acc.drain([0], 1 << 20)
    acc.release(reserved)
    assert acc.append(2, 0, None, b"x" * 900, now_ms=0) is not None
    with pytest.raises(RecordTooLargeError):
        acc.append(3, 0, None, b"x" * 5000, now_ms=0)
    assert len(acc.abort_all()) == 2 and acc.used_memory == 0


def test_bad_settings() -> None:
    with pytest.raises(InvalidConfigurationError):
        RecordAccumulator(batch_size=0)
    with pytest.raises(InvalidConfigurationError):
        RecordAccumulator(compression="brotli")
