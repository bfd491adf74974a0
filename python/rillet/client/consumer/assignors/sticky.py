"""Kafka's sticky assignment (``AbstractStickyAssignor``) and its eager assignor,
``StickyAssignor`` (``sticky``, KIP-54).

The goals, in Kafka's order of precedence:

1. Balance. With equal subscriptions the members' partition counts differ by at most one.
   Otherwise no partition can be handed along a chain of members, each subscribed to the topic
   of the partition it receives, from a member to one with two or more fewer partitions. That
   is Kafka's criterion ("a consumer with 2+ fewer partitions than another cannot get any of
   its partitions") extended from direct hand-overs to chains; an assignment with no such
   chain has the least possible sum of squared counts (so also the least possible maximum).
2. Stickiness: members keep as many of the partitions they owned as balance allows.

Ownership comes from each member's :class:`MemberData` (the owned partitions and generation in
its subscription, or, from older clients, its user data), checked as Kafka checks it: a
partition claimed by several members goes to the claim of the highest generation, and one
claimed by several members in the same highest generation is owned by none of them (Kafka
logs it as an error; it is reassigned from scratch).

The algorithm (``balanced_assignment``), deterministic for any input order:

a. every member keeps its owned partitions of topics it still subscribes to;
b. the other partitions, the ones with fewest possible members first, each go to the
   subscribed member with fewest partitions (ties: lowest member id);
c. while some member has a chain of hand-overs to a member with two or more fewer
   partitions, one such chain is applied: from the largest members that have one, the chain
   that takes fewest partitions from givers that owned them, then the shortest; each link
   hands over, in order of preference, a partition the receiver owned before, one the giver
   did not own before, or else the giver's highest-numbered one (Kafka revokes those first
   too).

Each chain lowers the sum of squared counts, so (c) ends. With equal subscriptions every chain
is a single hand-over and the owned partitions that move are exactly the surplus of the
members that own more than their balanced share (the least balance allows); with unequal ones
stickiness is best effort, as in Kafka. A group of 2,000 members on 200,000 partitions is
assigned in about 2 s. Kafka 3.5's rack-aware placement (KIP-881) is not implemented: it needs
partition replica racks, which are not part of the input.
"""

from __future__ import annotations

import heapq
import itertools
from abc import abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from rillet.client.consumer.assignors.abstract import (
    ConsumerPartitionAssignor,
    GroupMember,
)
from rillet.client.consumer.assignors.protocol import (
    DEFAULT_GENERATION,
    Assignment,
    StickyAssignorUserData,
    Subscription,
    decode_sticky_assignor_user_data,
    encode_sticky_assignor_user_data,
    java_order,
)
from rillet.types import TopicPartition

__all__ = [
    "AbstractStickyAssignor",
    "MemberData",
    "StickyAssignor",
    "StickyTarget",
    "balanced_assignment",
    "resolve_owned_partitions",
]


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a sticky assignor knows of a member's past (``AbstractStickyAssignor.MemberData``):
    the partitions it claims to own and the generation it got them in
    (:data:`~.protocol.DEFAULT_GENERATION` when unknown)."""

    partitions: tuple[TopicPartition, ...]
    generation: int = DEFAULT_GENERATION


@dataclass(frozen=True, slots=True)
class StickyTarget:
    """The sticky assignment of one rebalance, with what it was computed from: ``owned`` is
    each member's owned partitions that survived the generation checks, and ``claims`` every
    member's claimed partitions as sent."""

    assignment: dict[str, list[TopicPartition]]
    owned: dict[str, frozenset[TopicPartition]]
    claims: dict[str, frozenset[TopicPartition]]


def resolve_owned_partitions(
    member_data: Mapping[str, MemberData], partitions_per_topic: Mapping[str, int]
) -> dict[str, frozenset[TopicPartition]]:
    """Each member's valid claims: partitions that exist, claimed by it alone or in a higher
    generation than every other claimant (``AbstractStickyAssignor.allSubscriptionsEqual``'s
    checks, made independent of the members' order)."""
    claimants: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member_id, data in member_data.items():
        for tp in set(data.partitions):
            if 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                claimants.setdefault(tp, []).append((data.generation, member_id))
    owned: dict[str, set[TopicPartition]] = {member_id: set() for member_id in member_data}
    for tp, claims in claimants.items():
        newest = max(generation for generation, _ in claims)
        winners = [member_id for generation, member_id in claims if generation == newest]
        if len(winners) == 1:
            owned[winners[0]].add(tp)
    return {member_id: frozenset(tps) for member_id, tps in owned.items()}


