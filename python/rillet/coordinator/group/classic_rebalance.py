"""The mechanics of a classic rebalance (Kafka's ``GroupMetadataManager`` join and sync
phases): preparing a rebalance, completing the join phase into a new generation, handing out
the leader's assignment, removing members, and the timers that drive all three.

Timers (keys ``(kind, group id, member id or "")``):

- ``classic-heartbeat`` per member: its session. A member that is neither awaiting a join
  nor a sync when it fires is removed (a new member that never rejoined too), which
  rebalances the group.
- ``classic-join`` per group: data ``(delay, remaining)`` while the group's first rebalance
  waits ``group.initial.rebalance.delay.ms`` (extended while new members arrive, within the
  rebalance timeout); data ``()`` for the rebalance timeout, which completes the join phase
  with the members that rejoined.
- ``classic-sync`` per group, data ``(generation,)``: members that did not send SyncGroup
  within the rebalance timeout are removed and the group rebalances again.
"""

from __future__ import annotations

from rillet.coordinator.group.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from rillet.coordinator.group.context import ShardContext
from rillet.coordinator.group.messages import (
    JoinGroupResponse,
    JoinGroupResponseMember,
    SyncGroupResponse,
)
from rillet.coordinator.group.record_helpers import group_metadata_record
from rillet.coordinator.group.results import Completion, Operation
from rillet.coordinator.group.timers import Timer
from rillet.errors import (
    KafkaError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

__all__ = ["HEARTBEAT_TIMER", "JOIN_TIMER", "SYNC_TIMER", "ClassicRebalance"]

HEARTBEAT_TIMER = "classic-heartbeat"
JOIN_TIMER = "classic-join"
SYNC_TIMER = "classic-sync"

S = ClassicGroupState


class ClassicRebalance:
    """The join and sync phases of classic groups, over a :class:`ShardContext`."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx

    def maybe_prepare_rebalance_or_complete_join(
        self, op: Operation, group: ClassicGroup, now_ms: int
    ) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(op, group, now_ms)
        else:
            self.maybe_complete_join_phase(op, group, now_ms)

    def prepare_rebalance(self, op: Operation, group: ClassicGroup, now_ms: int) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment(op, group, RebalanceInProgressError(), now_ms)
        self.remove_sync_expiration(group)
        initial = group.is_in(S.EMPTY)
        if initial:
            delay = self.ctx.config.classic_group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.ctx.timers.schedule(
                (JOIN_TIMER, group.group_id, ""), now_ms + delay, (delay, remaining)
            )
        group.transition_to(S.PREPARING_REBALANCE, now_ms)
        if not initial:
            self.maybe_complete_join_else_schedule(op, group, now_ms)

    def maybe_complete_join_else_schedule(
        self, op: Operation, group: ClassicGroup, now_ms: int
    ) -> None:
        if group.has_all_members_joined():
            self.complete_join(op, group, now_ms)
        else:
            self.ctx.timers.schedule(
                (JOIN_TIMER, group.group_id, ""), now_ms + group.rebalance_timeout_ms()
            )

    def maybe_complete_join_phase(self, op: Operation, group: ClassicGroup, now_ms: int) -> None:
        if (
            group.is_in(S.PREPARING_REBALANCE)
            and group.previous_state != S.EMPTY  # the initial rebalance waits for its delay
            and group.has_all_members_joined()
        ):
            self.complete_join(op, group, now_ms)

    def complete_join(self, op: Operation, group: ClassicGroup, now_ms: int) -> None:
        self.ctx.timers.cancel((JOIN_TIMER, group.group_id, ""))
        for m in group.not_yet_rejoined_members():
            if m.group_instance_id is None:
                self.remove_member(op, group, m, UnknownMemberIdError("did not rejoin in time"))
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only static members are left): wait another round.
            self.ctx.timers.schedule(
                (JOIN_TIMER, group.group_id, ""), now_ms + group.rebalance_timeout_ms()
            )
            return
        group.init_next_generation(now_ms)
        if group.is_in(S.EMPTY):
            op.append_persisted_snapshot(group_metadata_record(group))
            group.persisted = True
            return
        for m in group.members.values():
            response = self.join_response(group, m, with_members=True)
            op.complete(group.take_join(m), response)
            self.reschedule_heartbeat(group, m.member_id, m.session_timeout_ms, now_ms)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        self.ctx.timers.schedule(
            (SYNC_TIMER, group.group_id, ""),
            now_ms + group.rebalance_timeout_ms(),
            (group.generation_id,),
        )

    def remove_member(
        self, op: Operation, group: ClassicGroup, member: ClassicGroupMember, error: KafkaError
    ) -> None:
        op.complete(group.take_join(member), JoinGroupResponse(error=error))
        op.complete(group.take_sync(member), SyncGroupResponse(error=error))
        group.remove(member.member_id)
        self.ctx.timers.cancel((HEARTBEAT_TIMER, group.group_id, member.member_id))

    def remove_member_and_update_group(
        self, op: Operation, group: ClassicGroup, member: ClassicGroupMember, now_ms: int
    ) -> None:
        self.remove_member(op, group, member, UnknownMemberIdError("session expired"))
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(op, group, now_ms)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(op, group, now_ms)

    def join_response(
        self, group: ClassicGroup, member: ClassicGroupMember, with_members: bool
    ) -> JoinGroupResponse:
        members: tuple[JoinGroupResponseMember, ...] = ()
        if with_members and group.is_leader(member.member_id):
            members = tuple(
                JoinGroupResponseMember(
                    m.member_id, m.group_instance_id, m.metadata(group.protocol_name)
                )
                for m in group.members.values()
            )
        return JoinGroupResponse(
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.is_in(S.DEAD, S.EMPTY, S.PREPARING_REBALANCE) or (
            group.has_received_sync_from_all_members()
        ):
            self.ctx.timers.cancel((SYNC_TIMER, group.group_id, ""))

    def remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.ctx.timers.cancel((SYNC_TIMER, group.group_id, ""))

    def reset_and_propagate_assignment(
        self, op: Operation, group: ClassicGroup, error: KafkaError, now_ms: int
    ) -> None:
        for m in group.members.values():
            m.assignment = b""
        self.propagate_assignment(op, group, error, now_ms)

    def propagate_assignment(
        self, op: Operation, group: ClassicGroup, error: KafkaError | None, now_ms: int
    ) -> None:
        """Answers every parked SyncGroup: the assignment, or ``error`` for all."""
        for m in group.members.values():
            handle = group.take_sync(m)
            if handle is None:
                continue
            if error is None:
                response = SyncGroupResponse(
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=m.assignment,
                )
            else:
                response = SyncGroupResponse(error=error)
            op.complete(handle, response)
            self.reschedule_heartbeat(group, m.member_id, m.session_timeout_ms, now_ms)

    def reschedule_heartbeat(
        self, group: ClassicGroup, member_id: str, timeout_ms: int, now_ms: int
    ) -> None:
        self.ctx.timers.schedule((HEARTBEAT_TIMER, group.group_id, member_id), now_ms + timeout_ms)

    def on_timer(self, op: Operation, timer: Timer, now_ms: int) -> None:
        group = self.ctx.state.classic_group(timer.group_id)
        if group is None or group.is_in(S.DEAD):
            return
        if timer.kind == HEARTBEAT_TIMER:
            member_id = timer.member_id
            if member_id in group.pending_join_members:
                group.remove(member_id)
                if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                    self.complete_join(op, group, now_ms)
                return
            member = group.members.get(member_id)
            if member is not None and not member.has_satisfied_heartbeat():
                self.remove_member_and_update_group(op, group, member, now_ms)
        elif timer.kind == JOIN_TIMER:
            if timer.data:
                self._on_initial_delay(op, group, timer.data[0], timer.data[1], now_ms)
            elif group.is_in(S.PREPARING_REBALANCE):
                self.complete_join(op, group, now_ms)
        elif timer.kind == SYNC_TIMER:
            self._on_sync_expired(op, group, timer.data[0], now_ms)

    def _on_initial_delay(
        self, op: Operation, group: ClassicGroup, delay: int, remaining: int, now_ms: int
    ) -> None:
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining != 0:
            # New members keep arriving: wait a little more, within the rebalance timeout.
            group.new_member_added = False
            new_delay = min(self.ctx.config.classic_group_initial_rebalance_delay_ms, remaining)
            self.ctx.timers.schedule(
                (JOIN_TIMER, group.group_id, ""),
                now_ms + new_delay,
                (new_delay, max(remaining - delay, 0)),
            )
        else:
            self.complete_join(op, group, now_ms)

    def _on_sync_expired(
        self, op: Operation, group: ClassicGroup, generation: int, now_ms: int
    ) -> None:
        if generation != group.generation_id or not group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
            return
        if group.has_received_sync_from_all_members():
            return
        for member_id in sorted(group.pending_sync_members):
            member = group.members.get(member_id)
            if member is not None:
                self.remove_member(op, group, member, UnknownMemberIdError("no SyncGroup"))
        self.prepare_rebalance(op, group, now_ms)

    def on_loaded(self, now_ms: int) -> None:
        """Every loaded member's session starts at ``now_ms`` (Kafka's onLoaded)."""
        for group in self.ctx.state.groups.values():
            if isinstance(group, ClassicGroup):
                for m in group.members.values():
                    self.reschedule_heartbeat(group, m.member_id, m.session_timeout_ms, now_ms)

    def unload(self) -> list[Completion]:
        """NOT_COORDINATOR to every parked request (Kafka's onUnloaded)."""
        out = []
        for group in self.ctx.state.groups.values():
            if not isinstance(group, ClassicGroup):
                continue
            for m in group.members.values():
                if m.awaiting_join is not None:
                    out.append(
                        Completion(
                            m.awaiting_join,
                            JoinGroupResponse(error=NotCoordinatorError(), member_id=m.member_id),
                        )
                    )
                if m.awaiting_sync is not None:
                    out.append(
                        Completion(m.awaiting_sync, SyncGroupResponse(error=NotCoordinatorError()))
                    )
            group.state = S.DEAD
        return out
