"""FindCoordinator, the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
and OffsetCommit/OffsetFetch over Kafka's protocol: request dicts to the group coordinator's
messages (:mod:`rillet.coordinator.group.messages`, the same state machine the gRPC API
drives) and its answers back to response dicts. What a request's version says about the
client is passed on: JoinGroup v4+ clients take MEMBER_ID_REQUIRED, v9+ know
``skip_assignment`` (KIP-814)."""

from __future__ import annotations

from collections.abc import Mapping

from rillet.broker.coordinator_lookup import find_coordinator
from rillet.broker.group_coordinator import GroupCoordinator
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.coordinator.group import messages as m
from rillet.coordinator.group.offsets import error_commit_response
from rillet.coordinator.group.txn_offsets import error_txn_commit_response
from rillet.errors import KafkaError
from rillet.server.kafka.request import Body, KafkaRequest, Served

__all__ = ["KafkaGroups"]


def _code(err: KafkaError | None) -> int:
    return err.code if err is not None else 0


def _message(err: KafkaError | None) -> str | None:
    return err.message if err is not None else None


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
            8: Served(2, 8, self.offset_commit),  # OffsetCommit
            9: Served(1, 7, self.offset_fetch),  # OffsetFetch
            28: Served(0, 3, self.txn_offset_commit),  # TxnOffsetCommit
        }

    # -- FindCoordinator ----------------------------------------------------------------------

    async def find_coordinator(self, req: KafkaRequest) -> Body:
        version, body, listener_name = req.version, req.body, req.listener_name
        keys = body.get("coordinator_keys") or [body.get("key", "")]
        found = [await self._find(body.get("key_type", 0), k, listener_name) for k in keys]
        if version >= 4:
            return {"coordinators": found}
        (one,) = found  # v0-3 ask for one key
        return {k: v for k, v in one.items() if k != "key"}

    async def _find(self, key_type: int, key: str, listener_name: str) -> Body:
        found = await find_coordinator(self.groups, self.transactions, key_type, key, listener_name)
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
        response = await self.groups.run_parked(
            r.group_id,
            lambda shard, handle, now: shard.join_group(r, handle, now),
            lambda e: m.JoinGroupResponse(error=e, member_id=r.member_id),
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
        response = await self.groups.run_parked(
            r.group_id,
            lambda shard, handle, now: shard.sync_group(r, handle, now),
            lambda e: m.SyncGroupResponse(error=e),
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
        response = await self.groups.run(
            r.group_id,
            lambda shard, now: shard.heartbeat(r, now),
            lambda e: m.HeartbeatResponse(error=e),
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
        response = await self.groups.run(
            r.group_id,
            lambda shard, now: shard.leave_group(r, now),
            lambda e: m.LeaveGroupResponse(error=e),
        )
        error = response.error
        if version < 3 and error is None:
            error = next((x.error for x in response.members if x.error is not None), None)
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
        body = req.body
        r = m.OffsetCommitRequest(
            group_id=body["group_id"],
            topics=_commit_topics(body["topics"]),
            generation_id_or_member_epoch=body.get("generation_id_or_member_epoch", -1),
            member_id=body.get("member_id", ""),
            group_instance_id=body.get("group_instance_id"),
        )
        response = await self.groups.run(
            r.group_id,
            lambda shard, now: shard.commit_offsets(r, now),
            lambda e: error_commit_response(r, e),
        )
        return {"topics": _partition_errors(response.topics)}

    async def txn_offset_commit(self, req: KafkaRequest) -> Body:
        body = req.body
        r = m.TxnOffsetCommitRequest(
            transactional_id=body["transactional_id"],
            group_id=body["group_id"],
            producer_id=body["producer_id"],
            producer_epoch=body["producer_epoch"],
            topics=_commit_topics(body["topics"]),
            generation_id_or_member_epoch=body.get("generation_id", -1),
            member_id=body.get("member_id", ""),
            group_instance_id=body.get("group_instance_id"),
        )
        response = await self.groups.run(
            r.group_id,
            lambda shard, now: shard.txn_offset_commit(r, now),
            lambda e: error_txn_commit_response(r, e),
        )
        return {"topics": _partition_errors(response.topics)}

    async def offset_fetch(self, req: KafkaRequest) -> Body:
        version, body = req.version, req.body
        topics = body.get("topics")
        r = m.OffsetFetchRequest(
            group_id=body["group_id"],
            topics=None
            if topics is None
            else tuple(
                m.TopicPartitionIndexes(t["name"], tuple(t["partition_indexes"])) for t in topics
            ),
            require_stable=bool(body.get("require_stable", False)),
        )
        response = await self.groups.run(
            r.group_id,
            lambda shard, now: shard.fetch_offsets(r),
            lambda e: m.OffsetFetchResponse(r.group_id, error=e),
        )
        # Before v2 a group-level error goes to every partition asked.
        group_error = response.error if version < 2 else None
        topics_out = [
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
            for t in response.topics
        ]
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


def _partition_errors(topics: tuple[m.TopicPartitionErrors, ...]) -> list[Body]:
    return [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": _code(p.error)}
                for p in t.partitions
            ],
        }
        for t in topics
    ]