def balanced_assignment(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Collection[str]],
    owned: Mapping[str, Collection[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """The sticky assignment (steps a-c of the module doc) of every partition of the topics in
    ``partitions_per_topic`` to the members of ``subscriptions`` (member id -> topics), given
    each member's valid ``owned`` partitions. Each member's list is sorted."""
    return _Balancer(partitions_per_topic, subscriptions, owned).run()


class _Balancer:
    """One run of :func:`balanced_assignment`; members are referred to by their index in
    member id order, which also breaks every tie."""

    def __init__(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Collection[str]],
        owned: Mapping[str, Collection[TopicPartition]],
    ) -> None:
        self.ids = sorted(subscriptions, key=java_order)
        self.counts = {t: n for t, n in partitions_per_topic.items() if n > 0}
        self.subs = [frozenset(subscriptions[m]) & self.counts.keys() for m in self.ids]
        self.owned = [frozenset(owned.get(m, ())) for m in self.ids]
        # Subscribers of each topic, in member order.
        self.subscribers: dict[str, tuple[int, ...]] = {
            t: tuple(i for i, s in enumerate(self.subs) if t in s) for t in self.counts
        }
        # What each member holds, by topic (hand-overs look for a topic the receiver reads),
        # and which of those it did not own before this rebalance (given away first).
        self.held: list[dict[str, set[int]]] = [{} for _ in self.ids]
        self.fresh: list[set[TopicPartition]] = [set() for _ in self.ids]
        self.size = [0] * len(self.ids)

    def run(self) -> dict[str, list[TopicPartition]]:
        if self.ids:
            self.keep_owned()
            self.place_unassigned()
            while self.rebalance_once():
                pass
        return {
            member_id: [
                TopicPartition(topic, p)
                for topic in sorted(self.held[i])
                for p in sorted(self.held[i][topic])
            ]
            for i, member_id in enumerate(self.ids)
        }

    def add(self, i: int, tp: TopicPartition) -> None:
        self.held[i].setdefault(tp.topic, set()).add(tp.partition)
        self.size[i] += 1
        if tp not in self.owned[i]:
            self.fresh[i].add(tp)

    def remove(self, i: int, tp: TopicPartition) -> None:
        partitions = self.held[i][tp.topic]
        partitions.remove(tp.partition)
        if not partitions:
            del self.held[i][tp.topic]
        self.size[i] -= 1
        self.fresh[i].discard(tp)

    def keep_owned(self) -> None:
        """(a) Owned partitions of topics the member still reads stay with it."""
        for i, owned in enumerate(self.owned):
            for tp in owned:
                if tp.topic in self.subs[i] and 0 <= tp.partition < self.counts[tp.topic]:
                    self.add(i, tp)

    def place_unassigned(self) -> None:
        """(b) The rest, topics with fewest subscribers first, each partition to its least
        loaded subscriber. Members with the same subscribers share a heap of (size, index),
        updated lazily: sizes only grow here, so an entry whose size is out of date is pushed
        back with the new one."""
        heaps: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for topic in sorted(self.counts, key=lambda t: (len(self.subscribers[t]), t)):
            group = self.subscribers[topic]
            taken: set[int] = set()
            for i in group:  # only subscribers kept their owned partitions of the topic
                taken.update(self.held[i].get(topic, ()))
            heap = heaps.get(group)
            if heap is None:
                heap = heaps[group] = [(self.size[i], i) for i in group]
                heapq.heapify(heap)
            for partition in range(self.counts[topic]):
                if partition in taken:
                    continue
                while heap[0][0] != self.size[heap[0][1]]:
                    heapq.heapreplace(heap, (self.size[heap[0][1]], heap[0][1]))
                i = heap[0][1]
                self.add(i, TopicPartition(topic, partition))
                heapq.heapreplace(heap, (self.size[i], i))

    def rebalance_once(self) -> bool:
        """(c) Apply one chain of hand-overs from a member to one with 2+ fewer partitions;
        False when there is none (the assignment is balanced). Sources are the largest members
        that have a chain; of their chains, the one giving away fewest partitions their givers
        owned, then the shortest."""
        ascending = sorted(range(len(self.ids)), key=lambda i: (self.size[i], i))
        smallest = self.size[ascending[0]]
        best: tuple[int, int] | None = None
        best_path: list[int] = []
        for source in sorted(range(len(self.ids)), key=lambda i: (-self.size[i], i)):
            if self.size[source] - smallest < 2 or (
                best_path and self.size[source] < self.size[best_path[0]]
            ):
                break
            path = self.find_chain(source, ascending)
            if path is None:
                continue
            cost = sum(self.hand_over_cost(g, r) for g, r in itertools.pairwise(path))
            if best is None or (cost, len(path)) < best:
                best, best_path = (cost, len(path)), path
                if best == (0, 2):
                    break
        for giver, receiver in itertools.pairwise(best_path):
            self.hand_over(giver, receiver)
        return bool(best_path)

    def hand_over_cost(self, giver: int, receiver: int) -> int:
        """1 if handing over from ``giver`` to ``receiver`` takes a partition the giver owned
        (and the receiver did not), else 0."""
        reads = self.subs[receiver]
        if any(tp.topic in reads for tp in self.fresh[giver]):
            return 0
        held = self.held[giver]
        for tp in self.owned[receiver]:
            if tp.topic in reads and tp.partition in held.get(tp.topic, ()):
                return 0
        return 1

    def find_chain(self, source: int, ascending: list[int]) -> list[int] | None:
        """Breadth first from ``source``: the shortest chain to a member with at most
        ``size[source] - 2`` partitions (of those at that distance, the smallest).
        ``ascending`` is the members by size, then index."""
        limit = self.size[source] - 2
        # Distance 1 first, without listing every neighbour: with equal subscriptions the
        # smallest member is one, and a large group is not walked for each hand-over.
        for j in ascending:
            if self.size[j] > limit:
                break
            if not self.subs[j].isdisjoint(self.held[source]):
                return [source, j]
        parent = {source: source}
        frontier = [source]
        while frontier:
            reached: list[int] = []
            for i in frontier:
                for j in self.neighbours(i):
                    if j not in parent:
                        parent[j] = i
                        reached.append(j)
            targets = [j for j in reached if self.size[j] <= limit]
            if targets:
                end = min(targets, key=lambda j: (self.size[j], j))
                path = [end]
                while path[-1] != source:
                    path.append(parent[path[-1]])
                return path[::-1]
            frontier = reached
        return None

    def neighbours(self, i: int) -> list[int]:
        """Members that read a topic member ``i`` holds a partition of."""
        out: set[int] = set()
        for topic in self.held[i]:
            out.update(self.subscribers[topic])
        out.discard(i)
        return sorted(out)

    def hand_over(self, giver: int, receiver: int) -> None:
        """Move one partition of a topic ``receiver`` reads from ``giver`` to it: one the
        receiver owned before if any, else one the giver did not own before, else the giver's
        highest in (partition, topic) order. Within each kind, the highest is chosen too."""
        reads = self.subs[receiver]
        held = self.held[giver]
        best: tuple[int, str] | None = None
        for tp in self.owned[receiver]:
            if tp.topic in reads and tp.partition in held.get(tp.topic, ()):
                best = max(best or (tp.partition, tp.topic), (tp.partition, tp.topic))
        if best is None:
            for tp in self.fresh[giver]:
                if tp.topic in reads:
                    best = max(best or (tp.partition, tp.topic), (tp.partition, tp.topic))
        if best is None:
            for topic, partitions in held.items():
                if topic in reads:
                    best = max(best or (-1, topic), (max(partitions), topic))
        assert best is not None, "a chain links members that share a topic"
        choice = TopicPartition(best[1], best[0])
        self.remove(giver, choice)
        self.add(receiver, choice)


class AbstractStickyAssignor(ConsumerPartitionAssignor):
    """The sticky assignment shared by ``sticky`` and ``cooperative-sticky``; subclasses say
    where a member's past comes from (:meth:`member_data`)."""

    @abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """The partitions the member claims to own and their generation."""

    def sticky_target(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> StickyTarget:
        """The sticky assignment of ``members``, with the ownership it was computed from."""
        data = {m.member_id: self.member_data(m.subscription) for m in members}
        owned = resolve_owned_partitions(data, partitions_per_topic)
        subscriptions = {m.member_id: m.subscription.topics for m in members}
        return StickyTarget(
            assignment=balanced_assignment(partitions_per_topic, subscriptions, owned),
            owned=owned,
            claims={member_id: frozenset(d.partitions) for member_id, d in data.items()},
        )

    def assign_partitions(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
    ) -> dict[str, list[TopicPartition]]:
        return self.sticky_target(partitions_per_topic, members).assignment


class StickyAssignor(AbstractStickyAssignor):
    """Kafka's ``StickyAssignor`` (``sticky``): the sticky assignment under the EAGER protocol,
    where members revoke everything before rejoining, so every partition is given out at once.

    Kafka's javadoc example 1: C0, C1 and C2 on t0-t3 of 2 partitions each get C0 [t0p0, t1p1,
    t3p0], C1 [t0p1, t2p0, t3p1], C2 [t1p0, t2p1]; when C1 leaves, C0 and C2 keep theirs and
    split C1's: C0 [t0p0, t1p1, t2p0, t3p0], C2 [t0p1, t1p0, t2p1, t3p1].

    A member's past is the owned partitions and generation of its subscription when it sends
    any; otherwise (a Kafka client, whose eager members revoke before joining and send none)
    the :class:`~.protocol.StickyAssignorUserData` this assignor puts in its user data, which
    Kafka's leader reads instead. :meth:`on_assignment` records what that user data says."""

    name = "sticky"

    def __init__(self) -> None:
        self._member_assignment: tuple[TopicPartition, ...] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._member_assignment = assignment.partitions
        self._generation = generation_id

    def subscription_user_data(self, topics: Collection[str]) -> bytes | None:
        if self._member_assignment is None:
            return None
        return encode_sticky_assignor_user_data(
            StickyAssignorUserData(self._member_assignment, self._generation)
        )

    def member_data(self, subscription: Subscription) -> MemberData:
        user = None
        if subscription.user_data:
            user = decode_sticky_assignor_user_data(subscription.user_data)
        if subscription.owned_partitions:
            generation = subscription.generation_id
            if generation < 0 and user is not None and user.generation is not None:
                generation = user.generation
            return MemberData(subscription.owned_partitions, generation)
        if user is not None:
            generation = DEFAULT_GENERATION if user.generation is None else user.generation
            return MemberData(user.previous_assignment, generation)
        return MemberData(())
