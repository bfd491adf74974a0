"""Kafka's server-driven consumer group protocol (KIP-848: ConsumerGroupHeartbeat,
ConsumerGroupDescribe) and the group admin requests (ListGroups, DescribeGroups,
DeleteGroups, OffsetDelete) over Kafka's protocol: request dicts to the group coordinator's
messages (:mod:`rillet.coordinator.group.messages`) run exactly as the gRPC group service
runs them (:mod:`rillet.server.grpc.group`), and the answers back to response dicts.

Served versions and what differs from a Kafka 4.0 broker:

- **ConsumerGroupHeartbeat** (68) v0-1. v0 members join with an empty member id and are
  given one; v1 members make their own (KIP-1082), so an empty one is INVALID_REQUEST
  ("MemberId can't be empty."), after the coordinator checks (NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS) as in Kafka. Errors carry Kafka's message. Member epochs,
  server-side assignors (``group.consumer.assignors``), topic regexes (v1; Python's ``re``
  rather than Java's RE2J) and leaving with epoch -1 / -2 are the coordinator's
  (:mod:`rillet.coordinator.group.consumer_heartbeat`).
- **ConsumerGroupDescribe** (69) v0: KIP-848 groups; GROUP_ID_NOT_FOUND for anything else,
  which is how clients know to fall back to DescribeGroups. As Kafka, a topic no longer in
  the metadata is left out of the assignments (its name is unknown).
- **DescribeGroups** (15) v0-5: classic groups, members' metadata and assignment only while
  Stable; a group that does not exist or is a KIP-848 group is Dead with no error (Kafka
  answers GROUP_ID_NOT_FOUND only from v6, which the schemas here do not have).
- **ListGroups** (16) v0-5: every group of every ``__consumer_offsets`` partition this
  broker has loaded, filtered by state (v4+, case-insensitive) and type (v5+). A partition
  still loading is left out, where Kafka fails the whole answer with
  COORDINATOR_LOAD_IN_PROGRESS (the coordinator does not say which partitions are loading).
- **DeleteGroups** (42) v0-2: empty groups with their offsets; NON_EMPTY_GROUP,
  GROUP_ID_NOT_FOUND.
- **OffsetDelete** (47) v0: as Kafka, a partition of a topic the metadata does not have is
  answered UNKNOWN_TOPIC_OR_PARTITION without asking the coordinator, and a group-level
  error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) is the top-level error with no topics.

With an authorizer, each request is checked as Kafka 4.0's KafkaApis checks it:

- **ConsumerGroupHeartbeat**: READ on the group (top-level GROUP_AUTHORIZATION_FAILED), then
  DESCRIBE on each topic subscribed to by name (TOPIC_AUTHORIZATION_FAILED, its message
  naming them); a regex subscription is resolved by the coordinator unchecked.
- **ConsumerGroupDescribe**: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that
  group), and on each topic of its members' assignments (TOPIC_AUTHORIZATION_FAILED for the
  group, described no further; KAFKA-18813).
- **DescribeGroups**: DESCRIBE on each group (the group's entry GROUP_AUTHORIZATION_FAILED).
- **ListGroups**: every group to a principal allowed DESCRIBE on the cluster, else only the
  groups it may describe (the others left out quietly).
- **DeleteGroups**: DELETE on each group (GROUP_AUTHORIZATION_FAILED for that group).
- **OffsetDelete**: DELETE on the group (top-level GROUP_AUTHORIZATION_FAILED), READ on each
  topic (its partitions TOPIC_AUTHORIZATION_FAILED).

``authorized_operations`` (when asked for) are the group operations the sender may do; with
no authorizer, every operation Kafka supports on a group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from rillet.broker.group_coordinator import GroupCoordinator
from rillet.coordinator.group import messages as m
from rillet.coordinator.group.results import CoordinatorResult
from rillet.coordinator.group.shard import GroupCoordinatorShard
from rillet.errors import (
    InvalidRequestError,
    KafkaError,
    NotCoordinatorError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from rillet.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from rillet.server.kafka.groups import denied_topics, group_denied
from rillet.server.kafka.request import Body, KafkaRequest, Served

__all__ = ["GROUP_AUTHORIZED_OPERATIONS", "KafkaConsumerGroups"]

R = TypeVar("R")

# Kafka's AclOperation codes: READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11, what AclEntry.supportedOperations(GROUP) lists, as a bit field.
GROUP_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))
# The schemas' default: authorized operations not asked for.
_NO_AUTHORIZED_OPERATIONS = -(2**31)

_STABLE = "Stable"


def _code(err: KafkaError | None) -> int:
    return err.code if err is not None else 0


def _error_message(err: KafkaError | None) -> str | None:
    """An error's message as Kafka sends it: the exception's own, else the error's
    description (what ``Errors.X.exception()`` carries); None for no error."""
    if err is None:
        return None
    return err.message or " ".join((type(err).__doc__ or err.name).split())


def _authorized_groups(
    req: KafkaRequest, operation: AclOperation, groups: Sequence[str]
) -> tuple[list[str], dict[str, KafkaError]]:
    """The groups (each once) the sender may do ``operation`` on, and the refusal of each
    other one."""
    allowed: list[str] = []
    refused: dict[str, KafkaError] = {}
    for g in dict.fromkeys(groups):
        denied = group_denied(req, operation, g)
        if denied is None:
            allowed.append(g)
        else:
            refused[g] = denied
    return allowed, refused


def _group_operations(req: KafkaRequest, group_id: str) -> int:
    """The group operations the sender may do, as the ``authorized_operations`` bit field."""
    return sum(
        1 << op
        for op in (3, 6, 8, 10, 11)
        if req.allowed_quietly(AclOperation(op), ResourceType.GROUP, group_id)
    )


def _hide_unauthorized_topics(
    req: KafkaRequest, d: m.ConsumerGroupDescribeResult
) -> m.ConsumerGroupDescribeResult:
    """A described group whose members' assignments or target assignments name a topic the
    sender may not describe is TOPIC_AUTHORIZATION_FAILED instead, as Kafka 4.0 answers it
    (KAFKA-18813: the topic names are not said)."""
    if req.authorizer is None or d.error is not None:
        return d
    topics = {
        t.topic_name
        for x in d.members
        for t in (*x.assignment, *x.target_assignment)
        if t.topic_name is not None
    }
    if all(req.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in sorted(topics)):
        return d
    error = TopicAuthorizationFailedError(
        "The group has described topic(s) that the client is not authorized to describe."
    )
    return m.ConsumerGroupDescribeResult(d.group_id, error)


class KafkaConsumerGroups:
    """KIP-848 heartbeats and the group admin requests of one broker (see the module doc)."""

    def __init__(self, groups: GroupCoordinator) -> None:
        self.groups = groups

    def served(self) -> dict[int, Served]:
        return {
            15: Served(0, 5, self.describe_groups),  # DescribeGroups
            16: Served(0, 5, self.list_groups),  # ListGroups
            42: Served(0, 2, self.delete_groups),  # DeleteGroups
            47: Served(0, 0, self.offset_delete),  # OffsetDelete
            68: Served(0, 1, self.consumer_group_heartbeat),  # ConsumerGroupHeartbeat
            69: Served(0, 0, self.consumer_group_describe),  # ConsumerGroupDescribe
        }

    # -- KIP-848 ------------------------------------------------------------------------------

    async def consumer_group_heartbeat(self, req: KafkaRequest) -> Body:
        version, body = req.version, req.body
        names = body.get("subscribed_topic_names")
        owned = body.get("topic_partitions")
        r = m.ConsumerGroupHeartbeatRequest(
            group_id=body["group_id"],
            member_id=body["member_id"],
            member_epoch=body["member_epoch"],
            instance_id=body.get("instance_id"),
            rack_id=body.get("rack_id"),
            rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1),
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=body.get("subscribed_topic_regex"),
            server_assignor=body.get("server_assignor"),
            topic_partitions=None
            if owned is None
            else tuple(
                m.OwnedTopicPartitions(t["topic_id"], tuple(t["partitions"])) for t in owned
            ),
            client_id=req.client[0],
            client_host=req.client[1],
        )

        def heartbeat(
            shard: GroupCoordinatorShard, now: int
        ) -> CoordinatorResult[m.ConsumerGroupHeartbeatResponse]:
            if version >= 1 and not r.member_id.strip():
                # KIP-1082: from v1 the member makes its own id (Kafka checks it first
                # thing on the group's shard).
                error = InvalidRequestError("MemberId can't be empty.")
                return CoordinatorResult(response=m.ConsumerGroupHeartbeatResponse(error=error))
            return shard.consumer_group_heartbeat(r, now)

        # As Kafka: READ on the group, then DESCRIBE on each topic subscribed to by name
        # (a regex subscription is not checked here).
        error: KafkaError | None = group_denied(req, AclOperation.READ, r.group_id)
        if error is None and names:
            hidden = denied_topics(req, AclOperation.DESCRIBE, names)
            if hidden:
                error = TopicAuthorizationFailedError(
                    "The following topics are not authorized: " + ", ".join(sorted(hidden))
                )
        response = (
            m.ConsumerGroupHeartbeatResponse(error=error)
            if error is not None
            else await self.groups.run(
                r.group_id, heartbeat, lambda e: m.ConsumerGroupHeartbeatResponse(error=e)
            )
        )
        return {
            "error_code": _code(response.error),
            "error_message": _error_message(response.error),
            "member_id": response.member_id,
            "member_epoch": response.member_epoch,
            "heartbeat_interval_ms": response.heartbeat_interval_ms,
            "assignment": None
            if response.assignment is None
            else {
                "topic_partitions": [
                    {"topic_id": a.topic_id, "partitions": sorted(a.partitions)}
                    for a in response.assignment
                ]
            },
        }

    async def consumer_group_describe(self, req: KafkaRequest) -> Body:
        body = req.body
        # A group named twice is answered once.
        allowed, refused = _authorized_groups(req, AclOperation.DESCRIBE, body["group_ids"])
        described = await self.groups.run_per_group(
            allowed,
            lambda shard, g: shard.consumer_group_describe([g]),
            lambda g, e: m.ConsumerGroupDescribeResult(g, e),
        )
        by_id = {d.group_id: _hide_unauthorized_topics(req, d) for d in described}
        by_id.update((g, m.ConsumerGroupDescribeResult(g, e)) for g, e in refused.items())
        with_operations = bool(body.get("include_authorized_operations", False))
        out = []
        for g in dict.fromkeys(body["group_ids"]):
            group = _described_consumer_group(by_id[g], with_operations)
            if with_operations and by_id[g].error is None:
                group["authorized_operations"] = _group_operations(req, g)
            out.append(group)
        return {"groups": out}

    # -- classic groups and every group ---------------------------------------------------------

    async def describe_groups(self, req: KafkaRequest) -> Body:
        version, body = req.version, req.body
        allowed, refused = _authorized_groups(req, AclOperation.DESCRIBE, body["groups"])
        described = await self.groups.run_per_group(
            allowed,
            lambda shard, g: shard.describe_groups([g]),
            lambda g, e: m.DescribedGroup(g, "", error=e),
        )
        by_id = {d.group_id: d for d in described}
        by_id.update((g, m.DescribedGroup(g, "", error=e)) for g, e in refused.items())
        with_operations = version >= 3 and bool(body.get("include_authorized_operations"))
        out = []
        for d in (by_id[g] for g in dict.fromkeys(body["groups"])):
            stable = d.group_state == _STABLE
            group: Body = {
                "error_code": _code(d.error),
                "group_id": d.group_id,
                "group_state": d.group_state,
                "protocol_type": d.protocol_type,
                "protocol_data": d.protocol_data,
                "members": [
                    {
                        "member_id": x.member_id,
                        "group_instance_id": x.group_instance_id,
                        "client_id": x.client_id,
                        "client_host": x.client_host,
                        "member_metadata": x.member_metadata,
                        # Kafka's describeNoMetadata: no assignment outside Stable either.
                        "member_assignment": x.member_assignment if stable else b"",
                    }
                    for x in d.members
                ],
            }
            if with_operations and d.group_id and d.group_id not in refused:
                group["authorized_operations"] = _group_operations(req, d.group_id)
            out.append(group)
        return {"groups": out}

    async def list_groups(self, req: KafkaRequest) -> Body:
        version, body = req.version, req.body
        states: list[str] = list(body.get("states_filter") or ()) if version >= 4 else []
        types: list[str] = list(body.get("types_filter") or ()) if version >= 5 else []
        answers = await self.groups.run_on_all(lambda shard, now: shard.list_groups(states, types))
        # A shard unloaded meanwhile has nothing to list here (Kafka skips NOT_COORDINATOR);
        # another refusal is the answer's error.
        error = next(
            (
                a.error
                for a in answers
                if a.error is not None and not isinstance(a.error, NotCoordinatorError)
            ),
            None,
        )
        if error is not None:
            return {"error_code": error.code, "groups": []}
        everything = req.allowed_quietly(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
        listed = sorted(
            (
                g
                for a in answers
                for g in a.groups
                if everything
                or req.allowed_quietly(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
            ),
            key=lambda g: g.group_id,
        )
        return {
            "error_code": 0,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.group_state,
                    "group_type": g.group_type,
                }
                for g in listed
            ],
        }

    async def delete_groups(self, req: KafkaRequest) -> Body:
        allowed, refused = _authorized_groups(req, AclOperation.DELETE, req.body["groups_names"])
        results = await self.groups.run_per_group(
            allowed,
            lambda shard, g: shard.delete_groups([g]),
            lambda g, e: m.DeletableGroupResult(g, e),
        )
        codes = {x.group_id: _code(x.error) for x in results}
        codes.update((g, e.code) for g, e in refused.items())
        return {
            "results": [
                {"group_id": g, "error_code": codes[g]}
                for g in dict.fromkeys(req.body["groups_names"])
            ]
        }

    async def offset_delete(self, req: KafkaRequest) -> Body:
        body = req.body
        group_id = body["group_id"]
        denied = group_denied(req, AclOperation.DELETE, group_id)
        if denied is not None:
            return {"error_code": denied.code, "topics": []}
        refused = denied_topics(req, AclOperation.READ, (t["name"] for t in body["topics"]))
        image = self.groups.image
        known: list[m.TopicPartitionIndexes] = []
        unknown: list[tuple[str, int, int]] = []
        for t in body["topics"]:
            topic = image.topic(t["name"])
            indexes = [p["partition_index"] for p in t["partitions"]]
            if t["name"] in refused:
                unknown += [(t["name"], i, TopicAuthorizationFailedError.code) for i in indexes]
                continue
            present = tuple(i for i in indexes if topic is not None and i in topic.partitions)
            unknown += [
                (t["name"], i, UnknownTopicOrPartitionError.code)
                for i in indexes
                if i not in present
            ]
            if present:
                known.append(m.TopicPartitionIndexes(t["name"], present))
        r = m.OffsetDeleteRequest(group_id, tuple(known))
        response = await self.groups.run(
            group_id,
            lambda shard, now: shard.delete_offsets(r),
            lambda e: m.OffsetDeleteResponse(error=e),
        )
        if response.error is not None:
            return {"error_code": response.error.code, "topics": []}
        errors: dict[str, list[Body]] = {}
        for name, index, code in unknown:
            errors.setdefault(name, []).append({"partition_index": index, "error_code": code})
        for rt in response.topics:
            errors.setdefault(rt.name, []).extend(
                {"partition_index": p.partition_index, "error_code": _code(p.error)}
                for p in rt.partitions
            )
        return {
            "error_code": 0,
            "topics": [{"name": name, "partitions": ps} for name, ps in errors.items()],
        }


def _described_consumer_group(d: m.ConsumerGroupDescribeResult, with_operations: bool) -> Body:
    if d.error is not None:
        # Kafka answers a group it cannot describe with the error alone.
        return {
            "error_code": d.error.code,
            "error_message": _error_message(d.error),
            "group_id": d.group_id,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "assignor_name": "",
            "members": [],
        }
    return {
        "error_code": 0,
        "error_message": None,
        "group_id": d.group_id,
        "group_state": d.group_state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor_name": d.assignor_name,
        "members": [
            {
                "member_id": x.member_id,
                "instance_id": x.instance_id,
                "rack_id": x.rack_id,
                "member_epoch": x.member_epoch,
                "client_id": x.client_id,
                "client_host": x.client_host,
                "subscribed_topic_names": list(x.subscribed_topic_names),
                "subscribed_topic_regex": x.subscribed_topic_regex,
                "assignment": _assignment(x.assignment),
                "target_assignment": _assignment(x.target_assignment),
            }
            for x in d.members
        ],
        "authorized_operations": GROUP_AUTHORIZED_OPERATIONS
        if with_operations
        else _NO_AUTHORIZED_OPERATIONS,
    }


def _assignment(parts: Sequence[m.AssignedTopicPartitions]) -> Body:
    """Topics by id and name; a topic whose name is unknown (deleted) is left out, as Kafka
    leaves out a topic missing from its metadata image."""
    return {
        "topic_partitions": [
            {"topic_id": t.topic_id, "topic_name": t.topic_name, "partitions": sorted(t.partitions)}
            for t in parts
            if t.topic_name is not None
        ]
    }
