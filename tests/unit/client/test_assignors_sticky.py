"""The sticky assignors: ``sticky`` (eager) and ``cooperative-sticky`` (KIP-429).

Kafka's javadoc examples and cases from Kafka's AbstractStickyAssignorTest and
CooperativeStickyAssignorTest (their expected assignments), where a member's past comes from
(owned partitions, generations, user data), and properties on random groups: balance (counts
within one with equal subscriptions, the least possible sum of squares otherwise, checked by
brute force), stickiness (with equal subscriptions the owned partitions that move are exactly
the surplus balance forces out), stability, and the cooperative rule (no partition is given to
a member while another still owns it; follow-up rebalances converge on a balanced assignment).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rillet.client.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    GroupMember,
    StickyAssignor,
    Subscription,
    validate_cooperative_assignment,
)
from rillet.client.consumer.assignors.abstract import ConsumerPartitionAssignor
from rillet.client.consumer.assignors.protocol import (
    StickyAssignorUserData,
    encode_cooperative_sticky_user_data,
    encode_sticky_assignor_user_data,
)
from rillet.client.consumer.assignors.sticky import AbstractStickyAssignor, MemberData
from rillet.types import TopicPartition

TP = TopicPartition
STICKY = (StickyAssignor, CooperativeStickyAssignor)
Counts = dict[str, int]


def member(
    member_id: str,
    topics: Sequence[str],
    owned: Sequence[TopicPartition] = (),
    generation: int = -1,
    user_data: bytes | None = None,
) -> GroupMember:
    return GroupMember(member_id, Subscription(tuple(topics), user_data, tuple(owned), generation))


def tps(spec: str) -> list[TopicPartition]:
    """'t0p0 t1p2' -> [TP('t0', 0), TP('t1', 2)] (Kafka's javadoc notation)."""
    return [TP(w.rsplit("p", 1)[0], int(w.rsplit("p", 1)[1])) for w in spec.split()]


def result(
    assignor: ConsumerPartitionAssignor, counts: Mapping[str, int], members: list[GroupMember]
) -> dict[str, list[TopicPartition]]:
    return {m: list(a.partitions) for m, a in assignor.assign(counts, members).items()}


def rejoin(
    members: list[GroupMember], assignment: Mapping[str, Assignment], generation: int
) -> list[GroupMember]:
    """The members rejoining with what they were assigned, in ``generation``."""
    return [
        GroupMember(
            m.member_id,
            Subscription(
                m.subscription.topics, None, assignment[m.member_id].partitions, generation
            ),
            m.group_instance_id,
        )
        for m in members
    ]


# -- Kafka's examples --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", STICKY)
def test_javadoc_example_1_a_member_leaves_and_the_others_keep_theirs(
    cls: type[AbstractStickyAssignor],
) -> None:
    counts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    topics = list(counts)
    members = [member("C0", topics), member("C1", topics), member("C2", topics)]
    first = cls().assign(counts, members)
    assert {m: list(a.partitions) for m, a in first.items()} == {
        "C0": tps("t0p0 t1p1 t3p0"),
        "C1": tps("t0p1 t2p0 t3p1"),
        "C2": tps("t1p0 t2p1"),
    }
    survivors = [m for m in rejoin(members, first, 1) if m.member_id != "C1"]
    # C1's partitions are owned by nobody now, so cooperative gives them out at once too.
    assert result(cls(), counts, survivors) == {
        "C0": tps("t0p0 t1p1 t2p0 t3p0"),
        "C2": tps("t0p1 t1p0 t2p1 t3p1"),
    }


@pytest.mark.parametrize("cls", STICKY)
def test_javadoc_example_2_unequal_subscriptions(cls: type[AbstractStickyAssignor]) -> None:
    counts = {"t0": 1, "t1": 2, "t2": 3}
    members = [
        member("C0", ["t0"]),
        member("C1", ["t0", "t1"]),
        member("C2", ["t0", "t1", "t2"]),
    ]
    first = cls().assign(counts, members)
    assert {m: list(a.partitions) for m, a in first.items()} == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0 t1p1"),
        "C2": tps("t2p0 t2p1 t2p2"),
    }
    survivors = rejoin(members, first, 1)[1:]
    assert result(cls(), counts, survivors) == {
        "C1": tps("t0p0 t1p0 t1p1"),
        "C2": tps("t2p0 t2p1 t2p2"),
    }


