"""The classic-protocol assignors' shared interface, range and round robin, and what the
consumer does around them (choosing the rebalance protocol, JoinGroup's protocol list, the
leader's assignment and its cooperative check). Examples are Kafka's javadoc's; range and round
robin are also compared with kafka-python's on random groups. The sticky assignors are in
test_assignors_sticky.py."""

from __future__ import annotations

import random
import warnings
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rillet.client.consumer.assignors import (
    ASSIGNORS,
    Assignment,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupMember,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    all_subscribed_topics,
    choose_rebalance_protocol,
    create_assignors,
    decode_subscription,
    join_group_protocols,
    lookup_assignor,
    perform_assignment,
    validate_cooperative_assignment,
)
from rillet.client.consumer.assignors.protocol import decode_sticky_assignor_user_data
from rillet.errors import IllegalStateError, InvalidConfigurationError
from rillet.types import TopicPartition

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from kafka.coordinator.assignors.range import RangePartitionAssignor as KpRange
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KpRoundRobin

TP = TopicPartition
ALL = (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)


def member(
    member_id: str,
    topics: Sequence[str],
    owned: Sequence[TopicPartition] = (),
    generation: int = -1,
    instance: str | None = None,
) -> GroupMember:
    return GroupMember(
        member_id, Subscription(tuple(topics), None, tuple(owned), generation), instance
    )


def tps(spec: str) -> list[TopicPartition]:
    """'t0p0 t1p2' -> [TP('t0', 0), TP('t1', 2)] (Kafka's javadoc notation)."""
    out = []
    for word in spec.split():
        topic, partition = word.rsplit("p", 1)
        out.append(TP(topic, int(partition)))
    return out


def result(
    assignor: ConsumerPartitionAssignor, counts: Mapping[str, int], members: list[GroupMember]
) -> dict[str, list[TopicPartition]]:
    return {m: list(a.partitions) for m, a in assignor.assign(counts, members).items()}


# -- Kafka's documented examples ---------------------------------------------------------------


def test_range_javadoc_example() -> None:
    members = [member("C0", ["t0", "t1"]), member("C1", ["t0", "t1"])]
    assert result(RangeAssignor(), {"t0": 3, "t1": 3}, members) == {
        "C0": tps("t0p0 t0p1 t1p0 t1p1"),
        "C1": tps("t0p2 t1p2"),
    }


def test_range_orders_static_members_by_group_instance_id() -> None:
    # The javadoc's rolling bounce: new member ids C3 (was C0) and C2 (was C1) keep their ranges
    # because the instance ids I0 and I1 decide the order.
    members = [member("C3", ["t0", "t1"], instance="I0"), member("C2", ["t0", "t1"], instance="I1")]
    assert result(RangeAssignor(), {"t0": 3, "t1": 3}, members) == {
        "C3": tps("t0p0 t0p1 t1p0 t1p1"),
        "C2": tps("t0p2 t1p2"),
    }
    # Static members come before dynamic ones whatever their ids.
    mixed = [member("a", ["t"]), member("z", ["t"], instance="i")]
    assert result(RangeAssignor(), {"t": 3}, mixed) == {"a": tps("tp2"), "z": tps("tp0 tp1")}


def test_roundrobin_javadoc_examples() -> None:
    members = [member("C0", ["t0", "t1"]), member("C1", ["t0", "t1"])]
    assert result(RoundRobinAssignor(), {"t0": 3, "t1": 3}, members) == {
        "C0": tps("t0p0 t0p2 t1p1"),
        "C1": tps("t0p1 t1p0 t1p2"),
    }
    unequal = [
        member("C0", ["t0"]),
        member("C1", ["t0", "t1"]),
        member("C2", ["t0", "t1", "t2"]),
    ]
    assert result(RoundRobinAssignor(), {"t0": 1, "t1": 2, "t2": 3}, unequal) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1 t2p0 t2p1 t2p2"),
    }
    static = [
        member("C5", ["t0", "t1"], instance="I0"),
        member("C3", ["t0", "t1"], instance="I1"),
        member("C4", ["t0", "t1"], instance="I2"),
    ]
    assert result(RoundRobinAssignor(), {"t0": 3, "t1": 3}, static) == {
        "C5": tps("t0p0 t1p0"),
        "C3": tps("t0p1 t1p1"),
        "C4": tps("t0p2 t1p2"),
    }


