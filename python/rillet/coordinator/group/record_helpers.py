"""Builders of the coordinator's records (Kafka's ``GroupCoordinatorRecordHelpers``)."""

from __future__ import annotations

from collections.abc import Mapping

from rillet.coordinator.group.assignors import Assignment
from rillet.coordinator.group.classic_group import ClassicGroup
from rillet.coordinator.group.consumer_group import ConsumerGroupMember, TopicInfo
from rillet.coordinator.group.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataMember,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicMetadata,
    to_topic_partitions,
)
from rillet.errors import IllegalStateError

__all__ = [
    "consumer_group_tombstones",
    "current_assignment_record",
    "current_assignment_tombstone",
    "empty_group_metadata_record",
    "group_epoch_record",
    "group_metadata_record",
    "group_metadata_tombstone",
    "member_subscription_record",
    "member_subscription_tombstone",
    "offset_commit_record",
    "offset_commit_tombstone",
    "subscription_metadata_record",
    "target_assignment_epoch_record",
    "target_assignment_record",
    "target_assignment_tombstone",
]


def member_subscription_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupMemberMetadataKey(group_id, member.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            server_assignor=member.server_assignor,
        ),
    )


def member_subscription_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(group_id, member_id), None)


def subscription_metadata_record(
    group_id: str, metadata: Mapping[str, TopicInfo]
) -> CoordinatorRecord:
    topics = tuple(
        TopicMetadata(info.topic_id, name, info.num_partitions)
        for name, info in sorted(metadata.items())
    )
    return CoordinatorRecord(
        ConsumerGroupPartitionMetadataKey(group_id), ConsumerGroupPartitionMetadataValue(topics)
    )


def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch))


def target_assignment_record(
    group_id: str, member_id: str, assignment: Assignment
) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(assignment)),
    )


def target_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)


def target_assignment_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMetadataKey(group_id),
        ConsumerGroupTargetAssignmentMetadataValue(epoch),
    )


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return CoordinatorRecord(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned_partitions=to_topic_partitions(member.assigned_partitions),
            partitions_pending_revocation=to_topic_partitions(member.partitions_pending_revocation),
        ),
    )


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)


def consumer_group_tombstones(group_id: str, member_ids: list[str]) -> list[CoordinatorRecord]:
    """Everything that deletes a consumer group, in the order replay requires."""
    records = [current_assignment_tombstone(group_id, m) for m in member_ids]
    records += [target_assignment_tombstone(group_id, m) for m in member_ids]
    records.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), None))
    records += [member_subscription_tombstone(group_id, m) for m in member_ids]
    records.append(CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group_id), None))
    records.append(CoordinatorRecord(ConsumerGroupMetadataKey(group_id), None))
    return records


def group_metadata_record(
    group: ClassicGroup, assignment: Mapping[str, bytes] | None = None
) -> CoordinatorRecord:
    """A classic group's snapshot; each member's assignment from ``assignment`` (else its
    current one). An empty group is written with no protocol (Kafka's empty record)."""
    members = []
    for m in group.members.values():
        if group.protocol_name is None:
            raise IllegalStateError(f"group {group.group_id} has members but no protocol")
        members.append(
            GroupMetadataMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=(assignment or {}).get(m.member_id, m.assignment),
            )
        )
    return CoordinatorRecord(
        GroupMetadataKey(group.group_id),
        GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id if members else None,
            current_state_timestamp=(
                -1 if group.current_state_timestamp is None else group.current_state_timestamp
            ),
            members=tuple(members),
        ),
    )


def group_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group_id), None)


def offset_commit_record(
    group_id: str, topic: str, partition: int, value: OffsetCommitValue
) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group_id, topic, partition), value)


def offset_commit_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group_id, topic, partition), None)


def empty_group_metadata_record(group: ClassicGroup) -> CoordinatorRecord:
    """The record that persists a newly created classic group (Kafka's
    newEmptyGroupMetadataRecord: no protocol, generation 0, no members)."""
    return CoordinatorRecord(
        GroupMetadataKey(group.group_id),
        GroupMetadataValue(
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=(
                -1 if group.current_state_timestamp is None else group.current_state_timestamp
            ),
            members=(),
        ),
    )
