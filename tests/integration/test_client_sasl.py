"""Rillet's own Producer and Consumer over SASL (``transport="kafka"``) against a real
``rillet server start`` process with a SASL_PLAINTEXT and a SASL_SSL Kafka listener: PLAIN
users from ``sasl.jaas.config``, SCRAM-SHA-256 and SCRAM-SHA-512 users set with
``rillet configs``. Records produced over each mechanism are read back by a consumer over
SASL; a wrong password fails with the broker's SASL_AUTHENTICATION_FAILED, once: the client
does not connect again; calls that Rillet's client sends over gRPC (InitProducerId,
ListOffsets) are relayed by the Kafka SASL listener to the node's SASL gRPC listener, where
they authenticate with a session token."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rillet import Consumer, Producer
from rillet.client.cluster import METADATA_API_KEY, METADATA_VERSIONS
from rillet.client.kafka_connection import KafkaConnection
from rillet.client.sasl import ClientSasl
from rillet.errors import SaslAuthenticationFailedError
from rillet.security.certs import CertFiles, make_ca, make_cert
from rillet.types import TopicPartition
from tests.support.cluster import eventually
from tests.support.sasl_listeners import sasl_overrides
from tests.support.server_process import ServerProcess, free_port

pytestmark = pytest.mark.timeout(300)

PLAIN_USERS = {"alice": "alice-secret"}
SCRAM_USER, SCRAM_PASSWORD = "scrammer", "s3cret"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    d = tmp_path_factory.mktemp("client-sasl-certs")
    return make_cert(make_ca(d), d, "node")


class SaslServer(ServerProcess):
    """A node whose Kafka-protocol listeners are SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512):
    SASL_PLAINTEXT on ``sasl_port``, SASL_SSL (``certs``) on ``sasl_ssl_port``; gRPC on
    ``port`` and, SASL_PLAINTEXT, on ``grpc_sasl_port`` (where the Kafka listeners relay)."""

    def __init__(self, data_dir: Path, certs: CertFiles) -> None:
        super().__init__(data_dir)
        self.sasl_port, self.sasl_ssl_port = free_port(), free_port()
        self.grpc_sasl_port = free_port()
        self.overrides = {
            **sasl_overrides(
                self,
                {
                    "SASL": (self.sasl_port, "SASL_PLAINTEXT"),
                    "SECURE": (self.sasl_ssl_port, "SASL_SSL"),
                    "GSASL": (self.grpc_sasl_port, "SASL_PLAINTEXT"),
                },
                PLAIN_USERS,
                grpc=["GSASL"],
            ),
            "listener.name.secure.ssl.keystore.type": "PEM",
            "listener.name.secure.ssl.keystore.location": str(certs.keystore),
        }


def _authenticates(address: str, sasl: ClientSasl) -> bool:
    conn = KafkaConnection(address, "probe", 10_000, None, sasl)
    try:
        conn.call(METADATA_API_KEY, METADATA_VERSIONS, {"topics": []})
        return True
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, certs: CertFiles) -> Iterator[SaslServer]:
    s = SaslServer(tmp_path_factory.mktemp("client-sasl") / "data", certs)
    s.start()
    try:
        configs = subprocess.run(
            [sys.executable, "-m", "rillet.cli.main", "configs",
             "--bootstrap-server", s.bootstrap, "--alter", "--user", SCRAM_USER,
             "--add-config",
             f"SCRAM-SHA-256=[password={SCRAM_PASSWORD}],SCRAM-SHA-512=[password={SCRAM_PASSWORD}]"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert configs.returncode == 0, configs.stderr
        # The credentials reach the broker through the metadata log.
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            sasl = ClientSasl(mechanism, SCRAM_USER, SCRAM_PASSWORD)
            eventually(lambda sasl=sasl: _authenticates(f"localhost:{s.sasl_port}", sasl))
        yield s
    finally:
        s.stop()
    assert "Traceback" not in s.output(), s.output()[-5000:]


def sasl_configs(
    server: SaslServer, mechanism: str, certs: CertFiles | None = None, password: str = ""
) -> dict[str, Any]:
    """kafka-python's settings for the SASL_PLAINTEXT listener, or the SASL_SSL one with
    ``certs``: PLAIN as alice, SCRAM as the SCRAM user (``password`` replaces the right one)."""
    user = "alice" if mechanism == "PLAIN" else SCRAM_USER
    right = PLAIN_USERS["alice"] if mechanism == "PLAIN" else SCRAM_PASSWORD
    port = server.sasl_ssl_port if certs else server.sasl_port
    out: dict[str, Any] = {
        "bootstrap_servers": f"localhost:{port}",
        "transport": "kafka",
        "security_protocol": "SASL_SSL" if certs else "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password or right,
    }
    if certs:
        out["ssl_cafile"] = str(certs.ca)
    return out


def consume(configs: dict[str, Any], tp: TopicPartition, count: int) -> list[bytes]:
    """``count`` records of ``tp`` from offset 0, read over SASL."""
    values: list[bytes] = []
    with contextlib.closing(Consumer(**configs)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        for _ in range(200):
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            if len(values) >= count:
                break
    return values


@pytest.mark.parametrize(
    ("mechanism", "secure"),
    [
        ("PLAIN", False),
        ("SCRAM-SHA-256", False),
        ("SCRAM-SHA-512", False),
        ("PLAIN", True),
        ("SCRAM-SHA-512", True),
    ],
)
def test_records_produced_and_consumed_over_sasl(
    server: SaslServer, certs: CertFiles, mechanism: str, secure: bool
) -> None:
    topic = f"sasl-{mechanism.lower()}-{'ssl' if secure else 'plaintext'}"
    server.create_topic(topic, 1)
    configs = sasl_configs(server, mechanism, certs if secure else None)
    sent = [b"%s-%d" % (mechanism.encode(), i) for i in range(200)]
    with Producer(**configs, acks="all", enable_idempotence=False, linger_ms=5) as producer:
        futures = [producer.send(topic, value) for value in sent]
        producer.flush()
        offsets = [f.get(30).offset for f in futures]
        assert producer.transport == "kafka"
    assert offsets == list(range(200))
    assert consume(configs, TopicPartition(topic, 0), len(sent)) == sent


class CountingProxy:
    """A TCP proxy to ``port`` that counts the connections it is asked for."""

    def __init__(self, port: int) -> None:
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.accepted = 0
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self._listener.accept()
                self.accepted += 1  # before any byte is relayed: the client waits on it
                upstream = socket.create_connection(("localhost", self._target))
                self._sockets += [client, upstream]
                for src, dst in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        for s in self._sockets:
            s.close()


@pytest.mark.parametrize(
    ("mechanism", "reason"),
    [
        ("PLAIN", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", "Authentication failed: Invalid user credentials"),
    ],
)
def test_a_wrong_password_fails_authentication_once(
    server: SaslServer, mechanism: str, reason: str
) -> None:
    proxy = CountingProxy(server.sasl_port)
    configs = {
        **sasl_configs(server, mechanism, password="wrong"),
        "bootstrap_servers": proxy.address,
    }
    try:
        with Producer(**configs, enable_idempotence=False) as producer:
            messages = []
            for _ in range(2):
                with pytest.raises(SaslAuthenticationFailedError, match=reason) as failed:
                    producer.send("never-created", b"never")
                messages.append(str(failed.value))
        # The second send failed as the first had, without connecting again.
        assert proxy.accepted == 1
        user = "alice" if mechanism == "PLAIN" else SCRAM_USER
        expected = (
            f"[SASL_AUTHENTICATION_FAILED] SASL {mechanism} authentication of {user} with "
            f"{proxy.address} failed: {reason}"
        )
        assert messages == [expected, expected]
        consumer = Consumer(**configs)
        with (
            contextlib.closing(consumer),
            pytest.raises(SaslAuthenticationFailedError, match=reason),
        ):
            consumer.topics()
        assert proxy.accepted == 2
    finally:
        proxy.close()


def test_calls_over_grpc_are_relayed_to_the_sasl_grpc_listener(server: SaslServer) -> None:
    """An idempotent producer asks InitProducerId over gRPC, and a consumer without a
    position asks ListOffsets: the Kafka SASL listener relays both to the SASL gRPC
    listener, where the client authenticates again (SCRAM too) and is served."""
    server.create_topic("sasl-idempotent", 1)
    configs = sasl_configs(server, "SCRAM-SHA-256")
    with Producer(**configs, max_block_ms=30_000) as producer:
        assert producer.send("sasl-idempotent", b"idempotent").get(30).offset == 0
    with contextlib.closing(Consumer(**configs, auto_offset_reset="earliest")) as consumer:
        tp = TopicPartition("sasl-idempotent", 0)
        consumer.assign([tp])
        values: list[bytes] = []
        for _ in range(60):
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            if values:
                break
        assert values == [b"idempotent"]
