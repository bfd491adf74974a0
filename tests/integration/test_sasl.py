"""SASL/PLAIN and SCRAM on Kafka-protocol listeners of a real ``rillet server start`` process:
one SASL_PLAINTEXT listener and one SASL_SSL listener, reached by unmodified Kafka clients
(kcat, confluent-kafka, kafka-python) with the right credentials. SCRAM credentials are set
and described with Kafka's admin API and live in the metadata log. A wrong password is
answered SASL_AUTHENTICATION_FAILED, a client that skips SASL is disconnected, and both are
logged as Kafka logs a failed authentication."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from rillet.security.certs import CertFiles, make_ca, make_cert
from tests.support.cluster import eventually
from tests.support.sasl_listeners import sasl_overrides
from tests.support.server_process import ServerProcess, free_port

with warnings.catch_warnings():
    # kafka-python reads its JSON schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer

pytestmark = pytest.mark.timeout(300)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    d = tmp_path_factory.mktemp("sasl-certs")
    return make_cert(make_ca(d), d, "node")


class SaslServer(ServerProcess):
    """A node whose Kafka-protocol listeners are SASL (PLAIN, the users of USERS): SASL on
    ``sasl_port``, SECURE (SASL_SSL, ``certs``) on ``sasl_ssl_port``; gRPC on ``port``."""

    def __init__(self, data_dir: Path, certs: CertFiles) -> None:
        super().__init__(data_dir)
        self.sasl_port, self.sasl_ssl_port = free_port(), free_port()
        self.overrides = {
            **sasl_overrides(
                self,
                {
                    "SASL": (self.sasl_port, "SASL_PLAINTEXT"),
                    "SECURE": (self.sasl_ssl_port, "SASL_SSL"),
                },
                USERS,
            ),
            "listener.name.secure.ssl.keystore.type": "PEM",
            "listener.name.secure.ssl.keystore.location": str(certs.keystore),
        }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, certs: CertFiles) -> Iterator[SaslServer]:
    s = SaslServer(tmp_path_factory.mktemp("sasl") / "data", certs)
    s.start()
    s.create_topic("secured", 1)
    yield s
    s.stop()


def _sasl(
    server: SaslServer, user: str, password: str, certs: CertFiles | None = None
) -> dict[str, str]:
    """confluent-kafka's (librdkafka's) settings for the SASL_PLAINTEXT listener, or the
    SASL_SSL one with ``certs``."""
    port = server.sasl_ssl_port if certs else server.sasl_port
    out = {
        "bootstrap.servers": f"localhost:{port}",
        "security.protocol": "sasl_ssl" if certs else "sasl_plaintext",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }
    if certs:
        out["ssl.ca.location"] = str(certs.ca)
    return out


def test_confluent_kafka_produces_and_consumes_over_sasl_plain_and_sasl_ssl(
    server: SaslServer, certs: CertFiles
) -> None:
    for secure in (None, certs):
        p = CKProducer({**_sasl(server, "alice", USERS["alice"], secure), "acks": "all"})
        for i in range(50):
            p.produce("secured", value=b"ck-%d" % i)
        assert p.flush(30) == 0
    c = CKConsumer(
        {**_sasl(server, "bob", USERS["bob"], certs), "group.id": "sasl-group",
         "auto.offset.reset": "earliest"}
    )  # fmt: skip
    c.subscribe(["secured"])
    values: list[bytes] = []
    try:
        while len(values) < 100:
            m = c.poll(10)
            assert m is not None, "no records over SASL_SSL"
            assert m.error() is None, m.error()
            values.append(m.value() or b"")
    finally:
        c.close()
    assert sorted(values) == sorted([b"ck-%d" % i for i in range(50)] * 2)


def test_kafka_python_authenticates_with_sasl_plain(server: SaslServer) -> None:
    common = {
        "bootstrap_servers": f"localhost:{server.sasl_port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "bob",
        "sasl_plain_password": USERS["bob"],
    }
    producer = KafkaProducer(**common)
    producer.send("secured", b"kafka-python").get(timeout=30)
    producer.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_a_wrong_password_and_a_client_without_sasl_are_refused_and_logged(
    server: SaslServer,
) -> None:
    seen = len(server.output())
    bootstrap = f"localhost:{server.sasl_port}"
    wrong = subprocess.run(
        ["kcat", "-b", bootstrap, "-X", "security.protocol=sasl_plaintext",
         "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice",
         "-X", "sasl.password=wrong", "-L", "-m", "5"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert wrong.returncode != 0
    assert "Authentication failed: Invalid username or password" in wrong.stderr
    skipped = subprocess.run(
        ["kcat", "-b", bootstrap, "-L", "-m", "3"], capture_output=True, text=True, timeout=60
    )
    assert skipped.returncode != 0
    eventually(
        lambda: (
            server.output()[seen:].count("Failed authentication with 127.0.0.1 on SASL") >= 2
            or None
        )
    )
    assert "SASL authentication failed" in server.output()[seen:]
    assert "Unexpected Kafka request of type 3 during SASL handshake" in server.output()[seen:]


def test_scram_credentials_set_with_kafkas_admin_api_authenticate_clients(
    server: SaslServer, certs: CertFiles
) -> None:
    admin = AdminClient(_sasl(server, "alice", USERS["alice"]))
    upserts = [
        UserScramCredentialUpsertion(
            "scrammer", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"s3cret"
        ),
        UserScramCredentialUpsertion(
            "scrammer", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"s3cret"
        ),
    ]
    for future in admin.alter_user_scram_credentials(upserts, request_timeout=30).values():
        future.result()
    described = admin.describe_user_scram_credentials(["scrammer"])["scrammer"].result()
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192),
        (ScramMechanism.SCRAM_SHA_512, 4096),
    ]

    def scram(mechanism: str, password: str, secure: CertFiles | None = None) -> dict[str, str]:
        return {
            **_sasl(server, "scrammer", password, secure),
            "sasl.mechanisms": mechanism,
        }

    for mechanism, secure in (("SCRAM-SHA-256", None), ("SCRAM-SHA-512", certs)):
        p = CKProducer({**scram(mechanism, "s3cret", secure), "acks": "all"})
        p.produce("secured", value=mechanism.encode())
        assert p.flush(30) == 0
    # A wrong password: librdkafka reports the broker's SASL_AUTHENTICATION_FAILED.
    errors: list[KafkaError] = []
    p = CKProducer(
        {**scram("SCRAM-SHA-256", "wrong"), "error_cb": errors.append, "message.timeout.ms": 5000}
    )
    p.produce("secured", value=b"never")
    p.flush(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert "Invalid user credentials" in " ".join(e.str() for e in errors)
