"""The interface every classic-group assignor implements, and what the consumer's classic
membership code does around it (Kafka's ``ConsumerPartitionAssignor``,
``AbstractPartitionAssignor`` and the assignor half of ``ConsumerCoordinator``).

The life of one rebalance, on the client side of the classic protocol:

1. Every member sends JoinGroup with :func:`join_group_protocols`: one
   ``ConsumerProtocolSubscription`` per configured assignor, in order of preference.
2. The coordinator picks the first assignor all members support and elects a leader; the leader
   decodes every member's subscription (:func:`~.protocol.decode_subscription`), fetches the
   partition counts of :func:`all_subscribed_topics`, and calls :func:`perform_assignment`.
3. The leader sends each member its ``ConsumerProtocolAssignment``
   (:func:`~.protocol.encode_assignment`) in SyncGroup; each member calls
   :meth:`ConsumerPartitionAssignor.on_assignment` with what it got and the generation.

Assignors are pure: the same members and partition counts give the same assignment, whatever
the order of the input. Topics sort in Python's string order, which is Java's for Kafka's legal
topic names (ASCII ``[a-zA-Z0-9._-]``); member and instance ids are arbitrary strings and sort
by UTF-16 code unit, as Java's ``String.compareTo`` does (:func:`~.protocol.java_order`).

An assignor instance is owned by one consumer's thread (the sticky ones remember the last
assignment for their user data).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, NamedTuple

from rillet.client.consumer.assignors.protocol import (
    DEFAULT_GENERATION,
    Assignment,
    Subscription,
    encode_subscription,
    java_order,
)
from rillet.errors import IllegalStateError, InvalidConfigurationError
from rillet.types import TopicPartition

__all__ = [
    "ConsumerPartitionAssignor",
    "GroupMember",
    "JoinGroupProtocol",
    "RebalanceProtocol",
    "all_subscribed_topics",
    "choose_rebalance_protocol",
    "join_group_protocols",
    "lookup_assignor",
    "member_order",
    "perform_assignment",
    "validate_cooperative_assignment",
]


class RebalanceProtocol(IntEnum):
    """How members hand partitions over (``ConsumerPartitionAssignor.RebalanceProtocol``).

    EAGER: every member revokes everything before it rejoins; the leader may reshuffle freely.
    COOPERATIVE (KIP-429): members keep their partitions through the rebalance; the leader
    must not give a partition to a new owner while another member still owns it, only take it
    from the old owner, and a follow-up rebalance gives it out. The ids are Kafka's, and a
    higher one is preferred when choosing between them."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member as the leader sees it in the JoinGroup response: its ``member.id``, its
    ``group.instance.id`` when it is a static member (KIP-345), and its decoded subscription
    (topics, owned partitions, generation, rack, user data)."""

    member_id: str
    subscription: Subscription
    group_instance_id: str | None = None


class JoinGroupProtocol(NamedTuple):
    """One entry of JoinGroup's protocol list: an assignor's name and the member's encoded
    ``ConsumerProtocolSubscription`` for it."""

    name: str
    metadata: bytes


def member_order(member: GroupMember) -> tuple[int, bytes, bytes]:
    """Kafka's ``MemberInfo`` order: static members first, by ``group.instance.id``, then
    dynamic ones by ``member.id``; so a static member keeps its place (and with range and
    round robin its partitions) across restarts that give it a new member id."""
    if member.group_instance_id is not None:
        return (0, java_order(member.group_instance_id), java_order(member.member_id))
    return (1, java_order(member.member_id), b"")


def all_subscribed_topics(members: Iterable[GroupMember]) -> frozenset[str]:
    """Every topic some member subscribes to: the leader needs their partition counts."""
    return frozenset(t for m in members for t in m.subscription.topics)


class ConsumerPartitionAssignor(ABC):
    """A client-side assignor of the classic group protocol, named as in Kafka's
    ``partition.assignment.strategy`` (``range``, ``roundrobin``, ``sticky``,
    ``cooperative-sticky``).

    Subclasses implement :meth:`assign_partitions`; :meth:`assign` gives it the members in a
    fixed order and only the subscribed topics that exist, and sorts each member's result.
    Partition replica racks are not part of the input, so Kafka 3.5's rack-aware placement
    (KIP-881) is not done; members' ``rack_id`` is carried but unused."""

    #: Kafka's name for the assignor: the JoinGroup protocol name.
    name: ClassVar[str]
    #: The rebalance protocols it honours, preferred first.
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    #: ``ConsumerPartitionAssignor.version()``: of its user data and algorithm.
    version: ClassVar[int] = 0

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        """The opaque user data this member sends in its subscription (None: nothing)."""
        return None

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Called on each member with what SyncGroup gave it, in generation
        ``generation_id``: the sticky assignors remember it for their next subscription's user
        data; the others keep nothing."""
        return None

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Iterable[GroupMember]
    ) -> dict[str, Assignment]:
        """Every member's assignment, keyed by member id, each member's partitions sorted.

        ``partitions_per_topic`` gives the partition count of topics as the leader's metadata
        knows them; a subscribed topic missing from it (or with no partitions) is skipped, as
        Kafka's leader skips a topic without metadata."""
        ordered = sorted(members, key=lambda m: java_order(m.member_id))
        ids = [m.member_id for m in ordered]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate member ids in {ids}")
        counts = {
            topic: n
            for topic in sorted(all_subscribed_topics(ordered))
            if (n := partitions_per_topic.get(topic, 0)) > 0
        }
        raw = self.assign_partitions(counts, ordered)
        unknown = set(raw) - set(ids)
        if unknown:
            raise IllegalStateError(
                f"assignor {self.name} assigned to unknown members {sorted(unknown)}"
            )
        return {m.member_id: Assignment(tuple(sorted(raw.get(m.member_id, ())))) for m in ordered}

    @abstractmethod
    def assign_partitions(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> Mapping[str, Iterable[TopicPartition]]:
        """The assignment proper. ``members`` are sorted by member id and unique;
        ``partitions_per_topic`` holds exactly the subscribed topics that exist, sorted, each
        with at least one partition. A member left out gets nothing."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def join_group_protocols(
    assignors: Sequence[ConsumerPartitionAssignor],
    topics: Collection[str],
    owned_partitions: Collection[TopicPartition] = (),
    generation_id: int = DEFAULT_GENERATION,
    rack_id: str | None = None,
) -> list[JoinGroupProtocol]:
    """JoinGroup's protocol list (``ConsumerCoordinator.metadata()``): per assignor, in the
    configured order, the subscription with that assignor's user data, the partitions the
    member owns now (empty under EAGER, which revokes before rejoining) and the generation they
    were assigned in; encoded at the newest version."""
    out = []
    for assignor in assignors:
        subscription = Subscription(
            topics=tuple(topics),
            user_data=assignor.subscription_user_data(topics),
            owned_partitions=tuple(owned_partitions),
            generation_id=generation_id,
            rack_id=rack_id,
        )
        out.append(JoinGroupProtocol(assignor.name, encode_subscription(subscription)))
    return out


def lookup_assignor(
    assignors: Iterable[ConsumerPartitionAssignor], protocol_name: str
) -> ConsumerPartitionAssignor:
    """The configured assignor the coordinator chose (JoinGroup and SyncGroup responses'
    ``protocol_name``): the leader assigns with it and every member calls its
    :meth:`~ConsumerPartitionAssignor.on_assignment`. A name the member did not offer is an
    :class:`IllegalStateError`, as in Kafka's ``ConsumerCoordinator``."""
    for assignor in assignors:
        if assignor.name == protocol_name:
            return assignor
    raise IllegalStateError(f"Coordinator selected invalid assignment protocol: {protocol_name}")


def choose_rebalance_protocol(assignors: Sequence[ConsumerPartitionAssignor]) -> RebalanceProtocol:
    """The rebalance protocol a consumer follows (``ConsumerCoordinator``'s constructor): the
    highest one every configured assignor supports, so ``cooperative-sticky`` alone is
    COOPERATIVE and ``cooperative-sticky`` with ``range`` (the upgrade path) is EAGER."""
    if not assignors:
        raise InvalidConfigurationError(
            "partition.assignment.strategy must name at least one assignor for a group"
        )
    common = set(assignors[0].supported_protocols)
    for assignor in assignors[1:]:
        common &= set(assignor.supported_protocols)
    if not common:
        names = sorted(a.name for a in assignors)
        raise InvalidConfigurationError(
            f"Specified assignors {names} do not have commonly supported rebalance protocol"
        )
    return max(common)


def validate_cooperative_assignment(
    members: Iterable[GroupMember], assignments: Mapping[str, Assignment]
) -> None:
    """``ConsumerCoordinator.validateCooperativeAssignment``: under COOPERATIVE no partition may
    be added to one member while it is revoked from another (still owned, per its
    subscription's ``owned_partitions``); the assignor must leave it unassigned for a
    follow-up rebalance. Raises :class:`IllegalStateError` naming the partitions."""
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for member in members:
        owned = set(member.subscription.owned_partitions)
        assigned = set(assignments.get(member.member_id, Assignment()).partitions)
        added |= assigned - owned
        revoked |= owned - assigned
    both = sorted(added & revoked)
    if both:
        raise IllegalStateError(
            "Assignor supporting the COOPERATIVE protocol violates its requirements: "
            f"{[str(tp) for tp in both]} are assigned while still owned by another member"
        )


def perform_assignment(
    assignor: ConsumerPartitionAssignor,
    protocol: RebalanceProtocol,
    members: Collection[GroupMember],
    partitions_per_topic: Mapping[str, int],
) -> dict[str, Assignment]:
    """The leader's work between JoinGroup and SyncGroup (``ConsumerCoordinator.
    onLeaderElected``): ``assignor`` is the one the coordinator chose (the JoinGroup response's
    protocol name), ``protocol`` the consumer's :func:`choose_rebalance_protocol`. Returns an
    assignment for every member (encode each with :func:`~.protocol.encode_assignment`); under
    COOPERATIVE it is checked with :func:`validate_cooperative_assignment`."""
    assignments = assignor.assign(partitions_per_topic, members)
    if protocol is RebalanceProtocol.COOPERATIVE:
        validate_cooperative_assignment(members, assignments)
    return assignments
