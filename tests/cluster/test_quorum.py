"""A real cluster on loopback: three combined nodes (voters 1-3) and a broker-only node (4).

The metadata quorum runs over gRPC between the nodes; brokers register and heartbeat over the
ControllerService/QuorumService RPCs; admin requests sent to any broker are forwarded to the
active controller. Killing the active controller (kill -9) elects another, and the killed
node catches up when it comes back."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.client.admin import AdminClient, NewTopic, TopicDescription
from tests.support.cluster import Cluster, ClusterNode, eventually


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"), voters=3, broker_only=[4])
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


def _unfenced_brokers(cluster: Cluster) -> set[int] | None:
    with cluster.admin() as admin:
        brokers = admin.describe_cluster()["brokers"]
    return {b["node_id"] for b in brokers if not b["is_fenced"]} or None


def _described(admin: AdminClient, name: str) -> TopicDescription | None:
    topic = admin.describe_topics([name])[0]
    return topic if topic.partitions else None


def test_every_node_registers_and_agrees_on_the_controller(cluster: Cluster) -> None:
    assert eventually(lambda: _unfenced_brokers(cluster) == {1, 2, 3, 4} or None)
    assert cluster.controller_id() in (1, 2, 3)


def test_metadata_quorum_describe_shows_voters_and_observers(cluster: Cluster) -> None:
    leader = cluster.controller_id()
    status = _cli(
        "metadata-quorum", "--bootstrap-server", cluster.nodes[4].bootstrap, "describe", "--status"
    )
    fields = dict(line.split(":", 1) for line in status.splitlines())
    assert fields["ClusterId"].strip() == cluster.cluster_id
    assert fields["LeaderId"].strip() == str(leader)
    assert fields["CurrentVoters"].strip() == "[1,2,3]"
    assert "4" in fields["CurrentObservers"]
    assert int(fields["HighWatermark"]) > 0

    def replicated() -> list[list[str]] | None:
        out = _cli(
            "metadata-quorum",
            "--bootstrap-server",
            cluster.nodes[1].bootstrap,
            "describe",
            "--replication",
        )
        rows = [line.split() for line in out.splitlines()]
        body = rows[1:]
        # Every voter within reach of the leader's log end (the quorum keeps moving:
        # heartbeats write records).
        return rows if len(body) >= 4 and all(int(r[2]) < 50 for r in body) else None

    rows = eventually(replicated)
    assert rows[0] == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert rows[1][0] == str(leader) and rows[1][-1] == "Leader"
    statuses = {int(r[0]): r[-1] for r in rows[1:]}
    assert statuses == {
        **{v: "Follower" for v in (1, 2, 3) if v != leader},
        leader: "Leader",
        4: "Observer",
    }


def test_admin_requests_to_any_broker_reach_the_controller(cluster: Cluster) -> None:
    leader = cluster.controller_id()
    follower = next(n for n in (1, 2, 3, 4) if n != leader)
    with cluster.nodes[follower].admin_client() as admin:
        admin.create_topics([NewTopic("forwarded", num_partitions=4, replication_factor=1)])
        # The broker learns of the topic from the metadata log, just after the commit.
        topic = eventually(lambda: _described(admin, "forwarded"))
    leaders = {p.leader for p in topic.partitions}
    assert len(topic.partitions) == 4 and leaders <= {1, 2, 3, 4}
    # Every node's metadata image gets the topic from the log.
    for n in cluster.alive():
        with n.admin_client() as admin:
            assert eventually(lambda a=admin: "forwarded" in a.list_topics() or None)


def test_produce_and_consume_across_partition_leaders(cluster: Cluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("spread", num_partitions=8, replication_factor=1)])
    producer = Producer(bootstrap_servers=cluster.bootstrap(), acks="all")
    futures = [producer.send("spread", f"v{i}".encode(), partition=i % 8) for i in range(400)]
    producer.flush()
    producer.close()
    assert all(f.get(timeout=10).offset >= 0 for f in futures)
    consumer = Consumer(bootstrap_servers=cluster.bootstrap(), auto_offset_reset="earliest")
    consumer.assign([TopicPartition("spread", p) for p in range(8)])
    seen: list[bytes] = []
    while len(seen) < 400:
        batch = consumer.poll(timeout_ms=2000)
        assert batch, f"only {len(seen)} records came back"
        seen += [r.value for records in batch.values() for r in records]
    consumer.close()
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(400))


def test_a_replicated_topic_gets_every_replica_in_sync(cluster: Cluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("replicated", num_partitions=2, replication_factor=3)])
        described = eventually(
            lambda: (
                (t := _described(admin, "replicated"))
                and all(len(p.isr) == 3 for p in t.partitions)
                and t
            )
        )
    for p in described.partitions:
        assert len(p.replicas) == 3 and p.leader in p.replicas


def test_killing_the_active_controller_elects_another(cluster: Cluster) -> None:
    old = cluster.controller_id()
    cluster.nodes[old].kill()
    new = cluster.controller_id()
    assert new != old and new in (1, 2, 3)
    # The new controller takes metadata changes, forwarded from the broker-only node.
    with cluster.nodes[4].admin_client() as admin:
        admin.create_topics([NewTopic("after-failover", num_partitions=2, replication_factor=1)])
    # The old controller's broker is fenced once its session expires.
    assert eventually(lambda: old not in (_unfenced_brokers(cluster) or {old}) or None)

    # Back again, it rejoins as a follower, catches up and is unfenced.
    cluster.restart(old)
    assert eventually(lambda: _unfenced_brokers(cluster) == {1, 2, 3, 4} or None)
    with cluster.nodes[old].admin_client() as admin:
        assert "after-failover" in admin.list_topics()
    assert cluster.controller_id() == new


def test_a_node_of_another_cluster_is_refused(tmp_path: Path, cluster: Cluster) -> None:
    stranger = ClusterNode(tmp_path, 9, "broker")
    stranger.voters = cluster.nodes[1].voters
    stranger.format("QzE5Njc0MjMxNzIzNDM5OQ")
    stranger.launch()
    try:
        log = eventually(
            lambda: stranger.output() if "refuses this node" in stranger.output() else None
        )
        assert "INCONSISTENT_CLUSTER_ID" in log or "belongs to cluster" in log
        assert "QzE5Njc0MjMxNzIzNDM5OQ" in log and cluster.cluster_id in log
        # It never joins: the cluster does not list it.
        with cluster.admin() as admin:
            assert 9 not in {b["node_id"] for b in admin.describe_cluster()["brokers"]}
    finally:
        stranger.kill()


def test_a_node_whose_voter_list_disagrees_is_refused(tmp_path: Path, cluster: Cluster) -> None:
    """Node 5 thinks it is a fourth voter; the voters' lists do not have it."""
    rogue = ClusterNode(tmp_path, 5, "broker,controller")
    rogue.voters = f"{cluster.nodes[1].voters},5@127.0.0.1:{rogue.cport}"
    rogue.format(cluster.cluster_id)
    rogue.launch()
    try:
        log = eventually(
            lambda: rogue.output() if "INCONSISTENT_VOTER_SET" in rogue.output() else None
        )
        assert "does not list this node as a voter" in log
        # The quorum is unchanged and still takes metadata changes.
        with cluster.admin() as admin:
            assert {v.replica_id for v in admin.describe_metadata_quorum().voters} == {1, 2, 3}
            admin.create_topics([NewTopic("voters-agree", 1, 1)])
    finally:
        rogue.kill()


