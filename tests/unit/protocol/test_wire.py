"""The hand-written ProduceRequest reader and FetchResponse codec in Rust (rillet-core's
``wire``) against the generated protobuf classes, in both directions, and malformed input."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rillet import BatchBuilder, Log, LogConfig, decode_batches
from rillet._core import (
    FetchResponsePartition,
    decode_fetch_response,
    decode_produce_request,
    encode_fetch_response,
    kafka_decode_fetch_response,
    kafka_encode_response,
)
from rillet.errors import CorruptRecordError
from rillet.protocol import common_pb2, fetch_pb2, produce_pb2


def batch(n: int, size: int = 50) -> bytes:
    b = BatchBuilder("none")
    for i in range(n):
        b.append(1000 + i, None, bytes([i % 256]) * size, [])
    return b.build()


def sample_response() -> fetch_pb2.FetchResponse:
    """Every field of FetchResponse set, including those the reader skips."""
    r = fetch_pb2.FetchResponse(throttle_time_ms=5, error_message="")
    t = r.topics.add(name="orders")
    p = t.partitions.add(
        partition=3,
        high_watermark=1 << 40,
        last_stable_offset=17,
        log_start_offset=2,
        preferred_read_replica=-1,
        record_batches=batch(3),
    )
    p.current_leader.leader_id, p.current_leader.leader_epoch = 1, 7
    p.aborted_transactions.add(producer_id=9, first_offset=4)
    p.records.add(value=b"structured", offset=1)
    bad = t.partitions.add(
        partition=4,
        error_code=common_pb2.OFFSET_OUT_OF_RANGE,
        error_message="out of range",
        high_watermark=-1,
    )
    bad.diverging_epoch.epoch, bad.diverging_epoch.end_offset = 2, 40
    r.topics.add(name="ñ-topic").partitions.add(partition=0, record_batches=batch(1, 200_000))
    return r


def test_decode_reads_what_the_generated_encoder_writes() -> None:
    want = sample_response()
    data = want.SerializeToString()
    view = decode_fetch_response(data)
    assert (view.error_code, view.error_message) == (0, "")
    got = [(t.name, p) for t in want.topics for p in t.partitions]
    assert len(view.partitions) == len(got)
    for entry, (name, p) in zip(view.partitions, got, strict=True):
        topic, part, err, msg = entry.topic, entry.partition, entry.error_code, entry.error_message
        hw, lso, lss = entry.high_watermark, entry.last_stable_offset, entry.log_start_offset
        start, end, next_offset = entry.records_start, entry.records_end, entry.next_offset
        assert (topic, part, err, msg) == (name, p.partition, p.error_code, p.error_message)
        assert (hw, lso, lss) == (p.high_watermark, p.last_stable_offset, p.log_start_offset)
        assert data[start:end] == p.record_batches
        # The offset after the last whole batch, read from batch headers.
        batches = decode_batches(p.record_batches, allow_partial=True)
        assert next_offset == (batches[-1].last_offset + 1 if batches else -1)


def test_fetch_responses_carry_their_throttle_time() -> None:
    """A throttled client's fetch says so (``fetch-throttle-time-*``): over gRPC the broker
    puts the throttle time before the response's other fields, over Kafka's protocol it is
    the response's first field."""
    assert decode_fetch_response(sample_response().SerializeToString()).throttle_time_ms == 5
    unthrottled = sample_response()
    unthrottled.throttle_time_ms = 0
    data = unthrottled.SerializeToString()
    assert decode_fetch_response(data).throttle_time_ms == 0
    throttled = fetch_pb2.FetchResponse(throttle_time_ms=250).SerializeToString() + data
    view = decode_fetch_response(throttled)
    assert view.throttle_time_ms == 250
    assert len(view.partitions) == len(decode_fetch_response(data).partitions)
    body = {"throttle_time_ms": 120, "error_code": 0, "session_id": 0, "responses": []}
    frame = kafka_encode_response(1, 12, 7, body)
    assert kafka_decode_fetch_response(12, frame[4:]).throttle_time_ms == 120


