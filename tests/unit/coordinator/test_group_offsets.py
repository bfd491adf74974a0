"""Committed offsets: OffsetCommit validation per protocol, OffsetFetch, OffsetDelete, the
reset, expiry (rillet.coordinator.group.offsets), and issue 10's bad inputs."""

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
    sync,
)

from rillet.coordinator.group import (
    GroupCoordinatorShard,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OwnedTopicPartitions,
    TopicPartitionIndexes,
)
from rillet.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
)

HOUR = 3600 * 1000
WEEK = 7 * 24 * HOUR


def errors_of(response: OffsetCommitResponse | None) -> dict[tuple[str, int], str | None]:
    assert response is not None
    return {
        (t.name, p.partition_index): None if p.error is None else p.error.name
        for t in response.topics
        for p in t.partitions
    }


def consumer_group_of_two(shard: GroupCoordinatorShard, log: Log) -> dict[str, int]:
    """m1 and m2 in group "g" on foo, reconciled (each revokes at once): member -> epoch."""
    log.append(shard.consumer_group_heartbeat(join("g", "m1"), 0))
    log.append(shard.consumer_group_heartbeat(join("g", "m2"), 0))
    epochs = {}
    for _ in range(3):
        for member_id in ("m1", "m2"):
            group = shard.state.consumer_group("g")
            assert group is not None
            epoch = group.members[member_id].member_epoch
            request = beat("g", member_id, epoch, _owned(shard, member_id))
            result = shard.consumer_group_heartbeat(request, 10)
            log.append(result)
            assert result.response is not None and result.response.error is None
            epochs[member_id] = result.response.member_epoch
    group = shard.state.consumer_group("g")
    assert group is not None and str(group.state) == "Stable"
    return epochs


def _owned(shard: GroupCoordinatorShard, member_id: str) -> tuple[OwnedTopicPartitions, ...]:
    group = shard.state.consumer_group("g")
    assert group is not None
    member = group.members[member_id]
    return tuple(
        OwnedTopicPartitions(t, tuple(sorted(ps))) for t, ps in member.assigned_partitions.items()
    )


def owned_partitions(shard: GroupCoordinatorShard, member_id: str) -> set[int]:
    group = shard.state.consumer_group("g")
    assert group is not None
    return {p for ps in group.members[member_id].assigned_partitions.values() for p in ps}


# -- issue 10's bad inputs: Kafka's error names, nothing lost -------------------------------


def test_a_commit_to_an_unknown_group_with_a_generation_gets_group_id_not_found() -> None:
    shard = new_shard()
    response = shard.commit_offsets(commit("nope", {("foo", 0): 5}, generation=3), 0).response
    assert errors_of(response) == {("foo", 0): "GROUP_ID_NOT_FOUND"}
    assert committed(shard, "nope") == {}


def test_a_commit_from_an_old_member_epoch_gets_stale_member_epoch_and_changes_nothing() -> None:
    shard, log = new_shard(), Log()
    epochs = consumer_group_of_two(shard, log)
    p = min(owned_partitions(shard, "m1"))
    good = commit("g", {("foo", p): 10}, member_id="m1", generation=epochs["m1"])
    log.append(shard.commit_offsets(good, 20))
    stale = commit("g", {("foo", p): 5}, member_id="m1", generation=epochs["m1"] - 1)
    assert errors_of(shard.commit_offsets(stale, 30).response) == {("foo", p): "STALE_MEMBER_EPOCH"}
    ahead = commit("g", {("foo", p): 5}, member_id="m1", generation=epochs["m1"] + 1)
    assert errors_of(shard.commit_offsets(ahead, 30).response) == {("foo", p): "STALE_MEMBER_EPOCH"}
    assert committed(shard, "g") == {("foo", p): 10}


def test_a_commit_from_a_fenced_member_gets_unknown_member_id() -> None:
    shard, log = new_shard(), Log()
    epochs = consumer_group_of_two(shard, log)
    p = min(owned_partitions(shard, "m1"))
    log.append(shard.consumer_group_heartbeat(beat("g", "m1", -1), 20))
    zombie = commit("g", {("foo", p): 99}, member_id="m1", generation=epochs["m1"])
    assert errors_of(shard.commit_offsets(zombie, 30).response) == {("foo", p): "UNKNOWN_MEMBER_ID"}
    assert committed(shard, "g") == {}


def test_a_commit_for_a_partition_the_member_does_not_own_is_refused() -> None:
    shard, log = new_shard(), Log()
    epochs = consumer_group_of_two(shard, log)
    mine, theirs = min(owned_partitions(shard, "m1")), min(owned_partitions(shard, "m2"))
    request = commit(
        "g", {("foo", mine): 7, ("foo", theirs): 8}, member_id="m1", generation=epochs["m1"]
    )
    result = shard.commit_offsets(request, 20)
    log.append(result)
    assert errors_of(result.response) == {
        ("foo", mine): None,
        ("foo", theirs): "STALE_MEMBER_EPOCH",
    }
    assert committed(shard, "g") == {("foo", mine): 7}


