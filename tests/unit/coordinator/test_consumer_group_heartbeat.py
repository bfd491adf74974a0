"""KIP-848 ConsumerGroupHeartbeat: membership, epochs, target assignment, reconciliation,
static members, timeouts (rillet.coordinator.group.consumer_heartbeat)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

import pytest
from group_harness import (
    BAR,
    FOO,
    TEST_CONFIG,
    TOPICS,
    Log,
    assert_replay_matches,
    beat,
    join,
    new_shard,
    owned_of,
    partitions_of,
)

from rillet.coordinator.group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupCoordinatorShard,
    MemberState,
    OwnedTopicPartitions,
    TopicInfo,
)
from rillet.errors import (
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    NotCoordinatorError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)


@dataclass
class Member:
    """A well-behaved client: heartbeats with its epoch and what it owns, revokes at once."""

    member_id: str
    topics: tuple[str, ...] = ("foo",)
    instance_id: str | None = None
    epoch: int = 0
    owned: tuple[OwnedTopicPartitions, ...] = ()
    responses: list[ConsumerGroupHeartbeatResponse] = field(default_factory=list)

    def heartbeat(
        self, shard: GroupCoordinatorShard, log: Log, now_ms: int, group: str = "g"
    ) -> ConsumerGroupHeartbeatResponse:
        if self.epoch == 0:
            request = join(group, self.member_id, self.topics, instance_id=self.instance_id)
        else:
            request = beat(group, self.member_id, self.epoch, self.owned, self.instance_id)
        result = shard.consumer_group_heartbeat(request, now_ms)
        log.append(result)
        response = result.response
        assert response is not None
        assert response.error is None, response.error
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.owned = owned_of(response)
        self.responses.append(response)
        return response

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(tp.topic_id, p) for tp in self.owned for p in tp.partitions}


def converge(shard: GroupCoordinatorShard, log: Log, members: list[Member], now_ms: int) -> None:
    for _ in range(10):
        for m in members:
            m.heartbeat(shard, log, now_ms)
        group = shard.state.consumer_group("g")
        assert group is not None
        if str(group.state) == "Stable":
            return
    raise AssertionError(f"not stable: {shard.state.consumer_group('g').state}")  # type: ignore[union-attr]


def test_first_member_gets_every_subscribed_partition_at_epoch_one() -> None:
    shard, log = new_shard(), Log()
    response = Member("m1", ("foo", "bar")).heartbeat(shard, log, 0)
    assert response.member_epoch == 1
    assert partitions_of(response) == {("foo", p) for p in range(6)} | {
        ("bar", p) for p in range(3)
    }
    assert response.heartbeat_interval_ms == TEST_CONFIG.consumer_group_heartbeat_interval_ms
    described = shard.consumer_group_describe(["g"]).response
    assert described is not None and described[0].group_state == "Stable"
    assert described[0].group_epoch == described[0].assignment_epoch == 1


def test_a_member_without_id_gets_one_from_the_coordinator() -> None:
    shard = new_shard()
    request = replace(join("g", ""), member_id="")
    response = shard.consumer_group_heartbeat(request, 0).response
    assert response is not None and response.error is None
    assert response.member_id and len(response.member_id) == 22


def test_a_second_member_gets_partitions_only_after_the_first_revoked_them() -> None:
    shard, log = new_shard(), Log()
    m1, m2 = Member("m1"), Member("m2")
    m1.heartbeat(shard, log, 0)
    r2 = m2.heartbeat(shard, log, 10)
    # The group epoch moved to 2; m2 is at the new epoch but gets nothing yet: m1 owns it all.
    assert r2.member_epoch == 2 and partitions_of(r2) == set()
    group = shard.state.consumer_group("g")
    assert group is not None
    assert group.members["m2"].state == MemberState.UNRELEASED_PARTITIONS
    # m1 is told to keep three partitions and revoke three; it stays at epoch 1 meanwhile.
    r1 = m1.heartbeat(shard, log, 20)
    assert r1.member_epoch == 1 and len(partitions_of(r1)) == 3
    assert group.members["m1"].state == MemberState.UNREVOKED_PARTITIONS
    # m2 still gets nothing: m1 has not acknowledged the revocation.
    assert m2.heartbeat(shard, log, 30).assignment is None
    assert m2.partitions() == set()
    # m1 acknowledges (its owned partitions no longer include the revoked ones): epoch 2.
    assert m1.heartbeat(shard, log, 40).member_epoch == 2
    r2 = m2.heartbeat(shard, log, 50)
    assert len(partitions_of(r2)) == 3
    assert m1.partitions().isdisjoint(m2.partitions())
    assert str(group.state) == "Stable"
    assert_replay_matches(shard, log)


def test_an_unchanged_assignment_moves_to_the_new_epoch_without_revoking() -> None:
    shard, log = new_shard(), Log()
    m1, m2 = Member("m1", ("foo",)), Member("m2", ("bar",))
    m1.heartbeat(shard, log, 0)
    before = m1.partitions()
    m2.heartbeat(shard, log, 10)
    response = m1.heartbeat(shard, log, 20)
    assert response.member_epoch == 2
    assert response.assignment is None  # nothing changed: no assignment sent
    assert m1.partitions() == before
    group = shard.state.consumer_group("g")
    assert group is not None and group.members["m1"].state == MemberState.STABLE


def test_a_newer_member_epoch_than_the_coordinators_is_fenced() -> None:
    shard, log = new_shard(), Log()
    m1 = Member("m1")
    m1.heartbeat(shard, log, 0)
    response = shard.consumer_group_heartbeat(beat("g", "m1", 5, m1.owned), 10).response
    assert response is not None and isinstance(response.error, FencedMemberEpochError)


def test_an_older_epoch_is_fenced_unless_it_is_the_previous_one_with_a_subset() -> None:
    shard, log = new_shard(), Log()
    m1, m2 = Member("m1"), Member("m2")
    converge(shard, log, [m1, m2], 0)
    assert m1.epoch == 2
    group = shard.state.consumer_group("g")
    assert group is not None and group.members["m1"].previous_member_epoch == 1
    # The response that bumped m1 to epoch 2 was lost: epoch 1 with a subset is accepted.
    response = shard.consumer_group_heartbeat(beat("g", "m1", 1, m1.owned), 100).response
    assert response is not None and response.error is None and response.member_epoch == 2
    # Epoch 1 claiming a partition it no longer has is a zombie.
    everything = (OwnedTopicPartitions(FOO, tuple(range(6))),)
    response = shard.consumer_group_heartbeat(beat("g", "m1", 1, everything), 110).response
    assert response is not None and isinstance(response.error, FencedMemberEpochError)
    # Epoch 0 is a rejoin, not a stale epoch.
    response = shard.consumer_group_heartbeat(beat("g", "m1", 1, None), 120).response
    assert response is not None and isinstance(response.error, FencedMemberEpochError)


def test_a_fenced_member_rejoins_with_epoch_zero_and_its_member_id() -> None:
    shard, log = new_shard(), Log()
    m1 = Member("m1")
    m1.heartbeat(shard, log, 0)
    result = shard.consumer_group_heartbeat(join("g", "m1"), 10)
    log.append(result)
    assert result.response is not None and result.response.error is None
    assert result.response.member_id == "m1" and result.response.member_epoch == 1
    assert len(partitions_of(result.response)) == 6  # a full answer after a rejoin


def test_an_unknown_member_gets_unknown_member_id() -> None:
    shard, log = new_shard(), Log()
    Member("m1").heartbeat(shard, log, 0)
    response = shard.consumer_group_heartbeat(beat("g", "ghost", 3, ()), 10).response
    assert response is not None and isinstance(response.error, UnknownMemberIdError)


def test_a_heartbeat_to_an_unknown_group_gets_group_id_not_found() -> None:
    response = new_shard().consumer_group_heartbeat(beat("nope", "m1", 2, ()), 0).response
    assert response is not None and isinstance(response.error, GroupIdNotFoundError)


def test_leaving_with_epoch_minus_one_frees_the_partitions_for_the_others() -> None:
    shard, log = new_shard(), Log()
    m1, m2 = Member("m1"), Member("m2")
    converge(shard, log, [m1, m2], 0)
    result = shard.consumer_group_heartbeat(beat("g", "m1", -1), 100)
    log.append(result)
    assert result.response is not None and result.response.member_epoch == -1
    group = shard.state.consumer_group("g")
    assert group is not None and "m1" not in group.members
    assert str(group.state) == "Assigning"  # epoch bumped; the next heartbeat assigns
    r2 = m2.heartbeat(shard, log, 110)
    assert len(partitions_of(r2)) == 6 and str(group.state) == "Stable"
    assert_replay_matches(shard, log)


def test_the_last_member_leaving_leaves_an_empty_group() -> None:
    shard, log = new_shard(), Log()
    Member("m1").heartbeat(shard, log, 0)
    log.append(shard.consumer_group_heartbeat(beat("g", "m1", -1), 10))
    listed = shard.list_groups().response
    assert listed is not None
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Empty")]
    assert_replay_matches(shard, log)


def test_a_static_member_leaving_temporarily_keeps_its_partitions_for_its_successor() -> None:
    shard, log = new_shard(), Log()
    s1, m2 = Member("s1", instance_id="i-1"), Member("m2")
    converge(shard, log, [s1, m2], 0)
    kept = s1.partitions()
    result = shard.consumer_group_heartbeat(beat("g", "s1", -2, instance_id="i-1"), 100)
    log.append(result)
    assert result.response is not None and result.response.member_epoch == -2
    # No rebalance: m2 keeps what it has and gets nothing more.
    assert m2.heartbeat(shard, log, 110).assignment is None
    # The new incarnation (a new member id) takes over the assignment at once.
    s1b = Member("s1-bis", instance_id="i-1")
    response = s1b.heartbeat(shard, log, 120)
    assert s1b.partitions() == kept and response.member_epoch >= 2
    group = shard.state.consumer_group("g")
    assert group is not None and set(group.members) == {"s1-bis", "m2"}
    assert_replay_matches(shard, log)


def test_a_static_member_cannot_join_while_its_instance_id_is_held() -> None:
    shard, log = new_shard(), Log()
    Member("s1", instance_id="i-1").heartbeat(shard, log, 0)
    request = join("g", "s2", instance_id="i-1")
    response = shard.consumer_group_heartbeat(request, 10).response
    assert response is not None and isinstance(response.error, UnreleasedInstanceIdError)


def test_another_member_id_with_a_held_instance_id_is_fenced() -> None:
    shard, log = new_shard(), Log()
    Member("s1", instance_id="i-1").heartbeat(shard, log, 0)
    response = shard.consumer_group_heartbeat(beat("g", "s2", 1, (), "i-1"), 10).response
    assert response is not None and isinstance(response.error, FencedInstanceIdError)
    leave = beat("g", "s2", -1, None, "i-1")
    response = shard.consumer_group_heartbeat(leave, 20).response
    assert response is not None and isinstance(response.error, FencedInstanceIdError)


def test_a_static_member_rejoining_with_its_own_id_is_handled_in_place() -> None:
    shard, log = new_shard(), Log()
    s1 = Member("s1", instance_id="i-1")
    s1.heartbeat(shard, log, 0)
    log.append(shard.consumer_group_heartbeat(beat("g", "s1", -2, instance_id="i-1"), 10))
    response = shard.consumer_group_heartbeat(join("g", "s1", instance_id="i-1"), 20).response
    assert response is not None and response.error is None and response.member_epoch == 1
    assert len(partitions_of(response)) == 6
    moved = join("g", "s1", instance_id="i-2")
    response = shard.consumer_group_heartbeat(moved, 30).response
    assert response is not None and isinstance(response.error, InvalidRequestError)


def test_the_session_timeout_fences_a_silent_member() -> None:
    shard, log = new_shard(), Log()
    m1, m2 = Member("m1"), Member("m2")
    converge(shard, log, [m1, m2], 0)
    m2.heartbeat(shard, log, 30_000)
    deadline = shard.next_deadline_ms()
    assert deadline == 45_000  # m1's session: its last heartbeat at 0 + 45 s
    log.append(shard.tick(44_999))
    group = shard.state.consumer_group("g")
    assert group is not None and "m1" in group.members
    log.append(shard.tick(45_000))
    assert "m1" not in group.members
    assert len(partitions_of(m2.heartbeat(shard, log, 45_010))) == 6
    assert_replay_matches(shard, log)


def test_the_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    shard, log = new_shard(), Log()
    m1 = Member("m1")
    m1.heartbeat(shard, log, 0)
    m2 = Member("m2")
    m2.heartbeat(shard, log, 10)
    # m1 learns it must revoke, then keeps heartbeating with everything it had.
    request = beat("g", "m1", 1, m1.owned)
    log.append(shard.consumer_group_heartbeat(request, 20))
    everything = (OwnedTopicPartitions(FOO, tuple(range(6))),)
    for t in range(1_000, 60_000, 5_000):
        log.append(shard.consumer_group_heartbeat(beat("g", "m1", 1, everything), t))
        m2.heartbeat(shard, log, t)
        log.append(shard.tick(t))
    group = shard.state.consumer_group("g")
    assert group is not None and "m1" in group.members
    log.append(shard.tick(60_020))  # 20 + the 60 s rebalance timeout
    assert "m1" not in group.members
    assert len(partitions_of(m2.heartbeat(shard, log, 60_030))) == 6


def test_a_regex_subscription_takes_the_topics_it_fully_matches_and_new_ones() -> None:
    shard, log = new_shard(), Log()
    result = shard.consumer_group_heartbeat(join("g", "m1", regex="fo+"), 0)
    log.append(result)
    assert result.response is not None
    assert {t for t, _ in partitions_of(result.response)} == {"foo"}
    shard.on_metadata({**TOPICS, "fooo": TopicInfo(uuid.UUID(int=9), 2), "food": TOPICS["bar"]})
    response = shard.consumer_group_heartbeat(beat("g", "m1", 1, owned_of(result.response)), 10)
    log.append(response)
    assert response.response is not None and response.response.member_epoch == 2
    assert {t for t, _ in partitions_of(response.response)} == {"foo", "fooo"}
    assert_replay_matches(shard, log)


def test_an_invalid_regex_is_refused() -> None:
    response = new_shard().consumer_group_heartbeat(join("g", "m1", regex="(unclosed"), 0)
    assert response.response is not None
    assert isinstance(response.response.error, InvalidRegularExpressionError)


def test_a_topic_gaining_partitions_bumps_the_epoch_and_assigns_them() -> None:
    shard, log = new_shard(), Log()
    m1, m2 = Member("m1"), Member("m2")
    converge(shard, log, [m1, m2], 0)
    epoch = m1.epoch
    shard.on_metadata({**TOPICS, "foo": TopicInfo(FOO, 10)})
    converge(shard, log, [m1, m2], 100)
    assert m1.epoch > epoch
    assert len(m1.partitions()) == len(m2.partitions()) == 5
    assert m1.partitions() | m2.partitions() == {(FOO, p) for p in range(10)}
    assert_replay_matches(shard, log)


def test_a_member_may_choose_the_range_assignor() -> None:
    shard, log = new_shard(), Log()
    for member_id in ("a", "b"):
        request = join("g", member_id, ("foo", "bar"), assignor="range")
        log.append(shard.consumer_group_heartbeat(request, 0))
    described = shard.consumer_group_describe(["g"]).response
    assert described is not None and described[0].assignor_name == "range"
    targets = {m.member_id: m.target_assignment for m in described[0].members}
    assert [(t.topic_name, t.partitions) for t in targets["a"]] == [
        ("bar", (0, 1)),
        ("foo", (0, 1, 2)),
    ]


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (join("g", "m", assignor="sticky"), UnsupportedAssignorError),
        (replace(join("g", "m"), rebalance_timeout_ms=-1), InvalidRequestError),
        (replace(join("g", "m"), topic_partitions=None), InvalidRequestError),
        (replace(join("g", "m"), subscribed_topic_names=None), InvalidRequestError),
        (replace(join("g", "m"), member_epoch=-3), InvalidRequestError),
        (replace(join("g", "m"), instance_id=" "), InvalidRequestError),
        (beat("g", "", 3), InvalidRequestError),
        (beat(" ", "m", 3), InvalidRequestError),
    ],
)
def test_an_invalid_heartbeat_is_refused_with_kafkas_error(
    request_: ConsumerGroupHeartbeatRequest, error: type[Exception]
) -> None:
    response = new_shard().consumer_group_heartbeat(request_, 0).response
    assert response is not None and isinstance(response.error, error)


def test_the_assignment_is_sent_only_when_it_changed_or_on_a_full_request() -> None:
    shard, log = new_shard(), Log()
    m1 = Member("m1")
    m1.heartbeat(shard, log, 0)
    assert m1.heartbeat(shard, log, 10).assignment is None
    full = replace(
        beat("g", "m1", 1, m1.owned), rebalance_timeout_ms=60_000, subscribed_topic_names=("foo",)
    )
    response = shard.consumer_group_heartbeat(full, 20).response
    assert response is not None and response.assignment is not None


def test_a_heartbeat_to_a_classic_group_with_members_gets_group_id_not_found() -> None:
    from group_harness import join_classic

    shard = new_shard()
    shard.join_group(replace(join_classic("cg"), require_known_member_id=False), "h1", 0)
    group = shard.state.classic_group("cg")
    assert group is not None and len(group.members) == 1
    for request in (join("cg", "m1"), beat("cg", "m1", 2, ())):
        response = shard.consumer_group_heartbeat(request, 10).response
        assert response is not None and isinstance(response.error, GroupIdNotFoundError)


def test_an_empty_classic_group_is_replaced_by_a_consumer_group() -> None:
    from group_harness import commit

    shard, log = new_shard(), Log()
    log.append(shard.commit_offsets(commit("g", {("foo", 0): 5}), 0))
    assert shard.state.classic_group("g") is not None
    Member("m1").heartbeat(shard, log, 10)
    assert shard.state.consumer_group("g") is not None
    assert_replay_matches(shard, log)


def test_the_group_size_is_limited_by_group_consumer_max_size() -> None:
    shard, log = new_shard(replace(TEST_CONFIG, consumer_group_max_size=1)), Log()
    Member("m1").heartbeat(shard, log, 0)
    response = shard.consumer_group_heartbeat(join("g", "m2"), 10).response
    assert response is not None and isinstance(response.error, GroupMaxSizeReachedError)


def test_load_in_progress_until_loaded_and_not_coordinator_for_other_groups() -> None:
    import random

    from rillet.coordinator.group import partition_for

    config = replace(TEST_CONFIG, offsets_topic_num_partitions=50)
    loading = GroupCoordinatorShard(0, config, rng=random.Random(1), topics=TOPICS)
    response = loading.consumer_group_heartbeat(join("g", "m1"), 0).response
    assert response is not None and isinstance(response.error, CoordinatorLoadInProgressError)
    mine = next(f"g{i}" for i in range(1000) if partition_for(f"g{i}", 50) == 0)
    other = next(f"g{i}" for i in range(1000) if partition_for(f"g{i}", 50) != 0)
    loading.on_loaded(0)
    ok = loading.consumer_group_heartbeat(join(mine, "m1"), 0).response
    assert ok is not None and ok.error is None
    refused = loading.consumer_group_heartbeat(join(other, "m1"), 0).response
    assert refused is not None and isinstance(refused.error, NotCoordinatorError)


def test_group_states_follow_kip_848() -> None:
    shard, log = new_shard(), Log()
    m1, m2 = Member("m1"), Member("m2")
    m1.heartbeat(shard, log, 0)
    group = shard.state.consumer_group("g")
    assert group is not None and str(group.state) == "Stable"
    m2.heartbeat(shard, log, 10)
    assert str(group.state) == "Reconciling"
    converge(shard, log, [m1, m2], 20)
    assert str(group.state) == "Stable"
    log.append(shard.consumer_group_heartbeat(beat("g", "m2", -1), 30))
    assert str(group.state) == "Assigning"
    log.append(shard.consumer_group_heartbeat(beat("g", "m1", -1), 40))
    assert str(group.state) == "Empty"


def test_members_of_different_subscriptions_only_get_their_topics() -> None:
    shard, log = new_shard(), Log()
    a, b, c = Member("a", ("foo",)), Member("b", ("foo", "bar")), Member("c", ("bar",))
    converge(shard, log, [a, b, c], 0)
    assert all(t == FOO for t, _ in a.partitions())
    assert all(t == BAR for t, _ in c.partitions())
    everything = a.partitions() | b.partitions() | c.partitions()
    assert len(everything) == 9 == len(a.partitions()) + len(b.partitions()) + len(c.partitions())


def test_a_heartbeat_that_changes_nothing_writes_nothing() -> None:
    shard, log = new_shard(), Log()
    m1 = Member("m1")
    m1.heartbeat(shard, log, 0)
    result = shard.consumer_group_heartbeat(beat("g", "m1", 1, m1.owned), 10)
    assert result.records == () and result.response is not None
    assert result.response.error is None and result.response.member_epoch == 1


def test_an_unloaded_shard_answers_not_coordinator() -> None:
    shard, log = new_shard(), Log()
    Member("m1").heartbeat(shard, log, 0)
    assert shard.unload() == []
    response = shard.consumer_group_heartbeat(beat("g", "m1", 1, ()), 10).response
    assert response is not None and isinstance(response.error, NotCoordinatorError)