def test_encode_matches_the_generated_encoder(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    for n in (1, 5, 2):
        log.append_as_leader(batch(n), 0)
    data = log.read(0, 1 << 20)
    encoded = encode_fetch_response(
        [
            (
                "t",
                [
                    FetchResponsePartition(
                        0,
                        error_code=0,
                        error_message="",
                        high_watermark=8,
                        last_stable_offset=8,
                        log_start_offset=0,
                        diverging_epoch=None,
                        preferred_read_replica=-1,
                        records=data,
                    )
                ],
            ),
            (
                "u",
                [
                    FetchResponsePartition(
                        1,
                        error_code=1,
                        error_message="not leader",
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        diverging_epoch=(3, 99),
                        preferred_read_replica=-1,
                        records=None,
                    )
                ],
            ),
        ],
    )
    want = fetch_pb2.FetchResponse()
    want.topics.add(name="t").partitions.add(
        partition=0,
        high_watermark=8,
        last_stable_offset=8,
        preferred_read_replica=-1,
        record_batches=data.read_all(),
    )
    u = want.topics.add(name="u").partitions.add(
        partition=1,
        error_code=1,
        error_message="not leader",
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        preferred_read_replica=-1,
    )
    u.diverging_epoch.epoch, u.diverging_epoch.end_offset = 3, 99
    assert fetch_pb2.FetchResponse.FromString(encoded) == want
    assert encoded == want.SerializeToString()
    log.close()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_malformed_bytes_raise_or_decode_never_crash(data: bytes) -> None:
    try:
        view = decode_fetch_response(data)
    except CorruptRecordError:
        return
    for p in view.partitions:
        assert 0 <= p.records_start <= p.records_end <= len(data)


def test_truncated_responses_are_refused() -> None:
    data = sample_response().SerializeToString()
    rng = random.Random(4)
    refused = 0
    for cut in rng.sample(range(1, len(data)), 200):
        try:
            decode_fetch_response(data[:cut])
        except CorruptRecordError:
            refused += 1
    assert refused > 150  # nearly every cut lands inside a field
    with pytest.raises(CorruptRecordError, match="malformed"):
        decode_fetch_response(b"\x22\x05\x0a")


def test_produce_requests_are_read_in_place() -> None:
    req = produce_pb2.ProduceRequest(acks=-1, timeout_ms=1500, transactional_id="tx")
    t = req.topics.add(name="orders")
    t.partitions.add(partition=2, record_batches=batch(4))
    t.partitions.add(partition=0, record_batches=batch(1, 100_000))
    data = req.SerializeToString()
    view = decode_produce_request(data)
    assert (view.acks, view.timeout_ms, view.transactional_id, view.structured) == (
        -1,
        1500,
        "tx",
        False,
    )
    got = [(p.topic, p.partition, data[p.start : p.end]) for p in view.partitions]
    assert got == [("orders", p.partition, p.record_batches) for p in t.partitions]
    # Structured records are left to the generated classes.
    t.partitions.add(partition=1, records=[common_pb2.Record(value=b"v")])
    assert decode_produce_request(req.SerializeToString()).structured is True
    with pytest.raises(CorruptRecordError):
        decode_produce_request(data[:-3])


def test_the_log_appends_a_slice_of_a_request_without_copying_it(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    a, b = batch(2), batch(3)
    request = b"header" + a + b + b"trailer"
    log.append_as_leader(memoryview(request)[6 : 6 + len(a)], 0)
    # A writable buffer is copied first; it appends just the same.
    log.append_as_leader(bytearray(b), 0)
    assert log.log_end_offset == 5
    batches = decode_batches(log.read(0, 1 << 20).read_all())
    assert [b.record_count for b in batches] == [2, 3]
    assert [r.value for r in batches[1].records] == [bytes([i]) * 50 for i in range(3)]
    log.close()
