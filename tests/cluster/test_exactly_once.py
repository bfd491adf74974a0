"""Kafka's exactly-once system test in miniature: a consume-transform-produce loop
(:mod:`tests.support.txn_copier`) with transactions on a 3-node cluster, killed with -9 at
random points and inside open transactions, and started again, ``RILLET_EOS_KILLS`` times
(20 by default).

The check: a read_committed consumer of the output sees every input record exactly once;
a read_uncommitted one sees at least every committed record, and the copies of aborted
transactions it may see besides lie inside transactions whose ABORT marker is in the log.
"""

from __future__ import annotations

import collections
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer, TopicPartition, decode_batches
from rillet.client.admin import NewTopic
from tests.support.cluster import Cluster, eventually

KILLS = int(os.environ.get("RILLET_EOS_KILLS", "20"))
# Each transaction stays open this long once its records are in the output, so a kill can
# be aimed inside one.
HOLD_MS = 300
PARTITIONS = 2
ROOT = Path(__file__).resolve().parents[2]


# Groups notice a dead member in seconds, not Kafka's 45 (the copier is a static member, so
# its next instance takes over at once anyway).
GROUP_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("eos"), voters=3)
    for n in c.nodes.values():
        n.extra.update(GROUP_SETTINGS)
    try:
        c.start()
        with c.admin() as admin:
            admin.create_topics(
                [
                    NewTopic(name, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})
                    for name in ("eos-in", "eos-out")
                ]
            )
        yield c
    finally:
        c.stop()


def _copier(c: Cluster, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.support.txn_copier", c.bootstrap(), "eos-in",
            "eos-out", "eos-group", "eos-copier", str(HOLD_MS)]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def _opened(log: Path) -> int:
    """How many transactions the copiers have written and hold open (``open N`` lines)."""
    if not log.exists():
        return 0
    return sum(line.startswith("open ") for line in log.read_text().splitlines())


def _await_open_transaction(c: Cluster, log: Path, opened: int) -> None:
    """Wait until a copier holds a transaction open beyond the ``opened`` before."""
    try:
        eventually(lambda: _opened(log) > opened or None, timeout=60, interval=0.02)
    except AssertionError:
        raise AssertionError(f"no transaction opened:\n{_diagnose(c, log)}") from None


def _diagnose(c: Cluster, log: Path) -> str:
    """What a failed run leaves to look at: the transaction, the output's producers and
    offsets, the copier's log."""
    lines = []
    with c.admin() as admin:
        lines.append(repr(admin.describe_transactions(["eos-copier"])))
        for p in range(PARTITIONS):
            lines.append(repr(admin.describe_producers(TopicPartition("eos-out", p))))
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(bootstrap_servers=c.bootstrap(), isolation_level=isolation)
        tps = [TopicPartition("eos-out", p) for p in range(PARTITIONS)]
        lines.append(f"{isolation} end offsets: {consumer.end_offsets(tps)}")
        consumer.close()
    return "\n".join([*lines, log.read_text()[-5000:]])


def _read(c: Cluster, isolation: str) -> list[bytes]:
    consumer = Consumer(
        bootstrap_servers=c.bootstrap(), isolation_level=isolation, auto_offset_reset="earliest"
    )
    tps = [TopicPartition("eos-out", p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "the output could not be read to its end"
            for records in consumer.poll(timeout_ms=1000).values():
                values += [r.value or b"" for r in records]
    finally:
        consumer.close()
    return values


def test_a_copier_killed_again_and_again_copies_each_record_exactly_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    # The input keeps coming while the copier is killed, so that every kill lands while it
    # has work (records in flight, a transaction open, offsets not yet committed).
    sent: list[int] = []
    stop = threading.Event()

    def feed() -> None:
        with Producer(bootstrap_servers=cluster.bootstrap(), linger_ms=5) as p:
            while not stop.is_set():
                for _ in range(25):
                    i = len(sent)
                    p.send("eos-in", b"%05d" % i, partition=i % PARTITIONS)
                    sent.append(i)
                p.flush()
                time.sleep(0.25)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    rng = random.Random(KILLS)
    log = tmp_path / "copier.log"
    try:
        for kill in range(KILLS):
            opened = _opened(log)
            proc = _copier(cluster, log)
            try:
                if kill % 2:
                    # Aimed: inside a transaction whose records are written, which the next
                    # copier must abort.
                    _await_open_transaction(cluster, log, opened)
                else:
                    time.sleep(rng.uniform(1.5, 4.0))
            finally:
                # Killed on a failure too: a copier left running fails whichever test the
                # worker runs next (ResourceWarning: subprocess still running).
                proc.kill()
                proc.wait()
    finally:
        stop.set()
        feeder.join(60)
    records = len(sent)
    proc = _copier(cluster, log)
    try:
        eventually(lambda: len(_read(cluster, "read_committed")) >= records or None, timeout=180)
    except AssertionError:
        raise AssertionError(f"the copier did not finish:\n{_diagnose(cluster, log)}") from None
    finally:
        proc.kill()
        proc.wait()
    # Most kills landed while the copier worked, not while it started; none died otherwise.
    assert log.read_text().count("copied") > KILLS // 4, "the copier was mostly killed idle"
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    committed = _read(cluster, "read_committed")
    twice = [v for v, n in collections.Counter(committed).items() if n > 1]
    assert not twice, f"{len(twice)} records copied twice, first {sorted(twice)[:5]}"
    assert sorted(committed) == [b"%05d" % i for i in range(records)]
    # In each output partition the committed copies keep the input's order.
    for part in range(PARTITIONS):
        mine = [v for v in committed if int(v) % PARTITIONS == part]
        assert mine == sorted(mine)
    # read_uncommitted sees everything, including copies from aborted transactions; each
    # value it sees beyond the committed ones must be a duplicate of a committed one.
    uncommitted = _read(cluster, "read_uncommitted")
    assert set(uncommitted) == set(committed)
    aborted_markers = 0
    for part in range(PARTITIONS):
        node = cluster.nodes[cluster.partition("eos-out", part).leader]
        log_dir = next(node.data_dir.glob(f"**/eos-out-{part}"))
        for segment in sorted(log_dir.glob("*.log")):
            for batch in decode_batches(segment.read_bytes()):
                if batch.is_control and batch.records[0].key == b"\x00\x00\x00\x00":
                    aborted_markers += 1
    extra = len(uncommitted) - len(committed)
    assert extra == 0 or aborted_markers > 0, "uncommitted copies without an ABORT marker"
    # The aimed kills left transactions to abort (the next copier's init_transactions
    # fences and aborts them), and their records are in the log.
    assert aborted_markers > 0
    assert extra > 0
