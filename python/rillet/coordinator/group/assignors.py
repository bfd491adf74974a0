"""Server-side partition assignors of KIP-848: ``uniform`` and ``range``.

An assignor is a pure function from a :class:`GroupSpec` (each member's subscribed topic ids
and its current *target* assignment, and the partition count of each subscribed topic) to
the new target assignment of every member. It runs when the group epoch moves past the
target assignment epoch (a member joined, left or changed its subscription, or a subscribed
topic gained partitions); the coordinator then reconciles members toward the result one
heartbeat at a time.

Both guarantee that every partition of a topic some member subscribes to is assigned to
exactly one member, and only to a member subscribed to its topic.

``uniform`` (Kafka's ``UniformAssignor``): balanced and sticky. Each member first keeps the
partitions of its current target that are still valid; unassigned partitions then go, topic
by topic (topics with the fewest subscribers first), to the least loaded subscribed member;
finally a partition moves from a member to a subscribed member holding at least two fewer,
until no such move exists. When every member subscribes to the same topics this gives sizes
that differ by at most one, and the moves are the fewest that reach it: a joining member
takes partitions only from the most loaded members, a leaving member's partitions go to the
least loaded, nobody else moves. With different subscriptions, no member could take a
partition of its topics from a member holding two more (a local optimum).

``range`` (Kafka's ``RangeAssignor``): per topic, contiguous ranges in member order, so that
members subscribed to the same co-partitioned topics get the same partition numbers of each
(joins). Members are ordered static first by instance id, then by member id, which keeps
static members' ranges across restarts. It is not otherwise sticky.

Iteration never depends on set or string-hash order, so the result is the same in every
process (the simulation replays seeds across runs).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "GroupSpec",
    "MemberSubscription",
    "java_string_key",
    "range_assign",
    "uniform_assign",
]

# topic id -> partitions, a member's assignment. Empty topics are left out.
Assignment = Mapping[uuid.UUID, frozenset[int]]


def java_string_key(s: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` (by UTF-16 units)."""
    return s.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True)
class MemberSubscription:
    """One member as the assignor sees it: what it subscribes to and its current target."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True)
class GroupSpec:
    """The members (by member id) and the partition count of each subscribed topic."""

    members: Mapping[str, MemberSubscription]
    partitions_per_topic: Mapping[uuid.UUID, int]

    def is_homogeneous(self) -> bool:
        subscriptions = {m.subscribed_topic_ids for m in self.members.values()}
        return len(subscriptions) <= 1

    def sorted_member_ids(self) -> list[str]:
        return sorted(self.members, key=java_string_key)


def _topic_order(topic_id: uuid.UUID) -> bytes:
    return topic_id.bytes


def uniform_assign(spec: GroupSpec) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Kafka's ``uniform`` assignor: balanced, and sticky to the current target."""
    members = spec.sorted_member_ids()
    order = {m: i for i, m in enumerate(members)}
    topics = spec.partitions_per_topic
    eligible: dict[uuid.UUID, list[str]] = {}
    for m in members:
        for t in spec.members[m].subscribed_topic_ids:
            if t in topics:
                eligible.setdefault(t, []).append(m)
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    owner: dict[tuple[uuid.UUID, int], str] = {}

    # 1. Stickiness: keep what is still valid.
    for m in members:
        subscribed = spec.members[m].subscribed_topic_ids
        for t in sorted(spec.members[m].assignment, key=_topic_order):
            if t not in subscribed or t not in topics:
                continue
            for p in sorted(spec.members[m].assignment[t]):
                if p < topics[t] and (t, p) not in owner:
                    owner[(t, p)] = m
                    owned[m].add((t, p))

    # 2. Unassigned partitions to the least loaded subscribed member, scarce topics first.
    for t in sorted(eligible, key=lambda t: (len(eligible[t]), _topic_order(t))):
        for p in range(topics[t]):
            if (t, p) not in owner:
                m = min(eligible[t], key=lambda m: (len(owned[m]), order[m]))
                owner[(t, p)] = m
                owned[m].add((t, p))

    # 3. Balance: move from a member to a subscribed member holding two fewer.
    while True:
        moved = False
        for a in sorted(members, key=lambda m: (-len(owned[m]), order[m])):
            for tp in sorted(owned[a], key=lambda tp: (_topic_order(tp[0]), tp[1]), reverse=True):
                b = min(eligible[tp[0]], key=lambda m: (len(owned[m]), order[m]))
                if len(owned[b]) <= len(owned[a]) - 2:
                    owned[a].remove(tp)
                    owned[b].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break

    return {m: _as_assignment(owned[m]) for m in members}


def _as_assignment(partitions: set[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in partitions:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def _range_member_order(spec: GroupSpec) -> list[str]:
    """Static members first, by instance id; then dynamic members, by member id."""

    def key(member_id: str) -> tuple[int, bytes, bytes]:
        instance_id = spec.members[member_id].instance_id
        if instance_id is not None:
            return (0, java_string_key(instance_id), java_string_key(member_id))
        return (1, java_string_key(member_id), b"")

    return sorted(spec.members, key=key)


def range_assign(spec: GroupSpec) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Kafka's ``range`` assignor: per topic, contiguous ranges in member order."""
    members = _range_member_order(spec)
    topics = spec.partitions_per_topic
    subscribers: dict[uuid.UUID, int] = {}
    for m in members:
        for t in spec.members[m].subscribed_topic_ids:
            if t in topics:
                subscribers[t] = subscribers.get(t, 0) + 1
    next_start = dict.fromkeys(subscribers, 0)
    extra = {t: topics[t] % n for t, n in subscribers.items()}
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for m in members:
        assignment: dict[uuid.UUID, frozenset[int]] = {}
        for t in sorted(spec.members[m].subscribed_topic_ids, key=_topic_order):
            if t not in topics:
                continue
            quota = topics[t] // subscribers[t]
            if extra[t] > 0:
                quota += 1
                extra[t] -= 1
            start = next_start[t]
            end = min(start + quota, topics[t])
            next_start[t] = end
            if start < end:
                assignment[t] = frozenset(range(start, end))
        out[m] = assignment
    return out


ASSIGNORS: Mapping[str, Callable[[GroupSpec], dict[str, dict[uuid.UUID, frozenset[int]]]]] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
