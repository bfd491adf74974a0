"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, the reset used by
``rillet consumer-groups --reset-offsets``, and expiry (Kafka's ``OffsetMetadataManager``).

Commits are validated against the group before any record is written:

- No group: a commit with generation -1 (an admin, or a consumer without membership) is
  accepted and creates a *simple* group; anything else gets GROUP_ID_NOT_FOUND.
- A KIP-848 group: generation -1 is accepted only while the group has no members; otherwise
  the member must exist (UNKNOWN_MEMBER_ID) and send its current member epoch
  (STALE_MEMBER_EPOCH). Each partition must also be one the member owns (assigned or pending
  revocation), else that partition gets STALE_MEMBER_EPOCH: KIP-1251's per-partition rule,
  applied to exact-epoch commits too, so a member can never commit for a partition another
  member consumes. Kafka 4.0 checks only the epoch.
- A classic group: generation -1 without member id only while it is Empty (else
  UNKNOWN_MEMBER_ID); a member must be known (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and at
  the group's generation (ILLEGAL_GENERATION), and not in CompletingRebalance
  (REBALANCE_IN_PROGRESS). A commit keeps a classic member's session alive.

OffsetFetch of an unknown group answers -1 offsets, as Kafka; a KIP-848 member that names
itself must send its current epoch. With ``require_stable`` (OffsetFetch v7+, KIP-447) a
partition with an offset pending in an open transaction is UNSTABLE_OFFSET_COMMIT; without,
its last committed offset. OffsetDelete refuses topics the group subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC) and non-empty classic groups of other protocol types
(NON_EMPTY_GROUP); it writes a tombstone for a partition with a committed or a pending
offset, and so does DeleteGroups for each (which drops the pending ones).

Expiry (every ``offsets.retention.check.interval.ms``): an offset of a topic the group does
not subscribe to expires ``offsets.retention.minutes`` after its commit, or, in an Empty
classic group, after the group became Empty, unless the partition has a pending offset; a
group left empty without offsets is deleted, unless it has open transactions (KAFKA-19163).
"""

from __future__ import annotations

from collections.abc import Callable

from rillet.coordinator.group.classic_group import ClassicGroup, ClassicGroupState
from rillet.coordinator.group.classic_protocol import ClassicGroupProtocol
from rillet.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from rillet.coordinator.group.context import ShardContext
from rillet.coordinator.group.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    PartitionError,
    TopicPartitionErrors,
)
from rillet.coordinator.group.record_helpers import (
    consumer_group_tombstones,
    group_metadata_tombstone,
    offset_commit_record,
    offset_commit_tombstone,
)
from rillet.coordinator.group.records import OffsetCommitValue
from rillet.coordinator.group.results import Operation
from rillet.coordinator.group.state import Group, OffsetAndMetadata
from rillet.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InvalidGroupIdError,
    KafkaError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)

__all__ = ["EXPIRATION_TIMER", "OffsetManager", "error_commit_response"]

EXPIRATION_TIMER = "offsets-expiration"

S = ClassicGroupState
# From when an offset's retention counts.
_Base = Callable[[OffsetAndMetadata], int]


def error_commit_response(request: OffsetCommitRequest, error: KafkaError) -> OffsetCommitResponse:
    """Every partition of the request failed with ``error`` (a group-level refusal)."""
    return OffsetCommitResponse(
        tuple(
            TopicPartitionErrors(
                t.name, tuple(PartitionError(p.partition_index, error) for p in t.partitions)
            )
            for t in request.topics
        )
    )


class OffsetManager:
    """Offset handlers over a :class:`ShardContext` (see the module doc)."""

    def __init__(self, ctx: ShardContext, classic: ClassicGroupProtocol) -> None:
        self.ctx = ctx
        self.classic = classic

    # -- commit ----------------------------------------------------------------------------

    def commit(
        self, op: Operation, request: OffsetCommitRequest, now_ms: int
    ) -> OffsetCommitResponse:
        if not request.group_id.strip():
            raise InvalidGroupIdError("The group id is empty.")
        group = self.ctx.state.groups.get(request.group_id)
        member = self._validate_commit(group, request)
        if isinstance(group, ClassicGroup):
            self.classic.on_offset_commit(group, request.member_id, now_ms)
        limit = self.ctx.config.offset_metadata_max_bytes
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                error: KafkaError | None = None
                if len(metadata) > limit:
                    error = OffsetMetadataTooLargeError(f"{len(metadata)} > {limit}")
                elif member is not None and not self._owns(
                    group, member, topic.name, p.partition_index
                ):
                    error = StaleMemberEpochError(
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
        return OffsetCommitResponse(tuple(topics))

    def reset(
        self, op: Operation, request: OffsetCommitRequest, now_ms: int
    ) -> OffsetCommitResponse:
        """``--reset-offsets --execute``: a commit with generation -1, refused with
        NON_EMPTY_GROUP while the group has members (what kafka-consumer-groups checks)."""
        group = self.ctx.state.groups.get(request.group_id)
        if group is not None and not group.is_empty():
            raise NonEmptyGroupError(
                f"Assignments can only be reset if the group {request.group_id} is inactive"
            )
        plain = OffsetCommitRequest(request.group_id, request.topics)
        return self.commit(op, plain, now_ms)

    def _validate_commit(
        self, group: Group | None, request: OffsetCommitRequest
    ) -> ConsumerGroupMember | None:
        """The committing KIP-848 member (None if not one); raises to refuse the request."""
        generation = request.generation_id_or_member_epoch
        if group is None:
            if generation < 0:
                return None
            raise GroupIdNotFoundError(f"Group {request.group_id} not found.")
        if isinstance(group, ConsumerGroup):
            if generation < 0 and group.is_empty():
                return None
            member = group.members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {request.member_id} is not a member of group {group.group_id}."
                )
            if generation != member.member_epoch:
                raise StaleMemberEpochError(
                    f"The received member epoch {generation} does not match the expected "
                    f"member epoch {member.member_epoch}."
                )
            return member
        if group.is_in(S.DEAD):
            raise CoordinatorNotAvailableError()
        if generation < 0 and group.is_empty():
            return None
        if generation >= 0 or request.member_id or request.group_instance_id is not None:
            group.validate_member(request.member_id, request.group_instance_id)
            if generation != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation}, the group is at {group.generation_id}"
                )
        elif not group.is_empty():
            raise UnknownMemberIdError("only an empty group takes commits without a member")
        if group.is_in(S.COMPLETING_REBALANCE):
            raise RebalanceInProgressError()
        return None

    def _owns(
        self, group: Group | None, member: ConsumerGroupMember, topic: str, partition: int
    ) -> bool:
        assert isinstance(group, ConsumerGroup)
        info = group.subscription_metadata.get(topic) or self.ctx.topics.get(topic)
        return info is not None and member.owns(info.topic_id, partition)

    # -- fetch and delete ------------------------------------------------------------------

    def fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        gid = request.group_id
        if not gid.strip():
            return OffsetFetchResponse(gid, error=InvalidGroupIdError("The group id is empty."))
        group = self.ctx.state.groups.get(gid)
        if isinstance(group, ConsumerGroup) and (
            request.member_id is not None or request.member_epoch >= 0
        ):
            member = group.members.get(request.member_id or "")
            if member is None:
                return OffsetFetchResponse(gid, error=UnknownMemberIdError())
            if member.member_epoch != request.member_epoch:
                return OffsetFetchResponse(
                    gid,
                    error=StaleMemberEpochError(
                        f"member epoch {request.member_epoch}, expected {member.member_epoch}"
                    ),
                )
        known = group is not None and not (isinstance(group, ClassicGroup) and group.is_in(S.DEAD))
        offsets = self.ctx.state.offsets.get(gid, {}) if known else {}
        if request.topics is None:
            wanted = {t: tuple(sorted(ps)) for t, ps in sorted(offsets.items())}
        else:
            wanted = {t.name: t.partition_indexes for t in request.topics}
        pending = self.ctx.state.pending
        topics = []
        for name, partitions in wanted.items():
            by_partition = offsets.get(name, {})
            out = []
            for p in partitions:
                o = by_partition.get(p)
                if request.require_stable and pending.has_pending(gid, name, p):
                    error = UnstableOffsetCommitError(
                        f"{name}-{p} has an offset pending in an open transaction of group {gid}"
                    )
                    out.append(OffsetFetchResponsePartition(p, error=error))
                elif o is None:
                    out.append(OffsetFetchResponsePartition(p))
                else:
                    epoch = -1 if o.leader_epoch is None else o.leader_epoch
                    out.append(
                        OffsetFetchResponsePartition(p, o.committed_offset, epoch, o.metadata)
                    )
            topics.append(OffsetFetchResponseTopic(name, tuple(out)))
        return OffsetFetchResponse(gid, tuple(topics))

    def delete(self, op: Operation, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        gid = request.group_id
        group = self.ctx.state.groups.get(gid)
        if group is None or (isinstance(group, ClassicGroup) and group.is_in(S.DEAD)):
            raise GroupIdNotFoundError(f"Group {gid} not found.")
        if (
            isinstance(group, ClassicGroup)
            and group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
            and not group.uses_consumer_protocol()
        ):
            raise NonEmptyGroupError(f"Group {gid} is not empty.")
        topics = []
        for topic in request.topics:
            if group.is_subscribed_to_topic(topic.name):
                error: KafkaError | None = GroupSubscribedToTopicError(
                    f"group {gid} is subscribed to {topic.name}"
                )
                partitions = tuple(PartitionError(p, error) for p in topic.partition_indexes)
            else:
                for p in topic.partition_indexes:
                    if self.ctx.state.offset(
                        gid, topic.name, p
                    ) is not None or self.ctx.state.pending.has_pending(gid, topic.name, p):
                        op.append(offset_commit_tombstone(gid, topic.name, p))
                partitions = tuple(PartitionError(p) for p in topic.partition_indexes)
            topics.append(TopicPartitionErrors(topic.name, partitions))
        return OffsetDeleteResponse(topics=tuple(topics))

    def delete_all(self, op: Operation, group_id: str) -> None:
        """Tombstones for every offset of the group, committed or pending, once each
        (DeleteGroups)."""
        state = self.ctx.state
        committed = [
            (topic, p)
            for topic, partitions in sorted(state.offsets.get(group_id, {}).items())
            for p in sorted(partitions)
        ]
        pending = [tp for tp in state.pending.partitions_of(group_id) if tp not in set(committed)]
        for topic, p in committed + pending:
            op.append(offset_commit_tombstone(group_id, topic, p))

    # -- expiry ----------------------------------------------------------------------------

    def schedule_expiration(self, now_ms: int) -> None:
        interval = self.ctx.config.offsets_retention_check_interval_ms
        self.ctx.timers.schedule((EXPIRATION_TIMER, "", ""), now_ms + interval)

    def cleanup_group_metadata(self, op: Operation, now_ms: int) -> None:
        """Expires offsets and deletes groups left empty with none (Kafka's
        cleanupGroupMetadata); then schedules the next check."""
        for gid in sorted(self.ctx.state.groups):
            if self._cleanup_expired_offsets(op, gid, now_ms):
                group = self.ctx.state.groups.get(gid)
                if group is None or not group.is_empty():
                    continue
                if isinstance(group, ConsumerGroup):
                    for record in consumer_group_tombstones(gid, []):
                        op.append(record)
                else:
                    op.append(group_metadata_tombstone(gid))
        self.schedule_expiration(now_ms)

    def _cleanup_expired_offsets(self, op: Operation, gid: str, now_ms: int) -> bool:
        """Tombstones the group's expired offsets; True if none is left and the group has no
        open transaction."""
        pending = self.ctx.state.pending
        offsets = self.ctx.state.offsets.get(gid)
        if not offsets:
            return not pending.has_open_transactions(gid)
        group = self.ctx.state.groups.get(gid)
        base = self._expiration_base(group)
        if base is None:
            return False
        retention = self.ctx.config.offsets_retention_ms
        all_expired = True
        for topic, partitions in sorted(offsets.items()):
            if group is not None and group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for p, o in sorted(partitions.items()):
                if o.expire_timestamp_ms is not None:
                    expired = now_ms >= o.expire_timestamp_ms
                else:
                    expired = now_ms - base(o) >= retention
                if expired and not pending.has_pending(gid, topic, p):
                    op.append(offset_commit_tombstone(gid, topic, p))
                else:
                    all_expired = False
        return all_expired and not pending.has_open_transactions(gid)

    @staticmethod
    def _expiration_base(group: Group | None) -> _Base | None:
        """Kafka's offsetExpirationCondition: from when an offset's retention counts."""
        if group is None or isinstance(group, ConsumerGroup):
            return _commit_time
        if group.protocol_type is None:
            return _commit_time  # a simple group
        if group.is_empty():
            state_ts = group.current_state_timestamp
            return _commit_time if state_ts is None else (lambda _o: state_ts)
        stable = group.uses_consumer_protocol() and group.is_in(S.STABLE)
        if stable and group.subscribed_topics() is not None:
            return _commit_time
        return None


def _commit_time(o: OffsetAndMetadata) -> int:
    return o.commit_timestamp_ms
