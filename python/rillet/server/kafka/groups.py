"""FindCoordinator, the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
and OffsetCommit/OffsetFetch/TxnOffsetCommit over Kafka's protocol: request dicts to the
group coordinator's messages (:mod:`rillet.coordinator.group.messages`, the same state
machine the gRPC API drives) and its answers back to response dicts. What a request's version
says about the client is passed on: JoinGroup v4+ clients take MEMBER_ID_REQUIRED, v9+ know
``skip_assignment`` (KIP-814).

Offsets serve KIP-848 members as well as classic ones: OffsetCommit v9 carries a consumer
group member's epoch in ``generation_id_or_member_epoch`` (checked by the coordinator:
UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), OffsetFetch v8+ asks for several groups and v9 names
the member and its epoch. These schemas' OffsetCommit/OffsetFetch name topics, not topic ids
(topic ids come with Kafka's v10). KIP-848 heartbeats and the group admin requests are
:mod:`rillet.server.kafka.consumer_groups`.

With an authorizer, each request is checked as Kafka's KafkaApis checks it:

- **FindCoordinator**: DESCRIBE on the group (key type 0) or transactional id (1); refused,
  the key is answered GROUP_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED (per
  key from v4, the top-level error before).
- **JoinGroup, SyncGroup, Heartbeat, LeaveGroup**: READ on the group, else the top-level
  GROUP_AUTHORIZATION_FAILED (LeaveGroup v3+ with no members).
- **OffsetCommit**: READ on the group (refused: every partition GROUP_AUTHORIZATION_FAILED),
  then READ on each topic (refused: its partitions TOPIC_AUTHORIZATION_FAILED, the other
  topics' offsets still committed).
- **OffsetFetch**: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED: top-level before v8,
  per group from v8) and on each topic: a topic asked for by name that may not be described
  is TOPIC_AUTHORIZATION_FAILED for each partition; asking for all, such topics are left out.
- **TxnOffsetCommit**: WRITE on the transactional id, then READ on the group (refused:
  every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED or GROUP_AUTHORIZATION_FAILED), then
  READ on each topic as OffsetCommit."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from rillet.broker.coordinator_lookup import find_coordinator
from rillet.broker.group_coordinator import GroupCoordinator
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.coordinator.group import messages as m
from rillet.coordinator.group.consumer_group import ConsumerGroup
from rillet.coordinator.group.offsets import error_commit_response
from rillet.coordinator.group.results import CoordinatorResult
from rillet.coordinator.group.shard import GroupCoordinatorShard
from rillet.coordinator.group.txn_offsets import error_txn_commit_response
from rillet.errors import (
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from rillet.metadata.image import MetadataImage
from rillet.security.acls import AclOperation, ResourceType
from rillet.server.kafka.request import Body, KafkaRequest, Served

__all__ = ["KafkaGroups"]


def _code(err: KafkaError | None) -> int:
    return err.code if err is not None else 0


def _message(err: KafkaError | None) -> str | None:
    return err.message if err is not None else None


def group_denied(
    req: KafkaRequest, operation: AclOperation, group_id: str
) -> GroupAuthorizationFailedError | None:
    """GROUP_AUTHORIZATION_FAILED when the sender may not do ``operation`` on the group."""
    if req.allowed(operation, ResourceType.GROUP, group_id):
        return None
    return GroupAuthorizationFailedError(f"Not authorized to access group: {group_id}")


def denied_topics(req: KafkaRequest, operation: AclOperation, names: Iterable[str]) -> set[str]:
    """The topics the sender may not do ``operation`` on, each name checked once (Kafka's
    ``filterByAuthorized``)."""
    return {n for n in dict.fromkeys(names) if not req.allowed(operation, ResourceType.TOPIC, n)}


def _names(topics: list[Body]) -> list[str]:
    return [t["name"] for t in topics]


def transactional_id_denied(
    req: KafkaRequest, transactional_id: str, operation: AclOperation = AclOperation.WRITE
) -> TransactionalIdAuthorizationFailedError | None:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED when the sender may not do ``operation`` on the
    transactional id."""
    if req.allowed(operation, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return None
    return TransactionalIdAuthorizationFailedError(
        f"Not authorized to access transactional id: {transactional_id}"
    )


def _every_partition(topics: list[Body], code: int) -> list[tuple[str, int, int]]:
    """``(topic, partition, code)`` for every partition of ``topics`` (OffsetCommit-shaped)."""
    return [(t["name"], p["partition_index"], code) for t in topics for p in t["partitions"]]


class KafkaGroups:
    """The group handlers of one broker; coordinators are named by the endpoints of the
    listener the request came on."""

    def __init__(
        self, groups: GroupCoordinator, transactions: TransactionCoordinator | None
    ) -> None:
        self.groups = groups
        self.transactions = transactions

    def served(self) -> Mapping[int, Served]:
        return {
            10: Served(0, 5, self.find_coordinator),  # FindCoordinator
            11: Served(0, 9, self.join_group),  # JoinGroup
            14: Served(0, 5, self.sync_group),  # SyncGroup
            12: Served(0, 4, self.heartbeat),  # Heartbeat
            13: Served(0, 5, self.leave_group),  # LeaveGroup
            8: Served(2, 9, self.offset_commit),  # OffsetCommit
            9: Served(1, 9, self.offset_fetch),  # OffsetFetch
            28: Served(0, 3, self.txn_offset_commit),  # TxnOffsetCommit
        }

    # -- FindCoordinator ----------------------------------------------------------------------

    async def find_coordinator(self, req: KafkaRequest) -> Body:
        version, body, listener_name = req.version, req.body, req.listener_name
        keys = body.get("coordinator_keys") or [body.get("key", "")]
        found = [await self._find(req, body.get("key_type", 0), k, listener_name) for k in keys]
        if version >= 4:
            return {"coordinators": found}
        (one,) = found  # v0-3 ask for one key
        return {k: v for k, v in one.items() if k != "key"}

    async def _find(self, req: KafkaRequest, key_type: int, key: str, listener_name: str) -> Body:
        denied: KafkaError | None = None
        if key_type == 0:
            denied = group_denied(req, AclOperation.DESCRIBE, key)
        elif key_type == 1:
            denied = transactional_id_denied(req, key, AclOperation.DESCRIBE)
        found: tuple[int, Any] | KafkaError = (
            denied
            if denied is not None
            else await find_coordinator(
                self.groups, self.transactions, key_type, key, listener_name
            )
        )
        if isinstance(found, KafkaError):
            return {
                "key": key,
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": found.code,
                "error_message": found.message,
            }
        node, ep = found
        return {"key": key, "node_id": node, "host": ep.host, "port": ep.port, "error_code": 0}

    # -- the classic protocol -----------------------------------------------------------------

    async def join_group(self, req: KafkaRequest) -> Body:
        version, body, client = req.version, req.body, req.client
        r = m.JoinGroupRequest(
            group_id=body["group_id"],
            session_timeout_ms=body["session_timeout_ms"],
            rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1)
            if version >= 1
            else body["session_timeout_ms"],
            member_id=body["member_id"],
            group_instance_id=body.get("group_instance_id"),
            protocol_type=body["protocol_type"],
            protocols=tuple(
                m.JoinGroupProtocol(p["name"], p["metadata"]) for p in body["protocols"]
            ),
            client_id=client[0],
            client_host=client[1],
            reason=body.get("reason"),
            require_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
        )
        denied = group_denied(req, AclOperation.READ, r.group_id)
        response = (
            m.JoinGroupResponse(error=denied)  # as Kafka's getErrorResponse: no member id
            if denied
            else await self.groups.run_parked(
                r.group_id,
                lambda shard, handle, now: shard.join_group(r, handle, now),
                lambda e: m.JoinGroupResponse(error=e, member_id=r.member_id),
            )
        )
        out: Body = {
            "error_code": _code(response.error),
            "generation_id": response.generation_id,
            "protocol_name": response.protocol_name
            if version >= 7
            else (response.protocol_name or ""),
            "leader": response.leader,
            "member_id": response.member_id,
            "members": [
                {
                    "member_id": x.member_id,
                    "group_instance_id": x.group_instance_id,
                    "metadata": x.metadata,
                }
                for x in response.members
            ],
        }
        if version >= 7:
            out["protocol_type"] = response.protocol_type
        if version >= 9:
            out["skip_assignment"] = response.skip_assignment
        return out

    async def sync_group(self, req: KafkaRequest) -> Body:
        version, body = req.version, req.body
        r = m.SyncGroupRequest(
            group_id=body["group_id"],
            generation_id=body["generation_id"],
            member_id=body["member_id"],
            group_instance_id=body.get("group_instance_id"),
            protocol_type=body.get("protocol_type"),
            protocol_name=body.get("protocol_name"),
            assignments={a["member_id"]: a["assignment"] for a in body["assignments"]},
        )
        denied = group_denied(req, AclOperation.READ, r.group_id)
        response = (
            m.SyncGroupResponse(error=denied)
            if denied
            else await self.groups.run_parked(
                r.group_id,
                lambda shard, handle, now: shard.sync_group(r, handle, now),
                lambda e: m.SyncGroupResponse(error=e),
            )
        )
        out: Body = {"error_code": _code(response.error), "assignment": response.assignment}
        if version >= 5:
            out.update(protocol_type=response.protocol_type, protocol_name=response.protocol_name)
        return out

    async def heartbeat(self, req: KafkaRequest) -> Body:
        body = req.body
        r = m.HeartbeatRequest(
            group_id=body["group_id"],
            generation_id=body["generation_id"],
            member_id=body["member_id"],
            group_instance_id=body.get("group_instance_id"),
        )
        denied = group_denied(req, AclOperation.READ, r.group_id)
        response = (
            m.HeartbeatResponse(error=denied)
            if denied
            else await self.groups.run(
                r.group_id,
                lambda shard, now: shard.heartbeat(r, now),
                lambda e: m.HeartbeatResponse(error=e),
            )
        )
        return {"error_code": _code(response.error)}

    async def leave_group(self, req: KafkaRequest) -> Body:
        version, body = req.version, req.body
        if version >= 3:
            members = tuple(
                m.MemberIdentity(x["member_id"], x.get("group_instance_id"), x.get("reason"))
                for x in body["members"]
            )
        else:
            members = (m.MemberIdentity(body["member_id"], None, None),)
        r = m.LeaveGroupRequest(group_id=body["group_id"], members=members)
        denied = group_denied(req, AclOperation.READ, r.group_id)
        response = (
            m.LeaveGroupResponse(error=denied)
            if denied
            else await self.groups.run(
                r.group_id,
                lambda shard, now: shard.leave_group(r, now),
                lambda e: m.LeaveGroupResponse(error=e),
            )
        )
        error = response.error
        if version < 3:  # one member, no list
            if error is None:
                error = next((x.error for x in response.members if x.error is not None), None)
            return {"error_code": _code(error)}
        return {
            "error_code": _code(error),
            "members": [
                {
                    "member_id": x.member_id,
                    "group_instance_id": x.group_instance_id,
                    "error_code": _code(x.error),
                }
                for x in response.members
            ],
        }

    # -- offsets ------------------------------------------------------------------------------

    async def offset_commit(self, req: KafkaRequest) -> Body:
        """Partitions the metadata does not have are answered UNKNOWN_TOPIC_OR_PARTITION
        without asking the coordinator, as Kafka does. Before v9 (the first version a
        KIP-848 member may use), a member of a consumer group gets UNSUPPORTED_VERSION and
        a commit with a generation to a group that does not exist ILLEGAL_GENERATION (v9+:
        GROUP_ID_NOT_FOUND), as Kafka answers them."""
        version, body = req.version, req.body
        group_error = group_denied(req, AclOperation.READ, body["group_id"])
        if group_error is not None:  # every partition asked, known or not, as Kafka
            denied = _every_partition(body["topics"], group_error.code)
            return {"topics": _merged_partition_errors((), denied, body["topics"])}
        refused = denied_topics(req, AclOperation.READ, _names(body["topics"]))
        known, unknown = _split_known(self.groups.image, body["topics"], refused)
        r = m.OffsetCommitRequest(
            group_id=body["group_id"],
            topics=_commit_topics(known),
            generation_id_or_member_epoch=body.get("generation_id_or_member_epoch", -1),
            member_id=body.get("member_id", ""),
            group_instance_id=body.get("group_instance_id"),
        )

        def commit(
            shard: GroupCoordinatorShard, now: int
        ) -> CoordinatorResult[m.OffsetCommitResponse]:
            group = shard.state.groups.get(r.group_id)
            if version < 9 and isinstance(group, ConsumerGroup) and r.member_id in group.members:
                error = UnsupportedVersionError(
                    "OffsetCommit version 9 or above must be used by members using the "
                    "modern group protocol"
                )
                return CoordinatorResult(response=error_commit_response(r, error))
            return shard.commit_offsets(r, now)

        committed: tuple[m.TopicPartitionErrors, ...] = ()
        if r.topics:
            response = await self.groups.run(
                r.group_id, commit, lambda e: error_commit_response(r, e)
            )
            committed = response.topics
        out = _merged_partition_errors(committed, unknown, body["topics"])
        if version < 9:
            for t in out:
                for p in t["partitions"]:
                    if p["error_code"] == GroupIdNotFoundError.code:
                        p["error_code"] = IllegalGenerationError.code
        return {"topics": out}

    async def txn_offset_commit(self, req: KafkaRequest) -> Body:
        body = req.body
        error = transactional_id_denied(req, body["transactional_id"]) or group_denied(
            req, AclOperation.READ, body["group_id"]
        )
        if error is not None:  # every partition asked, as Kafka's getErrorResponse
            denied = _every_partition(body["topics"], error.code)
            return {"topics": _merged_partition_errors((), denied, body["topics"])}
        refused = denied_topics(req, AclOperation.READ, _names(body["topics"]))
        r = m.TxnOffsetCommitRequest(
            transactional_id=body["transactional_id"],
            group_id=body["group_id"],
            producer_id=body["producer_id"],
            producer_epoch=body["producer_epoch"],
            topics=_commit_topics([t for t in body["topics"] if t["name"] not in refused]),
            generation_id_or_member_epoch=body.get("generation_id", -1),
            member_id=body.get("member_id", ""),
            group_instance_id=body.get("group_instance_id"),
        )
        answered: tuple[m.TopicPartitionErrors, ...] = ()
        if r.topics:
            response = await self.groups.run(
                r.group_id,
                lambda shard, now: shard.txn_offset_commit(r, now),
                lambda e: error_txn_commit_response(r, e),
            )
            answered = response.topics
        denied = _every_partition(
            [t for t in body["topics"] if t["name"] in refused],
            TopicAuthorizationFailedError.code,
        )
        return {"topics": _merged_partition_errors(answered, denied, body["topics"])}

    async def offset_fetch(self, req: KafkaRequest) -> Body:
        """v1-7 fetch one group's offsets, v8+ several groups' (each run on its shard);
        v9 adds the KIP-848 member's id and epoch, checked by the coordinator
        (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH) when given. A group that does not exist
        has no offsets (-1), as in Kafka."""
        version, body = req.version, req.body
        require_stable = bool(body.get("require_stable", False))
        if version >= 8:
            groups = []
            for g in body["groups"]:
                response = await self._fetch(
                    req,
                    m.OffsetFetchRequest(
                        group_id=g["group_id"],
                        topics=_fetch_topics(g.get("topics")),
                        member_id=g.get("member_id"),
                        member_epoch=g.get("member_epoch", -1),
                        require_stable=require_stable,
                    ),
                )
                groups.append(
                    {
                        "group_id": response.group_id,
                        "topics": [] if response.error else _fetched_topics(response.topics),
                        "error_code": _code(response.error),
                    }
                )
            return {"groups": groups}
        topics = body.get("topics")
        response = await self._fetch(
            req,
            m.OffsetFetchRequest(
                group_id=body["group_id"],
                topics=_fetch_topics(topics),
                require_stable=require_stable,
            ),
        )
        # Before v2 a group-level error goes to every partition asked.
        group_error = response.error if version < 2 else None
        topics_out = _fetched_topics(response.topics, group_error)
        if group_error is not None and topics is not None and not response.topics:
            topics_out = [
                {
                    "name": t["name"],
                    "partitions": [
                        {
                            "partition_index": i,
                            "committed_offset": -1,
                            "error_code": group_error.code,
                        }
                        for i in t["partition_indexes"]
                    ],
                }
                for t in topics
            ]
        if version < 2:
            return {"topics": topics_out}
        return {"error_code": _code(response.error), "topics": topics_out}

    async def _fetch(self, req: KafkaRequest, r: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
        """One group's offsets, as far as the sender may see them: a group it may not
        describe is GROUP_AUTHORIZATION_FAILED, a topic named that it may not describe
        TOPIC_AUTHORIZATION_FAILED, and with no topics named the others are left out."""
        denied = group_denied(req, AclOperation.DESCRIBE, r.group_id)
        if denied is not None:
            return m.OffsetFetchResponse(r.group_id, error=denied)
        response = await self.groups.run(
            r.group_id,
            lambda shard, now: shard.fetch_offsets(r),
            lambda e: m.OffsetFetchResponse(r.group_id, error=e),
        )
        if req.authorizer is None or response.error is not None:
            return response
        # Topics named are checked as Kafka checks them (a denial logged); with none named,
        # the group's other topics are quietly left out.
        allowed = req.allowed if r.topics is not None else req.allowed_quietly
        topics = []
        for t in response.topics:
            if allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name):
                topics.append(t)
            elif r.topics is not None:
                refused = TopicAuthorizationFailedError(
                    f"Not authorized to access topics: [{t.name}]"
                )
                topics.append(
                    m.OffsetFetchResponseTopic(
                        t.name,
                        tuple(
                            m.OffsetFetchResponsePartition(p.partition_index, error=refused)
                            for p in t.partitions
                        ),
                    )
                )
        return dataclasses.replace(response, topics=tuple(topics))


