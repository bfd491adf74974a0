"""Breaking a replicated partition's leader while an acks=all producer and a consumer run:
kill -9 it again and again, and pause it (SIGSTOP) so it comes back believing it leads.

Three combined nodes on loopback with fast failure detection (``broker.session.timeout.ms``
1000). After each run: every acknowledged record is in the log, in the order it was sent,
and every record a consumer was given is at the offset it was given at (nothing it read
above a high watermark was later truncated). The producer is not idempotent, so a retried
batch may appear twice; duplicates are allowed here, losses and reordering are not.

``RILLET_LEADER_KILLS`` sets the number of kills (20 by default).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.client.admin import AdminClient, NewTopic, PartitionInfo
from tests.support.cluster import Cluster, eventually

KILLS = int(os.environ.get("RILLET_LEADER_KILLS", "20"))
TP = TopicPartition("faults", 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("faults"), voters=3)
    for n in c.nodes.values():
        n.extra.update(
            {
                "broker.session.timeout.ms": "1000",
                "broker.heartbeat.interval.ms": "250",
                "replica.lag.time.max.ms": "5000",
                "replica.fetch.wait.max.ms": "100",
                "replica.fetch.backoff.ms": "200",
            }
        )
    try:
        c.start()
        with c.admin() as admin:
            admin.create_topics(
                [NewTopic(TP.topic, 1, 3, topic_configs={"min.insync.replicas": "2"})]
            )
        eventually(lambda: len(_partition(c).isr) == 3 or None)
        yield c
    finally:
        c.stop()


def _partition(c: Cluster, *, avoid: int | None = None) -> PartitionInfo:
    """The partition as the live brokers (other than ``avoid``, a paused one) describe it."""
    bootstrap = ",".join(n.bootstrap for i, n in c.nodes.items() if n.alive and i != avoid)
    with AdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000) as admin:
        return admin.describe_topics([TP.topic])[0].partitions[0]


class Workload:
    """An acks=all producer sending r0, r1, ... one request at a time, and a consumer reading
    everything, each on its own thread."""

    def __init__(self, c: Cluster, prefix: str) -> None:
        self.prefix = prefix
        self.acked: list[int] = []
        self.consumed: dict[int, bytes] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.producer = Producer(
            bootstrap_servers=c.bootstrap(),
            acks="all",
            max_in_flight_requests_per_connection=1,
            retry_backoff_ms=50,
            request_timeout_ms=3000,
            linger_ms=1,
        )
        self.consumer = Consumer(bootstrap_servers=c.bootstrap(), auto_offset_reset="earliest")
        self.consumer.assign([TP])
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _produce(self) -> None:
        i = 0
        while not self._stop.is_set():
            futures = []
            for _ in range(20):
                f = self.producer.send(TP.topic, f"{self.prefix}{i}".encode(), partition=0)
                f.add_callback(lambda _m, i=i: self.acked.append(i))
                f.add_errback(lambda e: self.errors.append(repr(e)))
                futures.append(f)
                i += 1
            self.producer.flush()

    def _consume(self) -> None:
        while not self._stop.is_set():
            for records in self.consumer.poll(timeout_ms=200).values():
                for r in records:
                    self.consumed[r.offset] = r.value or b""

    def wait_for_acks(self, more: int, timeout: float = 60) -> None:
        mark = len(self.acked)
        eventually(lambda: len(self.acked) >= mark + more or None, timeout=timeout)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        self.producer.close()
        self.consumer.close()


def _read_all(c: Cluster) -> list[tuple[int, bytes]]:
    consumer = Consumer(bootstrap_servers=c.bootstrap(), auto_offset_reset="earliest")
    consumer.assign([TP])
    end = consumer.end_offsets([TP])[TP]
    out: list[tuple[int, bytes]] = []
    try:
        while not out or out[-1][0] < end - 1:
            batch = consumer.poll(timeout_ms=10_000)
            assert batch, f"read stopped at {out[-1][0] if out else -1} of {end}"
            out += [(r.offset, r.value or b"") for rs in batch.values() for r in rs]
    finally:
        consumer.close()
    return out


def _check(c: Cluster, w: Workload) -> None:
    log = _read_all(c)
    by_offset = dict(log)
    first_at: dict[bytes, int] = {}
    for offset, value in log:
        first_at.setdefault(value, offset)
    acked = [f"{w.prefix}{i}".encode() for i in sorted(set(w.acked))]
    missing = [v for v in acked if v not in first_at]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
    positions = [first_at[v] for v in acked]
    assert positions == sorted(positions), "acknowledged records out of order"
    moved = {o: v for o, v in w.consumed.items() if by_offset.get(o) != v}
    assert not moved, f"records a consumer read were later truncated or replaced: {moved}"


def test_kill_the_leader_again_and_again_during_acks_all_produce(cluster: Cluster) -> None:
    rng = random.Random(KILLS)
    w = Workload(cluster, "k")
    try:
        w.wait_for_acks(50)
        for _ in range(KILLS):
            leader = eventually(lambda: (p := _partition(cluster)).leader >= 0 and p.leader)
            cluster.nodes[leader].kill()
            time.sleep(rng.uniform(0, 0.5))
            w.wait_for_acks(20)  # a new leader takes acks=all writes
            cluster.restart(leader)
            eventually(lambda: len(_partition(cluster).isr) == 3 or None, timeout=60)
    finally:
        w.stop()
    _check(cluster, w)


def test_a_paused_leader_never_acknowledges_its_stale_appends(cluster: Cluster) -> None:
    w = Workload(cluster, "s")
    try:
        w.wait_for_acks(50)
        old = _partition(cluster).leader
        proc = cluster.nodes[old].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        try:
            # Fenced after its session expires; another replica leads and takes writes
            # while the paused one still holds requests it accepted before the pause.
            eventually(lambda: _partition(cluster, avoid=old).leader not in (-1, old) or None)
            w.wait_for_acks(50)
        finally:
            proc.send_signal(signal.SIGCONT)
        # Back, it learns it no longer leads; its pending acks=all appends fail and it
        # truncates what the new leader does not have.
        eventually(lambda: len(_partition(cluster).isr) == 3 or None, timeout=60)
        w.wait_for_acks(50)
    finally:
        w.stop()
    _check(cluster, w)
