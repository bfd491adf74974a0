"""Replication between real brokers: three combined nodes on loopback, topics with RF=3.

Followers fetch from the leader over the inter-broker listener; acks=all waits for the ISR;
killing a partition's leader (kill -9) moves leadership to an in-sync follower, and every
record acknowledged with acks=all is still there, in order, when the old leader returns as a
follower (truncating what it had that the new leader does not)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer, TopicPartition, decode_batches
from rillet.client.admin import NewTopic, PartitionInfo
from rillet.errors import KafkaError
from tests.support.cluster import Cluster, eventually


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("replication"), voters=3)
    for n in c.nodes.values():
        n.extra.update({"replica.lag.time.max.ms": "3000", "replica.fetch.wait.max.ms": "100"})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _partition(cluster: Cluster, topic: str, p: int = 0) -> PartitionInfo:
    with cluster.admin() as admin:
        return admin.describe_topics([topic])[0].partitions[p]


def _create(cluster: Cluster, topic: str, partitions: int = 1, **configs: str) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, partitions, 3, topic_configs=dict(configs))])
    for p in range(partitions):
        eventually(lambda p=p: _partition(cluster, topic, p).leader >= 0)


def _on_disk(node_dir: Path, topic: str, p: int) -> list[bytes]:
    """Every record value in one replica's segment files, in offset order."""
    values: list[bytes] = []
    for seg in sorted((node_dir / f"{topic}-{p}").glob("*.log")):
        for batch in decode_batches(seg.read_bytes(), allow_partial=True):
            values += [r.value or b"" for r in batch.records]
    return values


def _consume(cluster: Cluster, topic: str, p: int, count: int) -> list[bytes]:
    consumer = Consumer(bootstrap_servers=cluster.bootstrap(), auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p)])
    seen: list[bytes] = []
    try:
        while len(seen) < count:
            batch = consumer.poll(timeout_ms=10_000)
            assert batch, f"only {len(seen)} of {count} records came back"
            seen += [r.value or b"" for records in batch.values() for r in records]
    finally:
        consumer.close()
    return seen


def test_acks_all_records_are_on_every_replica(cluster: Cluster) -> None:
    _create(cluster, "everywhere", 1, **{"min.insync.replicas": "2"})
    producer = Producer(bootstrap_servers=cluster.bootstrap(), acks="all", linger_ms=5)
    futures = [producer.send("everywhere", f"v{i}".encode()) for i in range(300)]
    producer.flush()
    producer.close()
    offsets = [f.get(timeout=10).offset for f in futures]
    assert offsets == list(range(300))
    want = [f"v{i}".encode() for i in range(300)]
    for n in cluster.nodes.values():
        # Followers may be one fetch behind the leader's HW; they catch up.
        eventually(lambda n=n: _on_disk(n.data_dir, "everywhere", 0) == want or None)
    assert _partition(cluster, "everywhere").isr.__len__() == 3
    # Every broker reports its replica, of the same size, with `rillet log-dirs`.
    out = _cli(
        "log-dirs", "--describe", "--bootstrap-server", cluster.bootstrap(),
        "--topic-list", "everywhere",
    )  # fmt: skip
    lines = out.splitlines()
    assert lines[1] == "Received log directory information from brokers 1,2,3"
    described = json.loads(lines[2])["brokers"]
    sizes = {
        b["broker"]: [(p["partition"], p["size"]) for d in b["logDirs"] for p in d["partitions"]]
        for b in described
    }
    assert sorted(sizes) == [1, 2, 3]
    assert len({tuple(s) for s in sizes.values()}) == 1 and sizes[1][0][1] > 0


