"""SASL and ACLs on gRPC listeners, on a real ``rillet server start`` process with Kafka's
StandardAuthorizer: Rillet's own clients authenticate to a SASL_PLAINTEXT gRPC listener with
PLAIN (users of ``sasl.jaas.config``) or SCRAM (credentials set with ``rillet configs``) as
call credentials, and each operation is tried by a permitted and a denied principal:
producing, consuming in a group, committing, creating topics and describing, with a
prefixed pattern and DENY over ALLOW. A wrong password fails with SASL_AUTHENTICATION_FAILED,
and so does a call with no session; a Kafka SASL listener relays gRPC to the SASL gRPC
listener, so groups and idempotence work over Kafka's transport too. The node's own plaintext
gRPC listener (inter-broker, and the tests' admin as ``User:ANONYMOUS``, a super user) is
the third listener."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from rillet import Consumer, Producer
from rillet.client.admin import AdminClient, NewTopic
from rillet.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    SaslAuthenticationFailedError,
    TopicAuthorizationFailedError,
)
from rillet.protocol.gen.v1 import metadata_pb2, metadata_pb2_grpc
from rillet.types import TopicPartition
from tests.support.sasl_listeners import sasl_overrides
from tests.support.server_process import ServerProcess, free_port

pytestmark = pytest.mark.timeout(300)

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
SCRAM_USER, SCRAM_PASSWORD = "dave", "dave-secret"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class SaslGrpcServer(ServerProcess):
    """PLAINTEXT gRPC on ``port`` (inter-broker; ANONYMOUS is a super user), SASL_PLAINTEXT
    gRPC on ``sasl_port`` and a SASL_PLAINTEXT Kafka listener on ``kafka_sasl_port``."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.sasl_port, self.kafka_sasl_port = free_port(), free_port()
        self.overrides = {
            **sasl_overrides(
                self,
                {
                    "GSASL": (self.sasl_port, "SASL_PLAINTEXT"),
                    "KSASL": (self.kafka_sasl_port, "SASL_PLAINTEXT"),
                },
                USERS,
                grpc=["GSASL"],
            ),
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:ANONYMOUS",
        }

    def client(self, user: str, password: str = "", **more: Any) -> dict[str, Any]:
        """kafka-python's settings for ``user`` on the SASL gRPC listener (SCRAM for the
        SCRAM user, else PLAIN)."""
        scram = user == SCRAM_USER
        return {
            "bootstrap_servers": f"localhost:{self.sasl_port}",
            "transport": "grpc",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512" if scram else "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": password or (SCRAM_PASSWORD if scram else USERS[user]),
            **more,
        }


def _rillet(*args: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslGrpcServer]:
    s = SaslGrpcServer(tmp_path_factory.mktemp("grpc-sasl") / "data")
    s.start()
    try:
        _rillet(
            "configs", "--bootstrap-server", s.bootstrap, "--alter", "--user", SCRAM_USER,
            "--add-config", f"SCRAM-SHA-512=[password={SCRAM_PASSWORD}]",
        )  # fmt: skip
        for topic in ("orders", "payments-eu", "shared", "audit"):
            s.create_topic(topic, 1)
        yield s
    finally:
        s.stop()
    assert "Traceback" not in s.output(), s.output()[-5000:]


def _acl(server: SaslGrpcServer, *args: str) -> None:
    """``rillet acls --add`` as the node's super user (ANONYMOUS, over plaintext gRPC)."""
    _rillet("acls", "--bootstrap-server", server.bootstrap, "--add", *args)