def test_a_reset_on_an_active_group_gets_non_empty_group() -> None:
    shard, log = new_shard(), Log()
    consumer_group_of_two(shard, log)
    response = shard.reset_offsets(commit("g", {("foo", 0): 0}), 20).response
    assert errors_of(response) == {("foo", 0): "NON_EMPTY_GROUP"}
    # As an OffsetCommit (what Kafka's admin client sends), generation -1 is UNKNOWN_MEMBER_ID.
    response = shard.commit_offsets(commit("g", {("foo", 0): 0}), 20).response
    assert errors_of(response) == {("foo", 0): "UNKNOWN_MEMBER_ID"}
    assert committed(shard, "g") == {}


def test_a_reset_on_an_empty_group_commits_and_may_go_back() -> None:
    shard, log = new_shard(), Log()
    epochs = consumer_group_of_two(shard, log)
    p = min(owned_partitions(shard, "m1"))
    log.append(
        shard.commit_offsets(
            commit("g", {("foo", p): 50}, member_id="m1", generation=epochs["m1"]), 20
        )
    )
    for member_id in ("m1", "m2"):
        log.append(shard.consumer_group_heartbeat(beat("g", member_id, -1), 30))
    result = shard.reset_offsets(commit("g", {("foo", p): 0, ("bar", 1): 3}), 40)
    log.append(result)
    assert set(errors_of(result.response).values()) == {None}
    assert committed(shard, "g") == {("foo", p): 0, ("bar", 1): 3}
    assert_replay_matches(shard, log)


# -- commits -------------------------------------------------------------------------------


def test_a_consumer_without_membership_commits_with_generation_minus_one() -> None:
    shard, log = new_shard(), Log()
    result = shard.commit_offsets(commit("simple", {("foo", 0): 5, ("foo", 1): 6}, metadata="m"), 0)
    log.append(result)
    assert set(errors_of(result.response).values()) == {None}
    assert committed(shard, "simple") == {("foo", 0): 5, ("foo", 1): 6}
    fetched = shard.fetch_offsets(OffsetFetchRequest("simple")).response
    assert fetched is not None
    assert fetched.topics[0].partitions[0].metadata == "m"
    assert fetched.topics[0].partitions[0].committed_leader_epoch == 3
    listed = shard.list_groups().response
    assert listed is not None and [(g.group_id, g.group_state) for g in listed.groups] == [
        ("simple", "Empty")
    ]
    assert_replay_matches(shard, log)


def test_metadata_over_offset_metadata_max_bytes_is_refused_per_partition() -> None:
    shard = new_shard(replace(TEST_CONFIG, offset_metadata_max_bytes=4))
    response = shard.commit_offsets(commit("s", {("foo", 0): 5}, metadata="12345"), 0).response
    assert errors_of(response) == {("foo", 0): OffsetMetadataTooLargeError.name}


def test_classic_commits_need_the_current_generation_and_a_known_member() -> None:
    shard, log = new_shard(), Log()
    first = shard.join_group(join_classic("cg", instance_id="i"), "j", 0)
    log.append(first)
    result = shard.tick(3_000)
    log.append(result)
    member_id = completions(result)["j"].member_id
    # CompletingRebalance: commits wait for the assignment.
    during = commit("cg", {("foo", 0): 1}, member_id=member_id, generation=1)
    assert errors_of(shard.commit_offsets(during, 3_010).response) == {
        ("foo", 0): RebalanceInProgressError.name
    }
    log.append(
        shard.sync_group(
            sync("cg", member_id, 1, {member_id: assignment_bytes({"foo": (0,)})}, "i"), "s", 3_020
        )
    )
    ok = shard.commit_offsets(
        commit("cg", {("foo", 0): 1}, member_id=member_id, generation=1), 3_030
    )
    log.append(ok)
    assert errors_of(ok.response) == {("foo", 0): None}
    old = commit("cg", {("foo", 0): 0}, member_id=member_id, generation=0)
    assert errors_of(shard.commit_offsets(old, 3_040).response) == {
        ("foo", 0): IllegalGenerationError.name
    }
    ghost = commit("cg", {("foo", 0): 0}, member_id="ghost", generation=1)
    assert errors_of(shard.commit_offsets(ghost, 3_040).response) == {
        ("foo", 0): UnknownMemberIdError.name
    }
    assert committed(shard, "cg") == {("foo", 0): 1}
    assert_replay_matches(shard, log)


# -- fetch -----------------------------------------------------------------------------------


def test_fetching_offsets_of_an_unknown_group_answers_minus_one() -> None:
    shard = new_shard()
    request = OffsetFetchRequest("nope", (TopicPartitionIndexes("foo", (0, 1)),))
    response = shard.fetch_offsets(request).response
    assert response is not None and response.error is None
    assert [p.committed_offset for p in response.topics[0].partitions] == [-1, -1]
    everything = shard.fetch_offsets(OffsetFetchRequest("nope")).response
    assert everything is not None and everything.topics == ()