@pytest.mark.parametrize("cls", ALL)
def test_topics_without_metadata_and_members_without_topics(
    cls: type[ConsumerPartitionAssignor],
) -> None:
    members = [member("a", ["t", "missing", "empty"]), member("b", [])]
    assert result(cls(), {"t": 2, "empty": 0, "unsubscribed": 4}, members) == {
        "a": tps("tp0 tp1"),
        "b": [],
    }
    assert cls().assign({"t": 2}, []) == {}


@pytest.mark.parametrize("cls", ALL)
def test_duplicate_member_ids_are_refused(cls: type[ConsumerPartitionAssignor]) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        cls().assign({"t": 1}, [member("a", ["t"]), member("a", ["t"])])


# -- properties of all four --------------------------------------------------------------------


@st.composite
def groups(
    draw: st.DrawFn, equal: bool = False, max_members: int = 6
) -> tuple[dict[str, int], list[GroupMember]]:
    """Partition counts of up to 4 topics (some absent or empty) and members subscribed to
    some of them (all to the same ones when ``equal``), some static."""
    topics = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    counts = {t: draw(st.integers(0, 7)) for t in topics if draw(st.integers(0, 5))}
    n = draw(st.integers(1, max_members))
    shared = draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
    members = []
    for i in range(n):
        subscribed = (
            shared if equal else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        )
        instance = draw(st.none() | st.just(f"i{(i * 7) % n}"))
        members.append(
            member(f"m{draw(st.integers(0, 99)):02d}-{i}", subscribed, instance=instance)
        )
    return counts, members


def check_valid(
    counts: Mapping[str, int],
    members: list[GroupMember],
    assignment: Mapping[str, Assignment],
    complete: bool = True,
) -> None:
    """Every member has an entry with its partitions sorted; each partition of a subscribed
    topic goes to at most one member (exactly one when ``complete``), and only to a subscriber
    of its topic."""
    assert set(assignment) == {m.member_id for m in members}
    subscribed = all_subscribed_topics(members)
    expected = {TP(t, p) for t, n in counts.items() if t in subscribed for p in range(n)}
    seen: list[TopicPartition] = []
    for m in members:
        got = list(assignment[m.member_id].partitions)
        assert got == sorted(got)
        assert all(tp.topic in m.subscription.topics for tp in got)
        seen.extend(got)
    assert len(seen) == len(set(seen))
    assert set(seen) <= expected
    if complete:
        assert set(seen) == expected


@pytest.mark.parametrize("cls", ALL)
@given(group=groups(), seed=st.integers(0, 2**32))
def test_every_partition_once_to_a_subscriber_whatever_the_input_order(
    cls: type[ConsumerPartitionAssignor],
    group: tuple[dict[str, int], list[GroupMember]],
    seed: int,
) -> None:
    counts, members = group
    assignment = cls().assign(counts, members)
    # Without owned partitions even cooperative-sticky gives everything out at once.
    check_valid(counts, members, assignment)
    shuffled = members[:]
    random.Random(seed).shuffle(shuffled)
    reordered_counts = dict(reversed(list(counts.items())))
    assert cls().assign(reordered_counts, shuffled) == assignment
    assert list(cls().assign(reordered_counts, shuffled)) == list(assignment)


def counts_of(assignment: Mapping[str, Assignment]) -> list[int]:
    return [len(a.partitions) for a in assignment.values()]


@pytest.mark.parametrize("cls", (RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor))
@given(group=groups(equal=True))
def test_equal_subscriptions_differ_by_at_most_one(
    cls: type[ConsumerPartitionAssignor], group: tuple[dict[str, int], list[GroupMember]]
) -> None:
    counts, members = group
    sizes = counts_of(cls().assign(counts, members))
    assert max(sizes) - min(sizes) <= 1


