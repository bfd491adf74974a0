"""Transactions end to end on a real server process, through the client API: the
producer's ``init_transactions`` / ``begin_transaction`` / ``send_offsets_to_transaction`` /
``commit_transaction`` / ``abort_transaction``, read_committed and read_uncommitted
consumers, zombie fencing, the coordinator aborting a transaction left open past
``transaction.timeout.ms``, and ``rillet transactions``."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from rillet import Consumer, OffsetAndMetadata, Producer, TopicPartition
from rillet.errors import IllegalStateError, KafkaError, ProducerFencedError
from tests.support.cluster import eventually
from tests.support.server_process import ServerProcess

TP = TopicPartition("txn", 0)


class TxnServer(ServerProcess):
    """The embedded default, with the timed-out-transaction scan every 200 ms."""

    def argv(self) -> list[str]:
        return [
            *super().argv(),
            "--override",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxnServer]:
    s = TxnServer(tmp_path_factory.mktemp("txn") / "data")
    s.start()
    s.create_topic("txn", 1)
    s.create_topic("txn-in", 1)
    yield s
    s.stop()


def read(server: ServerProcess, isolation: str, tp: TopicPartition = TP) -> list[bytes]:
    """Every record of ``tp`` a consumer with ``isolation`` is given, up to its end offset
    (for read_committed: the last stable offset)."""
    c = Consumer(
        bootstrap_servers=server.bootstrap, isolation_level=isolation, auto_offset_reset="earliest"
    )
    c.assign([tp])
    end = c.end_offsets([tp])[tp]
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"stuck at {c.position(tp)} of {end}"
            for records in c.poll(timeout_ms=500).values():
                out += [r.value or b"" for r in records]
    finally:
        c.close()
    return out


def producer(server: ServerProcess, tid: str, **configs: object) -> Producer:
    return Producer(bootstrap_servers=server.bootstrap, transactional_id=tid, **configs)


def test_committed_records_are_read_and_aborted_ones_are_not(server: TxnServer) -> None:
    with producer(server, "commit-abort") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(TP.topic, b"c%d" % i, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(5):
            p.send(TP.topic, b"a%d" % i, partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(TP.topic, b"after", partition=0)
        p.commit_transaction()
    committed = read(server, "read_committed")
    assert [v for v in committed if v[:1] in (b"c", b"a") or v == b"after"] == [
        *(b"c%d" % i for i in range(5)),
        b"after",
    ]
    everything = read(server, "read_uncommitted")
    assert b"a0" in everything  # the aborted records are in the log, only filtered


def test_an_open_transaction_holds_read_committed_readers_at_its_start(
    server: TxnServer,
) -> None:
    tp = TopicPartition("txn-in", 0)
    with producer(server, "open") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(tp.topic, b"pending", partition=0)
        p.flush()
        assert b"pending" not in read(server, "read_committed", tp)
        assert b"pending" in read(server, "read_uncommitted", tp)
        p.commit_transaction()
    assert b"pending" in read(server, "read_committed", tp)


def test_a_second_producer_with_the_same_id_fences_the_first(server: TxnServer) -> None:
    zombie = producer(server, "fenced")
    fresh = producer(server, "fenced")
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(TP.topic, b"zombie", partition=0)
        zombie.flush()
        fresh.init_transactions()  # bumps the epoch: the zombie's transaction is aborted
        fresh.begin_transaction()
        fresh.send(TP.topic, b"fresh", partition=0)
        fresh.commit_transaction()
        with pytest.raises((ProducerFencedError, KafkaError)):
            zombie.send(TP.topic, b"zombie2", partition=0).get(10)
            zombie.commit_transaction()
    finally:
        zombie.close(0)
        fresh.close()
    committed = read(server, "read_committed")
    assert b"fresh" in committed and b"zombie" not in committed


def test_offsets_sent_to_a_transaction_count_only_if_it_commits(server: TxnServer) -> None:
    group = "txn-group"
    tp = TopicPartition("txn-in", 0)
    with producer(server, "offsets") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(3)}, group)
        p.abort_transaction()
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(7)}, group)
        p.commit_transaction()
    c = Consumer(bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert eventually(lambda: c.committed(tp)) == 7
    finally:
        c.close()


def test_the_coordinator_aborts_a_transaction_left_open_past_its_timeout(
    server: TxnServer,
) -> None:
    p = producer(server, "stuck", transaction_timeout_ms=1000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(TP.topic, b"stuck", partition=0)
        p.flush()
        # Nobody commits: after the timeout the coordinator aborts, and read_committed
        # readers move past it.
        eventually(lambda: b"stuck" in read(server, "read_uncommitted") or None)
        eventually(
            lambda: _describe_state(server, "stuck") in ("CompleteAbort", "Empty") or None,
            timeout=30,
        )
        assert b"stuck" not in read(server, "read_committed")
        with pytest.raises(KafkaError):
            p.commit_transaction()
    finally:
        p.close(0)


def _describe_state(server: ServerProcess, tid: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", "transactions", "--bootstrap-server",
         server.bootstrap, "describe", "--transactional-id", tid],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    header, row = out.splitlines()[:2]
    return row.split()[header.split().index("TransactionState")]


def test_the_transactions_tool_lists_describes_and_shows_producers(server: TxnServer) -> None:
    with producer(server, "tool") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(TP.topic, b"t", partition=0)
        p.commit_transaction()
    base = [sys.executable, "-m", "rillet.cli.main", "transactions", "--bootstrap-server",
            server.bootstrap]  # fmt: skip
    listed = subprocess.run([*base, "list"], capture_output=True, text=True, check=True).stdout
    assert listed.splitlines()[0].split() == [
        "TransactionalId", "Coordinator", "ProducerId", "TransactionState",
    ]  # fmt: skip
    assert any(line.split()[0] == "tool" for line in listed.splitlines()[1:])
    assert _describe_state(server, "tool") == "CompleteCommit"
    producers = subprocess.run(
        [*base, "describe-producers", "--topic", TP.topic, "--partition", "0"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert producers.splitlines()[0].split()[:3] == [
        "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
    ]  # fmt: skip
    assert len(producers.splitlines()) >= 2


def test_transactional_calls_out_of_order_are_refused(server: TxnServer) -> None:
    with producer(server, "order") as p:
        with pytest.raises(IllegalStateError):
            p.commit_transaction()
        p.init_transactions()
        with pytest.raises(IllegalStateError):
            p.commit_transaction()
        with pytest.raises(IllegalStateError):
            p.send(TP.topic, b"outside", partition=0)


def test_the_tool_aborts_a_hanging_transaction(server: TxnServer) -> None:
    tp = TopicPartition("txn-in", 0)
    p = producer(server, "hanging", transaction_timeout_ms=600_000)
    try:
        p.init_transactions()
        p.begin_transaction()
        start = p.send(tp.topic, b"hanging", partition=0).get(10).offset
        # The producer goes away with its transaction open: read_committed readers wait at
        # its first offset until someone ends it.
        assert b"hanging" not in read(server, "read_committed", tp)
        base = [sys.executable, "-m", "rillet.cli.main", "transactions", "--bootstrap-server",
                server.bootstrap]  # fmt: skip
        out = subprocess.run(
            [*base, "abort", "--topic", tp.topic, "--partition", "0", "--start-offset",
             str(start)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        c = Consumer(bootstrap_servers=server.bootstrap, isolation_level="read_committed")
        try:
            assert eventually(lambda: c.end_offsets([tp])[tp] > start or None)
        finally:
            c.close()
        assert b"hanging" not in read(server, "read_committed", tp)
        missing = subprocess.run(
            [*base, "abort", "--topic", tp.topic, "--partition", "0", "--start-offset", "999999"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert missing.returncode == 1
        assert "Could not find any open transactions starting at offset 999999" in missing.stderr
    finally:
        p.close(0)