T12 = ["topic1", "topic2"]
# (partition counts, members, sticky's assignment, partitions cooperative withholds): cases of
# Kafka's AbstractStickyAssignorTest, whose expected assignments and partitionsTransferringOwnership
# these are.
KAFKA_CASES = {
    "consumer owning min quota, expected max quota": (
        {"topic1": 2, "topic2": 3},
        [
            member("consumer1", T12, tps("topic1p0 topic2p1"), 1),
            member("consumer2", T12, tps("topic1p1 topic2p2"), 1),
        ],
        {"consumer1": tps("topic1p0 topic2p0 topic2p1"), "consumer2": tps("topic1p1 topic2p2")},
        [],
    ),
    "max quota members more than expected": (
        {"topic1": 2, "topic2": 2},
        [
            member("consumer1", T12, tps("topic1p0 topic2p0"), 1),
            member("consumer2", T12, tps("topic1p1 topic2p1"), 1),
            member("consumer3", T12, [], 1),
        ],
        {
            "consumer1": tps("topic1p0"),
            "consumer2": tps("topic1p1 topic2p1"),
            "consumer3": tps("topic2p0"),
        },
        tps("topic2p0"),
    ),
    "all consumers under min quota": (
        {"topic1": 2, "topic2": 3},
        [
            member("consumer1", T12, tps("topic1p0"), 1),
            member("consumer2", T12, tps("topic1p1"), 1),
            member("consumer3", T12, [], 1),
        ],
        {
            "consumer1": tps("topic1p0 topic2p1"),
            "consumer2": tps("topic1p1 topic2p2"),
            "consumer3": tps("topic2p0"),
        },
        [],
    ),
    "all consumers reach expected quota": (
        {"topic": 4},
        [
            member("consumer1", ["topic"], tps("topicp0 topicp1"), 1),
            member("consumer2", ["topic"], tps("topicp2"), 1),
            member("consumer3", ["topic"], [], 1),
        ],
        {
            "consumer1": tps("topicp0 topicp1"),
            "consumer2": tps("topicp2"),
            "consumer3": tps("topicp3"),
        },
        [],
    ),
    "add a consumer to one topic": (
        {"topic": 3},
        [
            member("consumer1", ["topic"], tps("topicp0 topicp1 topicp2"), 1),
            member("consumer2", ["topic"], [], 1),
        ],
        {"consumer1": tps("topicp0 topicp1"), "consumer2": tps("topicp2")},
        tps("topicp2"),
    ),
    "stale generation's claims are invalidated": (
        {"topic": 3, "topic2": 3},
        [
            member("consumer1", ["topic", "topic2"], tps("topicp0 topicp2 topic2p1"), 10),
            member("consumer2", ["topic", "topic2"], tps("topicp0 topicp2 topic2p1"), 9),
        ],
        {
            "consumer1": tps("topicp0 topicp2 topic2p1"),
            "consumer2": tps("topicp1 topic2p0 topic2p2"),
        },
        [],
    ),
    "no generation's claims are invalidated": (
        {"topic": 3, "topic2": 3},
        [
            member("consumer1", ["topic", "topic2"], tps("topicp0 topicp2 topic2p1"), 10),
            member("consumer2", ["topic", "topic2"], tps("topicp0 topicp2 topic2p1"), -1),
        ],
        {
            "consumer1": tps("topicp0 topicp2 topic2p1"),
            "consumer2": tps("topicp1 topic2p0 topic2p2"),
        },
        [],
    ),
    "multiple generations' claims go to the highest": (
        {"topic": 3, "topic2": 3},
        [
            member("consumer1", ["topic", "topic2"], tps("topicp0 topic2p1 topicp1"), 10),
            member("consumer2", ["topic", "topic2"], tps("topicp0 topic2p1 topic2p2"), 8),
        ],
        {
            "consumer1": tps("topicp0 topicp1 topic2p1"),
            "consumer2": tps("topicp2 topic2p0 topic2p2"),
        },
        [],
    ),
    "partitions go to the highest generation": (
        {"topic": 3, "topic2": 3, "topic3": 3},
        [
            member(
                "consumer1", ["topic", "topic2", "topic3"], tps("topicp0 topic2p0 topic3p0"), 10
            ),
            member("consumer2", ["topic", "topic2", "topic3"], tps("topicp1 topic2p1 topic3p1"), 9),
            member(
                "consumer3", ["topic", "topic2", "topic3"], tps("topic2p1 topic3p0 topic3p2"), 8
            ),
        ],
        {
            "consumer1": tps("topicp0 topic2p0 topic3p0"),
            "consumer2": tps("topicp1 topic2p1 topic3p1"),
            "consumer3": tps("topicp2 topic2p2 topic3p2"),
        },
        [],
    ),
    "claimed by two members of one generation": (
        {"topic": 3},
        [
            member("consumer1", ["topic"], tps("topicp0 topicp1"), 1),
            member("consumer2", ["topic"], tps("topicp0 topicp2"), 1),
            member("consumer3", ["topic"], [], 1),
        ],
        {"consumer1": tps("topicp1"), "consumer2": tps("topicp2"), "consumer3": tps("topicp0")},
        tps("topicp0"),
    ),
    "claimed by two members of one generation, unequal shares": (
        {"topic": 4},
        [
            member("consumer1", ["topic"], tps("topicp0 topicp1"), 1),
            member("consumer2", ["topic"], tps("topicp0 topicp2"), 1),
            member("consumer3", ["topic"], [], 1),
        ],
        {
            "consumer1": tps("topicp1 topicp3"),
            "consumer2": tps("topicp2"),
            "consumer3": tps("topicp0"),
        },
        tps("topicp0"),
    ),
}