def _fetch_topics(topics: list[Body] | None) -> tuple[m.TopicPartitionIndexes, ...] | None:
    if topics is None:
        return None
    return tuple(m.TopicPartitionIndexes(t["name"], tuple(t["partition_indexes"])) for t in topics)


def _fetched_topics(
    topics: tuple[m.OffsetFetchResponseTopic, ...], group_error: KafkaError | None = None
) -> list[Body]:
    return [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": p.committed_leader_epoch,
                    "metadata": p.metadata,
                    "error_code": _code(p.error or group_error),
                }
                for p in t.partitions
            ],
        }
        for t in topics
    ]


def _split_known(
    image: MetadataImage, topics: list[Body], refused: set[str]
) -> tuple[list[Body], list[tuple[str, int, int]]]:
    """The topics' partitions the metadata has, and (topic, partition, error code) of those
    it has not (UNKNOWN_TOPIC_OR_PARTITION) or that are ``refused``
    (TOPIC_AUTHORIZATION_FAILED)."""
    known: list[Body] = []
    unknown: list[tuple[str, int, int]] = []
    for t in topics:
        topic = image.topic(t["name"])
        present = []
        for p in t["partitions"]:
            if t["name"] in refused:
                unknown.append(
                    (t["name"], p["partition_index"], TopicAuthorizationFailedError.code)
                )
            elif topic is not None and p["partition_index"] in topic.partitions:
                present.append(p)
            else:
                unknown.append((t["name"], p["partition_index"], UnknownTopicOrPartitionError.code))
        if present:
            known.append({**t, "partitions": present})
    return known, unknown


def _commit_topics(topics: list[Body]) -> tuple[m.OffsetCommitRequestTopic, ...]:
    return tuple(
        m.OffsetCommitRequestTopic(
            t["name"],
            tuple(
                m.OffsetCommitRequestPartition(
                    p["partition_index"],
                    p["committed_offset"],
                    p.get("committed_leader_epoch", -1),
                    p.get("committed_metadata") or "",
                )
                for p in t["partitions"]
            ),
        )
        for t in topics
    )


def _merged_partition_errors(
    answered: tuple[m.TopicPartitionErrors, ...],
    unanswered: list[tuple[str, int, int]],
    requested: list[Body],
) -> list[Body]:
    """The coordinator's answers and the ``(topic, partition, error code)`` of the partitions
    it was not asked about, one entry per topic, in the request's order."""
    by_topic: dict[str, list[Body]] = {t["name"]: [] for t in requested}
    for name, index, code in unanswered:
        by_topic[name].append({"partition_index": index, "error_code": code})
    for t in answered:
        by_topic.setdefault(t.name, []).extend(
            {"partition_index": p.partition_index, "error_code": _code(p.error)}
            for p in t.partitions
        )
    return [{"name": name, "partitions": ps} for name, ps in by_topic.items() if ps]
