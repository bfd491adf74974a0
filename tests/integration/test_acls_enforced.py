"""ACLs on a real ``rillet server start`` process with Kafka's StandardAuthorizer: unmodified
Kafka clients (confluent-kafka) authenticate with SASL/PLAIN as different users, an admin
(a super user) manages ACLs with Kafka's admin API, and each operation is tried by a
permitted and a denied principal: producing, consuming, committing, creating topics and
describing, with literal, prefixed and wildcard patterns and DENY over ALLOW. Denials are
logged as Kafka's authorizer logs them; gRPC listeners check each call against the ACLs too
(``tests/integration/test_grpc_sasl_acls.py`` runs the same operations over gRPC)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from rillet.protocol.gen.v1 import admin_pb2, admin_pb2_grpc, metadata_pb2, metadata_pb2_grpc
from rillet.security.certs import make_ca, make_cert
from rillet.security.tls import ClientTls
from tests.support.cluster import eventually
from tests.support.sasl_listeners import sasl_overrides
from tests.support.server_process import ServerProcess, free_port

pytestmark = pytest.mark.timeout(300)

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "c"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class AclServer(ServerProcess):
    """A node with the StandardAuthorizer: its Kafka-protocol listener SASL (PLAIN, the
    users of USERS) on ``sasl_port``; gRPC on ``port`` for the node itself, whose
    ANONYMOUS principal is a super user alongside User:admin."""

    def __init__(self, data_dir: Path, super_users: str = "User:admin;User:ANONYMOUS") -> None:
        super().__init__(data_dir)
        self.sasl_port = free_port()
        self.overrides = {
            **sasl_overrides(
                self, {"SASL": (self.sasl_port, "SASL_PLAINTEXT")}, USERS, mechanisms="PLAIN"
            ),
            "authorizer.class.name": AUTHORIZER,
            "super.users": super_users,
        }

    def client(self, user: str) -> dict[str, str]:
        return {
            "bootstrap.servers": f"localhost:{self.sasl_port}",
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
        }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclServer]:
    s = AclServer(tmp_path_factory.mktemp("acls") / "data")
    s.start()
    for topic in ("orders", "payments-eu", "shared", "audit"):
        s.create_topic(topic, 1)
    yield s
    s.stop()
    assert "Traceback" not in s.output(), s.output()[-5000:]


@pytest.fixture(scope="module")
def admin(server: AclServer) -> AdminClient:
    return AdminClient(server.client("admin"))


def _allow(
    admin: AdminClient,
    principal: str,
    rtype: ResourceType,
    name: str,
    *operations: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> None:
    bindings = [
        AclBinding(rtype, name, pattern, principal, "*", op, permission) for op in operations
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()


def _until_allowed(attempt: Callable[[], object]) -> object:
    """ACLs reach the broker with the metadata log: retry an authorization error a while."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return attempt()
        except KafkaException as e:
            if time.monotonic() > deadline or "AUTHORIZATION" not in e.args[0].name():
                raise
            time.sleep(0.2)


