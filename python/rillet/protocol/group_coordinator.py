"""GroupService messages to and from the group coordinator's domain values
(:mod:`rillet.coordinator.group.messages`), for the broker side of ``group.proto``."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from rillet.coordinator.group import messages as m
from rillet.errors import KafkaError
from rillet.protocol.errors import set_error
from rillet.protocol.gen.v1 import group_pb2

__all__ = [
    "consumer_group_describe_response",
    "delete_groups_response",
    "describe_groups_response",
    "heartbeat_request_from_pb",
    "heartbeat_response_to_pb",
    "join_group_request_from_pb",
    "join_group_response_to_pb",
    "leave_group_request_from_pb",
    "leave_group_response_to_pb",
    "list_groups_response",
    "offset_commit_request_from_pb",
    "offset_commit_response_to_pb",
    "offset_delete_request_from_pb",
    "offset_delete_response_to_pb",
    "offset_fetch_request_from_pb",
    "offset_fetch_response_to_pb",
    "sync_group_request_from_pb",
    "sync_group_response_to_pb",
    "txn_offset_commit_request_from_pb",
    "txn_offset_commit_response_to_pb",
]


def _err(message: Any, error: KafkaError | None) -> None:
    if error is not None:
        set_error(message, error)


def _opt(message: Any, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


# -- KIP-848 ---------------------------------------------------------------------------------


def heartbeat_request_from_pb(
    pb: group_pb2.ConsumerGroupHeartbeatRequest, client_id: str, client_host: str
) -> m.ConsumerGroupHeartbeatRequest:
    owned = None
    if pb.HasField("topic_partitions"):
        owned = tuple(
            m.OwnedTopicPartitions(uuid.UUID(bytes=bytes(t.topic_id)), tuple(t.partitions))
            for t in pb.topic_partitions.topics
            if len(t.topic_id) == 16
        )
    names = None
    if pb.HasField("subscribed_topic_names"):
        names = tuple(pb.subscribed_topic_names.names)
    return m.ConsumerGroupHeartbeatRequest(
        group_id=pb.group_id,
        member_id=pb.member_id,
        member_epoch=pb.member_epoch,
        instance_id=_opt(pb, "instance_id"),
        rack_id=_opt(pb, "rack_id"),
        rebalance_timeout_ms=pb.rebalance_timeout_ms if pb.HasField("rebalance_timeout_ms") else -1,
        subscribed_topic_names=names,
        subscribed_topic_regex=_opt(pb, "subscribed_topic_regex"),
        server_assignor=_opt(pb, "server_assignor"),
        topic_partitions=owned,
        client_id=client_id,
        client_host=client_host,
    )


def heartbeat_response_to_pb(
    r: m.ConsumerGroupHeartbeatResponse,
) -> group_pb2.ConsumerGroupHeartbeatResponse:
    pb = group_pb2.ConsumerGroupHeartbeatResponse(
        member_id=r.member_id or "",
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
    )
    _err(pb, r.error)
    if r.assignment is not None:
        pb.assignment.SetInParent()
        for t in r.assignment:
            pb.assignment.topic_partitions.add(
                topic_id=t.topic_id.bytes, partitions=sorted(t.partitions)
            )
    return pb


# -- classic ---------------------------------------------------------------------------------


def join_group_request_from_pb(
    pb: group_pb2.JoinGroupRequest, client_id: str, client_host: str
) -> m.JoinGroupRequest:
    return m.JoinGroupRequest(
        group_id=pb.group_id,
        session_timeout_ms=pb.session_timeout_ms,
        rebalance_timeout_ms=pb.rebalance_timeout_ms,
        member_id=pb.member_id,
        group_instance_id=_opt(pb, "group_instance_id"),
        protocol_type=pb.protocol_type,
        protocols=tuple(m.JoinGroupProtocol(p.name, bytes(p.metadata)) for p in pb.protocols),
        client_id=client_id,
        client_host=client_host,
        reason=pb.reason or None,
    )


def join_group_response_to_pb(r: m.JoinGroupResponse) -> group_pb2.JoinGroupResponse:
    pb = group_pb2.JoinGroupResponse(
        generation_id=r.generation_id,
        protocol_type=r.protocol_type or "",
        protocol_name=r.protocol_name or "",
        leader=r.leader,
        member_id=r.member_id,
    )
    _err(pb, r.error)
    for member in r.members:
        out = pb.members.add(member_id=member.member_id, metadata=member.metadata)
        if member.group_instance_id is not None:
            out.group_instance_id = member.group_instance_id
    return pb


def sync_group_request_from_pb(pb: group_pb2.SyncGroupRequest) -> m.SyncGroupRequest:
    return m.SyncGroupRequest(
        group_id=pb.group_id,
        generation_id=pb.generation_id,
        member_id=pb.member_id,
        group_instance_id=_opt(pb, "group_instance_id"),
        protocol_type=pb.protocol_type or None,
        protocol_name=pb.protocol_name or None,
        assignments={a.member_id: bytes(a.assignment) for a in pb.assignments},
    )


def sync_group_response_to_pb(r: m.SyncGroupResponse) -> group_pb2.SyncGroupResponse:
    pb = group_pb2.SyncGroupResponse(
        protocol_type=r.protocol_type or "",
        protocol_name=r.protocol_name or "",
        assignment=r.assignment,
    )
    _err(pb, r.error)
    return pb


def heartbeat_classic_request_from_pb(pb: group_pb2.HeartbeatRequest) -> m.HeartbeatRequest:
    return m.HeartbeatRequest(
        group_id=pb.group_id,
        generation_id=pb.generation_id,
        member_id=pb.member_id,
        group_instance_id=_opt(pb, "group_instance_id"),
    )


def heartbeat_classic_response_to_pb(r: m.HeartbeatResponse) -> group_pb2.HeartbeatResponse:
    pb = group_pb2.HeartbeatResponse()
    _err(pb, r.error)
    return pb


def leave_group_request_from_pb(pb: group_pb2.LeaveGroupRequest) -> m.LeaveGroupRequest:
    return m.LeaveGroupRequest(
        group_id=pb.group_id,
        members=tuple(
            m.MemberIdentity(x.member_id, _opt(x, "group_instance_id"), x.reason or None)
            for x in pb.members
        ),
    )


def leave_group_response_to_pb(r: m.LeaveGroupResponse) -> group_pb2.LeaveGroupResponse:
    pb = group_pb2.LeaveGroupResponse()
    _err(pb, r.error)
    for member in r.members:
        out = pb.members.add(member_id=member.member_id)
        if member.group_instance_id is not None:
            out.group_instance_id = member.group_instance_id
        _err(out, member.error)
    return pb


# -- offsets ---------------------------------------------------------------------------------


def _commit_topics(
    topics: Iterable[group_pb2.OffsetCommitRequest.Topic],
) -> tuple[m.OffsetCommitRequestTopic, ...]:
    return tuple(
        m.OffsetCommitRequestTopic(
            t.name,
            tuple(
                m.OffsetCommitRequestPartition(
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if p.HasField("committed_leader_epoch") else -1,
                    p.committed_metadata,
                )
                for p in t.partitions
            ),
        )
        for t in topics
    )


def offset_commit_request_from_pb(pb: group_pb2.OffsetCommitRequest) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(
        group_id=pb.group_id,
        topics=_commit_topics(pb.topics),
        generation_id_or_member_epoch=pb.generation_id_or_member_epoch,
        member_id=pb.member_id,
        group_instance_id=_opt(pb, "group_instance_id"),
    )


def _partition_errors(topics: Iterable[m.TopicPartitionErrors], out: Any) -> None:
    for t in topics:
        rt = out.add(name=t.name)
        for p in t.partitions:
            rp = rt.partitions.add(partition_index=p.partition_index)
            _err(rp, p.error)


def offset_commit_response_to_pb(r: m.OffsetCommitResponse) -> group_pb2.OffsetCommitResponse:
    pb = group_pb2.OffsetCommitResponse()
    _partition_errors(r.topics, pb.topics)
    return pb


def txn_offset_commit_request_from_pb(
    pb: group_pb2.TxnOffsetCommitRequest,
) -> m.TxnOffsetCommitRequest:
    return m.TxnOffsetCommitRequest(
        transactional_id=pb.transactional_id,
        group_id=pb.group_id,
        producer_id=pb.producer_id,
        producer_epoch=pb.producer_epoch,
        topics=_commit_topics(pb.topics),
        generation_id_or_member_epoch=pb.generation_id_or_member_epoch,
        member_id=pb.member_id,
        group_instance_id=_opt(pb, "group_instance_id"),
    )


def txn_offset_commit_response_to_pb(
    r: m.TxnOffsetCommitResponse,
) -> group_pb2.TxnOffsetCommitResponse:
    pb = group_pb2.TxnOffsetCommitResponse()
    _partition_errors(r.topics, pb.topics)
    return pb


def offset_fetch_request_from_pb(
    group: group_pb2.OffsetFetchRequest.Group, require_stable: bool = False
) -> m.OffsetFetchRequest:
    """One group of an OffsetFetch; ``require_stable`` is the request's."""
    topics = None
    if group.HasField("topics"):
        topics = tuple(
            m.TopicPartitionIndexes(t.name, tuple(t.partition_indexes)) for t in group.topics.topics
        )
    return m.OffsetFetchRequest(
        group_id=group.group_id,
        topics=topics,
        member_id=group.member_id or None,
        member_epoch=group.member_epoch if group.HasField("member_epoch") else -1,
        require_stable=require_stable,
    )


