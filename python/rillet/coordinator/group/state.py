"""The shard's state and its replay: groups and committed offsets, rebuilt record by record.

:class:`ShardState` holds every group of one ``__consumer_offsets`` partition (by group id,
each a :class:`~rillet.coordinator.group.consumer_group.ConsumerGroup` or a
:class:`~rillet.coordinator.group.classic_group.ClassicGroup`) and the committed offsets
(group -> topic -> partition). :meth:`ShardState.replay` applies one record with Kafka's
semantics (``GroupMetadataManager.replay`` and ``OffsetMetadataManager.replay``):

- An offset commit for a group that does not exist creates a *simple* classic group (no
  protocol type, Empty): a consumer that commits without membership. It is dropped again with
  its last offset unless a GroupMetadata record backs it.
- A GroupMetadata value replaces the classic group with the persisted one (Stable with its
  members, or Empty); its tombstone deletes the group.
- Consumer group records create the group on first sight (replacing a simple classic group)
  and update one aspect each; their tombstones must come in Kafka's order (a member's current
  assignment, then its target, then its subscription; the target epoch, then the group
  epoch), which is checked, loudly.

- An offset commit written in a transactional batch (``replay(record, producer_id)``) is
  *pending* for that producer (:mod:`.pending_offsets`) until
  :meth:`ShardState.replay_end_transaction_marker`: COMMIT makes each of its offsets the
  committed one unless a record written after it committed that partition already (Kafka
  compares the records' log offsets; the shard counts its offset records, which keeps the same
  order), ABORT drops them. An offset tombstone also drops the partition's pending offsets.

Replay is the only way KIP-848 state and offsets change: a live shard replays the records it
produces as it produces them, so a shard reloaded from the log is the same shard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from rillet.coordinator.group.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    JoinGroupProtocol,
)
from rillet.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
)
from rillet.coordinator.group.pending_offsets import PendingTransactionalOffsets
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
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    from_topic_partitions,
)
from rillet.errors import IllegalStateError

__all__ = ["NO_PRODUCER_ID", "Group", "OffsetAndMetadata", "ShardState"]

Group = ConsumerGroup | ClassicGroup

# A batch's producer id when it was not written by a (transactional) producer.
NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset: the offset, its leader epoch (None if unknown), the client's
    metadata string, when it was committed and when it expires (None: by retention)."""

    committed_offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None
    # Where the record that wrote it stands among the shard's offset records (Kafka keeps
    # its log offset): a transaction's offset replaces at COMMIT only an older one. Not part
    # of the value, so not compared.
    record_seq: int = field(default=-1, compare=False, repr=False)

    @classmethod
    def from_record(cls, value: OffsetCommitValue, record_seq: int = -1) -> OffsetAndMetadata:
        return cls(
            value.offset,
            None if value.leader_epoch < 0 else value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            None if value.expire_timestamp < 0 else value.expire_timestamp,
            record_seq,
        )

    def to_record(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.committed_offset,
            -1 if self.leader_epoch is None else self.leader_epoch,
            self.metadata,
            self.commit_timestamp_ms,
            -1 if self.expire_timestamp_ms is None else self.expire_timestamp_ms,
        )