@pytest.mark.parametrize("case", sorted(KAFKA_CASES))
def test_kafka_cases(case: str) -> None:
    counts, members, expected, withheld = KAFKA_CASES[case]
    assert result(StickyAssignor(), counts, members) == expected
    cooperative = result(CooperativeStickyAssignor(), counts, members)
    assert cooperative == {
        m: [tp for tp in tps_ if tp not in withheld] for m, tps_ in expected.items()
    }
    validate_cooperative_assignment(members, CooperativeStickyAssignor().assign(counts, members))


def test_no_reassignment_of_current_members_partitions() -> None:
    # Kafka's testNoReassignmentOnCurrentMembers: the member without a generation gets what the
    # others (each of a different generation) do not own.
    topics = ["topic", "topic1", "topic2", "topic3"]
    counts = dict.fromkeys(topics, 3)
    members = [
        member("consumer1", topics, [], -1),
        member("consumer2", topics, tps("topicp0 topic2p0 topic1p0"), 9),
        member("consumer3", topics, tps("topic3p2 topic2p2 topic1p1"), 8),
        member("consumer4", topics, tps("topic3p1 topicp1 topicp2"), 7),
    ]
    for cls in STICKY:
        got = result(cls(), counts, members)
        assert got["consumer1"] == tps("topic1p2 topic2p1 topic3p0")
        for m in members[1:]:
            assert got[m.member_id] == sorted(m.subscription.owned_partitions)


