"""A network that can really be cut: each node in its own Linux network namespace with its own
address on a bridge, as separate hosts would be.

Node ``i`` gets the namespace ``<prefix>n<i>`` and the address ``10.201.0.<i>``; the root
namespace, where the test and its clients run, is ``10.201.0.254`` on the bridge and
reaches every node. :meth:`Network.cut` drops every packet between two nodes, both ways,
with iptables DROP rules inside their namespaces: silently, as a pulled cable (TCP retries
and times out; nothing is refused). The test's own connections are never cut, so a client
can go on talking to a node that the other nodes no longer hear, as in Jepsen's partitions.

Needs root, ``ip`` (iproute2) and ``iptables``; :func:`unavailable` says why not otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable

__all__ = ["Network", "unavailable"]

SUBNET = "10.201.0"
ROOT_ADDRESS = f"{SUBNET}.254"


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


class Network:
    """The bridge and the namespaces of ``node_ids``; :meth:`close` removes them all."""

    def __init__(self, node_ids: Iterable[int]) -> None:
        tag = f"r{os.getpid() % 100_000}"
        self.bridge = f"{tag}br"
        self._prefix = tag
        self.namespaces: dict[int, str] = {}
        self._cuts: set[tuple[int, int]] = set()
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{ROOT_ADDRESS}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            # Docker's FORWARD policy is DROP; with br_netfilter loaded, frames crossing the
            # bridge go through it too.
            _run("iptables", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT")
            for i in node_ids:
                self._add(i)
        except BaseException:
            self.close()
            raise

    def address(self, node_id: int) -> str:
        return f"{SUBNET}.{node_id}"

    def _add(self, node_id: int) -> None:
        if not 1 <= node_id <= 253:
            raise ValueError(f"node id {node_id} has no address in {SUBNET}.0/24")
        ns = f"{self._prefix}n{node_id}"
        veth = f"{self._prefix}v{node_id}"
        _run("ip", "netns", "add", ns)
        self.namespaces[node_id] = ns
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        _run("ip", "-n", ns, "addr", "add", f"{self.address(node_id)}/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")

    def exec_prefix(self, node_id: int) -> list[str]:
        """What runs a command inside the node's namespace."""
        return ["ip", "netns", "exec", self.namespaces[node_id]]

    def _rules(self, action: str, a: int, b: int) -> None:
        ns, peer = self.namespaces[a], self.address(b)
        _run("ip", "netns", "exec", ns, "iptables", action, "INPUT", "-s", peer, "-j", "DROP")
        _run("ip", "netns", "exec", ns, "iptables", action, "OUTPUT", "-d", peer, "-j", "DROP")

    def cut(self, a: int, b: int) -> None:
        """Nothing passes between nodes ``a`` and ``b`` any more, either way."""
        key = (min(a, b), max(a, b))
        if key in self._cuts:
            return
        self._rules("-A", a, b)
        self._rules("-A", b, a)
        self._cuts.add(key)

    def isolate(self, node_id: int) -> None:
        """Cut ``node_id`` from every other node (the test's clients still reach it)."""
        for other in self.namespaces:
            if other != node_id:
                self.cut(node_id, other)

    def heal(self) -> None:
        for a, b in sorted(self._cuts):
            self._rules("-D", a, b)
            self._rules("-D", b, a)
        self._cuts.clear()

    def close(self) -> None:
        for ns in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces.clear()
        subprocess.run(
            ["iptables", "-D", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"],
            capture_output=True,
        )
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
