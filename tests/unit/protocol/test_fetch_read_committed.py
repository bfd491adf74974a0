"""read_committed on the wire: the Rust FetchResponse codec carries the aborted
transactions (field 9) byte for byte as the generated classes do, in both directions; the
request conversions take the isolation level (consumers only); the structured answer drops
aborted records itself."""

from __future__ import annotations

from pathlib import Path

from rillet import BatchBuilder, Log, LogConfig
from rillet._core import (
    AbortedTransaction,
    FetchResponsePartition,
    decode_fetch_response,
    encode_fetch_response,
)
from rillet.broker.replica_manager import FetchedPartition, FetchPartition
from rillet.coordinator.end_txn_marker import end_txn_marker_batch
from rillet.protocol import fetch_pb2
from rillet.protocol.fetch import (
    fetch_request_from_pb,
    list_offsets_request_from_pb,
    structured_fetch_response,
)
from rillet.types import TopicPartition

NOW = 1_700_000_000_000
TP = TopicPartition("t", 0)


def txn(pid: int, seq: int, value: bytes) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
    b.append(NOW, None, value)
    return b.build()


def plain(value: bytes) -> bytes:
    b = BatchBuilder()
    b.append(NOW, None, value)
    return b.build()


def transactional_log(path: Path) -> Log:
    """0 p1 "a" (aborted), 1 p2 "c" (committed), 2 plain "x", 3 ABORT p1, 4 COMMIT p2."""
    log = Log.open(path, LogConfig())
    log.append_as_leader(txn(1, 0, b"a"), 0)
    log.append_as_leader(txn(2, 0, b"c"), 0)
    log.append_as_leader(plain(b"x"), 0)
    log.append_as_leader(end_txn_marker_batch(1, 0, 0, False, NOW), 0, allow_control=True)
    log.append_as_leader(end_txn_marker_batch(2, 0, 0, True, NOW), 0, allow_control=True)
    return log


def test_the_log_and_its_index(tmp_path: Path) -> None:
    log = transactional_log(tmp_path / "t-0")
    assert log.first_unstable_offset == 0  # until the high watermark passes the markers
    assert log.last_stable_offset(5) == 5
    assert log.first_unstable_offset is None
    assert log.collect_aborted_transactions(0, 5) == [AbortedTransaction(1, 0)]
    assert log.read(0, 1 << 20).aborted_transactions is None
    data = log.read(0, 1 << 20, max_offset=5, read_committed=True)
    assert data.aborted_transactions == [AbortedTransaction(1, 0)]
    log.close()


def test_aborted_transactions_cross_the_wire_as_the_generated_classes_write_them(
    tmp_path: Path,
) -> None:
    log = transactional_log(tmp_path / "t-0")
    data = log.read(0, 1 << 20, max_offset=log.last_stable_offset(5), read_committed=True)
    encoded = encode_fetch_response(
        [
            (
                "t",
                [
                    FetchResponsePartition(
                        0,
                        high_watermark=5,
                        last_stable_offset=5,
                        log_start_offset=0,
                        records=data,
                    )
                ],
            )
        ]
    )
    want = fetch_pb2.FetchResponse()
    p = want.topics.add(name="t").partitions.add(
        partition=0,
        high_watermark=5,
        last_stable_offset=5,
        preferred_read_replica=-1,
        record_batches=data.read_all(),
    )
    p.aborted_transactions.add(producer_id=1, first_offset=0)
    assert encoded == want.SerializeToString()
    view = decode_fetch_response(encoded)
    assert view.partitions[0].aborted_transactions == [AbortedTransaction(1, 0)]
    # And from the generated encoder, several, in any order, with large ids.
    p.aborted_transactions.add(producer_id=1 << 50, first_offset=1 << 40)
    view = decode_fetch_response(want.SerializeToString())
    assert view.partitions[0].aborted_transactions == [
        AbortedTransaction(1, 0),
        AbortedTransaction(1 << 50, 1 << 40),
    ]
    log.close()


def test_the_structured_answer_drops_aborted_records(tmp_path: Path) -> None:
    log = transactional_log(tmp_path / "t-0")
    data = log.read(0, 1 << 20, max_offset=5, read_committed=True)
    response = structured_fetch_response(
        {TP: FetchPartition(0, 1 << 20, read_committed=True)},
        {TP: FetchedPartition(None, 5, 5, 0, data)},
    )
    (part,) = response.topics[0].partitions
    assert [r.value for r in part.records] == [b"c", b"x"]
    assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == [(1, 0)]
    everything = log.read(0, 1 << 20, max_offset=5)
    response = structured_fetch_response(
        {TP: FetchPartition(0, 1 << 20)}, {TP: FetchedPartition(None, 5, 5, 0, everything)}
    )
    assert [r.value for r in response.topics[0].partitions[0].records] == [b"a", b"c", b"x"]
    log.close()


def test_requests_take_the_isolation_level_for_consumers_only() -> None:
    def fetch(isolation: int, replica_id: int | None) -> bool:
        r = fetch_pb2.FetchRequest(isolation_level=isolation)  # type: ignore[arg-type]
        if replica_id is not None:
            r.replica_id = replica_id
        r.topics.add(name="t").partitions.add(partition=0, fetch_offset=3)
        return fetch_request_from_pb(r).wanted[TP].read_committed

    assert fetch(fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED, None)
    assert fetch(fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED, -1)
    assert not fetch(fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED, 2)
    assert not fetch(fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED, None)

    r = fetch_pb2.ListOffsetsRequest(isolation_level=fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED)
    r.topics.add(name="t").partitions.add(partition=0, timestamp_ms=-1)
    wanted = list_offsets_request_from_pb(r)
    assert dict(wanted) == {TP: -1}
    assert wanted.read_committed
    r.isolation_level = fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
    assert not list_offsets_request_from_pb(r).read_committed