def offset_fetch_response_to_pb(
    responses: Sequence[m.OffsetFetchResponse],
) -> group_pb2.OffsetFetchResponse:
    pb = group_pb2.OffsetFetchResponse()
    for r in responses:
        g = pb.groups.add(group_id=r.group_id)
        _err(g, r.error)
        for t in r.topics:
            rt = g.topics.add(name=t.name)
            for p in t.partitions:
                rp = rt.partitions.add(
                    partition_index=p.partition_index,
                    committed_offset=p.committed_offset,
                    committed_leader_epoch=p.committed_leader_epoch,
                    metadata=p.metadata,
                )
                _err(rp, p.error)
    return pb


def offset_delete_request_from_pb(pb: group_pb2.OffsetDeleteRequest) -> m.OffsetDeleteRequest:
    return m.OffsetDeleteRequest(
        group_id=pb.group_id,
        topics=tuple(m.TopicPartitionIndexes(t.name, tuple(t.partitions)) for t in pb.topics),
    )


def offset_delete_response_to_pb(r: m.OffsetDeleteResponse) -> group_pb2.OffsetDeleteResponse:
    pb = group_pb2.OffsetDeleteResponse()
    _err(pb, r.error)
    _partition_errors(r.topics, pb.topics)
    return pb


# -- groups ----------------------------------------------------------------------------------


