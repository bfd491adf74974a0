"""GroupService over :class:`~rillet.broker.group_coordinator.GroupCoordinator`: decode, run
on the group's shard, encode. With an authorizer, OffsetCommit and TxnOffsetCommit check READ
per topic, as Kafka does: a topic the caller may not read is answered
TOPIC_AUTHORIZATION_FAILED for each of its partitions, and the others are committed."""

from __future__ import annotations

from typing import TypeVar

import grpc

from rillet.broker.coordinator_lookup import find_coordinator
from rillet.broker.group_coordinator import GroupCoordinator
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.coordinator.group import messages as m
from rillet.coordinator.group.txn_offsets import error_txn_commit_response
from rillet.errors import KafkaError
from rillet.protocol import group_coordinator as conv
from rillet.protocol.errors import set_error
from rillet.protocol.gen.v1 import group_pb2, group_pb2_grpc
from rillet.security.acls import AclOperation
from rillet.server.grpc.acl_policy import topic_refusals
from rillet.server.grpc.authorization import call_session, peer_host

__all__ = ["GroupServicer"]

Context = grpc.aio.ServicerContext[object, object]

R = TypeVar("R")


Commit = TypeVar("Commit", group_pb2.OffsetCommitRequest, group_pb2.TxnOffsetCommitRequest)


def _unreadable(request: Commit) -> tuple[Commit, list[group_pb2.OffsetCommitResponse.Topic]]:
    """``request`` without the topics the caller may not read, and their answers."""
    refused = topic_refusals(call_session(), AclOperation.READ, (t.name for t in request.topics))
    if not refused:
        return request, []
    kept = type(request)()
    kept.CopyFrom(request)
    del kept.topics[:]
    kept.topics.extend(t for t in request.topics if t.name not in refused)
    answers = [
        group_pb2.OffsetCommitResponse.Topic(
            name=t.name,
            partitions=[
                group_pb2.OffsetCommitResponse.Partition(
                    partition_index=p.partition_index,
                    error_code=refused[t.name].code,  # type: ignore[arg-type]  # a Kafka code
                    error_message=refused[t.name].message,
                )
                for p in t.partitions
            ],
        )
        for t in request.topics
        if t.name in refused
    ]
    return kept, answers


def _client(context: Context) -> tuple[str, str]:
    """(client id, client host) of the caller, as Kafka's request context has them."""
    client_id = ""
    for key, value in context.invocation_metadata() or ():
        if key == "client-id":
            client_id = str(value)
    return client_id, "/" + peer_host(context.peer() or "")


