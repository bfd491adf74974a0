"""Server-side assignors and the group's partition (rillet.coordinator.group.assignors,
partitioner): properties over random groups."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from rillet.coordinator.group import (
    GroupSpec,
    MemberSubscription,
    java_string_hashcode,
    partition_for,
)
from rillet.coordinator.group.assignors import range_assign, uniform_assign

TOPIC_IDS = [uuid.UUID(int=i + 1) for i in range(4)]

Result = dict[str, dict[uuid.UUID, frozenset[int]]]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None) -> GroupSpec:
    topics = {
        t: draw(st.integers(1, 12))
        for t in draw(st.lists(st.sampled_from(TOPIC_IDS), min_size=1, max_size=4, unique=True))
    }
    member_ids = draw(
        st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=7, unique=True)
    )
    same = homogeneous if homogeneous is not None else draw(st.booleans())
    everything = frozenset(topics)
    members = {}
    for m in member_ids:
        subscribed = (
            everything
            if same
            else frozenset(draw(st.sets(st.sampled_from(sorted(topics)), min_size=1)))
        )
        static = draw(st.none() | st.text("xyz", min_size=1, max_size=3))
        members[m] = MemberSubscription(subscribed, {}, static)
    return GroupSpec(members, topics)


def owners(result: Result) -> dict[tuple[uuid.UUID, int], list[str]]:
    out: dict[tuple[uuid.UUID, int], list[str]] = {}
    for m, assignment in result.items():
        for t, partitions in assignment.items():
            for p in partitions:
                out.setdefault((t, p), []).append(m)
    return out


def sizes(result: Result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def check_complete_and_valid(spec: GroupSpec, result: Result) -> None:
    subscribed = {t for m in spec.members.values() for t in m.subscribed_topic_ids}
    expected = {(t, p) for t in subscribed for p in range(spec.partitions_per_topic[t])}
    by_partition = owners(result)
    assert set(by_partition) == expected  # every subscribed partition, nothing else
    for (t, _), members in by_partition.items():
        assert len(members) == 1  # exactly once
        assert t in spec.members[members[0]].subscribed_topic_ids  # to a subscriber
    assert set(result) == set(spec.members)


def with_targets(spec: GroupSpec, result: Result) -> GroupSpec:
    return GroupSpec(
        {
            m: MemberSubscription(s.subscribed_topic_ids, result.get(m, {}), s.instance_id)
            for m, s in spec.members.items()
        },
        spec.partitions_per_topic,
    )


@settings(deadline=None)
@given(groups())
def test_both_assignors_give_every_subscribed_partition_to_exactly_one_subscriber(
    spec: GroupSpec,
) -> None:
    check_complete_and_valid(spec, uniform_assign(spec))
    check_complete_and_valid(spec, range_assign(spec))


@settings(deadline=None)
@given(groups(homogeneous=True))
def test_uniform_sizes_differ_by_at_most_one_when_subscriptions_are_the_same(
    spec: GroupSpec,
) -> None:
    counts = sizes(uniform_assign(spec)).values()
    assert max(counts) - min(counts) <= 1


@settings(deadline=None)
@given(groups(homogeneous=False))
def test_uniform_leaves_no_member_two_short_of_another_on_a_topic_both_take(
    spec: GroupSpec,
) -> None:
    result = uniform_assign(spec)
    count = sizes(result)
    for (t, _), (owner,) in owners(result).items():
        for other, sub in spec.members.items():
            if t in sub.subscribed_topic_ids:
                assert count[other] >= count[owner] - 1


@settings(deadline=None)
@given(groups(homogeneous=True), st.text("ghij", min_size=1, max_size=3))
def test_uniform_moves_only_toward_a_joining_member(spec: GroupSpec, newcomer: str) -> None:
    before = uniform_assign(spec)
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    joined = with_targets(spec, before)
    joined = GroupSpec(
        {**joined.members, newcomer: MemberSubscription(subscribed)}, spec.partitions_per_topic
    )
    after = uniform_assign(joined)
    for m, assignment in before.items():
        for t, partitions in after[m].items():
            assert partitions <= assignment.get(t, frozenset())  # nobody else gains
    counts = sizes(after).values()
    assert max(counts) - min(counts) <= 1


@settings(deadline=None)
@given(groups(homogeneous=True), st.data())
def test_uniform_moves_only_a_leaving_members_partitions(
    spec: GroupSpec, data: st.DataObject
) -> None:
    before = uniform_assign(spec)
    if len(spec.members) < 2:
        return
    leaving = data.draw(st.sampled_from(sorted(spec.members)))
    rest = with_targets(spec, before)
    rest = GroupSpec(
        {m: s for m, s in rest.members.items() if m != leaving}, spec.partitions_per_topic
    )
    after = uniform_assign(rest)
    for m, assignment in after.items():
        for t, partitions in before[m].items():
            assert partitions <= assignment.get(t, frozenset())  # nobody else loses


@settings(deadline=None)
@given(groups())
def test_uniform_is_stable_once_balanced(spec: GroupSpec) -> None:
    first = uniform_assign(spec)
    assert uniform_assign(with_targets(spec, first)) == first


@settings(deadline=None)
@given(groups())
def test_assignors_do_not_depend_on_the_order_members_are_listed(spec: GroupSpec) -> None:
    reordered = GroupSpec(dict(reversed(list(spec.members.items()))), spec.partitions_per_topic)
    assert uniform_assign(reordered) == uniform_assign(spec)
    assert range_assign(reordered) == range_assign(spec)


@settings(deadline=None)
@given(st.integers(1, 6), st.integers(1, 20), st.integers(1, 3))
def test_range_co_partitions_topics_of_the_same_size(
    members: int, partitions: int, topics: int
) -> None:
    spec = GroupSpec(
        {f"m{i}": MemberSubscription(frozenset(TOPIC_IDS[:topics])) for i in range(members)},
        dict.fromkeys(TOPIC_IDS[:topics], partitions),
    )
    result = range_assign(spec)
    for m in spec.members:
        per_topic = [result[m].get(t, frozenset()) for t in TOPIC_IDS[:topics]]
        assert all(ps == per_topic[0] for ps in per_topic)  # the same partition numbers
        ps = sorted(per_topic[0])
        assert ps == list(range(ps[0], ps[0] + len(ps))) if ps else True  # a contiguous range


def test_range_orders_static_members_by_instance_id_first() -> None:
    t = TOPIC_IDS[0]
    spec = GroupSpec(
        {
            "a-dynamic": MemberSubscription(frozenset({t})),
            "z-static": MemberSubscription(frozenset({t}), {}, "instance-1"),
            "b-static": MemberSubscription(frozenset({t}), {}, "instance-2"),
        },
        {t: 6},
    )
    result = range_assign(spec)
    assert result["z-static"][t] == {0, 1}
    assert result["b-static"][t] == {2, 3}
    assert result["a-dynamic"][t] == {4, 5}


# -- where a group lives ---------------------------------------------------------------------


def test_java_string_hashcode_matches_java() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("Hello World") == -862545276
    assert java_string_hashcode("Aa") == java_string_hashcode("BB") == 2112
    # A character outside the BMP counts as its two UTF-16 code units.
    assert java_string_hashcode("\U0001f600") == 31 * 0xD83D + 0xDE00


def test_partition_for_is_kafkas_abs_of_the_hashcode_modulo_the_partitions() -> None:
    assert partition_for("Hello World", 50) == 862545276 % 50
    assert partition_for("hello", 50) == 99162322 % 50
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (Math.abs would stay negative).
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 7) == 0


@settings(deadline=None)
@given(st.text(), st.integers(1, 200))
def test_partition_for_is_a_valid_partition(group_id: str, n: int) -> None:
    assert 0 <= partition_for(group_id, n) < n
