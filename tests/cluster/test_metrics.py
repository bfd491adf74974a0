"""The Prometheus endpoint (``metrics.port``) of real nodes: scraped while records are
produced, its values move as they should. Bytes in equal the bytes the partitions' logs
grew by, messages in the records produced; a killed follower makes the leader report its
partitions under-replicated, and they are not once it is back; the active controller is the
one node that says it is."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Producer
from rillet.client.admin import NewTopic
from tests.support.cluster import Cluster, eventually
from tests.support.server_process import free_port

pytestmark = pytest.mark.timeout(300)

_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$")


def scrape(port: int) -> dict[str, float]:
    """``name{labels}`` -> value of every sample the endpoint serves."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[int, int]]]:
    c = Cluster(tmp_path_factory.mktemp("metrics"), voters=3)
    ports = {i: free_port() for i in c.nodes}
    for i, n in c.nodes.items():
        n.extra.update({"metrics.port": str(ports[i]), "metrics.host": "127.0.0.1"})
    try:
        c.start()
        yield c, ports
    finally:
        c.stop()


def _log_bytes(root: Path, topic: str) -> int:
    return sum(f.stat().st_size for f in root.glob(f"{topic}-*/*.log"))


def test_bytes_and_records_in_match_what_was_produced(
    cluster: tuple[Cluster, dict[int, int]],
) -> None:
    c, ports = cluster
    with c.admin() as admin:
        admin.create_topics([NewTopic("measured", 1, 3)])
    leader = eventually(
        lambda: ((p := c.partition("measured", 0)).leader >= 0 and p) or None
    ).leader
    before = scrape(ports[leader])
    assert before.get('kafka_server_brokertopicmetrics_bytesin_total{topic="measured"}', 0) == 0
    producer = Producer(bootstrap_servers=c.bootstrap(), acks="all", linger_ms=5)
    for i in range(2000):
        producer.send("measured", value=b"v%06d" % i)
    producer.flush(60)
    producer.close()
    after = scrape(ports[leader])
    grown = _log_bytes(c.nodes[leader].data_dir, "measured")
    assert after['kafka_server_brokertopicmetrics_bytesin_total{topic="measured"}'] == grown
    assert after['kafka_server_brokertopicmetrics_messagesin_total{topic="measured"}'] == 2000
    assert after['kafka_server_brokertopicmetrics_bytesin_total{topic=""}'] >= grown
    assert after["kafka_server_replicamanager_leadercount"] >= 1
    # Exactly one node is the active controller.
    actives = [
        scrape(p)["kafka_controller_kafkacontroller_activecontrollercount"] for p in ports.values()
    ]
    assert sorted(actives) == [0, 0, 1]


def test_a_killed_follower_shows_as_under_replicated_until_it_returns(
    cluster: tuple[Cluster, dict[int, int]],
) -> None:
    c, ports = cluster
    with c.admin() as admin:
        admin.create_topics([NewTopic("watched", 1, 3)])
    info = eventually(
        lambda: ((p := c.partition("watched", 0)).leader >= 0 and len(p.isr) == 3 and p) or None
    )
    leader = info.leader
    follower = next(r for r in info.replicas if r != leader)
    urp = "kafka_server_replicamanager_underreplicatedpartitions"
    assert scrape(ports[leader])[urp] == 0
    c.nodes[follower].kill()
    try:
        eventually(lambda: scrape(ports[leader])[urp] >= 1 or None, timeout=60)
    finally:
        c.restart(follower)
    eventually(lambda: scrape(ports[leader])[urp] == 0 or None, timeout=60)