class GroupServicer(group_pb2_grpc.GroupServiceServicer):
    """Names coordinators by the endpoints of ``listener_name``."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        listener_name: str,
        transactions: TransactionCoordinator | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.listener_name = listener_name
        self.transactions = transactions

    async def FindCoordinator(
        self, request: group_pb2.FindCoordinatorRequest, context: Context
    ) -> group_pb2.FindCoordinatorResponse:
        """GROUP keys (0) to the group coordinator, TRANSACTION keys (1) to the transaction
        coordinator; each creates its topic on first use."""
        response = group_pb2.FindCoordinatorResponse()
        for key in request.coordinator_keys:
            out = response.coordinators.add(key=key, node_id=-1, port=-1)
            found = await find_coordinator(
                self.coordinator, self.transactions, request.key_type, key, self.listener_name
            )
            if isinstance(found, KafkaError):
                set_error(out, found)
                continue
            node, endpoint = found
            out.node_id, out.host, out.port = node, endpoint.host, endpoint.port
        return response

    # -- KIP-848 -------------------------------------------------------------------------------

    async def ConsumerGroupHeartbeat(
        self, request: group_pb2.ConsumerGroupHeartbeatRequest, context: Context
    ) -> group_pb2.ConsumerGroupHeartbeatResponse:
        r = conv.heartbeat_request_from_pb(request, *_client(context))
        response = await self.coordinator.run(
            r.group_id,
            lambda shard, now: shard.consumer_group_heartbeat(r, now),
            lambda e: m.ConsumerGroupHeartbeatResponse(error=e),
        )
        return conv.heartbeat_response_to_pb(response)

    # -- classic -------------------------------------------------------------------------------

    async def JoinGroup(
        self, request: group_pb2.JoinGroupRequest, context: Context
    ) -> group_pb2.JoinGroupResponse:
        r = conv.join_group_request_from_pb(request, *_client(context))
        response = await self.coordinator.run_parked(
            r.group_id,
            lambda shard, handle, now: shard.join_group(r, handle, now),
            lambda e: m.JoinGroupResponse(error=e, member_id=r.member_id),
        )
        return conv.join_group_response_to_pb(response)

    async def SyncGroup(
        self, request: group_pb2.SyncGroupRequest, context: Context
    ) -> group_pb2.SyncGroupResponse:
        r = conv.sync_group_request_from_pb(request)
        response = await self.coordinator.run_parked(
            r.group_id,
            lambda shard, handle, now: shard.sync_group(r, handle, now),
            lambda e: m.SyncGroupResponse(error=e),
        )
        return conv.sync_group_response_to_pb(response)

    async def Heartbeat(
        self, request: group_pb2.HeartbeatRequest, context: Context
    ) -> group_pb2.HeartbeatResponse:
        r = conv.heartbeat_classic_request_from_pb(request)
        response = await self.coordinator.run(
            r.group_id,
            lambda shard, now: shard.heartbeat(r, now),
            lambda e: m.HeartbeatResponse(error=e),
        )
        return conv.heartbeat_classic_response_to_pb(response)

    async def LeaveGroup(
        self, request: group_pb2.LeaveGroupRequest, context: Context
    ) -> group_pb2.LeaveGroupResponse:
        r = conv.leave_group_request_from_pb(request)
        response = await self.coordinator.run(
            r.group_id,
            lambda shard, now: shard.leave_group(r, now),
            lambda e: m.LeaveGroupResponse(error=e),
        )
        return conv.leave_group_response_to_pb(response)

    # -- offsets -------------------------------------------------------------------------------

    async def OffsetCommit(
        self, request: group_pb2.OffsetCommitRequest, context: Context
    ) -> group_pb2.OffsetCommitResponse:
        request, refused = _unreadable(request)
        if refused and not request.topics:
            return group_pb2.OffsetCommitResponse(topics=refused)
        r = conv.offset_commit_request_from_pb(request)
        response = await self.coordinator.run(
            r.group_id,
            lambda shard, now: shard.commit_offsets(r, now),
            lambda e: _commit_error(r, e),
        )
        out = conv.offset_commit_response_to_pb(response)
        out.topics.extend(refused)
        return out

    async def TxnOffsetCommit(
        self, request: group_pb2.TxnOffsetCommitRequest, context: Context
    ) -> group_pb2.TxnOffsetCommitResponse:
        request, refused = _unreadable(request)
        if refused and not request.topics:
            return group_pb2.TxnOffsetCommitResponse(topics=refused)
        r = conv.txn_offset_commit_request_from_pb(request)
        response = await self.coordinator.run(
            r.group_id,
            lambda shard, now: shard.txn_offset_commit(r, now),
            lambda e: error_txn_commit_response(r, e),
        )
        out = conv.txn_offset_commit_response_to_pb(response)
        out.topics.extend(refused)
        return out

    async def OffsetFetch(
        self, request: group_pb2.OffsetFetchRequest, context: Context
    ) -> group_pb2.OffsetFetchResponse:
        responses = []
        for group in request.groups:
            r = conv.offset_fetch_request_from_pb(group, request.require_stable)
            responses.append(
                await self.coordinator.run(
                    r.group_id,
                    lambda shard, now, r=r: shard.fetch_offsets(r),  # type: ignore[misc]
                    lambda e, r=r: m.OffsetFetchResponse(r.group_id, error=e),  # type: ignore[misc]
                )
            )
        return conv.offset_fetch_response_to_pb(responses)

    async def OffsetDelete(
        self, request: group_pb2.OffsetDeleteRequest, context: Context
    ) -> group_pb2.OffsetDeleteResponse:
        r = conv.offset_delete_request_from_pb(request)
        response = await self.coordinator.run(
            r.group_id,
            lambda shard, now: shard.delete_offsets(r),
            lambda e: m.OffsetDeleteResponse(error=e),
        )
        return conv.offset_delete_response_to_pb(response)

    # -- groups --------------------------------------------------------------------------------

    async def ListGroups(
        self, request: group_pb2.ListGroupsRequest, context: Context
    ) -> group_pb2.ListGroupsResponse:
        states, types = list(request.states_filter), list(request.types_filter)
        answers = await self.coordinator.run_on_all(
            lambda shard, now: shard.list_groups(states, types)
        )
        return conv.list_groups_response(g for a in answers for g in a.groups)

    async def DescribeGroups(
        self, request: group_pb2.DescribeGroupsRequest, context: Context
    ) -> group_pb2.DescribeGroupsResponse:
        described = await self.coordinator.run_per_group(
            list(request.groups),
            lambda shard, g: shard.describe_groups([g]),
            lambda g, e: m.DescribedGroup(g, "", error=e),
        )
        return conv.describe_groups_response(described)

    async def ConsumerGroupDescribe(
        self, request: group_pb2.ConsumerGroupDescribeRequest, context: Context
    ) -> group_pb2.ConsumerGroupDescribeResponse:
        described = await self.coordinator.run_per_group(
            list(request.group_ids),
            lambda shard, g: shard.consumer_group_describe([g]),
            lambda g, e: m.ConsumerGroupDescribeResult(g, e),
        )
        return conv.consumer_group_describe_response(described)

    async def DeleteGroups(
        self, request: group_pb2.DeleteGroupsRequest, context: Context
    ) -> group_pb2.DeleteGroupsResponse:
        results = await self.coordinator.run_per_group(
            list(request.groups_names),
            lambda shard, g: shard.delete_groups([g]),
            lambda g, e: m.DeletableGroupResult(g, e),
        )
        return conv.delete_groups_response(results)


def _commit_error(request: m.OffsetCommitRequest, error: KafkaError) -> m.OffsetCommitResponse:
    return m.OffsetCommitResponse(
        tuple(
            m.TopicPartitionErrors(
                t.name, tuple(m.PartitionError(p.partition_index, error) for p in t.partitions)
            )
            for t in request.topics
        )
    )