def test_unequal_subscriptions_hand_partitions_along_a_chain() -> None:
    # 3, 2 and 1 partitions: no member can give one to a member with 2 fewer directly (only A
    # and B read x), but A -> B (an x partition) and B -> C (a y partition) balance them.
    members = [
        member("A", ["x"], tps("xp0 xp1 xp2"), 1),
        member("B", ["x", "y"], tps("yp0 yp1"), 1),
        member("C", ["y"], tps("yp2"), 1),
    ]
    assert result(StickyAssignor(), {"x": 3, "y": 3}, members) == {
        "A": tps("xp0 xp1"),
        "B": tps("xp2 yp0"),
        "C": tps("yp1 yp2"),
    }


def test_a_partition_got_in_this_rebalance_is_handed_on_before_an_owned_one() -> None:
    # y0 is nobody's and goes to B (the least loaded of B and C, by id); when B then gives a
    # y partition to C it gives y0, not y1 which it owned.
    members = [
        member("A", ["x"], tps("xp0 xp1 xp2 xp3"), 1),
        member("B", ["x", "y"], tps("yp1"), 1),
        member("C", ["y"], tps("yp2"), 1),
    ]
    assert result(StickyAssignor(), {"x": 4, "y": 3}, members) == {
        "A": tps("xp0 xp1 xp2"),
        "B": tps("xp3 yp1"),
        "C": tps("yp0 yp2"),
    }


def test_of_the_largest_members_the_one_that_moves_least_gives() -> None:
    # m0 and m2 both have 2 and m1 none; only m2 can give to m1 directly (t0-0), and then
    # m0 keeps both of its partitions.
    members = [
        member("m0", ["t1"], tps("t1p0 t1p2"), 1),
        member("m1", ["t0"], [], 1),
        member("m2", ["t0", "t1"], tps("t0p0"), 1),
    ]
    assert result(StickyAssignor(), {"t0": 1, "t1": 3}, members) == {
        "m0": tps("t1p0 t1p2"),
        "m1": tps("t0p0"),
        "m2": tps("t1p1"),
    }


# -- where a member's past comes from ----------------------------------------------------------


def test_sticky_reads_kafka_clients_user_data_when_no_owned_partitions_are_sent() -> None:
    # A Kafka eager member revokes before joining: its subscription owns nothing and its
    # StickyAssignor user data carries the previous assignment.
    def java_member(member_id: str, previous: str, generation: int | None) -> GroupMember:
        data = encode_sticky_assignor_user_data(
            StickyAssignorUserData(tuple(tps(previous)), generation)
        )
        return member(member_id, ["t"], user_data=data)

    members = [
        java_member("a", "tp3 tp4 tp5", 4),
        java_member("b", "tp0 tp1 tp2", None),
        member("c", ["t"]),
    ]
    assert result(StickyAssignor(), {"t": 6}, members) == {
        "a": tps("tp3 tp4"),
        "b": tps("tp0 tp1"),
        "c": tps("tp2 tp5"),
    }
    sticky = StickyAssignor()
    assert sticky.member_data(members[0].subscription) == MemberData(tuple(tps("tp3 tp4 tp5")), 4)
    assert sticky.member_data(members[1].subscription) == MemberData(tuple(tps("tp0 tp1 tp2")), -1)
    # Undecodable user data is ignored, as Kafka's leader ignores it.
    assert sticky.member_data(member("x", ["t"], user_data=b"\x00").subscription) == MemberData(())


def test_sticky_prefers_owned_partitions_over_user_data() -> None:
    data = encode_sticky_assignor_user_data(StickyAssignorUserData(tuple(tps("tp0")), 3))
    sticky = StickyAssignor()
    owned = member("m", ["t"], tps("tp1"), 5, data)
    assert sticky.member_data(owned.subscription) == MemberData(tuple(tps("tp1")), 5)
    # A v1 subscription has owned partitions but no generation: the user data's is used.
    v1 = member("m", ["t"], tps("tp1"), -1, data)
    assert sticky.member_data(v1.subscription) == MemberData(tuple(tps("tp1")), 3)


