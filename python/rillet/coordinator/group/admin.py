"""Group administration: ListGroups, DescribeGroups, ConsumerGroupDescribe, DeleteGroups.

ListGroups reports every group with Kafka's state names (classic: Empty,
PreparingRebalance, CompletingRebalance, Stable, Dead; consumer: Empty, Assigning,
Reconciling, Stable, Dead) and type (``classic`` or ``consumer``), filtered by states
(case-insensitive) and types. DescribeGroups describes classic groups (a group that does not
exist, or is a consumer group, is reported Dead, as Kafka does); member metadata is included
only while the group is Stable. ConsumerGroupDescribe describes KIP-848 groups: epochs, the
assignor, and each member's subscription, assignment and target assignment;
GROUP_ID_NOT_FOUND for anything else. DeleteGroups deletes empty groups with their offsets
(tombstones) and refuses others with NON_EMPTY_GROUP.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rillet.coordinator.group.assignors import Assignment
from rillet.coordinator.group.classic_group import ClassicGroup, ClassicGroupState
from rillet.coordinator.group.consumer_group import ConsumerGroup
from rillet.coordinator.group.context import ShardContext
from rillet.coordinator.group.messages import (
    AssignedTopicPartitions,
    ConsumerGroupDescribeMember,
    ConsumerGroupDescribeResult,
    DeletableGroupResult,
    DescribedGroup,
    DescribedGroupMember,
    ListedGroup,
)
from rillet.coordinator.group.offsets import OffsetManager
from rillet.coordinator.group.record_helpers import (
    consumer_group_tombstones,
    group_metadata_tombstone,
)
from rillet.coordinator.group.results import Operation
from rillet.errors import GroupIdNotFoundError, InvalidGroupIdError, KafkaError, NonEmptyGroupError

__all__ = ["GroupAdmin"]


class GroupAdmin:
    """Listing, describing and deleting groups over a :class:`ShardContext`."""

    def __init__(self, ctx: ShardContext, offsets: OffsetManager) -> None:
        self.ctx = ctx
        self.offsets = offsets

    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> list[ListedGroup]:
        states = {s.strip().lower() for s in states_filter}
        types = {t.strip().lower() for t in types_filter}
        out = []
        for gid in sorted(self.ctx.state.groups):
            group = self.ctx.state.groups[gid]
            if isinstance(group, ConsumerGroup):
                listed = ListedGroup(gid, "consumer", str(group.state), "consumer")
            else:
                listed = ListedGroup(gid, group.protocol_type or "", str(group.state), "classic")
            if states and listed.group_state.lower() not in states:
                continue
            if types and listed.group_type not in types:
                continue
            out.append(listed)
        return out

    def describe_groups(self, group_ids: Sequence[str]) -> list[DescribedGroup]:
        out = []
        for gid in group_ids:
            group = self.ctx.state.groups.get(gid)
            if not gid.strip():
                out.append(DescribedGroup(gid, "", error=InvalidGroupIdError()))
            elif not isinstance(group, ClassicGroup):
                out.append(DescribedGroup(gid, str(ClassicGroupState.DEAD)))
            else:
                stable = group.is_in(ClassicGroupState.STABLE)
                members = tuple(
                    DescribedGroupMember(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        m.metadata(group.protocol_name) if stable else b"",
                        m.assignment,
                    )
                    for m in group.members.values()
                )
                out.append(
                    DescribedGroup(
                        gid,
                        str(group.state),
                        group.protocol_type or "",
                        (group.protocol_name or "") if stable else "",
                        members,
                    )
                )
        return out

    def consumer_group_describe(
        self, group_ids: Sequence[str]
    ) -> list[ConsumerGroupDescribeResult]:
        out = []
        for gid in group_ids:
            group = self.ctx.state.groups.get(gid)
            if not gid.strip():
                out.append(ConsumerGroupDescribeResult(gid, InvalidGroupIdError()))
                continue
            if not isinstance(group, ConsumerGroup):
                error = GroupIdNotFoundError(f"Group {gid} is not a consumer group.")
                out.append(ConsumerGroupDescribeResult(gid, error))
                continue
            members = tuple(
                ConsumerGroupDescribeMember(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=self._named(group, m.assigned_partitions),
                    target_assignment=self._named(
                        group, group.target_assignment.get(m.member_id, {})
                    ),
                )
                for _, m in sorted(group.members.items())
            )
            config = self.ctx.config
            assignor = group.preferred_server_assignor(config.default_assignor)
            out.append(
                ConsumerGroupDescribeResult(
                    gid,
                    group_state=str(group.state),
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=(
                        assignor
                        if assignor in config.consumer_group_assignors
                        else config.default_assignor
                    ),
                    members=members,
                )
            )
        return out

    def _named(
        self, group: ConsumerGroup, assignment: Assignment
    ) -> tuple[AssignedTopicPartitions, ...]:
        out = [
            AssignedTopicPartitions(
                topic_id,
                group.topic_name(topic_id) or self.ctx.topic_name(topic_id),
                tuple(sorted(partitions)),
            )
            for topic_id, partitions in assignment.items()
        ]
        return tuple(sorted(out, key=lambda a: (a.topic_name or "", a.topic_id.bytes)))

    def delete_groups(self, op: Operation, group_ids: Sequence[str]) -> list[DeletableGroupResult]:
        out = []
        for gid in group_ids:
            error: KafkaError | None = None
            group = self.ctx.state.groups.get(gid)
            if group is None or (
                isinstance(group, ClassicGroup) and group.is_in(ClassicGroupState.DEAD)
            ):
                error = GroupIdNotFoundError(f"Group {gid} not found.")
            elif not group.is_empty():
                error = NonEmptyGroupError(f"Group {gid} is not empty.")
            else:
                self.offsets.delete_all(op, gid)
                if isinstance(group, ConsumerGroup):
                    for record in consumer_group_tombstones(gid, sorted(group.members)):
                        op.append(record)
                else:
                    op.append(group_metadata_tombstone(gid))
            out.append(DeletableGroupResult(gid, error))
        return out
