"""The state of a classic group (Kafka's ``ClassicGroup``, ``ClassicGroupMember`` and
``ClassicGroupState``).

Unlike a KIP-848 group, a classic group lives in memory and is persisted only at the points
that matter (one ``GroupMetadataValue`` record, type 2): when a generation's assignment is
stored by the leader's SyncGroup, when the group becomes Empty, when a new group is created,
and when a static member is replaced. Loading replays the last such record: the group comes
back Stable (or Empty) at the persisted generation with its members and their assignments;
a rebalance in progress and the parked JoinGroup/SyncGroup requests are not persisted (the
clients rejoin), exactly as in Kafka.

State machine (``transition_to`` refuses anything else with IllegalStateError)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any

A member *awaiting join* (or *sync*) holds the driver's handle of its parked request; the
request is answered by a :class:`~rillet.coordinator.group.results.Completion`.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field

from rillet.coordinator.group.embedded_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from rillet.errors import (
    CorruptRecordError,
    FencedInstanceIdError,
    IllegalStateError,
    UnknownMemberIdError,
)

__all__ = [
    "ClassicGroup",
    "ClassicGroupMember",
    "ClassicGroupState",
    "JoinGroupProtocol",
]


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {
            ClassicGroupState.STABLE,
            ClassicGroupState.COMPLETING_REBALANCE,
            ClassicGroupState.EMPTY,
        }
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}


@dataclass(frozen=True)
class JoinGroupProtocol:
    """One protocol (client-side assignor) a member supports, with its metadata (for the
    ``consumer`` protocol type, a ConsumerProtocolSubscription)."""

    name: str
    metadata: bytes


@dataclass(eq=False)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: tuple[JoinGroupProtocol, ...]
    assignment: bytes = b""
    awaiting_join: Hashable | None = None
    awaiting_sync: Hashable | None = None
    is_new: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        for p in self.supported_protocols:
            if p.name == protocol_name:
                return p.metadata
        raise IllegalStateError(f"member {self.member_id} does not support {protocol_name}")

    def matches(self, protocols: tuple[JoinGroupProtocol, ...]) -> bool:
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        for p in self.supported_protocols:
            if p.name in candidates:
                return p.name
        raise IllegalStateError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        # New members may expire while awaiting join; others awaiting a rebalance are alive.
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


@dataclass(eq=False)
class ClassicGroup:
    """A classic group's membership and rebalance state (see the module doc)."""

    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int | None = None
    previous_state: ClassicGroupState = ClassicGroupState.DEAD
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    num_awaiting_join: int = 0
    new_member_added: bool = False
    # Whether a GroupMetadata record backs the group. A "simple" group (offsets committed
    # without membership) has none and vanishes with its last offset.
    persisted: bool = False

    # -- queries ---------------------------------------------------------------------------

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def is_empty(self) -> bool:
        return self.state == ClassicGroupState.EMPTY

    def is_simple(self) -> bool:
        return self.protocol_type is None and self.is_empty() and not self.pending_join_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[ClassicGroupState.PREPARING_REBALANCE]

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        if self.is_empty():
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == len(self.members) for name in protocol_names
        )

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID unless the member is the current one."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise UnknownMemberIdError(f"instance id {group_instance_id} is unknown")
            if existing != member_id:
                raise FencedInstanceIdError(
                    f"member {member_id} with instance id {group_instance_id} is fenced by "
                    f"{existing}"
                )
        if member_id not in self.members:
            raise UnknownMemberIdError(f"member {member_id} is not in group {self.group_id}")

    def select_protocol(self) -> str:
        """The protocol every member supports that most members list first (Kafka's vote)."""
        if not self.members:
            raise IllegalStateError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = {n for n, c in self.supported_protocols.items() if c == len(self.members)}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def subscribed_topics(self) -> frozenset[str] | None:
        """The topics members of a ``consumer`` group subscribe to; None when unknown (another
        protocol type, no protocol selected yet, or unreadable metadata)."""
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(decode_subscription(m.metadata(self.protocol_name)).topics)
        except (CorruptRecordError, IllegalStateError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        subscribed = self.subscribed_topics()
        if subscribed is None:
            return self.uses_consumer_protocol()
        return topic in subscribed

    # -- membership ------------------------------------------------------------------------

    def add(self, member: ClassicGroupMember) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalStateError(
                    f"static member {member.group_instance_id} is already in {self.group_id}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise IllegalStateError("the group's and the member's protocol types differ")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(p.name for p in member.supported_protocols)
        if member.is_awaiting_join:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self.supported_protocols.subtract(p.name for p in removed.supported_protocols)
            self.supported_protocols = +self.supported_protocols
            if removed.is_awaiting_join:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: tuple[JoinGroupProtocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        awaiting_join: Hashable | None,
    ) -> None:
        self.supported_protocols.subtract(p.name for p in member.supported_protocols)
        member.supported_protocols = protocols
        self.supported_protocols.update(p.name for p in protocols)
        self.supported_protocols = +self.supported_protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if awaiting_join is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif awaiting_join is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = awaiting_join

    def take_join(self, member: ClassicGroupMember) -> Hashable | None:
        """The member's parked JoinGroup handle, now answered (None if it had none)."""
        handle = member.awaiting_join
        if handle is not None:
            member.awaiting_join = None
            self.num_awaiting_join -= 1
        return handle

    def take_sync(self, member: ClassicGroupMember) -> Hashable | None:
        handle = member.awaiting_sync
        member.awaiting_sync = None
        return handle

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> tuple[ClassicGroupMember, ClassicGroupMember]:
        """Moves a static member to a new member id; returns (old, new). The caller answers
        the old member's parked requests with FENCED_INSTANCE_ID."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise IllegalStateError(f"cannot replace unknown member {old_member_id}")
        new = ClassicGroupMember(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.supported_protocols,
            old.assignment,
        )
        if old.is_awaiting_join:
            self.num_awaiting_join -= 1
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return old, new

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keeps a leader that rejoined, else elects a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # -- state -----------------------------------------------------------------------------

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateError(
                f"group {self.group_id}: illegal transition {self.state} -> {state}"
            )
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(ClassicGroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()
