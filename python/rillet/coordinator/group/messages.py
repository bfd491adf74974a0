"""Requests and responses of the group and offset APIs, as domain values.

Field names follow Kafka's request and response schemas (``ConsumerGroupHeartbeatRequest``,
``JoinGroupRequest``, ``OffsetCommitRequest``, ...) in snake case, with what a transport
knows from the request context (``client_id``, ``client_host``) added to the requests that
record it. Errors are :class:`~rillet.errors.KafkaError` instances (Kafka's error names),
None for success, at the level Kafka reports them (per group, per member, per partition).
A transport (gRPC now, Kafka's wire protocol later) converts to and from these.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from rillet.coordinator.group.classic_group import JoinGroupProtocol
from rillet.errors import KafkaError

__all__ = [
    "AssignedTopicPartitions",
    "ConsumerGroupDescribeMember",
    "ConsumerGroupDescribeResult",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "DeletableGroupResult",
    "DescribedGroup",
    "DescribedGroupMember",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupProtocol",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsResponse",
    "ListedGroup",
    "MemberIdentity",
    "MemberResponse",
    "OffsetCommitRequest",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetFetchResponsePartition",
    "OwnedTopicPartitions",
    "PartitionError",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "TopicPartitionErrors",
    "TopicPartitionIndexes",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
]

# -- KIP-848 ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OwnedTopicPartitions:
    """Partitions of one topic a member reports owning in a heartbeat."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class AssignedTopicPartitions:
    """Partitions of one topic in an assignment; the name when the coordinator knows it."""

    topic_id: uuid.UUID
    topic_name: str | None
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest:
    """KIP-848's heartbeat. ``member_epoch`` 0 joins (or rejoins), -1 leaves, -2 leaves
    temporarily (static members). Fields left None are unchanged since the last heartbeat;
    a joining member sends ``rebalance_timeout_ms``, a subscription and empty
    ``topic_partitions``; ``topic_partitions`` are the partitions the member owns."""

    group_id: str
    member_id: str = ""
    member_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[OwnedTopicPartitions, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    """``assignment`` is the member's whole assignment, sent when it changed or when the
    request was a full one (a join, or all fields set after an error); None otherwise."""

    error: KafkaError | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[AssignedTopicPartitions, ...] | None = None


# -- classic ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinGroupRequest:
    """``require_known_member_id``: the client speaks JoinGroup v4+ (Kafka >= 2.2), so a
    first join without a member id gets MEMBER_ID_REQUIRED and an id to rejoin with.
    ``supports_skip_assignment``: JoinGroup v9+ (KIP-814), see JoinGroupResponse."""

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str = "consumer"
    protocols: tuple[JoinGroupProtocol, ...] = ()
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None
    require_known_member_id: bool = True
    supports_skip_assignment: bool = True


@dataclass(frozen=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    """The leader alone gets ``members`` (with their metadata for the chosen protocol).
    ``skip_assignment`` (KIP-814): a static leader that took its old place back without a
    rebalance is told it leads, but must not send a new assignment."""

    error: KafkaError | None = None
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncGroupRequest:
    """The leader sends ``assignments`` (member id -> ConsumerProtocolAssignment bytes)."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class SyncGroupResponse:
    error: KafkaError | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse:
    error: KafkaError | None = None


@dataclass(frozen=True)
class MemberIdentity:
    """A member leaving; an admin may name a static member by instance id alone."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True)
class MemberResponse:
    member_id: str
    group_instance_id: str | None
    error: KafkaError | None = None


@dataclass(frozen=True)
class LeaveGroupResponse:
    error: KafkaError | None = None
    members: tuple[MemberResponse, ...] = ()


# -- offsets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@dataclass(frozen=True)
class OffsetCommitRequestTopic:
    name: str
    partitions: tuple[OffsetCommitRequestPartition, ...]


@dataclass(frozen=True)
class OffsetCommitRequest:
    """``generation_id_or_member_epoch`` -1 (with no member id) commits as an admin or a
    consumer without membership, which Kafka accepts only while the group is empty."""

    group_id: str
    topics: tuple[OffsetCommitRequestTopic, ...]
    generation_id_or_member_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class PartitionError:
    partition_index: int
    error: KafkaError | None = None


@dataclass(frozen=True)
class TopicPartitionErrors:
    name: str
    partitions: tuple[PartitionError, ...]


@dataclass(frozen=True)
class OffsetCommitResponse:
    topics: tuple[TopicPartitionErrors, ...]


@dataclass(frozen=True)
class TxnOffsetCommitRequest:
    """TxnOffsetCommit (KIP-98; v3+ carries the consumer's group metadata for KIP-447
    fencing): offsets a transactional producer commits for ``group_id`` inside its
    transaction. ``generation_id_or_member_epoch`` -1 with no member id: not checked."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[OffsetCommitRequestTopic, ...]
    generation_id_or_member_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class TxnOffsetCommitResponse:
    topics: tuple[TopicPartitionErrors, ...]


@dataclass(frozen=True)
class TopicPartitionIndexes:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True)
class OffsetFetchRequest:
    """``topics`` None fetches every committed offset of the group. A KIP-848 member sends
    its ``member_id`` and ``member_epoch``; tools send neither."""

    group_id: str
    topics: tuple[TopicPartitionIndexes, ...] | None = None
    member_id: str | None = None
    member_epoch: int = -1
    # OffsetFetch v7+: a partition with an offset still pending in an open transaction is
    # answered UNSTABLE_OFFSET_COMMIT (retriable) instead of its last committed offset.
    require_stable: bool = False


@dataclass(frozen=True)
class OffsetFetchResponsePartition:
    """``committed_offset`` -1 when none is committed."""

    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str = ""
    error: KafkaError | None = None


@dataclass(frozen=True)
class OffsetFetchResponseTopic:
    name: str
    partitions: tuple[OffsetFetchResponsePartition, ...]


@dataclass(frozen=True)
class OffsetFetchResponse:
    group_id: str
    topics: tuple[OffsetFetchResponseTopic, ...] = ()
    error: KafkaError | None = None


@dataclass(frozen=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[TopicPartitionIndexes, ...]


@dataclass(frozen=True)
class OffsetDeleteResponse:
    error: KafkaError | None = None
    topics: tuple[TopicPartitionErrors, ...] = ()


# -- groups ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeletableGroupResult:
    group_id: str
    error: KafkaError | None = None


@dataclass(frozen=True)
class ListedGroup:
    """``group_type`` is ``classic`` or ``consumer``; ``group_state`` as Kafka names it."""

    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


@dataclass(frozen=True)
class ListGroupsResponse:
    error: KafkaError | None = None
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    """DescribeGroups (classic groups); metadata only when the group is Stable, as Kafka."""

    group_id: str
    group_state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = ()
    error: KafkaError | None = None


@dataclass(frozen=True)
class ConsumerGroupDescribeMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[AssignedTopicPartitions, ...]
    target_assignment: tuple[AssignedTopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupDescribeResult:
    """ConsumerGroupDescribe (KIP-848 groups): GROUP_ID_NOT_FOUND for anything else."""

    group_id: str
    error: KafkaError | None = None
    group_state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[ConsumerGroupDescribeMember, ...] = ()
