"""Producer ids on a real cluster (KIP-730): three combined voters and a broker-only node
each hand out ids from blocks the active controller gives them (the broker-only node and the
inactive voters ask it over AllocateProducerIds). No id is handed out twice: not by two
brokers, and not after the active controller is killed (kill -9) and another one takes over,
nor by a broker restarted meanwhile."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.test_server_producer_ids import init_producer_id
from tests.support.cluster import Cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("producer-ids"), voters=3, broker_only=[4])
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _ids(cluster: Cluster, node_id: int, n: int) -> list[int]:
    answers = [init_producer_id(cluster.nodes[node_id].bootstrap) for _ in range(n)]
    assert all(epoch == 0 for _, epoch in answers)
    return [pid for pid, _ in answers]


def test_no_id_is_handed_out_twice_across_brokers_and_a_controller_failover(
    cluster: Cluster,
) -> None:
    handed_out: dict[int, list[int]] = {n: _ids(cluster, n, 10) for n in (1, 2, 3, 4)}
    # Each broker hands out a run from a block of its own.
    blocks = {ids[0] // 1000 for ids in handed_out.values()}
    assert len(blocks) == 4
    for ids in handed_out.values():
        assert ids == list(range(ids[0], ids[0] + 10))

    old = cluster.controller_id()
    cluster.nodes[old].kill()
    assert cluster.controller_id() != old
    survivors = [n for n in (1, 2, 3) if n != old]
    # Past the end of their blocks: the next ones come from the new active controller.
    for n in survivors:
        handed_out[n] += _ids(cluster, n, 1000)
    cluster.nodes[4].kill()
    cluster.restart(4)
    handed_out[4] += _ids(cluster, 4, 10)

    every = [pid for ids in handed_out.values() for pid in ids]
    assert len(every) == len(set(every))
    cluster.restart(old)
    handed_out[old] += _ids(cluster, old, 10)
    every = [pid for ids in handed_out.values() for pid in ids]
    assert len(every) == len(set(every))
