"""A workload for fault tests, and the check that follows it: an acks=all producer sending
``<prefix>0``, ``<prefix>1``, ... and a consumer reading everything, each on its own thread.

The check: every acknowledged record is in the log, in the order it was sent, and every
record the consumer was given is still at the offset it was given at (nothing it read above
a high watermark was later truncated). The producer is idempotent (Kafka's default), so no
record may appear twice either: exactly once, in send order. With ``idempotent=False`` a
retried batch may appear twice; duplicates are then allowed, losses and reordering are not.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from rillet import Consumer, Producer, TopicPartition
from rillet.client.admin import AdminClient, NewTopic
from tests.support.cluster import Cluster, eventually
from tests.support.netns import Network

__all__ = ["FAST_FAILURE_DETECTION", "Workload", "check_workload", "fault_cluster", "read_all"]

# Brokers fenced a second after their heartbeats stop; followers fetch and time out quickly.
FAST_FAILURE_DETECTION = {
    "broker.session.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "250",
    "replica.lag.time.max.ms": "5000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "200",
}


@contextlib.contextmanager
def fault_cluster(
    root: Path,
    tp: TopicPartition,
    network: Network | None = None,
    *,
    partitions: int = 1,
    kafka: bool = False,
) -> Iterator[Cluster]:
    """Three combined nodes with :data:`FAST_FAILURE_DETECTION`, and ``tp``'s topic
    (``partitions`` partitions, three replicas, ``min.insync.replicas=2``) fully in sync;
    with ``kafka``, each broker serves Kafka's protocol too."""
    c = Cluster(root, voters=3, network=network, kafka=kafka)
    for n in c.nodes.values():
        n.extra.update(FAST_FAILURE_DETECTION)
    try:
        c.start()
        with c.admin() as admin:
            admin.create_topics(
                [NewTopic(tp.topic, partitions, 3, topic_configs={"min.insync.replicas": "2"})]
            )
        eventually(
            lambda: all(len(c.partition(tp.topic, p).isr) == 3 for p in range(partitions)) or None
        )
        yield c
    finally:
        c.stop()


class Workload:
    def __init__(
        self,
        bootstrap: str,
        tp: TopicPartition,
        prefix: str,
        *,
        idempotent: bool = True,
        max_in_flight: int = 1,
    ) -> None:
        self.tp = tp
        self.prefix = prefix
        self.idempotent = idempotent
        self.acked: list[int] = []
        self.consumed: dict[int, bytes] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.producer = Producer(
            bootstrap_servers=bootstrap,
            acks="all",
            max_in_flight_requests_per_connection=max_in_flight,
            enable_idempotence=idempotent,
            retry_backoff_ms=50,
            request_timeout_ms=3000,
            linger_ms=1,
        )
        self.consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        self.consumer.assign([tp])
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _produce(self) -> None:
        i = 0
        while not self._stop.is_set():
            for _ in range(20):
                f = self.producer.send(
                    self.tp.topic, f"{self.prefix}{i}".encode(), partition=self.tp.partition
                )
                f.add_callback(lambda _m, i=i: self.acked.append(i))
                f.add_errback(lambda e: self.errors.append(repr(e)))
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


def read_all(bootstrap: str, tp: TopicPartition) -> list[tuple[int, bytes]]:
    """Every record of ``tp`` up to its end offset, as (offset, value)."""
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([tp])
    end = consumer.end_offsets([tp])[tp]
    out: list[tuple[int, bytes]] = []
    try:
        while not out or out[-1][0] < end - 1:
            batch = consumer.poll(timeout_ms=10_000)
            assert batch, f"read stopped at {out[-1][0] if out else -1} of {end}"
            out += [(r.offset, r.value or b"") for rs in batch.values() for r in rs]
    finally:
        consumer.close()
    return out


def _agreed_leader(bootstrap: str, tp: TopicPartition) -> bool:
    """Every broker in ``bootstrap`` names the same live leader and leader epoch for ``tp``."""
    seen = set()
    for address in bootstrap.split(","):
        with AdminClient(bootstrap_servers=address, request_timeout_ms=5000) as admin:
            p = admin.describe_topics([tp.topic])[0].partitions[tp.partition]
        seen.add((p.leader, p.leader_epoch))
    return len(seen) == 1 and next(iter(seen))[0] >= 0


def check_workload(bootstrap: str, *workloads: Workload) -> None:
    """The check of the module docstring, for workloads on one partition. It reads once every
    broker agrees on the leader: one that was cut off may not have heard of the new leader
    yet, and a client with no history would take its stale end offset for the log's end."""
    eventually(lambda: _agreed_leader(bootstrap, workloads[0].tp), timeout=60)
    log = read_all(bootstrap, workloads[0].tp)
    by_offset = dict(log)
    first_at: dict[bytes, int] = {}
    for offset, value in log:
        first_at.setdefault(value, offset)
    for w in workloads:
        acked = [f"{w.prefix}{i}".encode() for i in sorted(set(w.acked))]
        missing = [v for v in acked if v not in first_at]
        assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
        positions = [first_at[v] for v in acked]
        assert positions == sorted(positions), f"acknowledged records of {w.prefix} out of order"
        if w.idempotent:
            mine = [v for _, v in log if v.startswith(w.prefix.encode())]
            twice = sorted(v for v, n in collections.Counter(mine).items() if n > 1)
            assert not twice, f"{len(twice)} records of {w.prefix} written twice: {twice[:5]}"
            sent = [int(v[len(w.prefix) :]) for v in mine]
            assert sent == sorted(sent), f"records of {w.prefix} not in send order"
        moved = {o: v for o, v in w.consumed.items() if by_offset.get(o) != v}
        assert not moved, f"records a consumer read were later truncated or replaced: {moved}"
