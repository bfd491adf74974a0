"""The Docker cluster of ``docker/``: the image built from Debian packages and the host's
wheel (``docker/build.sh``), started with compose, broken with ``docker kill`` and
``docker network disconnect`` under an acks=all workload from the host, then checked as the
other fault tests are (:mod:`tests.support.workload`).

Skipped, with the reason, where there is no Docker engine, no docker-compose or no root
(debootstrap builds the base image).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import TopicPartition
from rillet.client.admin import AdminClient, NewTopic, PartitionInfo
from tests.support.cluster import eventually
from tests.support.workload import Workload, check_workload

DOCKER = Path(__file__).resolve().parents[2] / "docker"
TP = TopicPartition("docked", 0)
# Brokers fenced a second after their heartbeats stop (the compose files default to Kafka's).
FAST = {"BROKER_SESSION_TIMEOUT_MS": "1000", "BROKER_HEARTBEAT_INTERVAL_MS": "250"}


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "building the base image (debootstrap) needs root"
    if shutil.which("docker") is None or shutil.which("docker-compose") is None:
        return "docker and docker-compose are not installed"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "the Docker engine is not running"
    return None


# One worker at a time changes iptables and creates networks (xdist group "network").
pytestmark = [
    pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable())),
    pytest.mark.xdist_group("network"),
]


def _run(*argv: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, cwd=DOCKER, env=env, timeout=900)
    assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done.stdout


class Compose:
    """One compose project of ``docker/``; nodes are named by their compose service."""

    def __init__(
        self, file: str, addresses: dict[str, str], settings: dict[str, str] | None = None
    ) -> None:
        self.file = file
        self.project = f"rillet{uuid.uuid4().hex[:8]}"
        self.addresses = addresses  # service -> broker address, for brokers
        self.env = {**os.environ, **(settings or {}), "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg"}

    def compose(self, *args: str) -> str:
        return _run("docker-compose", "-p", self.project, "-f", self.file, *args, env=self.env)

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service).strip()

    def bootstrap(self, avoid: str | None = None) -> str:
        return ",".join(a for s, a in self.addresses.items() if s != avoid)

    def service_of(self, broker_id: int) -> str:
        return next(s for s in self.addresses if s.endswith(f"-{broker_id}"))


@pytest.fixture(scope="module")
def image() -> str:
    _run(str(DOCKER / "build.sh"))
    return "rillet:dev"


def _up(compose: Compose) -> Iterator[Compose]:
    try:
        compose.compose("up", "-d")
        with AdminClient(bootstrap_servers=compose.bootstrap(), request_timeout_ms=5000) as a:

            def ready() -> bool:
                brokers = a.describe_cluster()["brokers"]
                unfenced = [b for b in brokers if not b["is_fenced"]]
                return len(unfenced) == len(compose.addresses)

            eventually(ready, timeout=60)
        yield compose
    finally:
        # pytest shows a test's output only when it fails: the nodes' logs, to find out why.
        print(compose.compose("logs", "--no-color", "--tail", "400"))
        compose.compose("down", "-v", "--timeout", "5")


@pytest.fixture
def combined(image: str) -> Iterator[Compose]:
    yield from _up(
        Compose("compose.yaml", {f"rillet-{i}": f"10.202.0.1{i}:9092" for i in (1, 2, 3)})
    )


@pytest.fixture
def split(image: str) -> Iterator[Compose]:
    # Kafka's default session (9 s): brokers that are slow to learn of a new controller (an
    # observer hears of it only when its fetch to the dead one times out) keep their session.
    brokers = {f"broker-{i}": f"10.203.0.1{i}:9092" for i in (4, 5, 6)}
    yield from _up(Compose("compose-split.yaml", brokers))


def _partition(c: Compose, avoid: str | None = None) -> PartitionInfo:
    with AdminClient(bootstrap_servers=c.bootstrap(avoid), request_timeout_ms=5000) as admin:
        return admin.describe_topics([TP.topic])[0].partitions[0]


def _create(c: Compose) -> None:
    with AdminClient(bootstrap_servers=c.bootstrap(), request_timeout_ms=10000) as admin:
        admin.create_topics([NewTopic(TP.topic, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    eventually(lambda: len(_partition(c).isr) == 3 or None)


def test_killing_and_cutting_off_containers_loses_nothing(combined: Compose) -> None:
    c = combined
    _create(c)
    w = Workload(c.bootstrap(), TP, "d")
    try:
        w.wait_for_acks(50)
        # docker kill: the leader's container dies; another replica leads and takes writes.
        old = c.service_of(_partition(c).leader)
        _run("docker", "kill", c.container(old))
        eventually(lambda: _partition(c, avoid=old).leader not in (-1, int(old[-1])) or None)
        w.wait_for_acks(50)
        c.compose("start", old)
        eventually(lambda: len(_partition(c).isr) == 3 or None, timeout=60)
        # docker network disconnect: the leader is cut off from everyone, clients included.
        cut = c.service_of(_partition(c).leader)
        network = f"{c.project}_rillet"
        _run("docker", "network", "disconnect", network, c.container(cut))
        try:
            eventually(lambda: _partition(c, avoid=cut).leader not in (-1, int(cut[-1])) or None)
            w.wait_for_acks(50)
        finally:
            address = c.addresses[cut].split(":")[0]
            _run("docker", "network", "connect", "--ip", address, network, c.container(cut))
        eventually(lambda: len(_partition(c).isr) == 3 or None, timeout=60)
        w.wait_for_acks(50)
    finally:
        w.stop()
    check_workload(c.bootstrap(), w)


def test_three_controllers_and_three_brokers(split: Compose) -> None:
    c = split
    _create(c)
    w = Workload(c.bootstrap(), TP, "s")
    try:
        w.wait_for_acks(50)
        # The active controller dies; the others elect one that takes metadata changes.
        with AdminClient(bootstrap_servers=c.bootstrap(), request_timeout_ms=5000) as admin:
            controller = int(admin.describe_cluster()["controller_id"])
            _run("docker", "kill", c.compose("ps", "-q", f"controller-{controller}").strip())

            def replaced() -> bool:
                return int(admin.describe_cluster()["controller_id"]) not in (-1, controller)

            eventually(replaced)
            admin.create_topics([NewTopic("after-controller-kill", 1, 3)])
        w.wait_for_acks(50)
    finally:
        w.stop()
    check_workload(c.bootstrap(), w)
