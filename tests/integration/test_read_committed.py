"""read_committed end to end on one in-process broker: transactional batches, COMMIT and
ABORT markers and plain batches are written straight into the partition as its leader (so
the high watermark moves as for produced records), then read back by consumers and by raw
fetches. A read_committed consumer sees exactly the committed and non-transactional records,
in order, and nothing at or past an open transaction (the last stable offset); every fetch
answer reports the LSO, and a read_committed one lists the aborted transactions it overlaps;
a read_uncommitted consumer sees every record but the control records. A restart, clean or
after a crash that lost the ``.txnindex`` file, keeps the aborted transactions known."""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from rillet import BatchBuilder, Consumer, TopicPartition
from rillet._core import AbortedTransaction
from rillet.cli import console_consumer
from rillet.protocol.gen.v1 import fetch_pb2, fetch_pb2_grpc
from rillet.storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.support.mini_broker import MiniBroker

TOPIC = "txn"
TP = TopicPartition(TOPIC, 0)
NOW = 1_700_000_000_000
T = TypeVar("T")


class Writer:
    """Appends to the broker's partition as its leader, on the broker's event loop."""

    def __init__(self, broker: MiniBroker) -> None:
        self.broker = broker
        self.sequences: dict[int, int] = {}

    def _on_loop(self, f: Callable[[], T]) -> T:
        async def run() -> T:
            return f()

        result: T = self.broker._call(run())
        return result

    def _partition(self) -> Any:
        replicas = self.broker.server.replicas
        assert replicas is not None
        return replicas.partitions[TP]

    def plain(self, *values: str) -> int:
        b = BatchBuilder()
        for v in values:
            b.append(NOW, None, v.encode())
        return self._append(b.build())

    def txn(self, pid: int, *values: str) -> int:
        seq = self.sequences.get(pid, 0)
        b = BatchBuilder(
            producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True
        )
        for v in values:
            b.append(NOW, None, v.encode())
        self.sequences[pid] = seq + len(values)
        return self._append(b.build())

    def end(self, pid: int, *, commit: bool) -> int:
        def append() -> int:
            info = self._partition().append_txn_marker(pid, 0, 0, commit, NOW)
            self._changed()
            return int(info.first_offset)

        return self._on_loop(append)

    def _append(self, batch: bytes) -> int:
        def append() -> int:
            info = self._partition().append_records_to_leader(batch, -1)
            self._changed()
            return int(info.first_offset)

        return self._on_loop(append)

    def _changed(self) -> None:
        replicas = self.broker.server.replicas
        assert replicas is not None
        replicas.fetch_purgatory.check_and_complete(TP)

    def high_watermark(self) -> int:
        return int(self._on_loop(lambda: self._partition().high_watermark))


def read(broker: MiniBroker, isolation: str, until: int | None = None) -> list[str]:
    """Every value a consumer with ``isolation`` is given from the start to its end offset
    (the LSO for read_committed), or to ``until``."""
    with Consumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        max_poll_records=2,  # several decodes per fetched response
    ) as c:
        c.assign([TP])
        end = c.end_offsets([TP])[TP] if until is None else until
        out: list[str] = []
        deadline = time.monotonic() + 20
        while c.position(TP) < end:
            assert time.monotonic() < deadline, f"stuck at {c.position(TP)} of {end}"
            for records in c.poll(timeout_ms=200).values():
                out += [r.value.decode() for r in records]
        assert c.position(TP) == end
        return out


def raw_fetch(
    broker: MiniBroker, isolation: int, *, offset: int = 0, structured: bool = False
) -> fetch_pb2.FetchResponse.Partition:
    with grpc.insecure_channel(broker.bootstrap) as channel:
        response = fetch_pb2_grpc.FetchServiceStub(channel).Fetch(
            fetch_pb2.FetchRequest(
                isolation_level=isolation,  # type: ignore[arg-type]
                structured=structured,
                max_wait_ms=0,
                topics=[
                    fetch_pb2.FetchRequest.Topic(
                        name=TOPIC,
                        partitions=[
                            fetch_pb2.FetchRequest.Partition(partition=0, fetch_offset=offset)
                        ],
                    )
                ],
            ),
            timeout=10,
        )
    (part,) = response.topics[0].partitions
    return part


