"""The Prometheus endpoint (``metrics.port``) of real nodes: scraped while records are
produced, its values move as they should. Bytes in equal the bytes the partitions' logs
grew by, messages in the records produced; a killed follower makes the leader report its
partitions under-replicated, and they are not once it is back; the active controller is the
one node that says it is. The quorum's view, the Raft commit latency, gRPC calls, log
flushes, the followers' long polls in the fetch purgatory and a group's lag (on its
coordinator only, equal to what the consumer-groups tool computes) show on real nodes."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.client.admin import NewTopic
from rillet.types import OffsetAndMetadata
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
        n.extra.update(
            {
                "metrics.port": str(ports[i]),
                "metrics.host": "127.0.0.1",
                # The flusher looks for due logs often (Kafka's default: never).
                "log.flush.scheduler.interval.ms": "100",
            }
        )
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


def _produce(c: Cluster, topic: str, n: int) -> None:
    producer = Producer(bootstrap_servers=c.bootstrap(), acks="all", linger_ms=5)
    for i in range(n):
        producer.send(topic, value=b"r%06d" % i)
    producer.flush(60)
    producer.close()


def test_the_quorum_grpc_calls_and_flushes_are_measured(
    cluster: tuple[Cluster, dict[int, int]],
) -> None:
    c, ports = cluster
    with c.admin() as admin:
        admin.create_topics([NewTopic("flushed", 1, 3, topic_configs={"flush.messages": "1"})])
    leader = eventually(lambda: ((p := c.partition("flushed", 0)).leader >= 0 and p) or None).leader
    _produce(c, "flushed", 50)
    controller = c.controller_id()
    samples = {i: scrape(p) for i, p in ports.items()}
    for i, m in samples.items():
        assert m[f'rillet_node_info{{node_id="{i}",process_roles="broker,controller"}}'] == 1
        assert m["kafka_server_kafkaserver_brokerstate"] == 3  # RUNNING
        assert m["kafka_server_raft_metrics_current_leader"] == controller
        state = "leader" if i == controller else "follower"
        assert m[f'kafka_server_raft_metrics_current_state{{state="{state}"}}'] == 1
    # Creating the topic committed metadata records the active controller appended.
    assert samples[controller]["kafka_server_raft_metrics_commit_latency_ms_count"] >= 1
    # The producer's calls reached the leader over gRPC, and answered OK.
    produce_ok = (
        'grpc_server_handled_total{grpc_code="OK",grpc_method="Produce",'
        'grpc_service="rillet.v1.ProduceService",grpc_type="unary"}'
    )
    assert samples[leader][produce_ok] >= 1
    # flush.messages=1: the flusher fsyncs the partition, on the leader and on followers.
    flushes = "kafka_log_logflushstats_logflushrateandtimems_count"
    for i in ports:
        eventually(lambda i=i: scrape(ports[i])[flushes] >= 1 or None)


def test_followers_long_polls_wait_in_the_fetch_purgatory(
    cluster: tuple[Cluster, dict[int, int]],
) -> None:
    c, ports = cluster
    with c.admin() as admin:
        admin.create_topics([NewTopic("polled", 1, 3)])
    leader = eventually(
        lambda: ((p := c.partition("polled", 0)).leader >= 0 and len(p.isr) == 3 and p) or None
    ).leader
    waiting = (
        'kafka_server_delayedoperationpurgatory_numdelayedoperations{delayedOperation="Fetch"}'
    )
    eventually(lambda: scrape(ports[leader])[waiting] >= 1 or None)


def test_a_group_s_lag_is_shown_by_its_coordinator(
    cluster: tuple[Cluster, dict[int, int]],
) -> None:
    c, ports = cluster
    with c.admin() as admin:
        admin.create_topics([NewTopic("lagging", 2, 3)])
    eventually(lambda: c.partition("lagging", 1).leader >= 0 or None)
    _produce(c, "lagging", 100)
    ends = {p: _end_offset(c, "lagging", p) for p in (0, 1)}
    assert sum(ends.values()) == 100
    with Consumer(bootstrap_servers=c.bootstrap(), group_id="lagger") as consumer:
        tps = [TopicPartition("lagging", p) for p in (0, 1)]
        consumer.assign(tps)
        consumer.commit({tps[0]: OffsetAndMetadata(ends[0] // 2), tps[1]: OffsetAndMetadata(0)})

    lag = 'kafka_consumergroup_lag{group="lagger",partition="%d",topic="lagging"}'
    expected = {lag % 0: ends[0] - ends[0] // 2, lag % 1: ends[1]}

    def shown_by() -> dict[int, dict[str, float]] | None:
        """The nodes exporting the group's series, once one shows the expected lag (a
        follower's high watermark may trail the leader's by a fetch)."""
        shown = {
            i: {k: v for k, v in scrape(p).items() if 'group="lagger"' in k}
            for i, p in ports.items()
        }
        shown = {i: m for i, m in shown.items() if m}
        if any(all(m.get(k) == v for k, v in expected.items()) for m in shown.values()):
            return shown
        return None

    shown = eventually(shown_by)
    assert len(shown) == 1  # only the group's coordinator exports it
    (m,) = shown.values()
    current = 'kafka_consumergroup_current_offset{group="lagger",partition="0",topic="lagging"}'
    assert m[current] == ends[0] // 2


def _end_offset(c: Cluster, topic: str, partition: int) -> int:
    """The partition's end offset as a consumer sees it (its high watermark)."""
    with Consumer(bootstrap_servers=c.bootstrap()) as consumer:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
