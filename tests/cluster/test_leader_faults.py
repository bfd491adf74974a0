"""Breaking a replicated partition's leader while an acks=all producer and a consumer run:
kill -9 it again and again, and pause it (SIGSTOP) so it comes back believing it leads.

Three combined nodes on loopback with fast failure detection (``broker.session.timeout.ms``
1000), under the workload and check of :mod:`tests.support.workload` (no acknowledged
record lost or reordered, nothing a consumer read later truncated).

``RILLET_LEADER_KILLS`` sets the number of kills (20 by default).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator

import pytest

from rillet import TopicPartition
from rillet.client.admin import PartitionInfo
from tests.support.cluster import Cluster, eventually
from tests.support.workload import Workload, check_workload, fault_cluster

KILLS = int(os.environ.get("RILLET_LEADER_KILLS", "20"))
TP = TopicPartition("faults", 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with fault_cluster(tmp_path_factory.mktemp("faults"), TP) as c:
        yield c


def _partition(c: Cluster, *, avoid: int | None = None) -> PartitionInfo:
    return c.partition(TP.topic, TP.partition, avoid=avoid)


def test_kill_the_leader_again_and_again_during_acks_all_produce(cluster: Cluster) -> None:
    rng = random.Random(KILLS)
    w = Workload(cluster.bootstrap(), TP, "k")
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
    check_workload(cluster.bootstrap(), w)


def test_a_paused_leader_never_acknowledges_its_stale_appends(cluster: Cluster) -> None:
    w = Workload(cluster.bootstrap(), TP, "s")
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
    check_workload(cluster.bootstrap(), w)
