"""GroupService messages (``proto/rillet/v1/group.proto``) to and from the client's domain
types: KIP-848 heartbeats, committed offsets."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from rillet.client.consumer.membership import Assignment, HeartbeatRequest, HeartbeatResponse
from rillet.errors import error_for_code
from rillet.protocol.gen.v1 import group_pb2

__all__ = [
    "assignment_from_pb",
    "assignment_to_pb",
    "heartbeat_request_to_pb",
    "heartbeat_response_from_pb",
]


def assignment_to_pb(assignment: Assignment) -> list[group_pb2.TopicIdPartitions]:
    return [
        group_pb2.TopicIdPartitions(topic_id=topic_id.bytes, partitions=sorted(partitions))
        for topic_id, partitions in sorted(assignment.items())
        if partitions
    ]


def assignment_from_pb(
    topics: Iterable[group_pb2.TopicIdPartitions],
) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for t in topics:
        topic_id = uuid.UUID(bytes=bytes(t.topic_id))
        out[topic_id] = out.get(topic_id, frozenset()) | frozenset(t.partitions)
    return out


def heartbeat_request_to_pb(r: HeartbeatRequest) -> group_pb2.ConsumerGroupHeartbeatRequest:
    pb = group_pb2.ConsumerGroupHeartbeatRequest(
        group_id=r.group_id,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        rebalance_timeout_ms=r.rebalance_timeout_ms,
    )
    if r.instance_id is not None:
        pb.instance_id = r.instance_id
    if r.rack_id:
        pb.rack_id = r.rack_id
    if r.subscribed_topic_names is not None:
        pb.subscribed_topic_names.names.extend(r.subscribed_topic_names)
    if r.subscribed_topic_regex is not None:
        pb.subscribed_topic_regex = r.subscribed_topic_regex
    if r.server_assignor is not None:
        pb.server_assignor = r.server_assignor
    if r.owned is not None:
        pb.topic_partitions.SetInParent()  # present even when empty: a join says "none"
        pb.topic_partitions.topics.extend(assignment_to_pb(r.owned))
    return pb


def heartbeat_response_from_pb(pb: group_pb2.ConsumerGroupHeartbeatResponse) -> HeartbeatResponse:
    error = error_for_code(pb.error_code)(pb.error_message) if pb.error_code else None
    assignment: Mapping[uuid.UUID, frozenset[int]] | None = None
    if pb.HasField("assignment"):
        assignment = assignment_from_pb(pb.assignment.topic_partitions)
    return HeartbeatResponse(
        error=error,
        member_id=pb.member_id,
        member_epoch=pb.member_epoch,
        heartbeat_interval_ms=pb.heartbeat_interval_ms,
        assignment=assignment,
    )
