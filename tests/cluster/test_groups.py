"""Consumer groups on a real 3-node cluster, with member processes that join, leave and are
killed with kill -9, and a coordinator whose broker is killed.

Checked from the members' own logs (:mod:`tests.support.group_member`): every acknowledged
record is processed; no partition has two owners at once (a member's ownership runs from its
``assigned`` entry to its ``revoked`` entry, or to its death); members whose partitions did not
move kept consuming; and committed offsets survive the coordinator's death."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from rillet import Producer, TopicPartition
from rillet.client.admin import AdminClient, NewTopic
from rillet.types import OffsetAndMetadata
from tests.support.cluster import Cluster, eventually

PARTITIONS = 6
GROUP_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "3000",
    "offsets.topic.num.partitions": "6",
    "offsets.topic.replication.factor": "3",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "100",
    "broker.session.timeout.ms": "2000",
}


@pytest.fixture(autouse=True)
def _no_member_outlives_its_test() -> Iterator[None]:
    yield
    while MemberProcess.RUNNING:
        proc = MemberProcess.RUNNING.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("groups"), voters=3)
    for n in c.nodes.values():
        n.extra.update(GROUP_SETTINGS)
    try:
        c.start()
        yield c
    finally:
        c.stop()


class MemberProcess:
    """Every one started is killed when the test ends (``RUNNING``), pass or fail."""

    RUNNING: ClassVar[list[subprocess.Popen[bytes]]] = []

    def __init__(
        self, cluster: Cluster, root: Path, name: str, topic: str, group: str = "g"
    ) -> None:
        self.name = name
        self.log = root / f"{name}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.group_member", cluster.bootstrap(), group,
             topic, str(self.log)],
            cwd=Path(__file__).resolve().parents[2],
        )  # fmt: skip
        self.killed_at: int | None = None
        MemberProcess.RUNNING.append(self.proc)

    def entries(self) -> list[dict[str, object]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for e in self.entries():
            parts = e.get("partitions", [])
            assert isinstance(parts, list)
            if e["event"] == "assigned":
                owned |= set(parts)
            elif e["event"] == "revoked":
                owned -= set(parts)
        return owned

    def values(self) -> list[str]:
        return [str(e["v"]) for e in self.entries() if e["event"] == "record"]

    def kill(self) -> None:
        self.killed_at = time.monotonic_ns()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def leave(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0


def intervals(m: MemberProcess) -> dict[int, list[tuple[int, int]]]:
    """Per partition, when ``m`` owned it (to its death or the end for an open interval)."""
    end_of_life = m.killed_at or 2**63
    out: dict[int, list[tuple[int, int]]] = {}
    start: dict[int, int] = {}
    for e in m.entries():
        t = int(e["t"])  # type: ignore[call-overload]
        for p in e.get("partitions", []):  # type: ignore[attr-defined]
            if e["event"] == "assigned":
                start[p] = t
            elif e["event"] == "revoked" and p in start:
                out.setdefault(p, []).append((start.pop(p), t))
    for p, t in start.items():
        out.setdefault(p, []).append((t, end_of_life))
    return out


def check_single_owner(members: list[MemberProcess]) -> None:
    spans = [(p, s, e, m.name) for m in members for p, ss in intervals(m).items() for s, e in ss]
    for p in range(PARTITIONS):
        mine = sorted((s, e, n) for q, s, e, n in spans if q == p)
        for (_, e1, n1), (s2, _, n2) in itertools.pairwise(mine):
            assert s2 >= e1, f"partition {p}: {n2} got it while {n1} still owned it"


def test_members_join_leave_and_die_and_every_record_is_processed(
    cluster: Cluster, tmp_path: Path
) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("work", PARTITIONS, 3)])
    eventually(lambda: all(p.leader >= 0 for p in _describe(cluster, "work")))
    acked: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        with Producer(bootstrap_servers=cluster.bootstrap(), acks="all", linger_ms=5) as p:
            i = 0
            while not stop.is_set():
                p.send("work", f"r{i}".encode()).get(timeout=60)
                acked.append(f"r{i}")
                i += 1
                time.sleep(0.002)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    members = [MemberProcess(cluster, tmp_path, f"m{i}", "work") for i in range(3)]
    eventually(lambda: sorted(len(m.owned()) for m in members) == [2, 2, 2] or None, timeout=60)
    steady = {m.name: m.owned() for m in members}
    seen_before = {m.name: len(m.entries()) for m in members}

    joiner = MemberProcess(cluster, tmp_path, "m3", "work")
    members.append(joiner)
    eventually(lambda: len(joiner.owned()) >= 1 or None, timeout=60)
    # Members that kept their partitions never stopped: nothing of theirs was revoked.
    untouched = [m for m in members[:3] if m.owned() == steady[m.name]]
    for m in untouched:
        later = m.entries()[seen_before[m.name] :]
        assert not any(e["event"] == "revoked" for e in later), m.name

    members[0].leave()
    members[1].kill()
    survivors = [members[2], joiner]
    eventually(lambda: sum(len(m.owned()) for m in survivors) == PARTITIONS or None, timeout=60)
    time.sleep(1)
    stop.set()
    producer.join(60)
    eventually(lambda: set(acked) <= {v for m in members for v in m.values()} or None, timeout=60)
    for m in survivors:
        m.leave()
    check_single_owner(members)
    seen = [v for m in members for v in m.values()]
    # At least once: only what the killed member read after its last commit is read again.
    assert len(seen) - len(set(seen)) <= len(members[1].values())


def test_killing_the_coordinators_broker_moves_the_group_and_keeps_its_offsets(
    cluster: Cluster, tmp_path: Path
) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("moved", PARTITIONS, 3)])
    eventually(lambda: all(p.leader >= 0 for p in _describe(cluster, "moved")))
    with Producer(bootstrap_servers=cluster.bootstrap(), acks="all") as p:
        for i in range(600):
            p.send("moved", f"v{i}".encode(), partition=i % PARTITIONS)
    member = MemberProcess(cluster, tmp_path, "solo", "moved", group="h")
    eventually(lambda: len(member.values()) >= 600 or None, timeout=60)
    with cluster.admin() as admin:
        eventually(lambda: sum(o.offset for o in _offsets(admin).values()) == 600 or None)
        before = _offsets(admin)
        (described,) = admin.describe_consumer_groups(["h"])
    coordinator = described.coordinator
    member.leave()
    cluster.nodes[coordinator].kill()
    try:
        alive = ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != coordinator)
        with AdminClient(bootstrap_servers=alive, request_timeout_ms=20000) as admin:
            after = eventually(lambda: _offsets(admin) or None, timeout=60)
            (moved,) = admin.describe_consumer_groups(["h"])
        assert moved.coordinator != coordinator
        assert after == before
    finally:
        cluster.restart(coordinator)


def _describe(cluster: Cluster, topic: str) -> list[object]:
    with cluster.admin() as admin:
        return list(admin.describe_topics([topic])[0].partitions)


def _offsets(admin: AdminClient) -> dict[TopicPartition, OffsetAndMetadata]:
    return admin.list_consumer_group_offsets("h")