def _produce(server: AclServer, user: str, topic: str, value: bytes) -> KafkaError | None:
    """Produce one record as ``user``: None, or the delivery error."""
    p = Producer({**server.client(user), "message.timeout.ms": 10000, "retries": 0})
    outcome: list[KafkaError | None] = []
    p.produce(topic, value=value, on_delivery=lambda err, _msg: outcome.append(err))
    p.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def _consume(server: AclServer, user: str, topic: str, group: str) -> list[bytes] | KafkaError:
    """Read ``topic`` from the start as ``user`` in ``group``: the values, or the error."""
    c = Consumer(
        {**server.client(user), "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        values: list[bytes] = []
        while time.monotonic() < deadline:
            m = c.poll(1)
            if m is None:
                if values:
                    return values
                continue
            if m.error() is not None:
                return m.error()
            values.append(m.value() or b"")
        return values
    finally:
        c.close()


def test_producing_needs_write_on_the_topic(server: AclServer, admin: AdminClient) -> None:
    _allow(admin, "User:alice", ResourceType.TOPIC, "orders", AclOperation.WRITE)
    eventually(lambda: _produce(server, "alice", "orders", b"by-alice") is None or None)
    denied = _produce(server, "bob", "orders", b"by-bob")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # librdkafka asks for the topic's metadata first: bob may not even describe it.
    assert (
        "Principal = User:bob is Denied operation = DESCRIBE from host = 127.0.0.1 on "
        "resource = Topic:LITERAL:orders"
    ) in server.output()
    # With DESCRIBE but not WRITE, the produce request itself is refused.
    _allow(admin, "User:bob", ResourceType.TOPIC, "orders", AclOperation.DESCRIBE)
    eventually(
        lambda: (
            (
                (e := _produce(server, "bob", "orders", b"by-bob")) is not None
                and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                and "Principal = User:bob is Denied operation = WRITE" in server.output()
            )
            or None
        )
    )


def test_consuming_with_a_prefixed_pattern_needs_read_on_topic_and_group(
    server: AclServer, admin: AdminClient
) -> None:
    _allow(admin, "User:alice", ResourceType.TOPIC, "payments-", AclOperation.WRITE,
           pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    eventually(lambda: _produce(server, "alice", "payments-eu", b"pay-1") is None or None)
    _allow(admin, "User:bob", ResourceType.TOPIC, "payments-", AclOperation.READ,
           pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    # READ on the topic but not on the group: the group refuses.
    no_group = _consume(server, "bob", "payments-eu", "bob-group")
    assert isinstance(no_group, KafkaError)
    assert no_group.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(admin, "User:bob", ResourceType.GROUP, "bob-", AclOperation.READ,
           pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    assert eventually(lambda: _consume(server, "bob", "payments-eu", "bob-group") or None) == [
        b"pay-1"
    ]
    # carol has neither.
    refused = _consume(server, "carol", "payments-eu", "bob-group")
    assert isinstance(refused, KafkaError)
    assert refused.code() in (
        KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED
    )  # fmt: skip


def test_deny_takes_precedence_over_a_wildcard_allow(server: AclServer, admin: AdminClient) -> None:
    _allow(admin, "User:*", ResourceType.TOPIC, "shared", AclOperation.WRITE, AclOperation.READ)
    _allow(admin, "User:*", ResourceType.GROUP, "shared-", AclOperation.READ,
           pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    _allow(admin, "User:carol", ResourceType.TOPIC, "shared", AclOperation.WRITE,
           permission=AclPermissionType.DENY)  # fmt: skip
    eventually(lambda: _produce(server, "alice", "shared", b"s-1") is None or None)
    denied = _produce(server, "carol", "shared", b"s-2")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DENY of WRITE does not touch READ: carol still reads.
    assert _consume(server, "carol", "shared", "shared-carol") == [b"s-1"]


def test_committing_offsets_needs_read_on_the_group(server: AclServer, admin: AdminClient) -> None:
    _allow(admin, "User:alice", ResourceType.TOPIC, "audit", AclOperation.READ, AclOperation.WRITE)
    _allow(admin, "User:alice", ResourceType.GROUP, "audit-ok", AclOperation.READ)
    # DESCRIBE finds the group's coordinator; committing needs READ.
    _allow(admin, "User:alice", ResourceType.GROUP, "audit-no", AclOperation.DESCRIBE)
    eventually(lambda: _produce(server, "alice", "audit", b"a-1") is None or None)
    for group, allowed in (("audit-ok", True), ("audit-no", False)):
        c = Consumer({**server.client("alice"), "group.id": group, "enable.auto.commit": False})
        try:
            if allowed:
                _until_allowed(
                    lambda c=c: c.commit(
                        offsets=[TopicPartition("audit", 0, 1)], asynchronous=False
                    )
                )
                committed = c.committed([TopicPartition("audit", 0)], timeout=20)
                assert committed[0].offset == 1
            else:
                with pytest.raises(KafkaException) as e:
                    c.commit(offsets=[TopicPartition("audit", 0, 1)], asynchronous=False)
                assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        finally:
            c.close()


def test_creating_topics_needs_create_on_the_cluster_or_the_topic(
    server: AclServer, admin: AdminClient
) -> None:
    _allow(admin, "User:alice", ResourceType.TOPIC, "alice-", AclOperation.CREATE,
           pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    alice = AdminClient(server.client("alice"))
    ok = alice.create_topics([NewTopic("alice-created", 1, 1)], request_timeout=30)
    _until_allowed(ok["alice-created"].result)
    refused = alice.create_topics([NewTopic("bob-created", 1, 1)], request_timeout=30)
    with pytest.raises(KafkaException) as e:
        refused["bob-created"].result()
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The admin (a super user) may create anything.
    admin.create_topics([NewTopic("bob-created", 1, 1)], request_timeout=30)["bob-created"].result()


def test_describing_shows_only_what_the_principal_may_describe(
    server: AclServer, admin: AdminClient
) -> None:
    _allow(admin, "User:bob", ResourceType.TOPIC, "orders", AclOperation.DESCRIBE)
    bob = AdminClient(server.client("bob"))

    def bob_sees() -> set[str] | None:
        topics = set(bob.list_topics(timeout=20).topics)
        return topics if "orders" in topics else None

    seen = eventually(bob_sees)
    assert "audit" not in seen  # nothing lets bob describe it
    assert {"orders", "audit", "shared"} <= set(admin.list_topics(timeout=20).topics)
    # Configs: DESCRIBE_CONFIGS is not implied by DESCRIBE.
    futures = bob.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "orders")])
    with pytest.raises(KafkaException) as e:
        next(iter(futures.values())).result()
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_only_a_principal_allowed_alter_on_the_cluster_manages_acls(
    server: AclServer, admin: AdminClient
) -> None:
    alice = AdminClient(server.client("alice"))
    binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                         "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW)  # fmt: skip
    with pytest.raises(KafkaException) as e:
        next(iter(alice.create_acls([binding], request_timeout=30).values())).result()
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The admin lists and deletes: a filter on bob's ACLs finds the ones made above.
    bob_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob",
                                  None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    listed = admin.describe_acls(bob_filter, request_timeout=30).result()
    assert {(b.restype, b.name, b.operation) for b in listed} >= {
        (ResourceType.TOPIC, "orders", AclOperation.DESCRIBE),
        (ResourceType.TOPIC, "payments-", AclOperation.READ),
    }
    describe_only = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                                     "User:bob", None, AclOperation.DESCRIBE,
                                     AclPermissionType.ALLOW)  # fmt: skip
    deleted = next(iter(admin.delete_acls([describe_only], request_timeout=30).values())).result()
    assert [(b.name, b.operation) for b in deleted] == [("orders", AclOperation.DESCRIBE)]
    remaining = admin.describe_acls(bob_filter, request_timeout=30).result()
    assert (ResourceType.TOPIC, "orders", AclOperation.DESCRIBE) not in {
        (b.restype, b.name, b.operation) for b in remaining
    }


def test_grpc_listeners_check_the_acls_of_anonymous_callers(tmp_path: Path) -> None:
    """With ANONYMOUS no super user, a plaintext gRPC client (User:ANONYMOUS) is refused
    what it has no ACL for: describing the cluster needs DESCRIBE on it."""
    s = AclServer(tmp_path / "data", super_users="User:admin")
    s.start()
    try:
        with grpc.insecure_channel(s.bootstrap) as ch, pytest.raises(grpc.RpcError) as e:
            admin_pb2_grpc.AdminServiceStub(ch).DescribeCluster(
                admin_pb2.DescribeClusterRequest(), timeout=30
            )
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "CLUSTER_AUTHORIZATION_FAILED" in (e.value.details() or "")
        # The Kafka listener serves the admin all the same.
        admin = AdminClient(s.client("admin"))
        admin.create_topics([NewTopic("made-by-admin", 1, 1)], request_timeout=30)[
            "made-by-admin"
        ].result()
    finally:
        s.stop()


def test_a_certificate_principal_is_not_relayed_to_a_grpc_listener_that_would_drop_it(
    tmp_path: Path,
) -> None:
    """With an authorizer, a gRPC client of an mTLS Kafka listener is User:alice there; the
    node's plaintext gRPC listener would take its relayed calls for User:ANONYMOUS (a super
    user here), so the relay refuses it. Kafka's protocol on the same listener is served."""
    ca = make_ca(tmp_path / "ca")
    node, alice = make_cert(ca, tmp_path / "ca", "node"), make_cert(ca, tmp_path / "ca", "alice")
    s = ServerProcess(tmp_path / "data")
    kport = free_port()
    s.overrides = {
        "listeners": f"PLAINTEXT://localhost:{s.port},KTLS://localhost:{kport},"
        f"CONTROLLER://localhost:{s.cport}",
        "advertised.listeners": f"PLAINTEXT://localhost:{s.port},KTLS://localhost:{kport}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KTLS:SSL,CONTROLLER:PLAINTEXT",
        "grpc.listener.names": "PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.ktls.ssl.keystore.type": "PEM",
        "listener.name.ktls.ssl.keystore.location": str(node.keystore),
        "listener.name.ktls.ssl.truststore.type": "PEM",
        "listener.name.ktls.ssl.truststore.location": str(node.ca),
        "listener.name.ktls.ssl.client.auth": "required",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS",
    }
    s.start()
    try:
        tls = ClientTls.from_files(str(alice.ca), str(alice.cert), str(alice.key))
        with (
            grpc.secure_channel(f"localhost:{kport}", tls.grpc_credentials()) as ch,
            pytest.raises(grpc.RpcError) as refused,
        ):
            metadata_pb2_grpc.MetadataServiceStub(ch).Metadata(
                metadata_pb2.MetadataRequest(), timeout=10
            )
        # The connection closes each time gRPC opens it, until the deadline.
        assert refused.value.code() in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
        )
        assert "not relaying gRPC" in s.output()
        assert "is User:CN=alice" in s.output()
        # Kafka's protocol on the same listener: alice, who has no ACL, is refused by name.
        admin = AdminClient(
            {
                "bootstrap.servers": f"localhost:{kport}",
                "security.protocol": "ssl",
                "ssl.ca.location": str(alice.ca),
                "ssl.certificate.location": str(alice.cert),
                "ssl.key.location": str(alice.key),
            }
        )
        future = admin.create_topics([NewTopic("by-alice", 1, 1)], request_timeout=30)["by-alice"]
        with pytest.raises(KafkaException, match="AUTHORIZATION"):
            future.result()
    finally:
        s.stop()
