"""Real multi-node Rillet clusters for tests: each node a ``rillet server start`` process
with its own server.properties, all on 127.0.0.1 with free ports."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from rillet.client.admin import AdminClient, PartitionInfo
from tests.support.netns import Network
from tests.support.server_process import KAFKA_LISTENER, ServerProcess, free_port

T = TypeVar("T")

# Fast failure detection for tests (Kafka's defaults: 1000 / 2000 / 9000 / 2000 ms).
FAST = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}


class ClusterNode(ServerProcess):
    """One node of a cluster: ``roles`` is ``process.roles``; ``voters`` the shared
    ``controller.quorum.voters`` string (set by :class:`Cluster`)."""

    def __init__(
        self,
        root: Path,
        node_id: int,
        roles: str,
        *,
        host: str = "127.0.0.1",
        exec_prefix: Sequence[str] = (),
        kafka: bool = False,
    ) -> None:
        super().__init__(root / f"node{node_id}", kafka=kafka)
        self.node_id = node_id
        self.roles = roles
        self.host = host
        self.exec_prefix = list(exec_prefix)
        self.voters = ""
        self.extra: dict[str, str] = {}
        self.properties = root / f"node{node_id}.properties"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def kafka_bootstrap(self) -> str:
        assert self.kport is not None, "started without a Kafka listener"
        return f"{self.host}:{self.kport}"

    def admin_client(self) -> AdminClient:
        return AdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000)

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    def write_properties(self) -> None:
        listeners = []
        if "broker" in self.roles:
            listeners.append(f"PLAINTEXT://{self.host}:{self.port}")
            if self.kport is not None:
                listeners.append(f"KAFKA://{self.host}:{self.kport}")
        advertised = ",".join(listeners)
        if self.is_controller:
            listeners.append(f"CONTROLLER://{self.host}:{self.cport}")
        props = {
            "process.roles": self.roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "log.dirs": str(self.data_dir),
            **FAST,
        }
        if "broker" in self.roles:
            props["advertised.listeners"] = advertised
            if self.kport is not None:
                props.update(KAFKA_LISTENER)
        props.update(self.extra)
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def format(self, cluster_id: str) -> None:
        self.write_properties()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "rillet.cli.main",
                "storage",
                "format",
                "-c",
                str(self.properties),
                "-t",
                cluster_id,
            ],
            check=True,
            capture_output=True,
        )

    def argv(self) -> list[str]:
        return [
            *self.exec_prefix,
            sys.executable,
            "-m",
            "rillet.cli.main",
            "server",
            "start",
            str(self.properties),
        ]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    """Nodes ``1..controllers`` are combined (broker and controller) voters unless
    ``brokers`` names broker-only nodes too."""

    def __init__(
        self,
        root: Path,
        voters: int = 3,
        broker_only: Iterable[int] = (),
        *,
        network: Network | None = None,
        kafka: bool = False,
    ) -> None:
        """``kafka``: every broker serves Kafka's protocol too (listener KAFKA)."""
        roles = {i: "broker,controller" for i in range(1, voters + 1)}
        roles.update({i: "broker" for i in broker_only})
        self.network = network
        self.nodes = {
            i: ClusterNode(
                root,
                i,
                r,
                host=network.address(i) if network else "127.0.0.1",
                exec_prefix=network.exec_prefix(i) if network else (),
                kafka=kafka and "broker" in r,
            )
            for i, r in roles.items()
        }
        voter_string = ",".join(
            f"{n.node_id}@{n.host}:{n.cport}" for n in self.nodes.values() if n.is_controller
        )
        for n in self.nodes.values():
            n.voters = voter_string
        self.cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"

    def start(self) -> None:
        for n in self.nodes.values():
            n.format(self.cluster_id)
        marks = {i: n.launch() for i, n in self.nodes.items()}
        for i, n in self.nodes.items():
            n.wait_started(marks[i])

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.wait_started(node.launch())

    def stop(self) -> None:
        for n in self.nodes.values():
            n.kill()

    def alive(self) -> list[ClusterNode]:
        return [n for n in self.nodes.values() if n.alive and "broker" in n.roles]

    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.alive())

    def kafka_bootstrap(self) -> str:
        return ",".join(n.kafka_bootstrap for n in self.alive())

    def admin(self) -> AdminClient:
        return AdminClient(bootstrap_servers=self.bootstrap(), request_timeout_ms=10000)

    def partition(self, topic: str, partition: int, *, avoid: int | None = None) -> PartitionInfo:
        """One partition as the live brokers other than ``avoid`` describe it (one paused or
        cut off has a stale view and may not answer)."""
        bootstrap = ",".join(n.bootstrap for i, n in self.nodes.items() if n.alive and i != avoid)
        with AdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000) as admin:
            return admin.describe_topics([topic])[0].partitions[partition]

    def controller_id(self) -> int:
        """The active controller as the live brokers agree on it, once they do."""
        return eventually(lambda: _agreed_controller(self))


def _agreed_controller(cluster: Cluster) -> int | None:
    seen = set()
    for n in cluster.alive():
        with n.admin_client() as admin:
            seen.add(admin.describe_cluster()["controller_id"])
    if len(seen) == 1 and (leader := seen.pop()) in cluster.nodes and cluster.nodes[leader].alive:
        return int(leader)
    return None


def eventually(check: Callable[[], T | None], timeout: float = 30, interval: float = 0.1) -> T:
    """Poll ``check`` until it returns something other than None (or False)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result is not None and result is not False:
                return result
        except Exception as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s (last error: {last!r})")


__all__ = ["FAST", "Cluster", "ClusterNode", "eventually", "free_port"]