class ShardState:
    """Groups and offsets of one shard; see the module doc."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}
        self.pending = PendingTransactionalOffsets()
        self._record_seq = 0

    # -- lookups ---------------------------------------------------------------------------

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def offset(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    # -- replay ----------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord, producer_id: int = NO_PRODUCER_ID) -> None:
        """Applies one record; ``producer_id`` is its batch's when the batch is transactional
        (an offset commit is then pending; other records are applied as they come)."""
        key, value = record.key, record.value
        match key:
            case OffsetCommitKey():
                assert value is None or isinstance(value, OffsetCommitValue)
                self._replay_offset(key, value, producer_id)
            case GroupMetadataKey():
                assert value is None or isinstance(value, GroupMetadataValue)
                self._replay_group_metadata(key, value)
            case ConsumerGroupMetadataKey():
                assert value is None or isinstance(value, ConsumerGroupMetadataValue)
                self._replay_group_epoch(key, value)
            case ConsumerGroupPartitionMetadataKey():
                assert value is None or isinstance(value, ConsumerGroupPartitionMetadataValue)
                self._replay_partition_metadata(key, value)
            case ConsumerGroupMemberMetadataKey():
                assert value is None or isinstance(value, ConsumerGroupMemberMetadataValue)
                self._replay_member_metadata(key, value)
            case ConsumerGroupTargetAssignmentMetadataKey():
                assert value is None or isinstance(
                    value, ConsumerGroupTargetAssignmentMetadataValue
                )
                self._replay_target_epoch(key, value)
            case ConsumerGroupTargetAssignmentMemberKey():
                assert value is None or isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                self._replay_target_member(key, value)
            case ConsumerGroupCurrentMemberAssignmentKey():
                assert value is None or isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
                self._replay_current_assignment(key, value)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        """The producer's COMMIT (``committed``) or ABORT marker (Kafka's
        replayEndTransactionMarker): its pending offsets become the committed ones, or go."""
        offsets = self.pending.pop_producer(producer_id)
        if offsets is None or not committed:
            return
        for group, topics in offsets.items():
            for topic, partitions in topics.items():
                for partition, o in partitions.items():
                    existing = self.offset(group, topic, partition)
                    if existing is None or o.record_seq > existing.record_seq:
                        self._put_offset(group, topic, partition, o)

    def save_transaction(self, producer_id: int, groups: Iterable[str] = ()) -> Callable[[], None]:
        """A function that puts back everything a transactional write of ``producer_id`` (to
        ``groups``) or its marker may change: its pending offsets, the committed offsets they
        would replace, groups they would create. For an append the log refused."""
        saved = self.pending.save(producer_id)
        keys = [
            (g, t, p)
            for g, topics in (saved.offsets or {}).items()
            for t, partitions in topics.items()
            for p in partitions
        ]
        committed = {k: self.offset(*k) for k in keys}
        existing = {g: self.groups.get(g) for g in {*groups, *(k[0] for k in keys)}}
        record_seq = self._record_seq

        def restore() -> None:
            self.pending.restore(saved)
            for (g, t, p), o in committed.items():
                if o is None:
                    self._remove_offset(g, t, p)
                else:
                    self._put_offset(g, t, p, o)
            for g, group in existing.items():
                if group is None:
                    self.groups.pop(g, None)
                else:
                    self.groups[g] = group
            self._record_seq = record_seq

        return restore

    def _put_offset(self, group: str, topic: str, partition: int, o: OffsetAndMetadata) -> None:
        if group not in self.groups:
            self.groups[group] = ClassicGroup(group)  # a simple group (see the module doc)
        self.offsets.setdefault(group, {}).setdefault(topic, {})[partition] = o

    def _remove_offset(self, group: str, topic: str, partition: int) -> bool:
        """Removes a committed offset; whether the group has none left."""
        by_group = self.offsets.get(group)
        if by_group is None:
            return False
        partitions = by_group.get(topic)
        if partitions is not None:
            partitions.pop(partition, None)
            if not partitions:
                del by_group[topic]
        if by_group:
            return False
        del self.offsets[group]
        return True

    def _replay_offset(
        self, key: OffsetCommitKey, value: OffsetCommitValue | None, producer_id: int
    ) -> None:
        if value is not None:
            self._record_seq += 1
            o = OffsetAndMetadata.from_record(value, self._record_seq)
            if producer_id == NO_PRODUCER_ID:
                self._put_offset(key.group, key.topic, key.partition, o)
                return
            if key.group not in self.groups:
                self.groups[key.group] = ClassicGroup(key.group)
            self.pending.put(producer_id, (key.group, key.topic, key.partition), o)
            return
        self.pending.remove_partition(key.group, key.topic, key.partition)
        if self._remove_offset(key.group, key.topic, key.partition):
            group = self.classic_group(key.group)
            if (
                group is not None
                and group.is_simple()
                and not group.persisted
                and not self.pending.has_open_transactions(key.group)
            ):
                del self.groups[key.group]

    def _replay_group_metadata(
        self, key: GroupMetadataKey, value: GroupMetadataValue | None
    ) -> None:
        if value is None:
            if isinstance(self.groups.get(key.group), ClassicGroup):
                del self.groups[key.group]
            return
        group = ClassicGroup(
            key.group,
            state=ClassicGroupState.STABLE if value.members else ClassicGroupState.EMPTY,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            current_state_timestamp=(
                None if value.current_state_timestamp < 0 else value.current_state_timestamp
            ),
            persisted=True,
        )
        for m in value.members:
            group.add(
                ClassicGroupMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                    m.session_timeout,
                    value.protocol_type,
                    (JoinGroupProtocol(value.protocol or "", m.subscription),),
                    m.assignment,
                )
            )
        # add() elects the first member; the record names the leader.
        group.leader_id = value.leader
        self.groups[key.group] = group

    def _persisted_consumer_group(self, group_id: str, create: bool) -> ConsumerGroup | None:
        """Kafka's getOrMaybeCreatePersistedConsumerGroup."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if group is None and not create:
            return None
        if group is None or (isinstance(group, ClassicGroup) and group.is_simple()):
            new = ConsumerGroup(group_id)
            self.groups[group_id] = new
            return new
        raise IllegalStateError(f"group {group_id} is not a consumer group")

    def _replay_group_epoch(
        self, key: ConsumerGroupMetadataKey, value: ConsumerGroupMetadataValue | None
    ) -> None:
        group = self._persisted_consumer_group(key.group_id, value is not None)
        if group is None:
            return
        if value is not None:
            group.group_epoch = value.epoch
            return
        if group.members or group.target_assignment or group.assignment_epoch != -1:
            raise IllegalStateError(
                f"tombstone of consumer group {key.group_id} before its members and target"
            )
        del self.groups[key.group_id]

    def _replay_partition_metadata(
        self,
        key: ConsumerGroupPartitionMetadataKey,
        value: ConsumerGroupPartitionMetadataValue | None,
    ) -> None:
        group = self._persisted_consumer_group(key.group_id, value is not None)
        if group is None:
            return
        group.subscription_metadata = (
            {}
            if value is None
            else {t.topic_name: TopicInfo(t.topic_id, t.num_partitions) for t in value.topics}
        )

    def _replay_member_metadata(
        self,
        key: ConsumerGroupMemberMetadataKey,
        value: ConsumerGroupMemberMetadataValue | None,
    ) -> None:
        group = self._persisted_consumer_group(key.group_id, value is not None)
        if group is None:
            return
        old = group.members.get(key.member_id)
        if value is not None:
            base = old if old is not None else ConsumerGroupMember(key.member_id)
            group.update_member(
                replace(
                    base,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=tuple(sorted(value.subscribed_topic_names)),
                    subscribed_topic_regex=value.subscribed_topic_regex,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    server_assignor=value.server_assignor,
                )
            )
            return
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            raise IllegalStateError(
                f"tombstone of member {key.member_id} before its current assignment tombstone"
            )
        if key.member_id in group.target_assignment:
            raise IllegalStateError(
                f"tombstone of member {key.member_id} before its target assignment tombstone"
            )
        group.remove_member(key.member_id)

    def _replay_target_epoch(
        self,
        key: ConsumerGroupTargetAssignmentMetadataKey,
        value: ConsumerGroupTargetAssignmentMetadataValue | None,
    ) -> None:
        group = self._persisted_consumer_group(key.group_id, value is not None)
        if group is None:
            return
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
            return
        if group.target_assignment:
            raise IllegalStateError(
                f"tombstone of the target epoch of {key.group_id} before its members' targets"
            )
        group.assignment_epoch = -1

    def _replay_target_member(
        self,
        key: ConsumerGroupTargetAssignmentMemberKey,
        value: ConsumerGroupTargetAssignmentMemberValue | None,
    ) -> None:
        group = self._persisted_consumer_group(key.group_id, value is not None)
        if group is None:
            return
        if value is not None:
            group.target_assignment[key.member_id] = from_topic_partitions(value.topic_partitions)
        else:
            group.target_assignment.pop(key.member_id, None)

    def _replay_current_assignment(
        self,
        key: ConsumerGroupCurrentMemberAssignmentKey,
        value: ConsumerGroupCurrentMemberAssignmentValue | None,
    ) -> None:
        group = self._persisted_consumer_group(key.group_id, value is not None)
        if group is None:
            return
        old = group.members.get(key.member_id)
        if value is not None:
            base = old if old is not None else ConsumerGroupMember(key.member_id)
            group.update_member(
                replace(
                    base,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=MemberState.from_value(value.state),
                    assigned_partitions=from_topic_partitions(value.assigned_partitions),
                    partitions_pending_revocation=from_topic_partitions(
                        value.partitions_pending_revocation
                    ),
                )
            )
            return
        if old is None:
            return
        group.update_member(
            replace(
                old,
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                assigned_partitions={},
                partitions_pending_revocation={},
            )
        )
