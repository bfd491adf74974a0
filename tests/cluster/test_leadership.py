"""Leadership in a real cluster: unclean leader election (by topic config, turned on while the
partition is offline, and by ``rillet leader-election --election-type unclean``), preferred
leader election by the tool, and automatic preferred leader balancing.

The unclean scenarios need both replicas of a partition down while the metadata quorum stays
up, so their cluster has three combined voters and two broker-only nodes (4 and 5) that hold
the replicas."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer, TopicPartition, decode_batches
from rillet.client.admin import ConfigResource, ConfigResourceType, NewTopic, PartitionInfo
from tests.support.cluster import Cluster, eventually


def _cli(*args: str, ok: bool = True) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode == 0) == ok, done.stdout + done.stderr
    return done.stdout


def _partition(cluster: Cluster, topic: str, p: int = 0, node: int | None = None) -> PartitionInfo:
    admin = cluster.nodes[node].admin_client() if node else cluster.admin()
    with admin:
        return admin.describe_topics([topic])[0].partitions[p]


def _on_disk(node_dir: Path, topic: str, p: int = 0) -> list[bytes]:
    values: list[bytes] = []
    for seg in sorted((node_dir / f"{topic}-{p}").glob("*.log")):
        for batch in decode_batches(seg.read_bytes(), allow_partial=True):
            values += [r.value or b"" for r in batch.records]
    return values


def _send(cluster: Cluster, topic: str, value: bytes) -> int:
    producer = Producer(
        bootstrap_servers=cluster.bootstrap(), acks="all", delivery_timeout_ms=30_000
    )
    try:
        return producer.send(topic, value).get(timeout=40).offset
    finally:
        producer.close()


def _poll_into(consumer: Consumer, out: list[tuple[int, bytes]]) -> int:
    """Poll once into ``out`` (offset, value); returns how many records it holds."""
    for records in consumer.poll(timeout_ms=200).values():
        out += [(r.offset, r.value or b"") for r in records]
    return len(out)


def _read_all(cluster: Cluster, topic: str) -> list[bytes]:
    consumer = Consumer(bootstrap_servers=cluster.bootstrap(), auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    seen: list[bytes] = []
    try:
        end = consumer.end_offsets([tp])[tp]
        while consumer.position(tp) < end:
            for records in consumer.poll(timeout_ms=5000).values():
                seen += [r.value or b"" for r in records]
    finally:
        consumer.close()
    return seen


@pytest.fixture(scope="module")
def five(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("leadership"), voters=3, broker_only=[4, 5])
    for n in c.nodes.values():
        n.extra.update(
            {
                "replica.lag.time.max.ms": "3000",
                "replica.fetch.wait.max.ms": "100",
                "auto.leader.rebalance.enable": "false",
            }
        )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_unclean_election_when_the_only_in_sync_replica_is_gone(five: Cluster) -> None:
    """Replicas 4 and 5. Broker 5 stops, "lost" is written to 4 alone, then 4 stops: the
    partitions are offline. Broker 5 comes back out of sync and may not lead until unclean
    election is allowed: by the topic's config for one topic, by the tool for the other.
    "lost" is gone, as unclean election warns; broker 4 returns as a follower and truncates
    it; nothing written after is lost."""
    topics = ("by-config", "by-tool")
    with five.admin() as admin:
        admin.create_topics([NewTopic(t, replica_assignments={0: [4, 5]}) for t in topics])
    for t in topics:
        eventually(lambda t=t: _partition(five, t).isr == (4, 5) or None)
        assert _send(five, t, b"kept") == 0
    assert five.nodes[5].stop() == 0
    for t in topics:
        eventually(lambda t=t: _partition(five, t).isr == (4,) or None)
        assert _send(five, t, b"lost") == 1
    # A consumer reads "lost" (committed while 4 was the only replica in sync)...
    reader = Consumer(bootstrap_servers=five.bootstrap(), auto_offset_reset="earliest")
    reader.assign([TopicPartition("by-tool", 0)])
    read: list[tuple[int, bytes]] = []
    eventually(lambda: _poll_into(reader, read) >= 2 or None)
    assert read == [(0, b"kept"), (1, b"lost")]
    assert five.nodes[4].stop() == 0
    five.restart(5)

    # Broker 5 is back and unfenced; in the same metadata it is not the leader (not in sync).
    def unfenced_on_node_1() -> bool:
        with five.nodes[1].admin_client() as admin:
            brokers = admin.describe_cluster()["brokers"]
        return any(b["node_id"] == 5 and not b["is_fenced"] for b in brokers)

    eventually(unfenced_on_node_1)
    for t in topics:
        info = _partition(five, t, node=1)
        assert (info.leader, info.isr) == (-1, (4,))
    out = _cli("topics", "--describe", "--unavailable-partitions",
               "--bootstrap-server", five.bootstrap())  # fmt: skip
    assert all(f"Topic: {t}\tPartition: 0\tLeader: none" in out for t in topics), out

    # One topic allows unclean election; the controller elects broker 5 as it commits that.
    with five.admin() as admin:
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    "by-config",
                    {"unclean.leader.election.enable": "true"},
                )
            ]
        )
    eventually(lambda: _partition(five, "by-config").leader == 5 or None)
    # The other is elected by the tool, whatever its config says.
    bootstrap = ("--bootstrap-server", five.bootstrap())
    out = _cli("leader-election", *bootstrap, "--election-type", "unclean",
               "--topic", "by-tool", "--partition", "0")  # fmt: skip
    assert "Successfully completed leader election (UNCLEAN) for partitions by-tool-0" in out
    eventually(lambda: _partition(five, "by-tool").leader == 5 or None)
    logs = "".join(five.nodes[i].output() for i in (1, 2, 3))
    for t in topics:
        assert f"Setting new leader for topic {t} partition 0 to 5 using an unclean election" in (
            logs
        )
        assert _partition(five, t).isr == (5,)
        assert _read_all(five, t) == [b"kept"]
        assert _send(five, t, b"after") == 1
    # ...and learns that the new leader's log diverged below its position (KIP-320): it
    # goes back to offset 1 and reads "after" there instead of skipping it.
    eventually(lambda: _poll_into(reader, read) >= 3 or None)
    assert read[2] == (1, b"after")
    reader.close()

    # Broker 4 returns as a follower: it truncates "lost" and copies "after".
    five.restart(4)
    for t in topics:
        eventually(lambda t=t: _partition(five, t).isr == (5, 4) or None, timeout=60)
        eventually(lambda t=t: _on_disk(five.nodes[4].data_dir, t) == [b"kept", b"after"] or None)
        assert _read_all(five, t) == [b"kept", b"after"]

    # Preferred leader election by the tool moves leadership back to 4.
    out = _cli("leader-election", *bootstrap, "--election-type", "PREFERRED",
               "--all-topic-partitions")  # fmt: skip
    assert "Successfully completed leader election (PREFERRED) for partitions" in out
    assert all(f"{t}-0" in out for t in topics), out
    for t in topics:
        eventually(lambda t=t: _partition(five, t).leader == 4 or None)
    out = _cli("leader-election", *bootstrap, "--election-type", "preferred",
               "--topic", "by-tool", "--partition", "0")  # fmt: skip
    assert "Valid replica already elected for partitions by-tool-0" in out


def _plan(topic: str, partition: int, replicas: list[int]) -> str:
    target = {"topic": topic, "partition": partition, "replicas": replicas}
    return json.dumps({"version": 1, "partitions": [target]})


def test_reassignment_moves_a_partition_to_other_brokers(five: Cluster, tmp_path: Path) -> None:
    """``rillet reassign-partitions``: moving-0 goes from brokers 1 and 2 to 4 and 5 under
    load; the new replicas catch up, take over, and the old ones are deleted."""
    with five.admin() as admin:
        admin.create_topics([NewTopic("moving", replica_assignments={0: [1, 2]})])
    eventually(lambda: len(_partition(five, "moving").isr) == 2 or None)
    producer = Producer(bootstrap_servers=five.bootstrap(), acks="all")
    values = [f"m{i}".encode() for i in range(200)]
    for v in values[:100]:
        producer.send("moving", v)
    producer.flush()
    bootstrap = ("--bootstrap-server", five.bootstrap())
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"moving"}]}')
    out = _cli("reassign-partitions", *bootstrap, "--generate", "--topics-to-move-json-file",
               str(topics), "--broker-list", "4,5").splitlines()  # fmt: skip
    assert out[0] == "Current partition replica assignment"
    assert json.loads(out[1])["partitions"] == [
        {"topic": "moving", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
    ]
    assert out[3] == "Proposed partition reassignment configuration"
    assert sorted(json.loads(out[4])["partitions"][0]["replicas"]) == [4, 5]

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [4, 5]}]}
        )
    )
    out_text = _cli("reassign-partitions", *bootstrap, "--execute",
                    "--reassignment-json-file", str(plan))  # fmt: skip
    assert "Save this to use as the --reassignment-json-file option during rollback" in out_text
    assert out_text.splitlines()[-1] == "Successfully started partition reassignment for moving-0"
    for v in values[100:]:  # writes go on during the move
        producer.send("moving", v)
    producer.flush()
    producer.close()

    def verified() -> bool:
        out = _cli("reassign-partitions", *bootstrap, "--verify",
                   "--reassignment-json-file", str(plan))  # fmt: skip
        return "Reassignment of partition moving-0 is completed." in out

    eventually(verified, timeout=60)
    info = _partition(five, "moving")
    assert (info.replicas, sorted(info.isr), info.leader) == ((4, 5), [4, 5], 4)
    # A new leader learns the high watermark from its followers' next fetches: until then
    # its end offset (what a consumer reads to) may lag the records every replica has.
    eventually(lambda: _read_all(five, "moving") == values or None)
    for n in (4, 5):
        eventually(lambda n=n: _on_disk(five.nodes[n].data_dir, "moving") == values or None)
    for n in (1, 2):
        eventually(lambda n=n: not (five.nodes[n].data_dir / "moving-0").exists() or None)
    assert (
        _cli("reassign-partitions", *bootstrap, "--list") == "No partition reassignments found.\n"
    )
    out_text = _cli("reassign-partitions", *bootstrap, "--cancel",
                    "--reassignment-json-file", str(plan))  # fmt: skip
    assert out_text == "None of the specified partition reassignments are active.\n"
    # A broker that does not exist is refused before anything moves.
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [4, 9]}]}
        )
    )
    _cli("reassign-partitions", *bootstrap, "--execute", "--reassignment-json-file", str(plan),
         ok=False)  # fmt: skip


RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b"}


@pytest.fixture(scope="module")
def balancing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("balancing"), voters=3)
    for n in c.nodes.values():
        n.extra.update(
            {
                "replica.lag.time.max.ms": "3000",
                "replica.fetch.wait.max.ms": "100",
                "leader.imbalance.check.interval.seconds": "1",
                "broker.rack": RACKS[n.node_id],
            }
        )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_leadership_returns_to_the_preferred_replicas_automatically(balancing: Cluster) -> None:
    with balancing.admin() as admin:
        admin.create_topics([NewTopic("spread", 3, 3)])

    def settled() -> list[PartitionInfo] | None:
        with balancing.admin() as admin:
            parts = admin.describe_topics(["spread"])[0].partitions
        ok = len(parts) == 3 and all(len(p.isr) == 3 and p.leader == p.replicas[0] for p in parts)
        return list(parts) if ok else None

    parts = eventually(settled)
    victim = parts[0].leader
    assert balancing.nodes[victim].stop() == 0
    eventually(lambda: _partition(balancing, "spread").leader not in (-1, victim) or None)
    balancing.restart(victim)
    # Once it is back in the ISRs, the controller's periodic check (1 s here) finds broker
    # `victim` leads none of the partitions it is preferred for, and moves them back.
    eventually(settled, timeout=60)


def test_replicas_are_placed_across_racks(balancing: Cluster) -> None:
    with balancing.admin() as admin:
        brokers = admin.describe_cluster()["brokers"]
        assert {b["node_id"]: b["rack"] for b in brokers} == RACKS
        admin.create_topics([NewTopic("racked", 6, 2)])

    def placed() -> list[PartitionInfo] | None:
        with balancing.admin() as admin:
            parts = admin.describe_topics(["racked"])[0].partitions
        return list(parts) if len(parts) == 6 else None

    parts = eventually(placed)
    # Two replicas on two racks: broker 3, alone in rack-b, holds a replica of every
    # partition; leadership is still spread evenly.
    assert all(sorted(RACKS[b] for b in p.replicas) == ["rack-a", "rack-b"] for p in parts)
    assert Counter(p.replicas[0] for p in parts) == {1: 2, 2: 2, 3: 2}