def test_sticky_user_data_follows_on_assignment() -> None:
    sticky = StickyAssignor()
    assert sticky.subscription_user_data({"t"}) is None
    sticky.on_assignment(Assignment(tuple(tps("tp2 tp0"))), 6)
    data = sticky.subscription_user_data({"t"})
    assert data == encode_sticky_assignor_user_data(
        StickyAssignorUserData(tuple(tps("tp0 tp2")), 6)
    )


def test_cooperative_generation_from_the_subscription_else_its_user_data() -> None:
    # Kafka's testEncodeAndDecodeGeneration and testMemberDataWithInconsistentData.
    assignor = CooperativeStickyAssignor()
    assert assignor.subscription_user_data({"t"}) == encode_cooperative_sticky_user_data(-1)
    assignor.on_assignment(Assignment(tuple(tps("tp1"))), 10)
    user_data = assignor.subscription_user_data({"t"})
    assert user_data == encode_cooperative_sticky_user_data(10)
    v1 = member("m", ["t"], tps("tp0"), -1, user_data)
    assert assignor.member_data(v1.subscription) == MemberData(tuple(tps("tp0")), 10)
    v2 = member("m", ["t"], tps("tp0"), 12, user_data)
    assert assignor.member_data(v2.subscription) == MemberData(tuple(tps("tp0")), 12)
    assert assignor.member_data(member("m", ["t"]).subscription) == MemberData((), -1)


# -- properties --------------------------------------------------------------------------------


@st.composite
def groups(
    draw: st.DrawFn, equal: bool, max_members: int = 6, max_partitions: int = 7
) -> tuple[Counts, list[GroupMember]]:
    topics = [f"t{i}" for i in range(draw(st.integers(1, 3)))]
    counts = {t: draw(st.integers(0, max_partitions)) for t in topics}
    shared = draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
    members = [
        member(
            f"m{i}",
            shared if equal else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)),
        )
        for i in range(draw(st.integers(1, max_members)))
    ]
    return counts, members


def with_disjoint_ownership(
    data: st.DataObject, counts: Counts, members: list[GroupMember]
) -> list[GroupMember]:
    """Each partition owned by at most one member (of any topics, subscribed or not), as
    after a completed rebalance; generation 1."""
    owned: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    for topic, n in counts.items():
        for p in range(n):
            owner = data.draw(st.none() | st.sampled_from([m.member_id for m in members]))
            if owner is not None:
                owned[owner].append(TP(topic, p))
    return [
        GroupMember(
            m.member_id, Subscription(m.subscription.topics, None, tuple(owned[m.member_id]), 1)
        )
        for m in members
    ]


def sum_of_squares(assignment: Mapping[str, Sequence[TopicPartition] | Assignment]) -> int:
    return sum(
        len(a.partitions if isinstance(a, Assignment) else a) ** 2 for a in assignment.values()
    )


def least_sum_of_squares(counts: Counts, members: list[GroupMember]) -> int:
    """Brute force over every way to give each partition to one of its subscribers."""
    partitions = [
        (t, p)
        for t, n in counts.items()
        for p in range(n)
        if any(t in m.subscription.topics for m in members)
    ]
    choices = [[m.member_id for m in members if t in m.subscription.topics] for t, _ in partitions]
    best = None
    for pick in itertools.product(*choices):
        sizes = {m.member_id: 0 for m in members}
        for member_id in pick:
            sizes[member_id] += 1
        total = sum(v * v for v in sizes.values())
        best = total if best is None else min(best, total)
    return best or 0


