"""Broker configs for a test node with SASL listeners beside its own plaintext gRPC one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rillet.security.sasl import PLAIN_LOGIN_MODULE
from tests.support.server_process import ServerProcess

__all__ = ["sasl_overrides"]


def sasl_overrides(
    server: ServerProcess,
    listeners: Mapping[str, tuple[int, str]],
    users: Mapping[str, str],
    *,
    grpc: Sequence[str] = (),
    mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
) -> dict[str, str]:
    """The overrides of a node serving PLAINTEXT gRPC on ``server.port`` (its inter-broker
    listener, where tests set it up as ``User:ANONYMOUS``) and ``listeners`` (name: port and
    security protocol), Kafka's protocol unless named in ``grpc``; PLAIN's users are
    ``users``."""
    endpoints = [f"PLAINTEXT://localhost:{server.port}"] + [
        f"{name}://localhost:{port}" for name, (port, _) in listeners.items()
    ]
    protocols = ["PLAINTEXT:PLAINTEXT"] + [
        f"{name}:{protocol}" for name, (_, protocol) in listeners.items()
    ]
    jaas_users = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return {
        "listeners": ",".join([*endpoints, f"CONTROLLER://localhost:{server.cport}"]),
        "advertised.listeners": ",".join(endpoints),
        "listener.security.protocol.map": ",".join([*protocols, "CONTROLLER:PLAINTEXT"]),
        "grpc.listener.names": ",".join(["PLAINTEXT", *grpc]),
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": mechanisms,
        "sasl.jaas.config": f"{PLAIN_LOGIN_MODULE} required {jaas_users};",
    }