@given(group=groups())
def test_range_splits_each_topic_in_contiguous_ranges_first_members_one_more(
    group: tuple[dict[str, int], list[GroupMember]],
) -> None:
    counts, members = group
    assignment = RangeAssignor().assign(counts, members)
    static = sorted(
        (m for m in members if m.group_instance_id),
        key=lambda m: (m.group_instance_id, m.member_id),
    )
    dynamic = sorted((m for m in members if not m.group_instance_id), key=lambda m: m.member_id)
    for topic, n in counts.items():
        subscribers = [m for m in static + dynamic if topic in m.subscription.topics]
        if not subscribers:
            continue
        each, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            got = [tp.partition for tp in assignment[m.member_id].partitions if tp.topic == topic]
            length = each + (i < extra)
            assert got == list(range(start, start + length))
            start += length


# -- against kafka-python's range and round robin ----------------------------------------------


def kafka_python_assign(
    kp: type[object], counts: Mapping[str, int], members: list[GroupMember]
) -> dict[str, list[TopicPartition]]:
    cluster = SimpleNamespace(
        partitions_for_topic=lambda t: set(range(counts[t])) if t in counts else None
    )
    kp_members = [
        SimpleNamespace(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=SimpleNamespace(topics=list(m.subscription.topics)),
        )
        for m in members
    ]
    out = kp.assign(cluster, kp_members)  # type: ignore[attr-defined]
    return {
        member_id: sorted(TP(tp.topic, tp.partition) for tp in a.partitions())
        for member_id, a in out.items()
    }


def same_kind(members: list[GroupMember], static: bool) -> list[GroupMember]:
    """kafka-python groups static and dynamic members with an unsorted groupby, which orders
    them as Kafka does only when all members are of one kind."""
    return [
        GroupMember(m.member_id, m.subscription, f"inst-{m.member_id}"[::-1] if static else None)
        for m in members
    ]


@given(group=groups(), static=st.booleans())
def test_range_equals_kafka_pythons(
    group: tuple[dict[str, int], list[GroupMember]], static: bool
) -> None:
    counts, members = group
    members = same_kind(members, static)
    assert result(RangeAssignor(), counts, members) == kafka_python_assign(KpRange, counts, members)


@given(group=groups(equal=True), static=st.booleans())
def test_roundrobin_equals_kafka_pythons(
    group: tuple[dict[str, int], list[GroupMember]], static: bool
) -> None:
    # Equal subscriptions only: kafka-python's loop that skips unsubscribed members assigns
    # the member tuple to member_id, and fails once it has to skip one.
    counts, members = group
    members = same_kind(members, static)
    assert result(RoundRobinAssignor(), counts, members) == kafka_python_assign(
        KpRoundRobin, counts, members
    )


# -- the consumer's side: configuration, JoinGroup, the leader ---------------------------------


def test_create_assignors_by_name_java_class_class_or_instance() -> None:
    sticky = StickyAssignor()
    assignors = create_assignors(
        [
            "range",
            "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            sticky,
            CooperativeStickyAssignor,
        ]
    )
    assert [a.name for a in assignors] == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    assert assignors[2] is sticky
    assert sorted(ASSIGNORS) == ["cooperative-sticky", "range", "roundrobin", "sticky"]
    with pytest.raises(InvalidConfigurationError, match="unknown assignor 'uniform'"):
        create_assignors(["uniform"])
    with pytest.raises(InvalidConfigurationError, match="more than one assignor"):
        create_assignors(["range", RangeAssignor])
    with pytest.raises(InvalidConfigurationError, match="not an assignor"):
        create_assignors([42])  # type: ignore[list-item]


