"""The ACL phase of ``bench/security.py``: what authorizing every request costs with 10,000
ACLs, against the same node without an authorizer, in the same run.

Two nodes run side by side, each with a PLAINTEXT Kafka-protocol listener: NONE has no
authorizer; ACL has Kafka's StandardAuthorizer with 10,000 ACLs. The ACLs are made while
``User:ANONYMOUS`` (the principal of a plaintext client) is a super user, then the node
restarts with no super users, so every request is checked against the ACLs rather than
waved through: ANONYMOUS gets ALL on the prefix ``bench-`` (topics) and ``*`` (groups),
CLUSTER_ACTION on the cluster (its gRPC group calls), and 9,996 other ACLs name other users,
topics and prefixes, literal and prefixed, allow and deny. ``producer-perf-test`` and
``consumer-perf-test`` (Kafka's defaults) run against each node in turn, alternating the
order between rounds; the best run of each is compared. Beside them, the cost of one
authorization with 10,000 ACLs is timed in process.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from rillet.protocol.gen.v1 import admin_pb2_grpc, security_pb2
from rillet.protocol.security import acl_binding_to_pb
from rillet.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
)
from tests.support.server_process import ServerProcess

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"
TOPIC_PREFIX = "bench-"


def bench_acls(count: int = 10_000) -> list[AclBinding]:
    """ANONYMOUS's four ACLs, then filler up to ``count``."""
    acls = [
        AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, ANONYMOUS, "*",
                   AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW),
        AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, ANONYMOUS, "*",
                   AclOperation.CREATE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, TOPIC_PREFIX, PatternType.PREFIXED, ANONYMOUS, "*",
                   AclOperation.ALL, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "*", PatternType.LITERAL, ANONYMOUS, "*",
                   AclOperation.ALL, AclPermissionType.ALLOW),
    ]  # fmt: skip
    i = 0
    while len(acls) < count:
        kind = i % 4
        acls.append(
            AclBinding(
                ResourceType.GROUP if kind == 3 else ResourceType.TOPIC,
                f"app-{i}-" if kind == 1 else f"topic-{i}",
                PatternType.PREFIXED if kind == 1 else PatternType.LITERAL,
                f"User:user-{i % 500}",
                "*",
                (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.READ)[
                    kind
                ],
                AclPermissionType.DENY if i % 10 == 9 else AclPermissionType.ALLOW,
            )
        )
        i += 1
    return acls


def create_acls(node: ServerProcess, acls: list[AclBinding], batch: int = 1000) -> None:
    with grpc.insecure_channel(node.bootstrap) as ch:
        stub = admin_pb2_grpc.AdminServiceStub(ch)
        for start in range(0, len(acls), batch):
            request = security_pb2.CreateAclsRequest(
                creations=[acl_binding_to_pb(a) for a in acls[start : start + batch]]
            )
            response = stub.CreateAcls(request, timeout=120)
            failed = [r for r in response.results if r.error_code]
            if failed:
                raise RuntimeError(f"CreateAcls failed: {failed[0].error_message}")


def acl_node(
    data_dir: Path, overrides: Callable[[ServerProcess], dict[str, str]], count: int
) -> ServerProcess:
    """A started node (its listeners from ``overrides``) with the authorizer and ``count``
    ACLs, and no super user."""
    node = ServerProcess(data_dir)
    base = {**overrides(node), "authorizer.class.name": AUTHORIZER}
    node.overrides = {**base, "super.users": ANONYMOUS}
    node.start()
    create_acls(node, bench_acls(count))
    node.stop()
    node.overrides = {**base, "super.users": ""}
    node.start()
    return node


def authorize_ns(count: int = 10_000, calls: int = 200_000) -> dict[str, Any]:
    """The in-process cost of one authorization with ``count`` ACLs: a produce's check (WRITE
    on a topic under the prefix) and a miss (a topic no ACL names, for another user)."""
    authorizer = Authorizer(bench_acls(count))
    out: dict[str, Any] = {"acls": authorizer.count}
    cases = {
        "hit_ns": (ANONYMOUS, AclOperation.WRITE, f"{TOPIC_PREFIX}{uuid.uuid4().hex[:8]}"),
        "miss_ns": ("User:nobody", AclOperation.READ, "topic-123456"),
    }
    for label, (principal, op, topic) in cases.items():
        start = time.perf_counter_ns()
        for _ in range(calls):
            authorizer.authorize(principal, "127.0.0.1", op, ResourceType.TOPIC, topic)
        out[label] = (time.perf_counter_ns() - start) / calls
    return out