def complete(counts: Counts, members: list[GroupMember], got: Mapping[str, Assignment]) -> None:
    subscribed = {t for m in members for t in m.subscription.topics}
    expected = sorted(TP(t, p) for t, n in counts.items() if t in subscribed for p in range(n))
    seen = sorted(tp for a in got.values() for tp in a.partitions)
    assert seen == expected
    for m in members:
        assert all(tp.topic in m.subscription.topics for tp in got[m.member_id].partitions)


def settle(
    cls: type[AbstractStickyAssignor], counts: Counts, members: list[GroupMember]
) -> tuple[dict[str, Assignment], int]:
    """Rebalance until no member has anything to revoke (cooperative: the follow-up
    rebalances), checking Kafka's cooperative rule each round. Returns the final assignment
    and the number of rebalances."""
    generation = max([m.subscription.generation_id for m in members] + [0])
    for rounds in range(1, 5):
        got = cls().assign(counts, members)
        if cls is CooperativeStickyAssignor:
            validate_cooperative_assignment(members, got)
        revoking = any(
            set(m.subscription.owned_partitions) - set(got[m.member_id].partitions) for m in members
        )
        generation += 1
        members = rejoin(members, got, generation)
        if not revoking or cls is StickyAssignor:
            return got, rounds
    raise AssertionError("cooperative rebalances did not settle in 4 rounds")


@pytest.mark.parametrize("cls", STICKY)
@given(data=st.data())
def test_unequal_subscriptions_get_the_least_possible_sum_of_squares(
    cls: type[AbstractStickyAssignor], data: st.DataObject
) -> None:
    counts, members = data.draw(groups(equal=False, max_members=3, max_partitions=3))
    owned = with_disjoint_ownership(data, counts, members)
    got, _ = settle(cls, counts, owned)
    complete(counts, owned, got)
    assert sum_of_squares(got) == least_sum_of_squares(counts, owned)


def surplus(counts: Counts, members: list[GroupMember]) -> int:
    """With equal subscriptions: the fewest owned partitions that must move for the counts to
    differ by at most one. The n % m largest owners may keep one more than n // m."""
    topics = set(members[0].subscription.topics)
    total = sum(n for t, n in counts.items() if t in topics)
    each, extra = divmod(total, len(members))
    kept = sorted(
        (sum(1 for tp in m.subscription.owned_partitions if tp.topic in topics) for m in members),
        reverse=True,
    )
    return sum(max(0, k - each - (i < extra)) for i, k in enumerate(kept))


def moved(members: list[GroupMember], got: Mapping[str, Assignment]) -> int:
    return sum(
        len(set(m.subscription.owned_partitions) - set(got[m.member_id].partitions))
        for m in members
    )


@pytest.mark.parametrize("cls", STICKY)
@given(data=st.data())
def test_equal_subscriptions_move_only_the_surplus(
    cls: type[AbstractStickyAssignor], data: st.DataObject
) -> None:
    counts, members = data.draw(groups(equal=True, max_members=5))
    owned = with_disjoint_ownership(data, counts, members)
    # Only partitions of subscribed topics count: others are dropped whatever happens.
    topics = set(members[0].subscription.topics)
    owned = [
        GroupMember(
            m.member_id,
            Subscription(
                m.subscription.topics,
                None,
                tuple(tp for tp in m.subscription.owned_partitions if tp.topic in topics),
                1,
            ),
        )
        for m in owned
    ]
    got, _ = settle(cls, counts, owned)
    complete(counts, owned, got)
    sizes = [len(a.partitions) for a in got.values()]
    assert max(sizes) - min(sizes) <= 1
    assert moved(owned, got) == surplus(counts, owned)


