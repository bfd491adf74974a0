"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat, leaving, and the timers that
fence silent members (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` and friends).

A heartbeat does three things, each persisted by the records it appends (and replays at once):

1. **Membership.** The member is created (member epoch 0, the coordinator makes an id when
   the client sent none) or found, its epoch checked, and its subscription updated. A changed
   subscription, or changed metadata of the subscribed topics (partitions added, a topic
   matching a regex created), bumps the group epoch.
2. **Target assignment.** When the group epoch is ahead of the target assignment epoch, the
   group's server-side assignor (the one most members asked for, else the first of
   ``group.consumer.assignors``) computes a new target; the members whose target changed get
   a record, then the target epoch moves to the group epoch.
3. **Reconciliation** of this member one step toward its target
   (:mod:`~rillet.coordinator.group.reconciliation`).

Epochs fence zombies. A heartbeat with an epoch newer than the coordinator's, or older and
not the member's previous epoch with only partitions it still has (the response that bumped
it may have been lost), gets FENCED_MEMBER_EPOCH; an unknown member UNKNOWN_MEMBER_ID. A
member rejoins with epoch 0 and its id (KAFKA-19233). A static member (``instance_id``) that
leaves with epoch -2 keeps its assignment for the session timeout; a new member with the same
instance id takes it over, while the instance id is still held otherwise it gets
UNRELEASED_INSTANCE_ID, and a request with the instance id but another member id gets
FENCED_INSTANCE_ID. A static member rejoining with its own member id is handled in place
(apache/kafka#23542).

Timers: the session timeout (``group.consumer.session.timeout.ms``) fences a member that
stops heartbeating; the member's rebalance timeout fences a member that does not revoke
partitions in time (it is in UNREVOKED_PARTITIONS at the same epoch when it fires).

Mixed groups (classic members inside a consumer group, KIP-848's online migration) are not
supported: a heartbeat to a classic group that has members gets GROUP_ID_NOT_FOUND, as with
Kafka's ``group.consumer.migration.policy=disabled``; an empty classic group is deleted and
replaced.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import replace

from rillet.coordinator.group.assignors import (
    ASSIGNORS,
    Assignment,
    GroupSpec,
    MemberSubscription,
)
from rillet.coordinator.group.classic_group import ClassicGroup
from rillet.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from rillet.coordinator.group.context import ShardContext
from rillet.coordinator.group.messages import (
    AssignedTopicPartitions,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    OwnedTopicPartitions,
)
from rillet.coordinator.group.reconciliation import reconcile
from rillet.coordinator.group.record_helpers import (
    current_assignment_record,
    current_assignment_tombstone,
    group_epoch_record,
    group_metadata_tombstone,
    member_subscription_record,
    member_subscription_tombstone,
    subscription_metadata_record,
    target_assignment_epoch_record,
    target_assignment_record,
    target_assignment_tombstone,
)
from rillet.coordinator.group.results import Operation
from rillet.coordinator.group.timers import Timer
from rillet.errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)

__all__ = ["ConsumerGroupProtocol"]

SESSION_TIMER = "consumer-session"
REBALANCE_TIMER = "consumer-rebalance"


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


class ConsumerGroupProtocol:
    """Handlers of the KIP-848 protocol over a :class:`ShardContext` (see the module doc)."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx

    # -- the request -----------------------------------------------------------------------

    def heartbeat(
        self, op: Operation, request: ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> ConsumerGroupHeartbeatResponse:
        """Handles one heartbeat; raises a KafkaError to refuse it (before any record)."""
        self._validate(request)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(op, request)
        return self._heartbeat(op, request, now_ms)

    def _validate(self, request: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (regexes are supported)."""
        if not request.group_id.strip():
            raise InvalidRequestError("GroupId can't be empty.")
        if _blank(request.instance_id):
            raise InvalidRequestError("InstanceId can't be empty.")
        if _blank(request.rack_id):
            raise InvalidRequestError("RackId can't be empty.")
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id.strip():
                raise InvalidRequestError("MemberId can't be empty.")
        elif epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise InvalidRequestError(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id.strip():
                raise InvalidRequestError("MemberId can't be empty.")
            if request.instance_id is None:
                raise InvalidRequestError("InstanceId can't be null.")
        else:
            raise InvalidRequestError("MemberEpoch is invalid.")
        assignor = request.server_assignor
        if assignor is not None and assignor not in self.ctx.config.consumer_group_assignors:
            raise UnsupportedAssignorError(
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.ctx.config.consumer_group_assignors)}."
            )
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as e:
                raise InvalidRegularExpressionError(
                    f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is invalid: {e}"
                ) from e

    def _group_for_heartbeat(
        self, op: Operation, group_id: str, create: bool
    ) -> ConsumerGroup | None:
        """The consumer group, None when a join will create it; an empty classic group of
        that id is deleted first (Kafka's maybeDeleteEmptyClassicGroup)."""
        group = self.ctx.state.groups.get(group_id)
        if group is None:
            if not create:
                raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
            return None
        if isinstance(group, ConsumerGroup):
            return group
        assert isinstance(group, ClassicGroup)
        if create and group.is_empty():
            op.append(group_metadata_tombstone(group_id))
            return None
        raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")

    def _heartbeat(
        self, op: Operation, request: ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> ConsumerGroupHeartbeatResponse:
        ctx, group_id = self.ctx, request.group_id
        joining = request.member_epoch == 0
        view = self._group_for_heartbeat(op, group_id, joining) or ConsumerGroup(group_id)
        if len(view.members) >= ctx.config.consumer_group_max_size and (
            not request.member_id or request.member_id not in view.members
        ):
            raise GroupMaxSizeReachedError(
                "The consumer group has reached its maximum capacity of "
                f"{ctx.config.consumer_group_max_size} members."
            )
        member_id = request.member_id or ctx.new_consumer_member_id()
        if request.instance_id is None:
            member = self._dynamic_member(view, member_id, request)
        else:
            member = self._static_member(op, view, member_id, request)

        # 1. The member and its subscription; the group epoch moves if the subscription or
        # the subscribed topics changed.
        updated = replace(
            member,
            instance_id=request.instance_id or member.instance_id,
            rack_id=request.rack_id or member.rack_id,
            rebalance_timeout_ms=(
                member.rebalance_timeout_ms
                if request.rebalance_timeout_ms == -1
                else request.rebalance_timeout_ms
            ),
            server_assignor=request.server_assignor or member.server_assignor,
            subscribed_topic_names=(
                member.subscribed_topic_names
                if request.subscribed_topic_names is None
                else tuple(sorted(set(request.subscribed_topic_names)))
            ),
            subscribed_topic_regex=(
                member.subscribed_topic_regex
                if request.subscribed_topic_regex is None
                else request.subscribed_topic_regex or None
            ),
            client_id=request.client_id,
            client_host=request.client_host,
        )
        bump = False
        if updated != member or member_id not in view.members:
            op.append(member_subscription_record(group_id, updated))
            bump = (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        group = ctx.state.consumer_group(group_id)
        assert group is not None
        if bump or group.metadata_refresh_needed:
            metadata = group.compute_subscription_metadata(ctx.topics)
            group.metadata_refresh_needed = False
            if metadata != group.subscription_metadata:
                op.append(subscription_metadata_record(group_id, metadata))
                bump = True
        if bump:
            op.append(group_epoch_record(group_id, group.group_epoch + 1))

        # 2. A new target assignment if the group epoch moved past it.
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(op, group)

        # 3. One reconciliation step.
        current = group.members[member_id]
        if not current.is_reconciled_to(group.assignment_epoch):
            self._maybe_reconcile(op, group, current, request.topic_partitions, now_ms)
        final = group.members[member_id]

        ctx.timers.schedule(
            (SESSION_TIMER, group_id, member_id),
            now_ms + ctx.config.consumer_group_session_timeout_ms,
        )
        full_request = joining or (
            request.rebalance_timeout_ms != -1
            and (
                request.subscribed_topic_names is not None
                or request.subscribed_topic_regex is not None
            )
            and request.topic_partitions is not None
        )
        changed = final.assigned_partitions != member.assigned_partitions
        return ConsumerGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=final.member_epoch,
            heartbeat_interval_ms=ctx.config.consumer_group_heartbeat_interval_ms,
            assignment=self._assignment(group, final) if full_request or changed else None,
        )

    def _dynamic_member(
        self, group: ConsumerGroup, member_id: str, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if request.member_epoch != 0:
                raise UnknownMemberIdError(
                    f"Member {member_id} is not a member of group {group.group_id}."
                )
            return ConsumerGroupMember(member_id)
        self._check_epoch(member, request.member_epoch, request.topic_partitions)
        return member

    def _static_member(
        self,
        op: Operation,
        group: ConsumerGroup,
        member_id: str,
        request: ConsumerGroupHeartbeatRequest,
    ) -> ConsumerGroupMember:
        instance_id = request.instance_id
        existing = group.static_member(instance_id)
        if request.member_epoch != 0:
            if existing is None:
                raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
            if existing.member_id != member_id:
                raise FencedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                    f"member {existing.member_id}."
                )
            self._check_epoch(existing, request.member_epoch, request.topic_partitions)
            return existing
        known = group.members.get(member_id)
        if known is not None:
            if known.instance_id != instance_id:
                raise InvalidRequestError(
                    f"Member {member_id} cannot change its instance id to {instance_id}."
                )
            if known.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Back after a temporary leave: reconciled again from epoch 0.
                reset = replace(known, member_epoch=0, previous_member_epoch=0)
                op.append(current_assignment_record(group.group_id, reset))
                return reset
            return known
        if existing is None:
            return ConsumerGroupMember(member_id)
        if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise UnreleasedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} cannot join the "
                f"group because the instance id is owned by member {existing.member_id}."
            )
        # A new incarnation takes over the departed one's assignment.
        new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = group.target_assignment.get(existing.member_id, {})
        self._remove_member_records(op, group.group_id, existing.member_id)
        op.append(member_subscription_record(group.group_id, new))
        op.append(target_assignment_record(group.group_id, member_id, target))
        op.append(current_assignment_record(group.group_id, new))
        return new

    @staticmethod
    def _check_epoch(
        member: ConsumerGroupMember,
        received: int,
        owned: Sequence[OwnedTopicPartitions] | None,
    ) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid; epoch 0 (a rejoin) is fine."""
        if received == 0:
            return
        if received > member.member_epoch:
            raise FencedMemberEpochError(
                f"The consumer group member has a greater member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin."
            )
        if received < member.member_epoch and (
            received != member.previous_member_epoch
            or not _is_subset(owned, member.assigned_partitions)
        ):
            raise FencedMemberEpochError(
                f"The consumer group member has a smaller member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin."
            )

    def _update_target_assignment(self, op: Operation, group: ConsumerGroup) -> None:
        config = self.ctx.config
        name = group.preferred_server_assignor(config.default_assignor)
        if name not in config.consumer_group_assignors:
            name = config.default_assignor
        spec = GroupSpec(
            members={
                m.member_id: MemberSubscription(
                    group.subscribed_topic_ids(m),
                    group.target_assignment.get(m.member_id, {}),
                    m.instance_id,
                    m.rack_id,
                )
                for m in group.members.values()
            },
            partitions_per_topic={
                info.topic_id: info.num_partitions for info in group.subscription_metadata.values()
            },
        )
        new_target = ASSIGNORS[name](spec)
        for member_id in sorted(group.members):
            assignment = new_target.get(member_id, {})
            if group.target_assignment.get(member_id) != assignment:
                op.append(target_assignment_record(group.group_id, member_id, assignment))
        op.append(target_assignment_epoch_record(group.group_id, group.group_epoch))

    def _maybe_reconcile(
        self,
        op: Operation,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: Sequence[OwnedTopicPartitions] | None,
        now_ms: int,
    ) -> None:
        def owner_of(topic_id: uuid.UUID, partition: int) -> str | None:
            owner = group.partition_owner(topic_id, partition)
            return None if owner is None else owner[0]

        target = group.target_assignment.get(member.member_id, {})
        new = reconcile(member, group.assignment_epoch, target, owner_of, owned)
        if new == member:
            return
        op.append(current_assignment_record(group.group_id, new))
        key = (REBALANCE_TIMER, group.group_id, member.member_id)
        if new.state == MemberState.UNREVOKED_PARTITIONS:
            self.ctx.timers.schedule(key, now_ms + new.rebalance_timeout_ms, (new.member_epoch,))
        else:
            self.ctx.timers.cancel(key)

    def _assignment(
        self, group: ConsumerGroup, member: ConsumerGroupMember
    ) -> tuple[AssignedTopicPartitions, ...]:
        out = []
        for topic_id, partitions in member.assigned_partitions.items():
            name = group.topic_name(topic_id) or self.ctx.topic_name(topic_id)
            out.append(AssignedTopicPartitions(topic_id, name, tuple(sorted(partitions))))
        return tuple(sorted(out, key=lambda a: (a.topic_name or "", a.topic_id.bytes)))

    # -- leaving and fencing ---------------------------------------------------------------

    def _leave(
        self, op: Operation, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        group = self.ctx.state.groups.get(request.group_id)
        if not isinstance(group, ConsumerGroup):
            raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
        response = ConsumerGroupHeartbeatResponse(
            member_id=request.member_id, member_epoch=request.member_epoch
        )
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(
                    f"Member {request.member_id} is not a member of group {group.group_id}."
                )
            self.fence_member(op, group, member)
            return response
        member = group.static_member(request.instance_id)
        if member is None:
            raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
        if member.member_id != request.member_id:
            raise FencedInstanceIdError(
                f"Static member {request.member_id} with instance id {request.instance_id} "
                f"was fenced by member {member.member_id}."
            )
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Gone for a while: the assignment stays until the session times out.
            leaving = replace(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                partitions_pending_revocation={},
            )
            op.append(current_assignment_record(group.group_id, leaving))
            return response
        self.fence_member(op, group, member)
        return response

    def _remove_member_records(self, op: Operation, group_id: str, member_id: str) -> None:
        op.append(current_assignment_tombstone(group_id, member_id))
        op.append(target_assignment_tombstone(group_id, member_id))
        op.append(member_subscription_tombstone(group_id, member_id))

    def fence_member(
        self, op: Operation, group: ConsumerGroup, member: ConsumerGroupMember
    ) -> None:
        """Removes the member and bumps the group epoch (Kafka's consumerGroupFenceMember)."""
        self._remove_member_records(op, group.group_id, member.member_id)
        metadata = group.compute_subscription_metadata(self.ctx.topics)
        if metadata != group.subscription_metadata:
            op.append(subscription_metadata_record(group.group_id, metadata))
        op.append(group_epoch_record(group.group_id, group.group_epoch + 1))
        self.ctx.timers.cancel((SESSION_TIMER, group.group_id, member.member_id))
        self.ctx.timers.cancel((REBALANCE_TIMER, group.group_id, member.member_id))

    # -- timers and loading ----------------------------------------------------------------

    def on_timer(self, op: Operation, timer: Timer) -> None:
        group = self.ctx.state.consumer_group(timer.group_id)
        member = None if group is None else group.members.get(timer.member_id)
        if group is None or member is None:
            return
        # A rebalance timeout only fences a member still at the epoch it was revoking in.
        expired = timer.kind == SESSION_TIMER or member.member_epoch == timer.data[0]
        if expired:
            self.fence_member(op, group, member)

    def on_loaded(self, now_ms: int) -> None:
        """Session timeouts for every member, rebalance timeouts for members revoking, and
        a metadata refresh on each group's next heartbeat (Kafka's onLoaded)."""
        session_ms = self.ctx.config.consumer_group_session_timeout_ms
        for group in self.ctx.state.groups.values():
            if not isinstance(group, ConsumerGroup):
                continue
            group.metadata_refresh_needed = True
            for member in group.members.values():
                key = (group.group_id, member.member_id)
                self.ctx.timers.schedule((SESSION_TIMER, *key), now_ms + session_ms)
                if member.state == MemberState.UNREVOKED_PARTITIONS:
                    self.ctx.timers.schedule(
                        (REBALANCE_TIMER, *key),
                        now_ms + member.rebalance_timeout_ms,
                        (member.member_epoch,),
                    )


def _is_subset(owned: Sequence[OwnedTopicPartitions] | None, assigned: Assignment) -> bool:
    """Whether the reported partitions are all in ``assigned`` (None: not reported, no)."""
    if owned is None:
        return False
    for tp in owned:
        partitions = assigned.get(tp.topic_id)
        if partitions is None:
            if tp.partitions:
                return False
            continue
        if any(p not in partitions for p in tp.partitions):
            return False
    return True