def test_a_second_broker_with_a_taken_node_id_is_refused(tmp_path: Path, cluster: Cluster) -> None:
    # Broker 4 must hold a live session first: an expired one may be taken over (as in Kafka).
    assert eventually(lambda: _unfenced_brokers(cluster) == {1, 2, 3, 4} or None)
    twin = ClusterNode(tmp_path, 4, "broker")
    twin.voters = cluster.nodes[1].voters
    twin.format(cluster.cluster_id)
    twin.launch()
    try:
        log = eventually(
            lambda: twin.output() if "DUPLICATE_BROKER_REGISTRATION" in twin.output() else None
        )
        assert "broker registration failed" in log
        assert "started (cluster id" not in twin.output()
        # The broker that holds the id keeps its registration and keeps serving.
        assert eventually(lambda: _unfenced_brokers(cluster) == {1, 2, 3, 4} or None)
        with cluster.nodes[4].admin_client() as admin:
            assert "spread" in admin.list_topics()
    finally:
        twin.kill()


def test_a_broker_that_cannot_reach_the_quorum_waits_and_says_so(tmp_path: Path) -> None:
    lonely = ClusterNode(tmp_path, 7, "broker")
    lonely.voters = "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"  # nothing listens there
    lonely.format("MkU3OEVBNTcwNTJENDM2Qg")
    lonely.launch()
    try:
        log = eventually(
            lambda: (
                lonely.output() if "No active controller is known yet" in lonely.output() else None
            )
        )
        assert "broker registration failed" in log
        assert lonely.alive and "started (cluster id" not in log
    finally:
        lonely.kill()
