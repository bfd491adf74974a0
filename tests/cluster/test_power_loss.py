"""Power cuts on a real cluster. A broker is killed (kill -9) and its partition log cut where
a power loss could have cut it: past the recovery point, mid-batch (Rillet, as Kafka, does not
fsync each write, so replication is what keeps those records). Restarted without a
clean-shutdown epoch, it leaves the ISR (KIP-966), catches up from the others and rejoins.

Three combined nodes with fast failure detection, ``min.insync.replicas=2``, an acks=all
producer and a consumer throughout (:mod:`tests.support.workload`): no acknowledged record is
lost or reordered, nothing a consumer read is later truncated. A broker stopped with SIGTERM
comes back clean: its ``.kafka_cleanshutdown`` names the broker epoch it ended.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest

from rillet import TopicPartition
from rillet._core import read_offset_checkpoint
from rillet.client.admin import PartitionInfo
from tests.support.cluster import Cluster, ClusterNode, eventually
from tests.support.power_loss import lose_unflushed, unflushed_bytes
from tests.support.workload import Workload, check_workload, fault_cluster

TP = TopicPartition("cuts", 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with fault_cluster(tmp_path_factory.mktemp("power"), TP) as c:
        yield c


def _partition(c: Cluster) -> PartitionInfo:
    return c.partition(TP.topic, TP.partition)


def _power_cut(node: ClusterNode) -> int:
    """Kill the node and cut its log of TP halfway through what it had not fsynced; returns
    the bytes lost."""
    node.kill()
    checkpoint = node.data_dir / "recovery-point-offset-checkpoint"
    points = (
        {(e.topic, e.partition): e.offset for e in read_offset_checkpoint(checkpoint)}
        if checkpoint.exists()
        else {}
    )
    log_dir = node.data_dir / f"{TP.topic}-{TP.partition}"
    recovery_point = points.get((TP.topic, TP.partition), 0)
    unflushed = sum(size - first for _, first, size in unflushed_bytes(log_dir, recovery_point))
    return lose_unflushed(log_dir, recovery_point, random.Random(0), keep=unflushed // 2 + 7)


def _said_unclean(cluster: Cluster, broker: int, marks: dict[int, int]) -> bool:
    line = f"Broker {broker} shut down uncleanly"
    return any(line in n.output()[marks[i] :] for i, n in cluster.nodes.items())


def _marks(cluster: Cluster) -> dict[int, int]:
    return {i: len(n.output()) for i, n in cluster.nodes.items()}


@pytest.mark.parametrize("role", ["follower", "leader"])
def test_a_power_cut_broker_loses_nothing_acknowledged(cluster: Cluster, role: str) -> None:
    w = Workload(cluster.bootstrap(), TP, f"{role}-")
    try:
        w.wait_for_acks(200)
        p = eventually(lambda: (p := _partition(cluster)).leader >= 0 and len(p.isr) == 3 and p)
        victim = p.leader if role == "leader" else next(r for r in p.replicas if r != p.leader)
        marks = _marks(cluster)
        assert _power_cut(cluster.nodes[victim]) > 0
        w.wait_for_acks(50)  # the other two take acks=all writes meanwhile
        cluster.restart(victim)
        assert eventually(lambda: _said_unclean(cluster, victim, marks), timeout=30)
        eventually(lambda: len(_partition(cluster).isr) == 3 or None, timeout=60)
        w.wait_for_acks(50)
    finally:
        w.stop()
    check_workload(cluster.bootstrap(), w)


def test_a_clean_shutdown_is_told_from_an_unclean_one(cluster: Cluster) -> None:
    p = _partition(cluster)
    follower = next(r for r in p.replicas if r != p.leader)
    node = cluster.nodes[follower]
    assert node.stop() == 0
    marker = json.loads((node.data_dir / ".kafka_cleanshutdown").read_text())
    assert marker["version"] == 0 and marker["brokerEpoch"] > 0
    marks = _marks(cluster)
    cluster.restart(follower)
    eventually(lambda: len(_partition(cluster).isr) == 3 or None, timeout=60)
    assert not _said_unclean(cluster, follower, marks)
