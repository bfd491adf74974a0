"""Kafka's protocol on a 3-node cluster: unmodified librdkafka clients (confluent-kafka) find
the partition leaders through Metadata, follow them across kill -9 and SIGSTOP of the
leader, and lose nothing. An idempotent acks=all producer keeps sending while the leaders
fail; afterwards a consumer group reads every acknowledged record exactly once, in send
order per partition, through the Kafka listeners, and the gRPC API reads the same log.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer

from rillet import TopicPartition
from tests.support.cluster import Cluster, eventually
from tests.support.server_process import fetch_all
from tests.support.workload import fault_cluster

TOPIC, PARTITIONS, FAULTS = "kafka-protocol", 3, 4

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("kafka-protocol")
    with fault_cluster(root, TopicPartition(TOPIC, 0), partitions=PARTITIONS, kafka=True) as c:
        yield c


class Sender:
    """An idempotent acks=all librdkafka producer sending ``0, 1, 2, ...`` round robin over
    the partitions, on its own thread, remembering what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 120_000,
                "topic.metadata.refresh.interval.ms": 1000,
                # A paused leader holds its requests: give up on them after 5 s (librdkafka
                # waits 30 s) and retry at the new leader, where idempotence dedupes them.
                "request.timeout.ms": 5000,
            }
        )
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            value = msg.value()
            assert value is not None
            self.acked[msg.partition() or 0].append(int(value))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(
                    TOPIC,
                    value=b"%d" % self.sent,
                    partition=self.sent % PARTITIONS,
                    on_delivery=self._delivered,
                )
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.001)

    def acks(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def wait_for_acks(self, more: int, timeout: float = 90) -> None:
        target = self.acks() + more
        eventually(lambda: self.acks() >= target or None, timeout=timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(120) == 0


def _leader(c: Cluster, partition: int, avoid: int | None = None) -> int:
    return int(
        eventually(
            lambda: (p := c.partition(TOPIC, partition, avoid=avoid)).leader >= 0 and p.leader
        )
    )


def test_metadata_lists_every_broker_on_its_kafka_listener(cluster: Cluster) -> None:
    listing = subprocess.run(
        ["kcat", "-b", cluster.kafka_bootstrap(), "-L", "-J", "-t", TOPIC],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    brokers = {b["id"]: b["name"] for b in json.loads(listing)["brokers"]}
    assert brokers == {i: n.kafka_bootstrap for i, n in cluster.nodes.items()}


def test_librdkafka_clients_follow_leaders_across_kills_and_pauses(cluster: Cluster) -> None:
    sender = Sender(cluster.kafka_bootstrap())
    try:
        sender.wait_for_acks(500)
        for n in range(FAULTS):
            leader = _leader(cluster, n % PARTITIONS)
            if n % 2 == 0:
                cluster.nodes[leader].kill()
                sender.wait_for_acks(300)  # new leaders take the retries and new records
                cluster.restart(leader)
            else:
                proc = cluster.nodes[leader].proc
                assert proc is not None
                proc.send_signal(signal.SIGSTOP)
                try:
                    _leader(cluster, n % PARTITIONS, avoid=leader)
                    sender.wait_for_acks(300)
                finally:
                    proc.send_signal(signal.SIGCONT)
            eventually(
                lambda: (
                    all(len(cluster.partition(TOPIC, p).isr) == 3 for p in range(PARTITIONS))
                    or None
                ),
                timeout=90,
            )
        sender.wait_for_acks(300)
    finally:
        sender.stop()
    assert not sender.errors, sender.errors[:5]

    # Every acknowledged record exactly once, in send order, read by a consumer group.
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": "kafka-protocol-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    read: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 120
    total = sender.acks()
    while sum(len(v) for v in read.values()) < total and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.5):
            assert m.error() is None, m.error()
            value = m.value()
            assert value is not None
            read[m.partition() or 0].append(int(value))
    consumer.close()
    for p in range(PARTITIONS):
        assert read[p] == sender.acked[p], f"partition {p}: what was read differs from the acks"
        leader = cluster.nodes[_leader(cluster, p)].bootstrap
        logged = [int(r.value or b"") for r in fetch_all(leader, TOPIC, p)]
        assert logged == read[p], f"partition {p}: the gRPC API reads another log"
