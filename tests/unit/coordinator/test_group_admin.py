"""ListGroups, DescribeGroups, ConsumerGroupDescribe, DeleteGroups
(rillet.coordinator.group.admin)."""

from __future__ import annotations

from dataclasses import replace

from group_harness import (
    TEST_CONFIG,
    Log,
    assert_replay_matches,
    assignment_bytes,
    beat,
    commit,
    committed,
    completions,
    join,
    join_classic,
    new_shard,
    subscription,
    sync,
)

from rillet.coordinator.group import GroupCoordinatorShard
from rillet.errors import (
    CoordinatorLoadInProgressError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
    NotCoordinatorError,
)


def three_groups(shard: GroupCoordinatorShard, log: Log) -> str:
    """ "consumer" (KIP-848, Stable), "classic" (Stable, one static member), "simple" (offsets
    only); the classic member's id."""
    log.append(shard.consumer_group_heartbeat(join("consumer", "m1"), 0))
    log.append(shard.join_group(join_classic("classic", instance_id="i"), "j", 0))
    result = shard.tick(3_000)
    log.append(result)
    member_id: str = completions(result)["j"].member_id
    plan = {member_id: assignment_bytes({"foo": (0, 1)})}
    log.append(shard.sync_group(sync("classic", member_id, 1, plan, "i"), "s", 3_010))
    log.append(shard.commit_offsets(commit("simple", {("foo", 0): 1}), 3_020))
    return member_id


def test_list_groups_reports_kafkas_states_and_types() -> None:
    shard, log = new_shard(), Log()
    three_groups(shard, log)
    listed = shard.list_groups().response
    assert listed is not None
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups] == [
        ("classic", "classic", "Stable", "consumer"),
        ("consumer", "consumer", "Stable", "consumer"),
        ("simple", "classic", "Empty", ""),
    ]
    empty = shard.list_groups(states_filter=["EMPTY"]).response
    assert empty is not None and [g.group_id for g in empty.groups] == ["simple"]
    consumer = shard.list_groups(types_filter=["consumer"]).response
    assert consumer is not None and [g.group_id for g in consumer.groups] == ["consumer"]


def test_describe_groups_shows_classic_members_and_assignments() -> None:
    shard, log = new_shard(), Log()
    member_id = three_groups(shard, log)
    described = shard.describe_groups(["classic", "consumer", "nope"]).response
    assert described is not None
    classic, consumer, nope = described
    assert (classic.group_state, classic.protocol_type, classic.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    (member,) = classic.members
    assert (member.member_id, member.group_instance_id, member.client_id) == (
        member_id,
        "i",
        "classic",
    )
    assert member.member_metadata == subscription("foo")
    assert member.member_assignment == assignment_bytes({"foo": (0, 1)})
    assert consumer.group_state == nope.group_state == "Dead"  # not classic groups


def test_consumer_group_describe_shows_epochs_and_assignments() -> None:
    shard, log = new_shard(), Log()
    three_groups(shard, log)
    described = shard.consumer_group_describe(["consumer", "classic"]).response
    assert described is not None
    consumer, classic = described
    assert (consumer.group_state, consumer.group_epoch, consumer.assignment_epoch) == (
        "Stable",
        1,
        1,
    )
    assert consumer.assignor_name == TEST_CONFIG.default_assignor
    (member,) = consumer.members
    assert member.member_epoch == 1 and member.client_id == "client-m1"
    assert member.subscribed_topic_names == ("foo",)
    assert [(a.topic_name, a.partitions) for a in member.assignment] == [("foo", tuple(range(6)))]
    assert member.target_assignment == member.assignment
    assert isinstance(classic.error, GroupIdNotFoundError)


def test_delete_groups_deletes_empty_groups_with_their_offsets_only() -> None:
    shard, log = new_shard(), Log()
    three_groups(shard, log)
    result = shard.delete_groups(["consumer", "classic", "simple", "nope"])
    log.append(result)
    assert result.response is not None
    errors = {r.group_id: r.error for r in result.response}
    assert isinstance(errors["consumer"], NonEmptyGroupError)
    assert isinstance(errors["classic"], NonEmptyGroupError)
    assert errors["simple"] is None
    assert isinstance(errors["nope"], GroupIdNotFoundError)
    assert committed(shard, "simple") == {}
    assert_replay_matches(shard, log)
    # Once the KIP-848 group is empty it can go too, with every record it wrote.
    log.append(shard.consumer_group_heartbeat(beat("consumer", "m1", -1), 4_000))
    result = shard.delete_groups(["consumer"])
    log.append(result)
    assert result.response is not None and result.response[0].error is None
    listed = shard.list_groups().response
    assert listed is not None and [g.group_id for g in listed.groups] == ["classic"]
    assert_replay_matches(shard, log)


def test_admin_requests_are_refused_while_loading_and_for_other_partitions() -> None:
    import random

    from rillet.coordinator.group import partition_for

    config = replace(TEST_CONFIG, offsets_topic_num_partitions=5)
    loading = GroupCoordinatorShard(0, config, rng=random.Random(1))
    listed = loading.list_groups().response
    assert listed is not None and isinstance(listed.error, CoordinatorLoadInProgressError)
    loading.on_loaded(0)
    other = next(f"g{i}" for i in range(100) if partition_for(f"g{i}", 5) != 0)
    described = loading.consumer_group_describe([other]).response
    assert described is not None and isinstance(described[0].error, NotCoordinatorError)
    deleted = loading.delete_groups([other]).response
    assert deleted is not None and isinstance(deleted[0].error, NotCoordinatorError)