def test_a_dead_follower_leaves_the_isr_and_acks_all_below_min_isr_is_refused(
    cluster: Cluster,
) -> None:
    _create(cluster, "strict", 1, **{"min.insync.replicas": "3"})
    info = _partition(cluster, "strict")
    follower = next(r for r in info.replicas if r != info.leader)
    producer = Producer(
        bootstrap_servers=cluster.bootstrap(),
        acks="all",
        delivery_timeout_ms=4000,
        request_timeout_ms=2000,
        retry_backoff_ms=100,
    )
    try:
        assert producer.send("strict", b"before").get(timeout=20).offset == 0
        cluster.nodes[follower].kill()
        eventually(lambda: len(_partition(cluster, "strict").isr) == 2 or None)
        # kafka-topics.sh's reports list it (and only partition lines, as Kafka prints).
        for flag in ("--under-replicated-partitions", "--under-min-isr-partitions"):
            out = _cli("topics", "--describe", "--topic", "strict", flag,
                       "--bootstrap-server", cluster.bootstrap())  # fmt: skip
            assert out.startswith("\tTopic: strict\tPartition: 0\tLeader: "), out
        out = _cli("topics", "--describe", "--topic", "strict", "--unavailable-partitions",
                   "--bootstrap-server", cluster.bootstrap())  # fmt: skip
        assert out == ""
        # Retried until delivery.timeout.ms, then failed with the last error.
        with pytest.raises(KafkaError) as e:
            producer.send("strict", b"refused").get(timeout=20)
        assert type(e.value).__name__ in (
            "NotEnoughReplicasError",
            "NotEnoughReplicasAfterAppendError",
        )
    finally:
        producer.close()
        if not cluster.nodes[follower].alive:
            cluster.restart(follower)
    # The follower catches up and rejoins the ISR.
    eventually(lambda: len(_partition(cluster, "strict").isr) == 3 or None, timeout=60)


def test_killing_the_leader_during_acks_all_produce_loses_nothing(cluster: Cluster) -> None:
    _create(cluster, "failover", 1, **{"min.insync.replicas": "2"})
    producer = Producer(
        bootstrap_servers=cluster.bootstrap(),
        acks="all",
        max_in_flight_requests_per_connection=1,
        retry_backoff_ms=50,
        request_timeout_ms=5000,
        linger_ms=1,
    )
    acked: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            f = producer.send("failover", f"r{i}".encode())
            f.add_callback(lambda _m, i=i: acked.append(i))
            i += 1
            if i % 50 == 0:
                producer.flush()

    t = threading.Thread(target=produce)
    t.start()
    try:
        eventually(lambda: len(acked) >= 200 or None)
        old = _partition(cluster, "failover").leader
        cluster.nodes[old].kill()
        eventually(lambda: _partition(cluster, "failover").leader not in (-1, old) or None)
        mark = len(acked)
        eventually(lambda: len(acked) >= mark + 200 or None)
    finally:
        stop.set()
        t.join()
        producer.flush()
        producer.close()
    cluster.restart(old)
    want = [f"r{i}".encode() for i in sorted(acked)]
    total = eventually(lambda: _partition(cluster, "failover") and _hw(cluster, "failover"))
    seen = _consume(cluster, "failover", 0, total)
    positions = {v: i for i, v in reversed(list(enumerate(seen)))}
    # Every acknowledged record is there, in the order it was sent.
    missing = [v for v in want if v not in positions]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:3]}"
    firsts = [positions[v] for v in want]
    assert firsts == sorted(firsts)
    # The old leader, back as a follower, holds the same log as the new leader.
    leader = _partition(cluster, "failover").leader
    eventually(
        lambda: (
            _on_disk(cluster.nodes[old].data_dir, "failover", 0)[: len(seen)]
            == _on_disk(cluster.nodes[leader].data_dir, "failover", 0)[: len(seen)]
            or None
        )
    )


def _hw(cluster: Cluster, topic: str) -> int | None:
    consumer = Consumer(bootstrap_servers=cluster.bootstrap())
    try:
        tp = TopicPartition(topic, 0)
        return consumer.end_offsets([tp])[tp] or None
    finally:
        consumer.close()


def test_sigterm_moves_leadership_away_before_the_broker_stops(cluster: Cluster) -> None:
    _create(cluster, "handover", 1, **{"min.insync.replicas": "2"})
    eventually(lambda: len(_partition(cluster, "handover").isr) == 3 or None)
    old = _partition(cluster, "handover").leader
    node = cluster.nodes[old]
    since = len(node.output())
    assert node.stop() == 0
    # Controlled shutdown: the controller fenced it and moved its leadership, committed, before
    # it exited (a kill -9 would leave it leader until its session expired). The other brokers
    # learn of the move from the metadata log, which may need a new quorum leader first.
    assert "controlled shutdown complete" in node.output()[since:]
    eventually(
        lambda: (
            (
                (info := _partition(cluster, "handover")).leader not in (-1, old)
                and old not in info.isr
            )
            or None
        )
    )
    producer = Producer(bootstrap_servers=cluster.bootstrap(), acks="all")
    try:
        assert producer.send("handover", b"after").get(timeout=20).offset >= 0
    finally:
        producer.close()
    cluster.restart(old)
    eventually(lambda: len(_partition(cluster, "handover").isr) == 3 or None, timeout=60)
