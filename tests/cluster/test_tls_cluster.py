"""A TLS-only cluster: three nodes whose every listener (gRPC, Kafka's protocol, the
controller quorum) is SSL with client certificates required. Replication and the quorum run
over TLS; the Python client and kcat reach it only with the right CA and a certificate it
trusts, and everything else is refused with a clear error."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.client.admin import AdminClient, NewTopic
from rillet.errors import KafkaError, SslAuthenticationError
from rillet.security.certs import CertFiles, make_ca, make_cert
from tests.support.cluster import Cluster, eventually
from tests.support.rust_client import build_rust_client

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
    # Over Kafka's protocol too, from Rillet's client and from its consumer below.
    with Producer(bootstrap_servers=cluster.kafka_bootstrap(), acks="all", **alice) as producer:
        assert producer.send("secure", b"%d" % RECORDS).get(30).offset == RECORDS
        assert producer.transport == "kafka"
    # Through a Kafka listener (Kafka's protocol over TLS) as well as the gRPC one.
    for bootstrap in (cluster.kafka_bootstrap(), cluster.bootstrap()):
        consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **alice)
        tp = TopicPartition("secure", 0)
        consumer.assign([tp])
        values: list[bytes] = []
        while len(values) < RECORDS + 1:
            batch = consumer.poll(timeout_ms=10_000).get(tp, [])
            assert batch, "no records over TLS"
            values += [r.value or b"" for r in batch]
        consumer.close()
        assert values == [b"%d" % i for i in range(RECORDS + 1)]


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
    with AdminClient(bootstrap_servers=cluster.bootstrap(), **_tls(alice)) as admin:
        admin.create_topics([NewTopic("kcat-tls", 1, 3)])
    # Every broker knows the topic and its leader before kcat asks one of them.
    for node in cluster.nodes.values():
        single = [*trusted[:2], node.kafka_bootstrap, *trusted[3:]]

        def described(argv: list[str] = single) -> bool | None:
            listed = subprocess.run(
                [*argv, "-L", "-t", "kcat-tls"], capture_output=True, text=True, timeout=30
            )
            return ("partition 0, leader" in listed.stdout and "err" not in listed.stdout) or None

        eventually(described)
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
    # Kafka's protocol in plaintext to the TLS port (an ApiVersions request): the broker
    # closes the connection, and logs the failed authentication as Kafka does.
    node = cluster.nodes[1]
    seen = len(node.output())
    with socket.create_connection(("127.0.0.1", node.kport or 0), timeout=10) as s:
        s.sendall(b"\x00\x00\x00\x0e\x00\x12\x00\x03\x00\x00\x00\x01\x00\x04test")
        answer = b"".join(iter(lambda: s.recv(100), b""))
    assert answer == b"" or answer[0] == 0x15, answer  # nothing, or a TLS alert record
    eventually(
        lambda: (
            "Failed authentication with 127.0.0.1 on KAFKA (SSL handshake failed"
            in node.output()[seen:]
            or None
        )
    )


@pytest.mark.parametrize(
    ("who", "ca_of"),
    [("stranger", "alice"), ("alice", "stranger"), ("expired", "alice")],
)
def test_kafkas_protocol_from_rillets_client_refuses_the_wrong_certificate(
    cluster: Cluster, certs: dict[str, CertFiles], who: str, ca_of: str
) -> None:
    configs = _tls(certs[who], certs[ca_of].ca)
    producer = Producer(
        bootstrap_servers=cluster.kafka_bootstrap(), transport="kafka", max_block_ms=5000, **configs
    )
    try:
        with pytest.raises(KafkaError, match="TLS"):
            producer.send("secure", b"never").get(10)
    finally:
        producer.close()


@pytest.mark.slow
def test_the_rust_example_client_speaks_grpc_over_tls_with_its_certificate(
    cluster: Cluster, certs: dict[str, CertFiles]
) -> None:
    binary = build_rust_client()
    alice = certs["alice"]
    with AdminClient(bootstrap_servers=cluster.bootstrap(), **_tls(alice)) as admin:
        admin.create_topics([NewTopic("rust-tls", 1, 3)])
    leader = cluster.nodes[_leader(cluster, alice, "rust-tls")]

    def run(files: CertFiles, ca: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binary), "--bootstrap-server", leader.bootstrap, "--topic", "rust-tls",
             "--if-not-exists", "--count", "5", "--ssl-cafile", str(ca),
             "--ssl-certfile", str(files.cert), "--ssl-keyfile", str(files.key)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    ok = run(alice, alice.ca)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1] == "Read back all 5 records; they match what was written."
    refused = run(alice, certs["stranger"].ca)  # trusts another CA
    assert refused.returncode != 0
    assert "cannot connect" in refused.stderr and "certificate" in refused.stderr.lower()


def _leader(cluster: Cluster, files: CertFiles, topic: str) -> int:
    """The partition's leader, once it has one."""
    with AdminClient(bootstrap_servers=cluster.bootstrap(), **_tls(files)) as admin:

        def leader() -> int | None:
            found = admin.describe_topics([topic])[0].partitions[0].leader
            return found if found >= 0 else None

        return eventually(leader)


def test_the_tools_take_a_kafka_client_properties_file(
    cluster: Cluster, certs: dict[str, CertFiles], tmp_path: Path
) -> None:
    """``--command-config``, ``--producer.config`` and ``--consumer.config`` with the Java
    client's TLS keys, as a Kafka user's client.properties has them."""
    alice = certs["alice"]
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={alice.ca}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={alice.keystore}\n"
    )
    bootstrap = cluster.kafka_bootstrap()

    def tool(*args: str, stdin: str = "") -> str:
        done = subprocess.run(
            [sys.executable, "-m", "rillet.cli.main", *args],
            input=stdin, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    tool("topics", "--bootstrap-server", bootstrap, "--command-config", str(props),
         "--create", "--topic", "tools-tls", "--replication-factor", "3")  # fmt: skip
    # Every broker answers the listing once the topic's record reached it.
    listing = ["topics", "--bootstrap-server", bootstrap, "--command-config", str(props), "--list"]
    eventually(lambda: "tools-tls" in tool(*listing).split() or None)
    tool("console-producer", "--bootstrap-server", bootstrap, "--topic", "tools-tls",
         "--producer.config", str(props), stdin="one\ntwo\n")  # fmt: skip
    read = tool("console-consumer", "--bootstrap-server", bootstrap, "--topic", "tools-tls",
                "--from-beginning", "--max-messages", "2",
                "--consumer.config", str(props))  # fmt: skip
    assert read.split() == ["one", "two"]
