"""Talking Kafka's binary protocol to a test broker: a broker with a Kafka listener named
KAFKA beside its gRPC one, and raw request/response helpers over the schema codec."""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rillet import _core
from tests.support.mini_broker import MiniBroker

__all__ = ["call", "closed", "connect", "kafka_broker", "kafka_port", "read_frame"]


def kafka_broker(
    data_dir: Path, topics: Mapping[str, int], overrides: Mapping[str, str] | None = None
) -> MiniBroker:
    """A one-node broker serving gRPC on PLAINTEXT and Kafka's protocol on KAFKA."""
    return MiniBroker(
        data_dir,
        dict(topics),
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "grpc.listener.names": "PLAINTEXT",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        },
    )


def kafka_port(broker: MiniBroker) -> int:
    return broker.server.bound["KAFKA"]


def connect(broker: MiniBroker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", kafka_port(broker)), timeout=30)


def read_frame(s: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def call(s: socket.socket, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """Send one request and read its response (correlation id 11, client id "raw")."""
    s.sendall(_core.kafka_encode_request(api_key, version, 11, "raw", body))
    correlation_id, response = _core.kafka_decode_response(api_key, version, read_frame(s))
    assert correlation_id == 11
    return response


def closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True
