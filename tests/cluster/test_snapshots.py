"""Metadata snapshots on a real cluster (KIP-630): three combined voters and a broker-only
observer that snapshot every few kilobytes of metadata and keep no more metadata log than
they must. Every node writes snapshots and lets its metadata log go behind them; a broker
that was down while the log it missed went away loads the leader's snapshot over
FetchSnapshot, ending up with the topics created meanwhile and without the local logs of
topics deleted meanwhile; a voter restarts from its own snapshot."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.client.admin import NewTopic
from rillet.raft.metadata_log import METADATA_TOPIC, parse_snapshot_name
from tests.support.cluster import Cluster, ClusterNode, eventually

SNAPSHOT_OFTEN = {
    "metadata.log.max.record.bytes.between.snapshots": "2000",
    "metadata.max.retention.bytes": "0",
    "metadata.log.segment.bytes": "2048",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("snapshots"), voters=3, broker_only=[4])
    for n in c.nodes.values():
        n.extra.update(SNAPSHOT_OFTEN)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _metadata_dir(node: ClusterNode) -> Path:
    return node.data_dir / f"{METADATA_TOPIC}-0"


def _snapshots(node: ClusterNode) -> list[tuple[int, int]]:
    return sorted(
        sid for f in _metadata_dir(node).iterdir() if (sid := parse_snapshot_name(f.name))
    )


def _segments(node: ClusterNode) -> list[int]:
    return sorted(int(f.name[:20]) for f in _metadata_dir(node).glob("*.log"))


def _first_segment(node: ClusterNode) -> int:
    return _segments(node)[0]


def _create(cluster: Cluster, names: list[str], on: int | None = None) -> None:
    """Create topics ten to a request, so that no metadata batch outgrows a segment."""
    with cluster.admin() as admin:
        for i in range(0, len(names), 10):
            results = admin.create_topics(
                [
                    NewTopic(n, 1, 1) if on is None else NewTopic(n, replica_assignments={0: [on]})
                    for n in names[i : i + 10]
                ]
            )
            assert all(e is None for e in results.values()), results


def _grow_until(cluster: Cluster, prefix: str, done: Callable[[], bool]) -> int:
    """Create topics ten at a time until ``done()`` (nodes snapshot at byte counts of their
    own, so how much metadata that takes varies a little); returns how many."""
    for round_ in range(30):
        deadline = time.monotonic() + (2 if round_ else 0)
        while True:
            if done():
                return round_ * 10
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        _create(cluster, [f"{prefix}{round_ * 10 + i}" for i in range(10)])
    raise AssertionError(f"still not done after 300 topics ({prefix}*)")


def _quietly(check: Callable[[], bool]) -> Callable[[], bool]:
    def run() -> bool:
        try:
            return check()
        except (OSError, IndexError, ValueError):
            return False  # a file went away while listing

    return run


def test_every_node_snapshots_and_lets_the_metadata_log_go(cluster: Cluster) -> None:
    def cut_everywhere() -> bool:
        # The log line comes just after the segments go: wait for both, or a check that
        # lands in between sees the files gone and the line not yet written.
        return all(
            len(_snapshots(n)) >= 1
            and _first_segment(n) > 0
            and "metadata log now starts at offset" in n.output()
            for n in cluster.nodes.values()
        )

    _grow_until(cluster, "a", _quietly(cut_everywhere))
    for n in cluster.nodes.values():
        # Only snapshots at or after the log start are kept.
        assert _snapshots(n)[0][0] >= _first_segment(n)
        assert "wrote metadata snapshot" in n.output()


def test_a_broker_that_missed_the_log_loads_the_leaders_snapshot(cluster: Cluster) -> None:
    _create(cluster, ["doomed", "kept"], on=4)
    broker = cluster.nodes[4]
    eventually(lambda: (broker.data_dir / "doomed-0").is_dir(), timeout=30)
    with Producer(bootstrap_servers=cluster.bootstrap(), acks="all") as producer:
        sent = [producer.send("kept", f"k{i}".encode()) for i in range(20)]
        assert [f.get(timeout=20).offset for f in sent] == list(range(20))
    broker.kill()
    with cluster.admin() as admin:
        admin.delete_topics(["doomed"])
    # Grow the metadata until the voters' logs start past everything the broker had (its
    # log ends within a segment of its last segment's base).
    seen = _segments(broker)[-1] + 60
    created = _grow_until(
        cluster,
        "b",
        _quietly(lambda: all(_first_segment(cluster.nodes[v]) > seen for v in (1, 2, 3))),
    )
    mark = len(broker.output())
    cluster.restart(4)
    eventually(lambda: "fetched from the leader" in broker.output()[mark:], timeout=60)
    with broker.admin_client() as admin:

        def caught_up() -> bool:
            names = set(admin.list_topics())
            return {"kept", f"b{created - 1}"} <= names and "doomed" not in names

        assert eventually(caught_up, timeout=60)
    # The deleted topic's log went as a stray; the kept one's stayed.
    assert eventually(lambda: not (broker.data_dir / "doomed-0").exists(), timeout=30)
    assert "deleted the stray log of doomed-0" in broker.output()[mark:]
    # The log it still hosts kept its records and is served again.
    consumer = Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("kept", 0)])
    seen: list[bytes] = []
    try:
        while len(seen) < 20:
            batch = consumer.poll(timeout_ms=10_000)
            assert batch, f"only {len(seen)} of 20 records came back"
            seen += [r.value or b"" for records in batch.values() for r in records]
    finally:
        consumer.close()
    assert seen == [f"k{i}".encode() for i in range(20)]


def test_a_voter_restarts_from_its_own_snapshot(cluster: Cluster) -> None:
    voter = cluster.nodes[2]
    voter.kill()
    mark = len(voter.output())
    cluster.restart(2)
    assert "loaded metadata snapshot" in voter.output()[mark:]
    _create(cluster, ["after-restart"])
    with voter.admin_client() as admin:
        assert eventually(lambda: "after-restart" in admin.list_topics(), timeout=30)
