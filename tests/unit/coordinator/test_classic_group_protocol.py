"""The classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, parked requests and
their completions, session and rebalance timeouts, static members
(rillet.coordinator.group.classic_protocol and classic_rebalance)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from group_harness import (
    Log,
    assert_replay_matches,
    assignment_bytes,
    completions,
    join,
    join_classic,
    new_shard,
    reload,
    sync,
)

from rillet.coordinator.group import (
    ClassicGroupState,
    GroupCoordinatorShard,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupResponse,
    decode_assignment,
)
from rillet.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

S = ClassicGroupState


def state_of(shard: GroupCoordinatorShard, group_id: str = "cg") -> ClassicGroupState:
    group = shard.state.classic_group(group_id)
    assert group is not None
    return group.state


def join_id(shard: GroupCoordinatorShard, log: Log, now_ms: int, **kwargs: Any) -> str:
    """The member id a first JoinGroup hands out (MEMBER_ID_REQUIRED)."""
    result = shard.join_group(join_classic("cg", **kwargs), "first", now_ms)
    log.append(result)
    response = completions(result)["first"]
    assert isinstance(response.error, MemberIdRequiredError)
    member_id: str = response.member_id
    return member_id


def stable_group_of_two(shard: GroupCoordinatorShard, log: Log) -> tuple[str, str, int]:
    """Two members through a first rebalance and SyncGroup: (leader, follower, generation)."""
    a = join_id(shard, log, 0)
    b = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a), "ja", 10))
    log.append(shard.join_group(join_classic("cg", b), "jb", 20))
    # The initial rebalance delay (3 s from the first join), once more for the second member.
    assert shard.tick(3_010).completions == ()
    result = shard.tick(6_010)
    log.append(result)
    joined = completions(result)
    leader = joined["ja"].leader
    follower = b if leader == a else a
    generation = joined["ja"].generation_id
    log.append(shard.sync_group(sync("cg", follower, generation), "sf", 6_020))
    plan = {leader: assignment_bytes({"foo": (0, 1, 2)}), follower: assignment_bytes({"foo": (3,)})}
    log.append(shard.sync_group(sync("cg", leader, generation, plan), "sl", 6_030))
    assert state_of(shard) == S.STABLE
    return leader, follower, generation


def test_a_first_join_without_member_id_gets_member_id_required() -> None:
    shard, log = new_shard(), Log()
    member_id = join_id(shard, log, 0, client_id="app")
    assert member_id.startswith("app-")
    assert state_of(shard) == S.EMPTY
    # The new group is persisted at once (Kafka writes an empty GroupMetadata record).
    assert len(log.records) == 1
    assert_replay_matches(shard, log)


def test_the_first_member_leads_and_alone_gets_every_members_metadata() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    b = join_id(shard, log, 0)
    first = shard.join_group(join_classic("cg", a, topics=("foo",)), "ja", 10)
    second = shard.join_group(join_classic("cg", b, topics=("bar",)), "jb", 20)
    assert first.completions == second.completions == ()  # parked
    assert state_of(shard) == S.PREPARING_REBALANCE
    result = shard.tick(6_010)
    joined = completions(result)
    assert joined["ja"].leader == a and joined["ja"].generation_id == 1
    assert {m.member_id for m in joined["ja"].members} == {a, b}
    assert joined["jb"].members == () and joined["jb"].leader == a
    assert joined["jb"].protocol_name == "range"
    assert state_of(shard) == S.COMPLETING_REBALANCE


def test_the_initial_rebalance_waits_longer_while_new_members_arrive() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    b = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a), "ja", 0))
    log.append(shard.join_group(join_classic("cg", b), "jb", 2_000))
    assert shard.tick(3_000).completions == ()  # b arrived: wait another delay
    assert shard.next_deadline_ms() == 6_000
    assert set(completions(shard.tick(6_000))) == {"ja", "jb"}


def test_followers_wait_for_the_leaders_sync_then_all_get_their_assignment() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    b = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a), "ja", 0))
    log.append(shard.join_group(join_classic("cg", b), "jb", 0))
    log.append(shard.tick(6_000))
    follower_sync = shard.sync_group(sync("cg", b, 1), "sb", 6_010)
    assert follower_sync.completions == () and follower_sync.records == ()
    plan = {a: assignment_bytes({"foo": (0, 1, 2)}), b: assignment_bytes({"foo": (3, 4, 5)})}
    result = shard.sync_group(sync("cg", a, 1, plan), "sa", 6_020)
    assert len(result.records) == 1  # the generation's GroupMetadata, sent after commit
    log.append(result)
    synced = completions(result)
    assert decode_assignment(synced["sb"].assignment).assigned_partitions == {"foo": (3, 4, 5)}
    assert decode_assignment(synced["sa"].assignment).assigned_partitions == {"foo": (0, 1, 2)}
    assert state_of(shard) == S.STABLE
    assert_replay_matches(shard, log)


def test_heartbeats_say_rebalance_in_progress_during_a_rebalance() -> None:
    shard, log = new_shard(), Log()
    leader, follower, generation = stable_group_of_two(shard, log)
    ok = shard.heartbeat(HeartbeatRequest("cg", generation, follower), 7_000).response
    assert ok is not None and ok.error is None
    log.append(shard.join_group(join_classic("cg", leader), "rejoin", 7_010))
    response = shard.heartbeat(HeartbeatRequest("cg", generation, follower), 7_020).response
    assert response is not None and isinstance(response.error, RebalanceInProgressError)


def test_a_heartbeat_of_another_generation_gets_illegal_generation() -> None:
    shard, log = new_shard(), Log()
    _, follower, generation = stable_group_of_two(shard, log)
    response = shard.heartbeat(HeartbeatRequest("cg", generation - 1, follower), 7_000).response
    assert response is not None and isinstance(response.error, IllegalGenerationError)
    unknown = shard.heartbeat(HeartbeatRequest("cg", generation, "ghost"), 7_000).response
    assert unknown is not None and isinstance(unknown.error, UnknownMemberIdError)


def test_a_rebalance_completes_as_soon_as_every_known_member_rejoined() -> None:
    shard, log = new_shard(), Log()
    leader, follower, generation = stable_group_of_two(shard, log)
    # A follower rejoining a Stable group with the same metadata just gets its generation.
    same = completions(shard.join_group(join_classic("cg", follower), "again", 7_000))
    assert same["again"].generation_id == generation and state_of(shard) == S.STABLE
    # The leader rejoining starts a rebalance; the follower's rejoin completes it at once.
    log.append(shard.join_group(join_classic("cg", leader), "jl", 7_010))
    result = shard.join_group(join_classic("cg", follower), "jf", 7_020)
    joined = completions(result)
    assert set(joined) == {"jf", "jl"}
    assert joined["jl"].generation_id == generation + 1


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed() -> None:
    shard, log = new_shard(), Log()
    leader, follower, generation = stable_group_of_two(shard, log)
    log.append(shard.join_group(join_classic("cg", leader), "jl", 7_000))
    # The follower heartbeats (REBALANCE_IN_PROGRESS) but never rejoins.
    for t in range(8_000, 37_000, 3_000):
        shard.heartbeat(HeartbeatRequest("cg", generation, follower), t)
        log.append(shard.tick(t))
    result = shard.tick(37_000)  # 7 000 + the 30 s rebalance timeout
    log.append(result)
    joined = completions(result)
    assert joined["jl"].generation_id == generation + 1
    assert [m.member_id for m in joined["jl"].members] == [leader]
    group = shard.state.classic_group("cg")
    assert group is not None and set(group.members) == {leader}


def test_a_silent_member_is_removed_after_its_session_timeout_and_the_group_rebalances() -> None:
    shard, log = new_shard(), Log()
    leader, follower, generation = stable_group_of_two(shard, log)
    for t in range(7_000, 16_000, 3_000):
        shard.heartbeat(HeartbeatRequest("cg", generation, leader), t)
    log.append(shard.tick(16_029))
    assert state_of(shard) == S.STABLE
    log.append(shard.tick(16_030))  # the follower got its assignment at 6 030, + 10 s
    group = shard.state.classic_group("cg")
    assert group is not None and follower not in group.members
    assert state_of(shard) == S.PREPARING_REBALANCE


def test_leaving_rebalances_the_group_and_the_last_leave_empties_it() -> None:
    shard, log = new_shard(), Log()
    leader, follower, generation = stable_group_of_two(shard, log)
    result = shard.leave_group(LeaveGroupRequest("cg", (MemberIdentity(follower),)), 7_000)
    log.append(result)
    assert result.response is not None and result.response.members[0].error is None
    assert state_of(shard) == S.PREPARING_REBALANCE
    result = shard.leave_group(LeaveGroupRequest("cg", (MemberIdentity(leader),)), 7_010)
    log.append(result)
    assert state_of(shard) == S.EMPTY
    assert len(result.records) == 1  # the Empty generation is persisted
    group = shard.state.classic_group("cg")
    assert group is not None and group.generation_id == generation + 1
    assert_replay_matches(shard, log)
    unknown = shard.leave_group(LeaveGroupRequest("cg", (MemberIdentity("ghost"),)), 7_020)
    assert unknown.response is not None
    assert isinstance(unknown.response.members[0].error, UnknownMemberIdError)


def test_a_restarted_static_member_takes_its_place_back_without_a_rebalance() -> None:
    shard, log = new_shard(), Log()
    first = shard.join_group(join_classic("cg", instance_id="i-a"), "ja", 0)
    log.append(first)
    assert first.completions == ()  # a static member joins directly, no MEMBER_ID_REQUIRED
    result = shard.tick(3_000)
    log.append(result)
    joined = completions(result)["ja"]
    a = joined.member_id
    plan = {a: assignment_bytes({"foo": (0, 1, 2, 3, 4, 5)})}
    log.append(shard.sync_group(sync("cg", a, 1, plan, "i-a"), "sa", 3_010))
    # The process restarts and joins again with its instance id and no member id.
    result = shard.join_group(join_classic("cg", instance_id="i-a"), "ja2", 20_000)
    log.append(result)
    response = completions(result)["ja2"]
    assert response.error is None and response.generation_id == 1
    assert response.member_id != a
    assert state_of(shard) == S.STABLE and len(result.records) == 1
    # It led the group: KIP-814 tells it so, and that the assignment stands.
    assert response.leader == response.member_id and response.skip_assignment
    assert [m.member_id for m in response.members] == [response.member_id]
    synced = shard.sync_group(sync("cg", response.member_id, 1, None, "i-a"), "s2", 20_010)
    assignment = completions(synced)["s2"].assignment
    assert decode_assignment(assignment).assigned_partitions == {"foo": (0, 1, 2, 3, 4, 5)}
    # The old incarnation is fenced.
    old = shard.heartbeat(HeartbeatRequest("cg", 1, a, "i-a"), 20_020).response
    assert old is not None and isinstance(old.error, FencedInstanceIdError)
    assert_replay_matches(shard, log)


def test_a_classic_join_to_a_consumer_group_gets_inconsistent_group_protocol() -> None:
    shard, log = new_shard(), Log()
    log.append(shard.consumer_group_heartbeat(join("cg", "m1"), 0))
    result = shard.join_group(join_classic("cg"), "h", 10)
    assert isinstance(completions(result)["h"].error, InconsistentGroupProtocolError)


def test_members_must_share_the_protocol_type_and_a_protocol() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a, protocols=("range",)), "ja", 0))
    other = replace(join_classic("cg"), protocol_type="connect")
    assert isinstance(
        completions(shard.join_group(other, "x", 10))["x"].error, InconsistentGroupProtocolError
    )
    sticky = join_classic("cg", protocols=("sticky",))
    assert isinstance(
        completions(shard.join_group(sticky, "y", 10))["y"].error, InconsistentGroupProtocolError
    )


def test_the_chosen_protocol_is_the_one_every_member_supports_and_most_prefer() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    b = join_id(shard, log, 0)
    log.append(
        shard.join_group(join_classic("cg", a, protocols=("cooperative-sticky", "range")), "ja", 0)
    )
    log.append(shard.join_group(join_classic("cg", b, protocols=("range", "roundrobin")), "jb", 0))
    assert completions(shard.tick(6_000))["ja"].protocol_name == "range"


def test_bad_join_requests_get_kafkas_errors() -> None:
    shard = new_shard()
    too_short = replace(join_classic("cg"), session_timeout_ms=10)
    assert isinstance(
        completions(shard.join_group(too_short, "h", 0))["h"].error, InvalidSessionTimeoutError
    )
    blank = join_classic(" ")
    assert isinstance(completions(shard.join_group(blank, "h", 0))["h"].error, InvalidGroupIdError)
    unknown = join_classic("nope", "some-member-id")
    assert isinstance(
        completions(shard.join_group(unknown, "h", 0))["h"].error, UnknownMemberIdError
    )


def test_a_sync_of_another_generation_gets_illegal_generation() -> None:
    shard, log = new_shard(), Log()
    _, follower, generation = stable_group_of_two(shard, log)
    result = shard.sync_group(sync("cg", follower, generation + 1), "s", 7_000)
    assert isinstance(completions(result)["s"].error, IllegalGenerationError)


def test_members_that_do_not_sync_within_the_rebalance_timeout_are_removed() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    b = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a), "ja", 0))
    log.append(shard.join_group(join_classic("cg", b), "jb", 0))
    joined = completions(shard.tick(6_000))
    leader = joined["ja"].leader
    other = b if leader == a else a
    log.append(shard.sync_group(sync("cg", leader, 1, {leader: b""}), "s", 6_010))
    shard.heartbeat(HeartbeatRequest("cg", 1, leader), 33_000)
    log.append(shard.tick(36_000))  # 6 000 + 30 s: `other` never sent SyncGroup
    group = shard.state.classic_group("cg")
    assert group is not None and other not in group.members


def test_unloading_answers_every_parked_request_not_coordinator() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a), "ja", 0))
    parked = {c.handle: c.response for c in shard.unload()}
    assert isinstance(parked["ja"], JoinGroupResponse)
    assert isinstance(parked["ja"].error, NotCoordinatorError)


def test_a_reloaded_shard_has_the_stable_group_and_its_assignments() -> None:
    shard, log = new_shard(), Log()
    leader, follower, generation = stable_group_of_two(shard, log)
    fresh = reload(log.records)
    assert state_of(fresh) == S.STABLE
    group = fresh.state.classic_group("cg")
    assert group is not None and group.generation_id == generation and group.leader_id == leader
    # Its members heartbeat on as if nothing happened.
    response = fresh.heartbeat(HeartbeatRequest("cg", generation, follower), 10).response
    assert response is not None and response.error is None
    synced = completions(fresh.sync_group(sync("cg", follower, generation), "s", 20))["s"]
    assert isinstance(synced, SyncGroupResponse)
    assert decode_assignment(synced.assignment).assigned_partitions == {"foo": (3,)}


def test_a_retried_join_answers_the_one_still_parked() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a), "first", 0))
    result = shard.join_group(join_classic("cg", a), "retry", 100)
    answered = completions(result)
    assert isinstance(answered["first"].error, RebalanceInProgressError)
    assert "retry" in completions(shard.tick(3_000))


def test_a_member_removed_while_its_sync_is_parked_is_answered() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    b = join_id(shard, log, 0)
    log.append(shard.join_group(join_classic("cg", a), "ja", 0))
    log.append(shard.join_group(join_classic("cg", b), "jb", 0))
    joined = completions(shard.tick(6_000))
    follower = b if joined["ja"].leader == a else a
    log.append(shard.sync_group(sync("cg", follower, 1), "parked", 6_010))
    left = shard.leave_group(LeaveGroupRequest("cg", (MemberIdentity(follower),)), 6_020)
    assert isinstance(completions(left)["parked"].error, UnknownMemberIdError)


def test_join_group_protocol_metadata_is_kept_per_protocol() -> None:
    shard, log = new_shard(), Log()
    a = join_id(shard, log, 0)
    request = replace(
        join_classic("cg", a),
        protocols=(JoinGroupProtocol("range", b"r"), JoinGroupProtocol("roundrobin", b"rr")),
    )
    log.append(shard.join_group(request, "ja", 0))
    joined = completions(shard.tick(3_000))["ja"]
    assert joined.protocol_name == "range" and joined.members[0].metadata == b"r"


def test_a_client_before_kip_814_is_told_the_old_leader_id() -> None:
    shard, log = new_shard(), Log()
    log.append(shard.join_group(join_classic("cg", instance_id="i-a"), "ja", 0))
    result = shard.tick(3_000)
    log.append(result)
    a = completions(result)["ja"].member_id
    log.append(shard.sync_group(sync("cg", a, 1, {a: b""}, "i-a"), "sa", 3_010))
    old_client = replace(join_classic("cg", instance_id="i-a"), supports_skip_assignment=False)
    response = completions(shard.join_group(old_client, "ja2", 5_000))["ja2"]
    assert response.leader == a != response.member_id
    assert not response.skip_assignment and response.members == ()


def test_a_sync_in_a_stable_group_restarts_the_members_session() -> None:
    shard, log = new_shard(), Log()
    leader, follower, generation = stable_group_of_two(shard, log)
    for t in range(7_000, 40_000, 3_000):
        shard.heartbeat(HeartbeatRequest("cg", generation, leader), t)
        log.append(shard.sync_group(sync("cg", follower, generation), ("s", t), t))
        log.append(shard.tick(t))
    group = shard.state.classic_group("cg")
    assert group is not None and set(group.members) == {leader, follower}
