"""Listeners and the quorum's voters: ``NAME://host:port`` endpoints, the listener to
security-protocol map, and ``id@host:port`` voter entries, parsed with Kafka's messages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rillet.config.keys import INT_MAX

__all__ = [
    "DEFAULT_LISTENERS",
    "DEFAULT_SECURITY_PROTOCOL_MAP",
    "PROCESS_ROLES",
    "SECURITY_PROTOCOLS",
    "Endpoint",
    "HostPort",
    "parse_listener",
    "parse_quorum_voters",
    "parse_security_protocol_map",
]


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_LISTENERS = "PLAINTEXT://:9092,CONTROLLER://:9093"
DEFAULT_SECURITY_PROTOCOL_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
)
PROCESS_ROLES = ("broker", "controller")

_HOST = r"\[?([0-9a-zA-Z\-%._:]*)\]?"
_LISTENER_RE = re.compile(r"^([^:/\s,]+)://" + _HOST + r":(-?[0-9]+)$")
_HOST_PORT_RE = re.compile(r"^" + _HOST + r":([0-9]+)$")
_VOTER_FORMAT = "Each voter entry must be in the form {id}@{host}:{port}."


class HostPort(NamedTuple):
    """A host (``""`` for every interface) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Endpoint:
    """One listener: ``NAME://host:port``. An empty host means every interface."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.listener_name}://{HostPort(self.host, self.port)}"

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets)."""
        return str(HostPort(self.host, self.port))

    @property
    def bind_address(self) -> str:
        """The address to bind, e.g. for ``grpc.aio.Server.add_insecure_port``: an empty host
        binds every interface (``[::]``, which gRPC makes dual-stack)."""
        return str(HostPort(self.host or "::", self.port))


def parse_listener(s: str) -> tuple[str, str, int]:
    """``NAME://host:port`` as (upper-cased name, host, port); raise ValueError."""
    m = _LISTENER_RE.match(s.strip())
    if m is None or not 0 <= int(m.group(3)) <= 65535:
        raise ValueError(f"Unable to parse {s} to a broker endpoint")
    return m.group(1).upper(), m.group(2), int(m.group(3))


def parse_quorum_voters(entries: Sequence[str]) -> dict[int, HostPort]:
    """``["1@host:9093", ...]`` as ``{1: HostPort("host", 9093), ...}``; raise ValueError."""
    voters: dict[int, HostPort] = {}
    for entry in entries:
        node, at, address = entry.strip().partition("@")
        m = _HOST_PORT_RE.match(address)
        if not at or "@" in address or m is None or not node.strip().isdigit() or not m[1]:
            raise ValueError(f"{_VOTER_FORMAT} Found {entry}")
        node_id, port = int(node), int(m[2])
        if not 0 < port <= 65535:
            raise ValueError(f"Invalid port {port} in voter entry {entry}")
        if node_id > INT_MAX:
            raise ValueError(f"Invalid node id {node} in voter entry {entry}")
        if node_id in voters:
            raise ValueError(f"Duplicate voter id {node_id} in {','.join(entries)}")
        voters[node_id] = HostPort(m[1], port)
    return voters


def parse_security_protocol_map(entries: Sequence[str]) -> dict[str, str]:
    """``["CONTROLLER:PLAINTEXT", ...]`` as ``{"CONTROLLER": "PLAINTEXT"}``; raise ValueError."""
    result: dict[str, str] = {}
    for entry in entries:
        name, colon, protocol = entry.strip().partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name or ":" in protocol:
            raise ValueError(f"Map entry '{entry}' is not in the form LISTENER_NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"No enum constant for security protocol {protocol}; one of: "
                + ", ".join(SECURITY_PROTOCOLS)
            )
        if name in result:
            raise ValueError(f"Duplicate listener name {name}")
        result[name] = protocol
    return result
