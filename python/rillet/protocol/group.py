"""GroupService messages (``proto/rillet/v1/group.proto``) to and from the client's domain
types: KIP-848 heartbeats, committed offsets, a transactional producer's offsets
(TxnOffsetCommit)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from rillet.client.consumer.membership import Assignment, HeartbeatRequest, HeartbeatResponse
from rillet.errors import KafkaError, error_for_code
from rillet.protocol.gen.v1 import group_pb2
from rillet.types import OffsetAndMetadata, TopicPartition

__all__ = [
    "assignment_from_pb",
    "assignment_to_pb",
    "heartbeat_request_to_pb",
    "heartbeat_response_from_pb",
    "offset_commit_request_to_pb",
    "offset_fetch_request_to_pb",
    "offset_fetch_response_from_pb",
    "partition_errors_from_pb",
    "read_txn_offset_commit_response",
    "txn_offset_commit_request",
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


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _add_offsets(
    request: group_pb2.OffsetCommitRequest | group_pb2.TxnOffsetCommitRequest,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> None:
    for topic, parts in _by_topic(offsets).items():
        t = request.topics.add(name=topic)
        for p in parts:
            om = offsets[TopicPartition(topic, p)]
            part = t.partitions.add(
                partition_index=p, committed_offset=om.offset, committed_metadata=om.metadata
            )
            if om.leader_epoch is not None:
                part.committed_leader_epoch = om.leader_epoch


def offset_commit_request_to_pb(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    member_id: str = "",
    epoch: int = -1,
    instance_id: str | None = None,
) -> group_pb2.OffsetCommitRequest:
    """OffsetCommit as member ``member_id`` in ``epoch`` (member epoch or generation; -1
    with no member outside the group protocol)."""
    request = group_pb2.OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=epoch, member_id=member_id
    )
    if instance_id is not None:
        request.group_instance_id = instance_id
    _add_offsets(request, offsets)
    return request


def txn_offset_commit_request(
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> group_pb2.TxnOffsetCommitRequest:
    """TxnOffsetCommit (after AddOffsetsToTxn), sent to the group's coordinator: ``offsets``
    count for ``group_id`` once the producer's transaction commits. The consumer's group
    metadata (KIP-447: its generation or member epoch, member id, instance id) lets the
    coordinator fence a zombie; ``generation_id`` -1 and no member id: not checked."""
    request = group_pb2.TxnOffsetCommitRequest(
        transactional_id=transactional_id,
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
    )
    if group_instance_id is not None:
        request.group_instance_id = group_instance_id
    _add_offsets(request, offsets)
    return request


def read_txn_offset_commit_response(
    response: group_pb2.TxnOffsetCommitResponse,
) -> dict[TopicPartition, KafkaError | None]:
    """Each partition's outcome: None when its offset is written (pending until the
    transaction ends), else the error (retriable: COORDINATOR_LOAD_IN_PROGRESS,
    NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS,
    UNKNOWN_TOPIC_OR_PARTITION; fatal for the producer: INVALID_PRODUCER_EPOCH,
    PRODUCER_FENCED; abortable: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND, OFFSET_METADATA_TOO_LARGE, ...)."""
    return partition_errors_from_pb(response.topics)


def partition_errors_from_pb(topics: Iterable[Any]) -> dict[TopicPartition, KafkaError | None]:
    """Per-partition errors of an OffsetCommit or OffsetDelete response."""
    return {
        TopicPartition(t.name, p.partition_index): (
            error_for_code(p.error_code)(p.error_message) if p.error_code else None
        )
        for t in topics
        for p in t.partitions
    }


def offset_fetch_request_to_pb(
    group_id: str,
    partitions: Iterable[TopicPartition] | None,
    member_id: str = "",
    member_epoch: int | None = None,
    require_stable: bool = False,
) -> group_pb2.OffsetFetchRequest:
    """OffsetFetch of ``partitions`` (None: every partition the group has an offset for).
    ``require_stable`` (a ``read_committed`` consumer): a partition with an offset pending in
    an open transaction fails with UNSTABLE_OFFSET_COMMIT (retriable) instead of answering
    the last committed offset."""
    group = group_pb2.OffsetFetchRequest.Group(group_id=group_id, member_id=member_id)
    if member_epoch is not None:
        group.member_epoch = member_epoch
    if partitions is not None:
        group.topics.SetInParent()
        for topic, ps in _by_topic(partitions).items():
            group.topics.topics.add(name=topic, partition_indexes=ps)
    return group_pb2.OffsetFetchRequest(groups=[group], require_stable=require_stable)


def offset_fetch_response_from_pb(
    group: group_pb2.OffsetFetchResponse.Group,
) -> tuple[dict[TopicPartition, OffsetAndMetadata], dict[TopicPartition, KafkaError]]:
    """One group's committed offsets (partitions without one left out), and the partitions
    that failed."""
    found: dict[TopicPartition, OffsetAndMetadata] = {}
    errors: dict[TopicPartition, KafkaError] = {}
    for t in group.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                errors[tp] = error_for_code(p.error_code)(p.error_message)
            elif p.committed_offset >= 0:
                epoch = p.committed_leader_epoch
                found[tp] = OffsetAndMetadata(
                    p.committed_offset, p.metadata, epoch if epoch >= 0 else None
                )
    return found, errors