def list_groups_response(
    groups: Iterable[m.ListedGroup], error: KafkaError | None = None
) -> group_pb2.ListGroupsResponse:
    pb = group_pb2.ListGroupsResponse()
    _err(pb, error)
    for g in sorted(groups, key=lambda g: g.group_id):
        pb.groups.add(
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.group_state,
            group_type=g.group_type,
        )
    return pb


def describe_groups_response(
    groups: Iterable[m.DescribedGroup],
) -> group_pb2.DescribeGroupsResponse:
    pb = group_pb2.DescribeGroupsResponse()
    for g in groups:
        out = pb.groups.add(
            group_id=g.group_id,
            group_state=g.group_state,
            protocol_type=g.protocol_type,
            protocol_data=g.protocol_data,
        )
        _err(out, g.error)
        for member in g.members:
            mo = out.members.add(
                member_id=member.member_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.member_metadata,
                member_assignment=member.member_assignment,
            )
            if member.group_instance_id is not None:
                mo.group_instance_id = member.group_instance_id
    return pb


def _assigned(out: Any, parts: Iterable[m.AssignedTopicPartitions]) -> None:
    for t in parts:
        out.add(
            topic_id=t.topic_id.bytes,
            topic_name=t.topic_name or "",
            partitions=sorted(t.partitions),
        )


def consumer_group_describe_response(
    groups: Iterable[m.ConsumerGroupDescribeResult],
) -> group_pb2.ConsumerGroupDescribeResponse:
    pb = group_pb2.ConsumerGroupDescribeResponse()
    for g in groups:
        out = pb.groups.add(
            group_id=g.group_id,
            group_state=g.group_state,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor_name=g.assignor_name,
        )
        _err(out, g.error)
        for member in g.members:
            mo = out.members.add(
                member_id=member.member_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
            )
            if member.instance_id is not None:
                mo.instance_id = member.instance_id
            if member.rack_id is not None:
                mo.rack_id = member.rack_id
            if member.subscribed_topic_regex is not None:
                mo.subscribed_topic_regex = member.subscribed_topic_regex
            _assigned(mo.assignment, member.assignment)
            _assigned(mo.target_assignment, member.target_assignment)
    return pb


def delete_groups_response(
    results: Iterable[m.DeletableGroupResult],
) -> group_pb2.DeleteGroupsResponse:
    pb = group_pb2.DeleteGroupsResponse()
    for r in results:
        out = pb.results.add(group_id=r.group_id)
        _err(out, r.error)
    return pb
