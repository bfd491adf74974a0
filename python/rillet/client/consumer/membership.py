"""A consumer's membership of a KIP-848 group (``group_protocol="consumer"``), as a pure state
machine: Kafka's ConsumerMembershipManager with its heartbeat timing.

The coordinator decides the assignment; the member heartbeats its subscription and the
partitions it owns, and reconciles towards what the coordinator sent: it gives up (revokes)
the partitions no longer its own first, then takes the new ones, and says so in its next
heartbeat, sent at once. Nothing here touches the network, a clock or a thread: the consumer's
heartbeat thread asks :meth:`ConsumerMembership.heartbeat_request` when one is due and hands
back the answer; the consumer's own thread runs reconciliations inside ``poll()`` (where the
rebalance listener may run), and reports them with :meth:`reconciled`.

States, as Kafka's MemberState: UNSUBSCRIBED, JOINING (epoch 0 sent, no answer yet), STABLE
(owns what it was assigned), RECONCILING (an assignment to apply), ACKNOWLEDGING (applied,
heartbeat it now), FENCED (the coordinator fenced this epoch: the partitions are lost; rejoin
with epoch 0), LEAVING (epoch -1, or -2 for a static member), and FATAL (an error no retry
fixes: a taken ``group.instance.id``, an unknown assignor, ...).
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rillet.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedMemberEpochError,
    KafkaError,
    NotCoordinatorError,
    UnknownMemberIdError,
)

__all__ = [
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "Assignment",
    "ConsumerMembership",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "MemberState",
]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]


class MemberState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    LEAVING = "LEAVING"
    FATAL = "FATAL"


@dataclass(frozen=True)
class HeartbeatRequest:
    """One ConsumerGroupHeartbeat, every field sent (Kafka may leave unchanged ones out;
    the coordinator treats a full request the same)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Assignment | None


@dataclass(frozen=True)
class HeartbeatResponse:
    error: KafkaError | None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass
class ConsumerMembership:
    """See the module docstring. ``rebalance_timeout_ms`` is ``max.poll.interval.ms``."""

    group_id: str
    rebalance_timeout_ms: int
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    member_id: str = field(default_factory=lambda: _new_member_id())
    member_epoch: int = JOIN_EPOCH
    state: MemberState = MemberState.UNSUBSCRIBED
    heartbeat_interval_ms: int = 0
    owned: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    target: dict[uuid.UUID, frozenset[int]] | None = None
    fatal: KafkaError | None = None
    topics: tuple[str, ...] | None = None
    regex: str | None = None
    _in_flight: bool = False
    _next_at_ms: int = 0
    _lost: bool = False

    # -- subscription ------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None = None, regex: str | None = None) -> None:
        """Join (or change the subscription of a joined member): heartbeat at once."""
        self.topics = tuple(sorted(set(topics))) if topics is not None else None
        self.regex = regex
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.LEAVING):
            self.state = MemberState.JOINING
            self.member_epoch = JOIN_EPOCH
        self._next_at_ms = 0

    def leave(self) -> None:
        """Leave the group with the next heartbeat (epoch -1, or -2 for a static member that
        means to come back)."""
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            return
        self.state = MemberState.LEAVING
        self.member_epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        self._next_at_ms = 0

    @property
    def in_group(self) -> bool:
        return self.state not in (MemberState.UNSUBSCRIBED, MemberState.FATAL)

    # -- heartbeats --------------------------------------------------------------------------

    def heartbeat_due(self, now_ms: int) -> bool:
        return self.in_group and not self._in_flight and now_ms >= self._next_at_ms

    def next_heartbeat_ms(self) -> int | None:
        """When the next heartbeat is due (None: none while one is in flight or not joined)."""
        if not self.in_group or self._in_flight:
            return None
        return self._next_at_ms

    def heartbeat_request(self) -> HeartbeatRequest:
        """The heartbeat to send now; one at a time (the answer goes to
        :meth:`on_heartbeat_response`, or :meth:`on_heartbeat_failure`)."""
        self._in_flight = True
        if self.state is MemberState.FENCED:
            self.member_epoch = JOIN_EPOCH
            self.state = MemberState.JOINING
        leaving = self.state is MemberState.LEAVING
        return HeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=None if leaving or self.regex else (self.topics or ()),
            subscribed_topic_regex=None if leaving else self.regex,
            server_assignor=self.server_assignor,
            owned=None if leaving else dict(self.owned),
        )

    def on_heartbeat_failure(self, now_ms: int, retry_backoff_ms: int) -> None:
        """The heartbeat got no answer (coordinator unreachable): retry after the backoff."""
        self._in_flight = False
        self._next_at_ms = now_ms + retry_backoff_ms

    def on_heartbeat_response(
        self, response: HeartbeatResponse, now_ms: int, retry_backoff_ms: int
    ) -> None:
        self._in_flight = False
        err = response.error
        if self.state is MemberState.LEAVING:
            # Left (or the coordinator forgot us anyway): nothing more to say.
            self.state = MemberState.UNSUBSCRIBED
            self.owned, self.target = {}, None
            return
        if err is None:
            self.member_id = response.member_id or self.member_id
            self.member_epoch = response.member_epoch
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                self.target = dict(response.assignment)
            reconciling = self.target is not None and self.target != self.owned
            self.state = MemberState.RECONCILING if reconciling else MemberState.STABLE
            self._next_at_ms = now_ms + self.heartbeat_interval_ms
            return
        if isinstance(err, FencedMemberEpochError | UnknownMemberIdError):
            # Fenced: everything owned is lost (not revoked: someone else may own it now);
            # rejoin with epoch 0 under the same member id.
            self.state = MemberState.FENCED
            self._lost = bool(self.owned)
            self.target = None
            self._next_at_ms = now_ms
            return
        if (
            isinstance(
                err,
                NotCoordinatorError | CoordinatorNotAvailableError | CoordinatorLoadInProgressError,
            )
            or err.retriable
        ):
            self._next_at_ms = now_ms + retry_backoff_ms
            return
        self.state = MemberState.FATAL
        self.fatal = err

    # -- reconciliation (the consumer's thread) -----------------------------------------------

    def take_lost(self) -> dict[uuid.UUID, frozenset[int]] | None:
        """After fencing: the partitions lost, once (the consumer drops them and calls
        ``on_partitions_lost``)."""
        if not self._lost:
            return None
        lost, self.owned, self._lost = self.owned, {}, False
        return lost

    def pending_reconciliation(self) -> dict[uuid.UUID, frozenset[int]] | None:
        """The assignment to move to, while one differs from what is owned."""
        if self.state is MemberState.RECONCILING and self.target is not None:
            return dict(self.target)
        return None

    def reconciled(self, owned: Mapping[uuid.UUID, frozenset[int]]) -> None:
        """The consumer now owns ``owned`` (revocations done, assignments taken): say so in a
        heartbeat at once."""
        self.owned = {t: ps for t, ps in owned.items() if ps}
        if self.state is MemberState.RECONCILING:
            self.state = MemberState.ACKNOWLEDGING
        self._next_at_ms = 0


def _new_member_id() -> str:
    """Kafka 4's consumer makes its own member id (KIP-1082): a random UUID in URL-safe
    base64, as Kafka prints UUIDs."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