def test_a_member_fetching_offsets_must_send_its_current_epoch() -> None:
    shard, log = new_shard(), Log()
    epochs = consumer_group_of_two(shard, log)
    ok = shard.fetch_offsets(OffsetFetchRequest("g", None, "m1", epochs["m1"])).response
    assert ok is not None and ok.error is None
    stale = shard.fetch_offsets(OffsetFetchRequest("g", None, "m1", epochs["m1"] - 1)).response
    assert stale is not None and isinstance(stale.error, StaleMemberEpochError)
    ghost = shard.fetch_offsets(OffsetFetchRequest("g", None, "ghost", 1)).response
    assert ghost is not None and isinstance(ghost.error, UnknownMemberIdError)


# -- delete ----------------------------------------------------------------------------------


def test_offset_delete_refuses_subscribed_topics_and_deletes_the_others() -> None:
    shard, log = new_shard(), Log()
    epochs = consumer_group_of_two(shard, log)
    log.append(shard.commit_offsets(commit("g", {("bar", 0): 4}), 0))  # before, from a tool
    p = min(owned_partitions(shard, "m1"))
    log.append(
        shard.commit_offsets(
            commit("g", {("foo", p): 9}, member_id="m1", generation=epochs["m1"]), 20
        )
    )
    request = OffsetDeleteRequest(
        "g", (TopicPartitionIndexes("foo", (p,)), TopicPartitionIndexes("bar", (0,)))
    )
    result = shard.delete_offsets(request)
    log.append(result)
    assert result.response is not None
    errors = {t.name: [e.error for e in t.partitions] for t in result.response.topics}
    assert isinstance(errors["foo"][0], GroupSubscribedToTopicError) and errors["bar"] == [None]
    assert committed(shard, "g") == {("foo", p): 9}
    assert_replay_matches(shard, log)


def test_offset_delete_of_an_unknown_group_gets_group_id_not_found() -> None:
    response = new_shard().delete_offsets(OffsetDeleteRequest("nope", ())).response
    assert response is not None and isinstance(response.error, GroupIdNotFoundError)


def test_offset_delete_in_a_non_empty_group_of_another_protocol_type_is_refused() -> None:
    shard, log = new_shard(), Log()
    request = replace(join_classic("connect", instance_id="w"), protocol_type="connect")
    log.append(shard.join_group(request, "j", 0))
    response = shard.delete_offsets(OffsetDeleteRequest("connect", ())).response
    assert response is not None and isinstance(response.error, NonEmptyGroupError)


# -- expiry ----------------------------------------------------------------------------------


def test_offsets_of_a_group_without_members_expire_after_the_retention() -> None:
    shard, log = new_shard(), Log()
    log.append(shard.commit_offsets(commit("simple", {("foo", 0): 5}), 0))
    log.append(shard.commit_offsets(commit("simple", {("foo", 1): 6}), 2 * HOUR))
    log.append(shard.tick(WEEK))
    assert committed(shard, "simple") == {("foo", 1): 6}
    result = shard.tick(WEEK + 2 * HOUR)
    log.append(result)
    assert committed(shard, "simple") == {}
    listed = shard.list_groups().response
    assert listed is not None and listed.groups == ()  # the group went with its offsets
    assert_replay_matches(shard, log)


def test_offsets_of_subscribed_topics_do_not_expire() -> None:
    shard, log = new_shard(replace(TEST_CONFIG, offsets_retention_ms=HOUR)), Log()
    log.append(shard.commit_offsets(commit("g", {("bar", 0): 1}), 0))  # before the members
    epochs = consumer_group_of_two(shard, log)
    p = min(owned_partitions(shard, "m1"))
    log.append(
        shard.commit_offsets(
            commit("g", {("foo", p): 9}, member_id="m1", generation=epochs["m1"]), 20
        )
    )
    for t in range(0, 2 * HOUR, 20_000):
        for member_id in ("m1", "m2"):
            shard.consumer_group_heartbeat(
                beat("g", member_id, epochs[member_id], _owned(shard, member_id)), t
            )
        log.append(shard.tick(t))
    assert committed(shard, "g") == {("foo", p): 9}
    assert_replay_matches(shard, log)


def test_an_empty_consumer_group_without_offsets_is_deleted_by_the_expiry_check() -> None:
    shard, log = new_shard(), Log()
    log.append(shard.consumer_group_heartbeat(join("g", "m1"), 0))
    log.append(shard.consumer_group_heartbeat(beat("g", "m1", -1), 10))
    log.append(shard.tick(TEST_CONFIG.offsets_retention_check_interval_ms))
    listed = shard.list_groups().response
    assert listed is not None and listed.groups == ()
    assert_replay_matches(shard, log)
