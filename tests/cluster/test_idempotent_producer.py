"""The idempotent producer across leader failures: exactly once, in send order.

Three combined nodes on loopback with fast failure detection. An idempotent producer with
five requests in flight (the most idempotence allows) keeps sending while the partition's
leader is killed with -9 or paused with SIGSTOP, again and again. Its retries reach a new
leader that may or may not hold the batches the old one took; the leader's producer state,
replicated with the log, tells retries from new batches. The check: every acknowledged
record is in the log, no record is there twice, and the records are in the order they were
sent (:func:`tests.support.workload.check_workload`).

``RILLET_IDEMPOTENT_FAULTS`` sets the number of faults (10 by default).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator

import pytest

from rillet import TopicPartition
from tests.support.cluster import Cluster, eventually
from tests.support.workload import Workload, check_workload, fault_cluster

FAULTS = int(os.environ.get("RILLET_IDEMPOTENT_FAULTS", "10"))
TP = TopicPartition("idempotent", 0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with fault_cluster(tmp_path_factory.mktemp("idempotent"), TP) as c:
        yield c


def _leader(c: Cluster, avoid: int | None = None) -> int:
    return int(
        eventually(
            lambda: (p := c.partition(TP.topic, TP.partition, avoid=avoid)).leader >= 0 and p.leader
        )
    )


def test_leader_kills_and_pauses_leave_each_record_once_in_send_order(cluster: Cluster) -> None:
    rng = random.Random(FAULTS)
    w = Workload(cluster.bootstrap(), TP, "i", idempotent=True, max_in_flight=5)
    try:
        w.wait_for_acks(100)
        for n in range(FAULTS):
            leader = _leader(cluster)
            if n % 2 == 0:
                cluster.nodes[leader].kill()
                time.sleep(rng.uniform(0, 0.5))
                w.wait_for_acks(50)  # a new leader takes the retries and new batches
                cluster.restart(leader)
            else:
                proc = cluster.nodes[leader].proc
                assert proc is not None
                proc.send_signal(signal.SIGSTOP)
                try:
                    _leader(cluster, avoid=leader)
                    w.wait_for_acks(50)
                finally:
                    proc.send_signal(signal.SIGCONT)
            eventually(
                lambda: len(cluster.partition(TP.topic, TP.partition).isr) == 3 or None, timeout=60
            )
            w.wait_for_acks(50)
    finally:
        w.stop()
    assert not w.errors, f"the idempotent producer failed records: {w.errors[:5]}"
    check_workload(cluster.bootstrap(), w)
