"""The state of a KIP-848 consumer group (Kafka's ``ConsumerGroup`` and
``ConsumerGroupMember``), as rebuilt from its records.

Everything here is the materialized view of records 3 to 8 of ``__consumer_offsets`` and is
changed only by replaying them (:mod:`rillet.coordinator.group.state`): the group epoch, the
subscribed topics' metadata, the members' subscriptions, the target assignment and its
epoch, and each member's current assignment, epoch and reconciliation state. Derived indexes
(static members by instance id, subscriber counts per topic name, the owner of every
partition) are kept in step by :meth:`ConsumerGroup.update_member` and
:meth:`ConsumerGroup.remove_member`.

A partition is *owned* by a member while it is in the member's assigned partitions or its
partitions pending revocation. :meth:`ConsumerGroup.update_member` refuses loudly
(``IllegalStateError``) to give a partition a second owner: that would be the one bug this
protocol exists to prevent.

Group states (``ConsumerGroupState``): Empty (no members), Assigning (group epoch ahead of
the target assignment epoch), Reconciling (some member not yet at the target), Stable.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from rillet.coordinator.group.assignors import Assignment
from rillet.errors import IllegalStateError

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "MemberState",
    "TopicInfo",
]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Where a member is in its reconciliation (the value is stored in record type 8)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class TopicInfo(NamedTuple):
    """A topic as the group coordinator needs it: its id and partition count."""

    topic_id: uuid.UUID
    num_partitions: int


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member: its subscription (record 5) and its current assignment (record 8)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def owned_partitions(self) -> Iterator[tuple[uuid.UUID, int]]:
        """Assigned and pending revocation: what the member may still be consuming."""
        for assignment in (self.assigned_partitions, self.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    yield (topic_id, p)

    def owns(self, topic_id: uuid.UUID, partition: int) -> bool:
        return partition in self.assigned_partitions.get(
            topic_id, frozenset()
        ) or partition in self.partitions_pending_revocation.get(topic_id, frozenset())

    def subscribes_to(self, topic_name: str) -> bool:
        if topic_name in self.subscribed_topic_names:
            return True
        regex = self.subscribed_topic_regex
        return regex is not None and compiled_regex(regex).fullmatch(topic_name) is not None


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def compiled_regex(regex: str) -> re.Pattern[str]:
    """A subscription regex, compiled once. Heartbeats refuse what Python's ``re`` cannot
    compile; one read from a log written elsewhere (Kafka uses RE2/J) that ``re`` cannot
    compile matches nothing."""
    pattern = _REGEX_CACHE.get(regex)
    if pattern is None:
        if len(_REGEX_CACHE) > 1024:
            _REGEX_CACHE.clear()
        try:
            pattern = re.compile(regex)
        except re.error:
            pattern = re.compile(r"(?!)")
        _REGEX_CACHE[regex] = pattern
    return pattern


class ConsumerGroup:
    """A KIP-848 group: the replayed records and the indexes derived from them.

    ``metadata_refresh_needed`` is soft state (not in any record): set when the group is
    loaded or the cluster's topics change, it makes the next heartbeat recompute the
    subscribed topics' metadata and bump the group epoch if it differs.
    """

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # topic name -> (id, partitions), the subscribed topics when the epoch last moved.
        self.subscription_metadata: dict[str, TopicInfo] = {}
        self.static_members: dict[str, str] = {}
        self.subscribed_topic_names: Counter[str] = Counter()
        self.server_assignors: Counter[str] = Counter()
        self.partition_owners: dict[tuple[uuid.UUID, int], tuple[str, int]] = {}
        self.metadata_refresh_needed = True

    # -- derived views ---------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members[member_id]

    def partition_owner(self, topic_id: uuid.UUID, partition: int) -> tuple[str, int] | None:
        """(member id, member epoch) of the partition's current owner, or None."""
        return self.partition_owners.get((topic_id, partition))

    def preferred_server_assignor(self, default: str) -> str:
        """The assignor most members asked for (ties broken by name), ``default`` when none
        asked for one (Kafka's computePreferredServerAssignor)."""
        if not self.server_assignors:
            return default
        best = max(self.server_assignors.values())
        return min(n for n, c in self.server_assignors.items() if c == best)

    def is_subscribed_to_topic(self, topic_name: str) -> bool:
        if self.subscribed_topic_names.get(topic_name, 0) > 0:
            return True
        return any(m.subscribes_to(topic_name) for m in self.members.values())

    def subscribed_topic_ids(self, member: ConsumerGroupMember) -> frozenset[uuid.UUID]:
        """The ids of the topics in the subscription metadata that ``member`` subscribes to
        (by name or by regex)."""
        return frozenset(
            info.topic_id
            for name, info in self.subscription_metadata.items()
            if member.subscribes_to(name)
        )

    def compute_subscription_metadata(
        self, topics: Mapping[str, TopicInfo]
    ) -> dict[str, TopicInfo]:
        """What the subscription metadata would be now: every existing topic some member
        subscribes to, by name or regex, with its id and partition count."""
        names: set[str] = set()
        regexes: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                regexes.add(member.subscribed_topic_regex)
        out: dict[str, TopicInfo] = {}
        for name in sorted(topics):
            if name in names or any(compiled_regex(r).fullmatch(name) for r in sorted(regexes)):
                out[name] = TopicInfo(topics[name].topic_id, topics[name].num_partitions)
        return out

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for name, info in self.subscription_metadata.items():
            if info.topic_id == topic_id:
                return name
        return None

    # -- updates (from replay only) --------------------------------------------------------

    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        self._unindex(old)
        self.members[new.member_id] = new
        self._index(new)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        self._unindex(old)

    def _index(self, member: ConsumerGroupMember) -> None:
        self.subscribed_topic_names.update(member.subscribed_topic_names)
        if member.server_assignor is not None:
            self.server_assignors[member.server_assignor] += 1
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in member.owned_partitions():
            previous = self.partition_owners.get(tp)
            if previous is not None:
                raise IllegalStateError(
                    f"group {self.group_id}: cannot give {tp[0]}-{tp[1]} to "
                    f"{member.member_id} at epoch {member.member_epoch}: still owned by "
                    f"{previous[0]} at epoch {previous[1]}"
                )
            self.partition_owners[tp] = (member.member_id, member.member_epoch)

    def _unindex(self, member: ConsumerGroupMember | None) -> None:
        if member is None:
            return
        self.subscribed_topic_names.subtract(member.subscribed_topic_names)
        self.subscribed_topic_names = +self.subscribed_topic_names
        if member.server_assignor is not None:
            self.server_assignors[member.server_assignor] -= 1
            self.server_assignors = +self.server_assignors
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member.member_id
        ):
            del self.static_members[member.instance_id]
        for tp in member.owned_partitions():
            if self.partition_owners.get(tp) != (member.member_id, member.member_epoch):
                raise IllegalStateError(
                    f"group {self.group_id}: {tp[0]}-{tp[1]} is not owned by "
                    f"{member.member_id} at epoch {member.member_epoch}"
                )
            del self.partition_owners[tp]