@pytest.mark.parametrize("cls", STICKY)
@given(group=groups(equal=True, max_members=6), change=st.sampled_from(["leave", "join"]))
def test_a_member_leaving_or_joining_moves_only_what_balance_needs(
    cls: type[AbstractStickyAssignor], group: tuple[Counts, list[GroupMember]], change: str
) -> None:
    counts, members = group
    before, _ = settle(cls, counts, members)
    rejoined = rejoin(members, before, 5)
    if change == "leave":
        rejoined = rejoined[1:]
        if not rejoined:
            return
    else:
        rejoined.append(member("new", members[0].subscription.topics))
    after, rounds = settle(cls, counts, rejoined)
    assert moved(rejoined, after) == surplus(counts, rejoined)
    # One rebalance when nothing has to move between members, else one follow-up (cooperative).
    assert rounds <= 2


@pytest.mark.parametrize("cls", STICKY)
@given(group=groups(equal=False))
def test_a_settled_assignment_is_kept_as_it_is(
    cls: type[AbstractStickyAssignor], group: tuple[Counts, list[GroupMember]]
) -> None:
    counts, members = group
    settled, _ = settle(cls, counts, members)
    again = cls().assign(counts, rejoin(members, settled, 9))
    assert again == settled


@st.composite
def claims(draw: st.DrawFn) -> tuple[Counts, list[GroupMember]]:
    """Members whose owned partitions overlap, with generations that may tie: what a leader
    sees after zombies, missed rebalances and restarts."""
    counts, members = draw(groups(equal=False))
    every = [TP(t, p) for t, n in counts.items() for p in range(n + 1)]  # one beyond the end
    out = []
    for m in members:
        owned = draw(st.lists(st.sampled_from(every), unique=True)) if every else []
        generation = draw(st.integers(-1, 3))
        out.append(member(m.member_id, m.subscription.topics, owned, generation))
    return counts, out


@given(group=claims())
def test_cooperative_never_gives_a_partition_another_member_still_owns(
    group: tuple[Counts, list[GroupMember]],
) -> None:
    counts, members = group
    got = CooperativeStickyAssignor().assign(counts, members)
    validate_cooperative_assignment(members, got)
    for m in members:
        for tp in got[m.member_id].partitions:
            others = [o for o in members if o is not m and tp in o.subscription.owned_partitions]
            if not others:
                continue
            # Only the newest claimant, alone in its generation, may keep it.
            assert tp in m.subscription.owned_partitions
            assert all(o.subscription.generation_id < m.subscription.generation_id for o in others)
    # Eager sticky gives out everything, each partition once, whatever the claims say.
    complete(counts, members, StickyAssignor().assign(counts, members))


@given(group=claims())
def test_cooperative_is_sticky_minus_the_partitions_in_transit(
    group: tuple[Counts, list[GroupMember]],
) -> None:
    counts, members = group
    sticky = StickyAssignor().assign(counts, members)
    cooperative = CooperativeStickyAssignor().assign(counts, members)
    for m in members:
        assert set(cooperative[m.member_id].partitions) <= set(sticky[m.member_id].partitions)
    # And the follow-up rebalances settle on a complete, valid assignment.
    final, _ = settle(CooperativeStickyAssignor, counts, members)
    complete(counts, members, final)


def test_a_large_group_assigns_and_rebalances() -> None:
    # 60 members on 30 topics of 40 partitions (1,200), half of them reading half the topics;
    # then one leaves. Checks only completeness and stickiness: timings belong in bench/.
    topics = [f"topic-{i:02d}" for i in range(30)]
    counts = dict.fromkeys(topics, 40)
    members = [
        member(f"member-{i:02d}", topics if i % 2 else topics[: 15 + i % 7]) for i in range(60)
    ]
    first, _ = settle(CooperativeStickyAssignor, counts, members)
    complete(counts, members, first)
    survivors = rejoin(members, first, 3)[1:]
    second, rounds = settle(CooperativeStickyAssignor, counts, survivors)
    complete(counts, survivors, second)
    assert rounds <= 2
    kept = sum(
        len(set(m.subscription.owned_partitions) & set(second[m.member_id].partitions))
        for m in survivors
    )
    assert kept >= sum(len(m.subscription.owned_partitions) for m in survivors) - 40
