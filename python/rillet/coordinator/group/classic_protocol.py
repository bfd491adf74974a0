"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers
(Kafka's ``GroupMetadataManager.classicGroup*``), on the same shard as KIP-848 groups.

A rebalance: members (re)join; the first to join leads. The join phase completes when every
known member has rejoined, or when the rebalance timeout (the largest of the members') runs
out, dropping the dynamic members that did not rejoin; a group's first rebalance waits
``group.initial.rebalance.delay.ms``, longer while new members keep arriving. Then every
joined member gets the new generation, the leader gets all members' metadata, and the group
waits (CompletingRebalance) for the leader's SyncGroup with the assignment, which is
persisted and sent to every member that synced (Stable). Heartbeats say
REBALANCE_IN_PROGRESS during a rebalance and ILLEGAL_GENERATION for another generation; a
member silent for its session timeout is removed, which starts a rebalance.

JoinGroup and SyncGroup often wait. The shard is pure, so it parks them: the driver passes a
*handle* with each; the answer, to this request or to ones parked earlier, comes as a
:class:`~rillet.coordinator.group.results.Completion` in whatever operation (a later join,
a leave, a tick) completes it. Deliberate extensions of Kafka, so that every parked handle is
answered: a member removed while its SyncGroup is parked gets UNKNOWN_MEMBER_ID (Kafka lets
that request time out), and a second JoinGroup or SyncGroup from a member whose first is
still parked answers the first with REBALANCE_IN_PROGRESS. The mechanics of the join and
sync phases, and their timers, are in :mod:`~rillet.coordinator.group.classic_rebalance`.

Static members (``group_instance_id``) rejoining with an unknown member id take over their
old member id's place (the old one gets FENCED_INSTANCE_ID); in a Stable group whose
protocol does not change this needs no rebalance, only a persisted GroupMetadata record.
A static leader returning that way is told it leads with ``skip_assignment`` (KIP-814,
JoinGroup v9+); older clients get the pre-v9 answer naming the old leader id.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from rillet.coordinator.group.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from rillet.coordinator.group.classic_rebalance import HEARTBEAT_TIMER, ClassicRebalance
from rillet.coordinator.group.consumer_group import ConsumerGroup
from rillet.coordinator.group.context import ShardContext
from rillet.coordinator.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from rillet.coordinator.group.record_helpers import (
    consumer_group_tombstones,
    empty_group_metadata_record,
    group_metadata_record,
)
from rillet.coordinator.group.results import Completion, Operation
from rillet.coordinator.group.timers import Timer
from rillet.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownServerError,
)

__all__ = ["ClassicGroupProtocol"]

S = ClassicGroupState


def _rebalance_timeout_ms(request: JoinGroupRequest) -> int:
    """JoinGroup v0 has no rebalance timeout (-1): the session timeout serves."""
    if request.rebalance_timeout_ms > 0:
        return request.rebalance_timeout_ms
    return request.session_timeout_ms


class ClassicGroupProtocol:
    """Handlers of the classic protocol over a :class:`ShardContext` (see the module doc)."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx
        self.rebalance = ClassicRebalance(ctx)

    # -- JoinGroup -------------------------------------------------------------------------

    def join_group(
        self, op: Operation, request: JoinGroupRequest, handle: Hashable, now_ms: int
    ) -> None:
        cfg, state, gid = self.ctx.config, self.ctx.state, request.group_id

        def fail(error: KafkaError, member_id: str = request.member_id) -> None:
            op.complete(handle, JoinGroupResponse(error=error, member_id=member_id))

        if not gid.strip():
            return fail(InvalidGroupIdError("The group id is empty."))
        if not (
            cfg.classic_group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= cfg.classic_group_max_session_timeout_ms
        ):
            return fail(InvalidSessionTimeoutError(f"{request.session_timeout_ms} ms"))
        existing = state.groups.get(gid)
        if isinstance(existing, ConsumerGroup):
            if not existing.is_empty():
                return fail(
                    InconsistentGroupProtocolError(f"group {gid} uses the consumer protocol"), ""
                )
            for record in consumer_group_tombstones(gid, []):
                op.append(record)
        unknown_member = request.member_id == ""
        group = state.classic_group(gid)
        is_new_group = group is None
        if group is None:
            if not unknown_member:
                return fail(UnknownMemberIdError(f"group {gid} does not exist"))
            group = ClassicGroup(gid, current_state_timestamp=now_ms)
            state.groups[gid] = group
        records_before = len(op.records)
        if not self._accept_joining_member(group, request.member_id):
            group.remove(request.member_id)
            fail(GroupMaxSizeReachedError(f"group {gid} is full"), "")
        elif unknown_member:
            self._join_new_member(op, group, request, handle, now_ms)
        else:
            self._join_existing_member(op, group, request, handle, now_ms)
        if is_new_group and len(op.records) == records_before:
            op.append_persisted_snapshot(empty_group_metadata_record(group))
            group.persisted = True

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.ctx.config.classic_group_max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or (
                group.num_awaiting_join < limit
            )
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(
        self,
        op: Operation,
        group: ClassicGroup,
        request: JoinGroupRequest,
        handle: Hashable,
        now_ms: int,
    ) -> None:
        if group.is_in(S.DEAD):
            op.complete(handle, JoinGroupResponse(error=CoordinatorNotAvailableError()))
            return
        if not group.supports_protocols(request.protocol_type, {p.name for p in request.protocols}):
            op.complete(handle, JoinGroupResponse(error=InconsistentGroupProtocolError()))
            return
        prefix = request.group_instance_id or request.client_id
        new_member_id = f"{prefix}-{self.ctx.random_uuid()}"
        if request.group_instance_id is not None:
            old = group.static_member_id(request.group_instance_id)
            if old is not None:
                self._replace_static_member(op, group, request, old, new_member_id, handle, now_ms)
            else:
                self._add_member(op, group, request, new_member_id, handle, now_ms)
        elif request.require_known_member_id:
            # JoinGroup v4+: hand out an id and ask the member to rejoin with it.
            group.pending_join_members.add(new_member_id)
            self.rebalance.reschedule_heartbeat(
                group, new_member_id, request.session_timeout_ms, now_ms
            )
            op.complete(
                handle, JoinGroupResponse(error=MemberIdRequiredError(), member_id=new_member_id)
            )
        else:
            self._add_member(op, group, request, new_member_id, handle, now_ms)

    def _join_existing_member(
        self,
        op: Operation,
        group: ClassicGroup,
        request: JoinGroupRequest,
        handle: Hashable,
        now_ms: int,
    ) -> None:
        member_id = request.member_id
        if group.is_in(S.DEAD):
            error: KafkaError = CoordinatorNotAvailableError()
        elif not group.supports_protocols(
            request.protocol_type, {p.name for p in request.protocols}
        ):
            error = InconsistentGroupProtocolError()
        elif member_id in group.pending_join_members:
            if request.group_instance_id is not None:
                error = UnknownServerError("a pending member cannot be static")
            else:
                self._add_member(op, group, request, member_id, handle, now_ms)
                return
        else:
            try:
                group.validate_member(member_id, request.group_instance_id)
            except KafkaError as e:
                error = e
            else:
                self._rejoin(op, group, group.members[member_id], request, handle, now_ms)
                return
        op.complete(handle, JoinGroupResponse(error=error, member_id=member_id))

    def _rejoin(
        self,
        op: Operation,
        group: ClassicGroup,
        member: ClassicGroupMember,
        request: JoinGroupRequest,
        handle: Hashable,
        now_ms: int,
    ) -> None:
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member(op, group, member, request, handle, now_ms)
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # It missed its JoinGroup answer: the current generation again.
                op.complete(handle, self.rebalance.join_response(group, member, with_members=True))
                self._alive(group, member, now_ms)
            else:
                self._update_member(op, group, member, request, handle, now_ms)
        elif group.is_in(S.STABLE):
            if group.is_leader(member.member_id) or not member.matches(request.protocols):
                # The leader rejoining forces a rebalance (new topic metadata, say).
                self._update_member(op, group, member, request, handle, now_ms)
            else:
                op.complete(handle, self.rebalance.join_response(group, member, with_members=False))
                self._alive(group, member, now_ms)
        else:
            op.complete(
                handle,
                JoinGroupResponse(error=UnknownMemberIdError(), member_id=member.member_id),
            )

    def _alive(self, group: ClassicGroup, member: ClassicGroupMember, now_ms: int) -> None:
        """A request answered at once is a sign of life too: the member's session restarts
        (Kafka's Scala coordinator did so for SyncGroup; Kafka 4 only for Heartbeat and
        OffsetCommit). A member can then trust any good answer to mean it still belongs."""
        self.rebalance.reschedule_heartbeat(
            group, member.member_id, member.session_timeout_ms, now_ms
        )

    def _add_member(
        self,
        op: Operation,
        group: ClassicGroup,
        request: JoinGroupRequest,
        member_id: str,
        handle: Hashable,
        now_ms: int,
    ) -> None:
        member = ClassicGroupMember(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            _rebalance_timeout_ms(request),
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
            awaiting_join=handle,
            is_new=True,
        )
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state == S.EMPTY:
            group.new_member_added = True
        group.add(member)
        # A parked JoinGroup cannot heartbeat; a new member that never comes back is dropped.
        timeout = self.ctx.config.classic_group_new_member_join_timeout_ms
        self.rebalance.reschedule_heartbeat(group, member_id, timeout, now_ms)
        self.rebalance.maybe_prepare_rebalance_or_complete_join(op, group, now_ms)

    def _update_member(
        self,
        op: Operation,
        group: ClassicGroup,
        member: ClassicGroupMember,
        request: JoinGroupRequest,
        handle: Hashable,
        now_ms: int,
    ) -> None:
        if member.awaiting_join is not None and member.awaiting_join != handle:
            # A retried JoinGroup replaces the one still parked.
            op.complete(
                group.take_join(member),
                JoinGroupResponse(error=RebalanceInProgressError(), member_id=member.member_id),
            )
        group.update_member(
            member,
            request.protocols,
            _rebalance_timeout_ms(request),
            request.session_timeout_ms,
            handle,
        )
        self.rebalance.maybe_prepare_rebalance_or_complete_join(op, group, now_ms)

    def _replace_static_member(
        self,
        op: Operation,
        group: ClassicGroup,
        request: JoinGroupRequest,
        old_member_id: str,
        new_member_id: str,
        handle: Hashable,
        now_ms: int,
    ) -> None:
        assert request.group_instance_id is not None
        current_leader = group.leader_id
        old, new = group.replace_static_member(
            request.group_instance_id, old_member_id, new_member_id
        )
        fenced = FencedInstanceIdError(f"replaced by {new_member_id}")
        op.complete(old.awaiting_join, JoinGroupResponse(error=fenced, member_id=old_member_id))
        op.complete(old.awaiting_sync, SyncGroupResponse(error=fenced))
        self.ctx.timers.cancel((HEARTBEAT_TIMER, group.group_id, old_member_id))
        self.rebalance.reschedule_heartbeat(group, new_member_id, new.session_timeout_ms, now_ms)
        group.update_member(
            new,
            request.protocols,
            _rebalance_timeout_ms(request),
            request.session_timeout_ms,
            handle,
        )
        if group.is_in(S.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, persist the new member id and answer.
                op.append_persisted_snapshot(group_metadata_record(group))
                group.persisted = True
                if request.supports_skip_assignment:
                    # KIP-814: a returning leader learns it leads, and keeps the assignment.
                    leads = group.is_leader(new_member_id)
                    response = replace(
                        self.rebalance.join_response(group, new, with_members=leads),
                        skip_assignment=leads,
                    )
                else:
                    response = JoinGroupResponse(
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader or "",
                        member_id=new_member_id,
                    )
                op.complete(group.take_join(new), response)
            else:
                self.rebalance.maybe_prepare_rebalance_or_complete_join(op, group, now_ms)
        elif group.is_in(S.COMPLETING_REBALANCE):
            # The leader may have assigned to the old member id: rebalance again.
            self.rebalance.prepare_rebalance(op, group, now_ms)
        else:
            self.rebalance.maybe_complete_join_phase(op, group, now_ms)

    # -- SyncGroup -------------------------------------------------------------------------

    def sync_group(
        self, op: Operation, request: SyncGroupRequest, handle: Hashable, now_ms: int
    ) -> None:

        def fail(error: KafkaError) -> None:
            op.complete(handle, SyncGroupResponse(error=error))

        if not request.group_id.strip():
            return fail(InvalidGroupIdError("The group id is empty."))
        group = self.ctx.state.groups.get(request.group_id)
        if not isinstance(group, ClassicGroup) or group.is_empty():
            return fail(UnknownMemberIdError(f"member {request.member_id} is unknown"))
        error = self._validate_sync(group, request)
        if error is not None:
            return fail(error)
        member = group.members[request.member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            return fail(RebalanceInProgressError())
        if group.is_in(S.STABLE):
            self.rebalance.remove_pending_sync_member(group, member.member_id)
            op.complete(
                handle,
                SyncGroupResponse(
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                ),
            )
            self._alive(group, member, now_ms)
            return
        # CompletingRebalance: wait for the leader's assignment.
        if member.awaiting_sync is not None:
            op.complete(
                group.take_sync(member), SyncGroupResponse(error=RebalanceInProgressError())
            )
        member.awaiting_sync = handle
        self.rebalance.remove_pending_sync_member(group, member.member_id)
        if group.is_leader(member.member_id):
            assignment = {m: request.assignments.get(m, b"") for m in group.members}
            for m in group.members.values():
                m.assignment = assignment[m.member_id]
            # Persisted, then every parked SyncGroup is answered: the driver sends the
            # answers only once the record is committed.
            op.append_persisted_snapshot(group_metadata_record(group, assignment))
            group.persisted = True
            self.rebalance.propagate_assignment(op, group, None, now_ms)
            group.transition_to(S.STABLE, now_ms)

    def _validate_sync(self, group: ClassicGroup, request: SyncGroupRequest) -> KafkaError | None:
        if group.is_in(S.DEAD):
            return CoordinatorNotAvailableError()
        try:
            group.validate_member(request.member_id, request.group_instance_id)
        except KafkaError as e:
            return e
        if request.generation_id != group.generation_id:
            return IllegalGenerationError(
                f"generation {request.generation_id}, the group is at {group.generation_id}"
            )
        for asked, actual in (
            (request.protocol_type, group.protocol_type),
            (request.protocol_name, group.protocol_name),
        ):
            if asked is not None and actual is not None and asked != actual:
                return InconsistentGroupProtocolError(f"{asked} is not {actual}")
        return None

    # -- Heartbeat and LeaveGroup ----------------------------------------------------------

    def heartbeat(self, op: Operation, request: HeartbeatRequest, now_ms: int) -> HeartbeatResponse:
        if not request.group_id.strip():
            raise InvalidGroupIdError("The group id is empty.")
        group = self.ctx.state.groups.get(request.group_id)
        if not isinstance(group, ClassicGroup):
            raise UnknownMemberIdError(f"Group {request.group_id} not found.")
        if group.is_in(S.DEAD):
            raise CoordinatorNotAvailableError()
        group.validate_member(request.member_id, request.group_instance_id)
        if request.generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"generation {request.generation_id}, the group is at {group.generation_id}"
            )
        if group.is_in(S.EMPTY):
            raise UnknownMemberIdError()
        member = group.members[request.member_id]
        self.rebalance.reschedule_heartbeat(
            group, member.member_id, member.session_timeout_ms, now_ms
        )
        if group.is_in(S.PREPARING_REBALANCE):
            return HeartbeatResponse(error=RebalanceInProgressError())
        return HeartbeatResponse()

    def leave_group(
        self, op: Operation, request: LeaveGroupRequest, now_ms: int
    ) -> LeaveGroupResponse:
        if not request.group_id.strip():
            raise InvalidGroupIdError("The group id is empty.")
        group = self.ctx.state.groups.get(request.group_id)
        if group is None:
            raise UnknownMemberIdError(f"Group {request.group_id} not found.")
        if isinstance(group, ConsumerGroup):
            # No classic members live in consumer groups here.
            responses = []
            for identity in request.members:
                holder = group.static_members.get(identity.group_instance_id or "")
                error: KafkaError = UnknownMemberIdError()
                if holder is not None and identity.member_id not in ("", holder):
                    error = FencedInstanceIdError()
                responses.append(
                    MemberResponse(identity.member_id, identity.group_instance_id, error)
                )
            return LeaveGroupResponse(members=tuple(responses))
        if group.is_in(S.DEAD):
            return LeaveGroupResponse(error=CoordinatorNotAvailableError())
        responses = []
        for identity in request.members:
            mid, iid = identity.member_id, identity.group_instance_id
            left_error: KafkaError | None = None
            if mid == "":
                static_id = group.static_member_id(iid)
                if static_id is None:
                    left_error = UnknownMemberIdError()
                else:
                    self.rebalance.remove_member(
                        op, group, group.members[static_id], UnknownMemberIdError()
                    )
            elif mid in group.pending_join_members:
                group.remove(mid)
                self.ctx.timers.cancel((HEARTBEAT_TIMER, group.group_id, mid))
            else:
                try:
                    group.validate_member(mid, iid)
                except KafkaError as e:
                    left_error = e
                else:
                    self.rebalance.remove_member(
                        op, group, group.members[mid], UnknownMemberIdError()
                    )
            responses.append(MemberResponse(mid, iid, left_error))
        if any(r.error is None for r in responses):
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self.rebalance.maybe_prepare_rebalance_or_complete_join(op, group, now_ms)
            elif group.is_in(S.PREPARING_REBALANCE):
                self.rebalance.maybe_complete_join_phase(op, group, now_ms)
        return LeaveGroupResponse(members=tuple(responses))

    # -- timers, offsets, loading ----------------------------------------------------------

    def on_offset_commit(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        """An offset commit keeps a member's session alive while the group is Stable or
        PreparingRebalance (Kafka's rule)."""
        member = group.members.get(member_id)
        if member is not None and group.is_in(S.STABLE, S.PREPARING_REBALANCE):
            self.rebalance.reschedule_heartbeat(group, member_id, member.session_timeout_ms, now_ms)

    def on_timer(self, op: Operation, timer: Timer, now_ms: int) -> None:
        self.rebalance.on_timer(op, timer, now_ms)

    def on_loaded(self, now_ms: int) -> None:
        self.rebalance.on_loaded(now_ms)

    def unload(self) -> list[Completion]:
        return self.rebalance.unload()
