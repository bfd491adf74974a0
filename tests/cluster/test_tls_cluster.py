"""A TLS-only cluster: three nodes whose every listener (gRPC, Kafka's protocol, the
controller quorum) is SSL with client certificates required. Replication and the quorum run
over TLS; the Python client and kcat reach it only with the right CA and a certificate it
trusts, and everything else is refused with a clear error."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.client.admin import AdminClient, NewTopic
from rillet.errors import KafkaError, SslAuthenticationError
from rillet.security.certs import CertFiles, make_ca, make_cert
from tests.support.cluster import Cluster

RECORDS = 500


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    d = tmp_path_factory.mktemp("certs")
    ca = make_ca(d)
    out = {name: make_cert(ca, d, name) for name in ("node1", "node2", "node3", "alice")}
    now = datetime.now(UTC)
    out["expired"] = make_cert(
        ca, d, "expired", not_before=now - timedelta(days=10), not_after=now - timedelta(days=1)
    )
    out["stranger"] = make_cert(make_ca(d / "other"), d / "other", "stranger")
    return out


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, certs: dict[str, CertFiles]
) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("tls"), voters=3, kafka=True)
    for i, n in c.nodes.items():
        n.extra.update(
            {
                "listener.security.protocol.map": "PLAINTEXT:SSL,KAFKA:SSL,CONTROLLER:SSL",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(certs[f"node{i}"].keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certs[f"node{i}"].ca),
                "ssl.client.auth": "required",
            }
        )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _tls(files: CertFiles, ca: Path | None = None) -> dict[str, Any]:
    return {
        "security_protocol": "SSL",
        "ssl_cafile": str(ca or files.ca),
        "ssl_certfile": str(files.cert),
        "ssl_keyfile": str(files.key),
    }


def _list_topics(cluster: Cluster, **configs: Any) -> list[str]:
    with AdminClient(
        bootstrap_servers=cluster.bootstrap(), request_timeout_ms=5000, **configs
    ) as admin:
        return admin.list_topics()


def test_the_cluster_replicates_over_tls_and_serves_clients_with_the_right_ca(
    cluster: Cluster, certs: dict[str, CertFiles]
) -> None:
    alice = _tls(certs["alice"])
    with AdminClient(bootstrap_servers=cluster.bootstrap(), **alice) as admin:
        admin.create_topics([NewTopic("secure", 1, 3, topic_configs={"min.insync.replicas": "3"})])
    # acks=all with min.insync.replicas=3: every record is on the three nodes, fetched by the
    # followers over the TLS inter-broker listener.
    with Producer(bootstrap_servers=cluster.bootstrap(), acks="all", **alice) as producer:
        futures = [producer.send("secure", b"%d" % i) for i in range(RECORDS)]
        producer.flush()
        assert all(f.get(30).offset == i for i, f in enumerate(futures))
    # Through a Kafka listener (its relay, over TLS) as well as the gRPC one.
    for bootstrap in (cluster.kafka_bootstrap(), cluster.bootstrap()):
        consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **alice)
        tp = TopicPartition("secure", 0)
        consumer.assign([tp])
        values: list[bytes] = []
        while len(values) < RECORDS:
            batch = consumer.poll(timeout_ms=10_000).get(tp, [])
            assert batch, "no records over TLS"
            values += [r.value or b"" for r in batch]
        consumer.close()
        assert values == [b"%d" % i for i in range(RECORDS)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_speaks_kafkas_protocol_over_tls_with_its_certificate(
    cluster: Cluster, certs: dict[str, CertFiles]
) -> None:
    alice = certs["alice"]
    base = ["kcat", "-b", cluster.kafka_bootstrap(), "-X", "security.protocol=ssl"]
    trusted = [
        *base,
        "-X",
        f"ssl.ca.location={alice.ca}",
        "-X",
        f"ssl.certificate.location={alice.cert}",
        "-X",
        f"ssl.key.location={alice.key}",
    ]
    lines = "".join(f"k{i}\n" for i in range(100))
    subprocess.run([*trusted, "-P", "-t", "kcat-tls"], input=lines.encode(), check=True, timeout=60)
    out = subprocess.run(
        [*trusted, "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.decode().splitlines() == lines.splitlines()
    # Another CA's certificate: kcat does not trust the brokers, and says why.
    stranger = certs["stranger"]
    refused = subprocess.run(
        [*base, "-X", f"ssl.ca.location={stranger.ca}", "-L", "-m", "5"],
        capture_output=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "certificate verify failed" in refused.stderr.decode()


@pytest.mark.parametrize(
    ("who", "ca_of"),
    [
        ("stranger", "alice"),  # a certificate of another CA: the broker does not trust it
        ("alice", "stranger"),  # trusts another CA: the client does not trust the broker
        ("expired", "alice"),  # an expired certificate
    ],
)
def test_a_client_with_the_wrong_certificate_is_refused_with_a_clear_error(
    cluster: Cluster, certs: dict[str, CertFiles], who: str, ca_of: str
) -> None:
    with pytest.raises(SslAuthenticationError) as raised:
        _list_topics(cluster, **_tls(certs[who], certs[ca_of].ca))
    assert "TLS" in str(raised.value), raised.value


def test_a_client_without_a_certificate_or_without_tls_is_refused(
    cluster: Cluster, certs: dict[str, CertFiles]
) -> None:
    no_cert: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": str(certs["alice"].ca)}
    with pytest.raises(SslAuthenticationError, match="does not accept this client's certificate"):
        _list_topics(cluster, **no_cert)
    with pytest.raises(KafkaError, match="closes plaintext"):
        _list_topics(cluster)
    # Kafka's protocol in plaintext to the TLS port: the broker closes the connection.
    host, port = cluster.kafka_bootstrap().split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"\x00\x00\x00\x0e\x00\x12\x00\x03\x00\x00\x00\x01\x00\x04test")
        assert s.recv(100) in (b"",) or not s.recv(100)
