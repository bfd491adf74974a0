"""TxnOffsetCommit: offsets a transactional producer commits for a group inside its
transaction (Kafka's ``OffsetMetadataManager.commitTransactionalOffset``, KIP-98 and KIP-447).

The records are ordinary OffsetCommit records; the shard returns them with the producer's id
and epoch (:attr:`CoordinatorResult.producer`), the driver writes them as one transactional
batch, and they stay pending (:mod:`.pending_offsets`) until the producer's marker. The log
checks the producer epoch (a fenced producer gets INVALID_PRODUCER_EPOCH); the shard checks:

- the request: an empty group id is INVALID_GROUP_ID, a producer id or epoch below zero
  INVALID_PRODUCER_ID_MAPPING; a partition of a topic the cluster does not have gets
  UNKNOWN_TOPIC_OR_PARTITION (Kafka's request handler), OFFSET_METADATA_TOO_LARGE as a commit.
- the group, KIP-447's fencing of zombie consumers, as Kafka 4.0 does for transactional
  commits: no group is accepted with generation -1 (a *simple* group appears with the first
  offset) and ILLEGAL_GENERATION otherwise; a KIP-848 group takes -1 only while it has no
  members, else the member must exist (UNKNOWN_MEMBER_ID) at its current epoch
  (ILLEGAL_GENERATION, where OffsetCommit says STALE_MEMBER_EPOCH) and, as Rillet's
  OffsetCommit does (KIP-1251), own each partition (else ILLEGAL_GENERATION for it); a
  classic group that is Dead is COORDINATOR_NOT_AVAILABLE, a member id, instance id or
  generation is checked as for OffsetCommit (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
  ILLEGAL_GENERATION), and neither an unknown member with generation -1 in a non-empty group
  nor CompletingRebalance is refused: the transaction's generation check is what fences.
"""

from __future__ import annotations

from rillet.coordinator.group.classic_group import ClassicGroup, ClassicGroupState
from rillet.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from rillet.coordinator.group.context import ShardContext
from rillet.coordinator.group.messages import (
    OffsetCommitRequestTopic,
    PartitionError,
    TopicPartitionErrors,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from rillet.coordinator.group.record_helpers import offset_commit_record
from rillet.coordinator.group.records import OffsetCommitValue
from rillet.coordinator.group.results import Operation
from rillet.errors import (
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    InvalidGroupIdError,
    InvalidProducerIdMappingError,
    KafkaError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)

__all__ = ["TxnOffsetManager", "error_txn_commit_response"]


def error_txn_commit_response(
    request: TxnOffsetCommitRequest, error: KafkaError
) -> TxnOffsetCommitResponse:
    """Every partition of the request failed with ``error`` (Kafka's getErrorResponse)."""
    return TxnOffsetCommitResponse(_every_partition(request.topics, error))


def _every_partition(
    topics: tuple[OffsetCommitRequestTopic, ...], error: KafkaError
) -> tuple[TopicPartitionErrors, ...]:
    return tuple(
        TopicPartitionErrors(
            t.name, tuple(PartitionError(p.partition_index, error) for p in t.partitions)
        )
        for t in topics
    )


class TxnOffsetManager:
    """The TxnOffsetCommit handler over a :class:`ShardContext` (see the module doc)."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx

    def commit(
        self, op: Operation, request: TxnOffsetCommitRequest, now_ms: int
    ) -> TxnOffsetCommitResponse:
        """Appends the records to ``op`` (built for the request's producer, so they replay as
        pending offsets)."""
        if not request.group_id.strip():
            raise InvalidGroupIdError("The group id is empty.")
        if request.producer_id < 0 or request.producer_epoch < 0:
            raise InvalidProducerIdMappingError(
                f"TxnOffsetCommit needs the transaction's producer id and epoch, not "
                f"{request.producer_id}/{request.producer_epoch}"
            )
        try:
            member = self._validate(request)
        except KafkaError as e:
            group_error: KafkaError | None = e
            member = None
        else:
            group_error = None
        limit = self.ctx.config.offset_metadata_max_bytes
        group = self.ctx.state.groups.get(request.group_id)
        topics = []
        for topic in request.topics:
            info = self.ctx.topics.get(topic.name)
            if isinstance(group, ConsumerGroup) and info is not None:
                # The group's own view of the topic (its id) decides what a member owns.
                topic_id = (group.subscription_metadata.get(topic.name) or info).topic_id
            partitions = []
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                error: KafkaError | None = None
                if info is None or not 0 <= p.partition_index < info.num_partitions:
                    error = UnknownTopicOrPartitionError(
                        f"{topic.name}-{p.partition_index} does not exist"
                    )
                elif group_error is not None:
                    error = group_error
                elif len(metadata) > limit:
                    error = OffsetMetadataTooLargeError(f"{len(metadata)} > {limit}")
                elif member is not None and not member.owns(topic_id, p.partition_index):
                    error = IllegalGenerationError(
                        f"{topic.name}-{p.partition_index} is not assigned to member "
                        f"{member.member_id} at epoch {member.member_epoch}"
                    )
                else:
                    value = OffsetCommitValue(
                        p.committed_offset, p.committed_leader_epoch, metadata, now_ms
                    )
                    op.append(
                        offset_commit_record(request.group_id, topic.name, p.partition_index, value)
                    )
                partitions.append(PartitionError(p.partition_index, error))
            topics.append(TopicPartitionErrors(topic.name, tuple(partitions)))
        return TxnOffsetCommitResponse(tuple(topics))

    def _validate(self, request: TxnOffsetCommitRequest) -> ConsumerGroupMember | None:
        """The committing KIP-848 member (None if not one); raises to refuse the group
        (Kafka's validateTransactionalOffsetCommit)."""
        generation = request.generation_id_or_member_epoch
        group = self.ctx.state.groups.get(request.group_id)
        if group is None:
            if generation < 0:
                return None
            raise IllegalGenerationError(
                f"group {request.group_id} does not exist, so generation {generation} is stale"
            )
        if isinstance(group, ConsumerGroup):
            if generation < 0 and group.is_empty():
                return None
            member = group.members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {request.member_id} is not a member of group {group.group_id}."
                )
            if generation != member.member_epoch:
                raise IllegalGenerationError(
                    f"The received member epoch {generation} does not match the expected "
                    f"member epoch {member.member_epoch}."
                )
            return member
        assert isinstance(group, ClassicGroup)
        if group.is_in(ClassicGroupState.DEAD):
            raise CoordinatorNotAvailableError()
        if generation < 0 and group.is_empty():
            return None
        if generation >= 0 or request.member_id or request.group_instance_id is not None:
            group.validate_member(request.member_id, request.group_instance_id)
            if generation != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation}, the group is at {group.generation_id}"
                )
        return None