def _until(attempt: Callable[[], Any]) -> Any:
    """ACLs reach the broker with the metadata log: retry an authorization error a while."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return attempt()
        except KafkaError as e:
            if time.monotonic() > deadline or "AUTHORIZATION" not in e.name:
                raise
            time.sleep(0.2)


def _produce(server: SaslGrpcServer, user: str, topic: str, value: bytes, **more: Any) -> int:
    with Producer(**server.client(user, **more), acks="all", retries=0) as producer:
        return producer.send(topic, value).get(30).offset


def _consume(server: SaslGrpcServer, user: str, topic: str, group: str) -> list[bytes]:
    """Every record of ``topic`` as ``user`` in ``group`` (committing as it goes)."""
    values: list[bytes] = []
    configs = server.client(user, group_id=group, auto_offset_reset="earliest")
    with contextlib.closing(Consumer(topic, **configs)) as consumer:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            if values:
                consumer.commit()
                return values
    return values


def test_scram_and_plain_sessions_and_wrong_passwords(server: SaslGrpcServer) -> None:
    _acl(server, "--allow-principal", "User:dave", "--allow-principal", "User:alice",
         "--operation", "Describe", "--topic", "audit")  # fmt: skip
    for user in (SCRAM_USER, "alice"):
        with contextlib.closing(Consumer(**server.client(user))) as consumer:
            assert "audit" in _until_listed(consumer, "audit")
    for user in (SCRAM_USER, "alice"):
        consumer = Consumer(**server.client(user, password="wrong"))
        with (
            contextlib.closing(consumer),
            pytest.raises(SaslAuthenticationFailedError, match="authentication of"),
        ):
            consumer.topics()
    # No session at all: refused by name, not served as ANONYMOUS.
    with (
        grpc.insecure_channel(f"localhost:{server.sasl_port}") as ch,
        pytest.raises(grpc.RpcError) as refused,
    ):
        metadata_pb2_grpc.MetadataServiceStub(ch).Metadata(
            metadata_pb2.MetadataRequest(), timeout=30
        )
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "SASL_AUTHENTICATION_FAILED" in (refused.value.details() or "")


def _until_listed(consumer: Consumer, topic: str) -> set[str]:
    deadline = time.monotonic() + 20
    while True:
        topics = consumer.topics()
        if topic in topics or time.monotonic() > deadline:
            return topics
        time.sleep(0.2)


def test_producing_needs_write_on_the_topic(server: SaslGrpcServer) -> None:
    _acl(server, "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    assert _until(lambda: _produce(server, "alice", "orders", b"by-alice")) >= 0
    with pytest.raises(TopicAuthorizationFailedError, match="orders"):
        _produce(server, "bob", "orders", b"by-bob", enable_idempotence=False)
    # One producer, two topics: the topic alice may not write fails, the other is written
    # (each topic is answered on its own, as Kafka answers it).
    with Producer(**server.client("alice"), acks="all", retries=0, linger_ms=50) as producer:
        allowed = producer.send("orders", b"mixed")
        with pytest.raises(TopicAuthorizationFailedError, match="audit"):
            producer.send("audit", b"mixed").get(30)
        assert allowed.get(30).offset >= 1


def test_consuming_with_a_prefixed_pattern_needs_read_on_topic_and_group(
    server: SaslGrpcServer,
) -> None:
    _seed(server, "payments-eu", b"p1")
    _acl(server, "--allow-principal", "User:carol", "--operation", "Read", "--operation",
         "Describe", "--topic", "payments-", "--resource-pattern-type", "prefixed")  # fmt: skip
    _acl(server, "--allow-principal", "User:carol", "--operation", "Read", "--group", "carols")
    assert _until(lambda: _consume(server, "carol", "payments-eu", "carols")) == [b"p1"]
    # One commit, two topics: the one carol may not read is refused, the other committed.
    with contextlib.closing(Consumer(**server.client("carol", group_id="carols"))) as consumer:
        readable, unreadable = TopicPartition("payments-eu", 0), TopicPartition("orders", 0)
        consumer.assign([readable])
        with pytest.raises(TopicAuthorizationFailedError, match="orders"):
            consumer.commit({readable: 1, unreadable: 1})
        assert consumer.committed(readable) == 1
    # Another group: GROUP_AUTHORIZATION_FAILED; bob has no READ on the topic at all.
    with pytest.raises(GroupAuthorizationFailedError):
        _consume(server, "carol", "payments-eu", "not-carols")
    _acl(server, "--allow-principal", "User:bob", "--operation", "Read", "--group", "bobs")
    with pytest.raises((TopicAuthorizationFailedError, GroupAuthorizationFailedError)):
        _until(lambda: _consume(server, "bob", "payments-eu", "bobs") or None)


def _seed(server: SaslGrpcServer, topic: str, value: bytes) -> None:
    """Write a record as the node's super user (ANONYMOUS, over plaintext gRPC)."""
    with Producer(bootstrap_servers=server.bootstrap, acks="all") as producer:
        producer.send(topic, value).get(30)


def test_deny_takes_precedence_over_a_wildcard_allow(server: SaslGrpcServer) -> None:
    _acl(server, "--allow-principal", "User:*", "--operation", "Write", "--topic", "shared")
    _acl(server, "--deny-principal", "User:bob", "--operation", "Write", "--topic", "shared")
    assert _until(lambda: _produce(server, "alice", "shared", b"a")) >= 0
    with pytest.raises(TopicAuthorizationFailedError):
        _produce(server, "bob", "shared", b"b", enable_idempotence=False)


def test_creating_topics_needs_create_and_describing_shows_only_what_may_be_described(
    server: SaslGrpcServer,
) -> None:
    configs = {k: v for k, v in server.client("bob").items() if k != "transport"}
    with AdminClient(**configs) as bob:
        with pytest.raises(KafkaError, match=r"TOPIC_AUTHORIZATION_FAILED|CLUSTER_AUTHORIZATION"):
            bob.create_topics([NewTopic("bobs-topic", 1, 1)])
        _acl(server, "--allow-principal", "User:bob", "--operation", "Create", "--operation",
             "Describe", "--topic", "bobs-", "--resource-pattern-type", "prefixed")  # fmt: skip
        _until(lambda: bob.create_topics([NewTopic("bobs-topic", 1, 1)]))
        # bob sees his own topic (and shared: a wildcard WRITE implies DESCRIBE), not the others.
        listed = set(bob.list_topics())
        assert "bobs-topic" in listed and not listed & {"orders", "audit"}


def test_a_kafka_sasl_listener_relays_grpc_calls_that_authenticate_themselves(
    server: SaslGrpcServer,
) -> None:
    """Over Kafka's transport, the idempotent producer's InitProducerId and the consumer's
    group calls go over gRPC through the Kafka SASL listener's relay, with the session."""
    _acl(server, "--allow-principal", "User:alice", "--operation", "All", "--topic", "relayed")
    _acl(server, "--allow-principal", "User:alice", "--operation", "All", "--group", "relay")
    server.create_topic("relayed", 1)
    kafka = {"bootstrap_servers": f"localhost:{server.kafka_sasl_port}", "transport": "kafka"}
    configs = {**server.client("alice"), **kafka}
    with Producer(**configs, acks="all") as producer:
        offset = _until(lambda: producer.send("relayed", b"over-kafka").get(30).offset)
        assert producer.transport == "kafka"
    assert offset == 0
    group = {**configs, "group_id": "relay", "auto_offset_reset": "earliest"}
    with contextlib.closing(Consumer("relayed", **group)) as consumer:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        consumer.commit()
        assert got == [b"over-kafka"]
        assert consumer.committed(TopicPartition("relayed", 0)) == 1
