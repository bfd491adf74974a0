"""Real network partitions: three combined nodes, each in its own network namespace with its
own address (:mod:`tests.support.netns`), and iptables cutting the links between them while
an acks=all producer and a consumer run from outside, still able to reach every node.

* The partition leader cut off from the other two nodes keeps believing it leads and keeps
  taking the producer's appends, but acknowledges none of them (its ISR cannot shrink
  without the controller, and the followers no longer fetch); the majority side fences it,
  elects a new leader and takes acks=all writes. Healed, the old leader truncates what the
  new leader does not have.
* The active controller cut off from the other voters steps down (it stops hearing from a
  majority) and the other two elect a new one, which goes on taking metadata changes.

After each: the workload check (no acknowledged record lost or reordered, nothing a consumer
read later truncated).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rillet import TopicPartition
from rillet.client.admin import AdminClient, NewTopic, PartitionInfo
from tests.support.cluster import Cluster, eventually
from tests.support.netns import Network, unavailable
from tests.support.workload import Workload, check_workload, fault_cluster

TP = TopicPartition("cut", 0)

# One worker at a time changes iptables and creates networks (xdist group "network").
pytestmark = [
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
    pytest.mark.xdist_group("network"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    network = Network([1, 2, 3])
    try:
        with fault_cluster(tmp_path_factory.mktemp("partitions"), TP, network) as c:
            yield c
    finally:
        network.close()


def _admin(c: Cluster, avoid: int | None) -> AdminClient:
    """An admin client on the live nodes other than ``avoid`` (one cut off, whose view of
    the cluster is stale)."""
    bootstrap = ",".join(n.bootstrap for i, n in c.nodes.items() if n.alive and i != avoid)
    return AdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def _partition(c: Cluster, *, avoid: int | None = None) -> PartitionInfo:
    return c.partition(TP.topic, TP.partition, avoid=avoid)


def _net(c: Cluster) -> Network:
    assert c.network is not None
    return c.network


def test_a_leader_cut_off_from_its_followers_acknowledges_nothing(cluster: Cluster) -> None:
    w = Workload(cluster.bootstrap(), TP, "p")
    try:
        w.wait_for_acks(50)
        old = _partition(cluster).leader
        _net(cluster).isolate(old)
        try:
            new = eventually(
                lambda: (p := _partition(cluster, avoid=old)).leader not in (-1, old) and p.leader
            )
            # The majority side takes acks=all writes; a producer that only knows the
            # majority's brokers gets them acknowledged.
            side = Workload(
                ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != old), TP, "m"
            )
            try:
                side.wait_for_acks(50)
            finally:
                side.stop()
            assert _partition(cluster, avoid=old).leader == new
        finally:
            _net(cluster).heal()
        # Healed: the old leader learns it was deposed, truncates, and catches up.
        eventually(lambda: len(_partition(cluster).isr) == 3 or None, timeout=60)
        w.wait_for_acks(50)
    finally:
        w.stop()
    check_workload(cluster.bootstrap(), w, side)


def test_an_active_controller_cut_off_from_the_other_voters_is_replaced(
    cluster: Cluster,
) -> None:
    old = cluster.controller_id()
    _net(cluster).isolate(old)
    try:

        def replaced() -> int | None:
            with _admin(cluster, old) as admin:
                now = int(admin.describe_cluster()["controller_id"])
            return now if now not in (-1, old) else None

        eventually(replaced)
        # The majority's controller takes metadata changes.
        with _admin(cluster, old) as admin:
            admin.create_topics([NewTopic("while-cut", 1, 2)])
            assert "while-cut" in admin.list_topics()
    finally:
        _net(cluster).heal()
    # Healed, the old controller follows the new one and sees what it committed.
    with cluster.nodes[old].admin_client() as admin:
        eventually(lambda: "while-cut" in admin.list_topics() or None)
    eventually(lambda: len(_partition(cluster).isr) == 3 or None, timeout=60)