def list_latest(broker: MiniBroker, isolation: int, timestamp: int = -1) -> int:
    with grpc.insecure_channel(broker.bootstrap) as channel:
        response = fetch_pb2_grpc.FetchServiceStub(channel).ListOffsets(
            fetch_pb2.ListOffsetsRequest(
                isolation_level=isolation,  # type: ignore[arg-type]
                topics=[
                    fetch_pb2.ListOffsetsRequest.Topic(
                        name=TOPIC,
                        partitions=[
                            fetch_pb2.ListOffsetsRequest.Partition(
                                partition=0, timestamp_ms=timestamp
                            )
                        ],
                    )
                ],
            ),
            timeout=10,
        )
    return int(response.topics[0].partitions[0].offset)


COMMITTED = ["p0", "c1", "c2", "p1", "c3", "p2"]
EVERYTHING = ["p0", "c1", "c2", "a1", "p1", "c3", "a2", "p2", "open", "after-open"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def broker(data_dir: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(data_dir, {TOPIC: 1})
    yield b
    b.close()


def write_transactions(w: Writer) -> dict[str, int]:
    """The log of the tests, returning where things are."""
    at = {}
    w.plain("p0")  # 0
    at["c"] = w.txn(1, "c1", "c2")  # 1-2, producer 1 commits
    at["a1"] = w.txn(2, "a1")  # 3, producer 2 aborts
    w.plain("p1")  # 4
    w.txn(1, "c3")  # 5
    w.txn(2, "a2")  # 6
    w.end(1, commit=True)  # 7
    at["abort"] = w.end(2, commit=False)  # 8
    w.plain("p2")  # 9
    at["open"] = w.txn(3, "open")  # 10, producer 3 stays open
    w.plain("after-open")  # 11
    at["end"] = 12
    return at


def test_read_committed_sees_committed_records_up_to_the_lso(broker: MiniBroker) -> None:
    w = Writer(broker)
    at = write_transactions(w)
    assert w.high_watermark() == at["end"]

    assert read(broker, "read_committed") == COMMITTED
    assert read(broker, "read_uncommitted") == EVERYTHING
    with Consumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed") as c:
        assert c.end_offsets([TP]) == {TP: at["open"]}
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        assert c.end_offsets([TP]) == {TP: at["end"]}
    assert list_latest(broker, fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED) == at["open"]
    assert list_latest(broker, fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED) == at["end"]

    # The fetch answers: the LSO in both isolation levels, the aborted transaction for
    # read_committed only, no batch at or past the LSO.
    committed = raw_fetch(broker, fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (at["end"], at["open"])
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [
        (2, at["a1"])
    ]
    uncommitted = raw_fetch(broker, fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED)
    assert uncommitted.last_stable_offset == at["open"]
    assert not uncommitted.aborted_transactions
    assert len(uncommitted.record_batches) > len(committed.record_batches)
    # Past the aborted transaction, none is listed.
    later = raw_fetch(broker, fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED, offset=at["abort"] + 1)
    assert not later.aborted_transactions
    # The structured answer leaves out the aborted records itself.
    structured = raw_fetch(broker, fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED, structured=True)
    assert [r.value.decode() for r in structured.records] == COMMITTED

    # The open transaction commits: everything it held back is readable.
    w.end(3, commit=True)
    assert read(broker, "read_committed") == [*COMMITTED, "open", "after-open"]
    # Both consumers end past the final COMMIT marker, which has no record to hand out.
    assert read(broker, "read_uncommitted") == EVERYTHING
    assert raw_fetch(broker, fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED).last_stable_offset == (
        at["end"] + 1
    )


def test_a_consumer_waiting_at_the_lso_gets_the_records_once_the_transaction_ends(
    broker: MiniBroker,
) -> None:
    w = Writer(broker)
    w.plain("before")
    w.txn(7, "t1")
    w.plain("during")
    with Consumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    ) as c:
        c.assign([TP])
        got: list[str] = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(got) < 1:
            for records in c.poll(timeout_ms=100).values():
                got += [r.value.decode() for r in records]
        assert got == ["before"]
        assert c.poll(timeout_ms=300) == {}
        w.txn(7, "t2")
        w.end(7, commit=False)
        w.plain("after")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "after" not in got:
            for records in c.poll(timeout_ms=100).values():
                got += [r.value.decode() for r in records]
        assert got == ["before", "during", "after"]
        # Past the ABORT marker: its offset was consumed without a record.
        assert c.position(TP) == 6


def test_a_timestamp_lookup_read_committed_answers_nothing_past_the_lso(
    broker: MiniBroker,
) -> None:
    w = Writer(broker)
    w.plain("early")  # 0, at NOW
    w.txn(4, "open")  # 1, at NOW
    b = BatchBuilder()
    b.append(NOW + 1000, None, b"late")
    w._append(b.build())  # 2, at NOW + 1000
    committed, uncommitted = (
        fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED,
        fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED,
    )
    assert list_latest(broker, committed, NOW) == 0
    assert list_latest(broker, uncommitted, NOW + 1000) == 2
    assert list_latest(broker, committed, NOW + 1000) == -1
    assert list_latest(broker, committed, -2) == 0
    w.end(4, commit=True)
    assert list_latest(broker, committed, NOW + 1000) == 2


def test_the_console_consumer_reads_committed(broker: MiniBroker) -> None:
    write_transactions(Writer(broker))
    parser = argparse.ArgumentParser()
    console_consumer.add_arguments(parser)

    def run(isolation: str, n: int) -> list[str]:
        args = parser.parse_args(
            [
                "--bootstrap-server",
                broker.bootstrap,
                "--topic",
                TOPIC,
                "--from-beginning",
                "--isolation-level",
                isolation,
                "--max-messages",
                str(n),
                "--timeout-ms",
                "3000",
            ]
        )
        out = io.StringIO()
        console_consumer.run(args, out)
        return out.getvalue().splitlines()

    assert run("read_committed", 100) == COMMITTED
    assert run("read_uncommitted", 100) == EVERYTHING


def test_a_restart_keeps_the_aborted_transactions(data_dir: Path) -> None:
    b = MiniBroker(data_dir, {TOPIC: 1})
    try:
        at = write_transactions(Writer(b))
        assert read(b, "read_committed") == COMMITTED
    finally:
        b.close()
    txn_index = data_dir / f"{TOPIC}-0" / "00000000000000000000.txnindex"
    assert txn_index.stat().st_size == 34

    # A clean restart reads the index as it was.
    b = MiniBroker(data_dir, {})
    try:
        assert read(b, "read_committed", until=at["open"]) == COMMITTED
        log = b.log(TOPIC, 0)
        assert log.collect_aborted_transactions(0, at["end"]) == [AbortedTransaction(2, at["a1"])]
        assert log.first_unstable_offset == at["open"]
    finally:
        b.close()

    # A crash that lost the index: the unclean open re-reads the segment and rebuilds it.
    txn_index.unlink()
    (data_dir / CLEAN_SHUTDOWN_FILE).unlink()
    b = MiniBroker(data_dir, {})
    try:
        assert read(b, "read_committed", until=at["open"]) == COMMITTED
        assert txn_index.stat().st_size == 34
        w = Writer(b)
        w.sequences[3] = 1
        w.end(3, commit=False)
        assert read(b, "read_committed") == [*COMMITTED, "after-open"]
    finally:
        b.close()