def test_the_rebalance_protocol_is_the_highest_all_assignors_support() -> None:
    assert choose_rebalance_protocol(create_assignors(["range"])) is RebalanceProtocol.EAGER
    cooperative = create_assignors(["cooperative-sticky"])
    assert choose_rebalance_protocol(cooperative) is RebalanceProtocol.COOPERATIVE
    # Kafka's upgrade path: cooperative-sticky listed with range stays EAGER.
    upgrading = create_assignors(["cooperative-sticky", "range"])
    assert choose_rebalance_protocol(upgrading) is RebalanceProtocol.EAGER

    class CooperativeOnly(RangeAssignor):
        name = "cooperative-only"
        supported_protocols = (RebalanceProtocol.COOPERATIVE,)

    with pytest.raises(InvalidConfigurationError, match="commonly supported"):
        choose_rebalance_protocol([CooperativeOnly(), RangeAssignor()])
    with pytest.raises(InvalidConfigurationError, match="at least one"):
        choose_rebalance_protocol([])


def test_join_group_protocols_one_subscription_per_assignor_in_order() -> None:
    sticky = StickyAssignor()
    sticky.on_assignment(Assignment((TP("t", 1),)), generation_id=4)
    protocols = join_group_protocols(
        [CooperativeStickyAssignor(), sticky, RangeAssignor()],
        topics={"u", "t"},
        owned_partitions=[TP("t", 1), TP("t", 0)],
        generation_id=4,
        rack_id="r1",
    )
    assert [p.name for p in protocols] == ["cooperative-sticky", "sticky", "range"]
    subscriptions = [decode_subscription(p.metadata) for p in protocols]
    for s in subscriptions:
        assert s.topics == ("t", "u")
        assert s.owned_partitions == (TP("t", 0), TP("t", 1))
        assert (s.generation_id, s.rack_id) == (4, "r1")
    assert subscriptions[0].user_data == b"\xff\xff\xff\xff"  # never assigned: generation -1
    user_data = subscriptions[1].user_data
    assert user_data is not None
    decoded = decode_sticky_assignor_user_data(user_data)
    assert decoded is not None
    assert (decoded.previous_assignment, decoded.generation) == ((TP("t", 1),), 4)
    assert subscriptions[2].user_data is None


def test_perform_assignment_checks_cooperative_assignments() -> None:
    members = [member("a", ["t"], owned=tps("tp0 tp1"), generation=3), member("b", ["t"])]
    # Range moves t-1 from a to b at once: fine under EAGER, a violation under COOPERATIVE.
    eager = perform_assignment(RangeAssignor(), RebalanceProtocol.EAGER, members, {"t": 2})
    assert {m: a.partitions for m, a in eager.items()} == {"a": (TP("t", 0),), "b": (TP("t", 1),)}
    with pytest.raises(IllegalStateError, match=r"\['t-1'\]"):
        perform_assignment(RangeAssignor(), RebalanceProtocol.COOPERATIVE, members, {"t": 2})
    cooperative = perform_assignment(
        CooperativeStickyAssignor(), RebalanceProtocol.COOPERATIVE, members, {"t": 2}
    )
    # t-1 is only revoked from a; the follow-up rebalance gives it to b.
    assert {m: a.partitions for m, a in cooperative.items()} == {"a": (TP("t", 0),), "b": ()}
    validate_cooperative_assignment(members, cooperative)


def test_lookup_assignor_finds_the_protocol_the_coordinator_chose() -> None:
    assignors = create_assignors(["cooperative-sticky", "range"])
    assert lookup_assignor(assignors, "range") is assignors[1]
    with pytest.raises(IllegalStateError, match="invalid assignment protocol: roundrobin"):
        lookup_assignor(assignors, "roundrobin")


def test_an_assignor_naming_an_unknown_member_is_refused() -> None:
    class Rogue(RangeAssignor):
        name = "rogue"

        def assign_partitions(
            self, partitions_per_topic: Mapping[str, int], members: Sequence[GroupMember]
        ) -> dict[str, list[TopicPartition]]:
            return {"stranger": [TP("t", 0)]}

    with pytest.raises(IllegalStateError, match="unknown members"):
        Rogue().assign({"t": 1}, [member("a", ["t"])])
