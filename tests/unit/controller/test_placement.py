"""Rack-aware replica placement (``broker.rack``)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rillet.controller.placement import _rack_alternated, place_replicas

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def test_brokers_alternate_between_racks() -> None:
    assert _rack_alternated({1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}) == [1, 3, 4, 2, 5]
    # A broker without a rack is a rack of its own.
    assert _rack_alternated({1: "a", 2: "a", 3: None}) == [3, 1, 2]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("rf", [1, 2, 3])
def test_each_partition_spans_distinct_racks_and_leaders_spread(seed: int, rf: int) -> None:
    got = place_replicas(sorted(RACKS), 12, rf, random.Random(seed), racks=RACKS)
    assert sorted(got) == list(range(12))
    for replicas in got.values():
        assert len(set(replicas)) == rf
        assert len({RACKS[b] for b in replicas}) == rf
    # Every broker leads 12 / 6 partitions and holds 12 * rf / 6 replicas.
    assert set(Counter(r[0] for r in got.values()).values()) == {2}
    assert set(Counter(b for r in got.values() for b in r).values()) == {2 * rf}


def test_more_replicas_than_racks_reuse_racks_evenly() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    got = place_replicas(sorted(racks), 8, 3, random.Random(3), racks=racks)
    for replicas in got.values():
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b"}
    assert set(Counter(b for r in got.values() for b in r).values()) == {6}


def test_added_partitions_continue_the_pattern() -> None:
    got = place_replicas(sorted(RACKS), 4, 3, random.Random(1), first_partition=6, racks=RACKS)
    assert sorted(got) == [6, 7, 8, 9]
    assert all(len({RACKS[b] for b in r}) == 3 for r in got.values())


def test_without_racks_placement_is_round_robin() -> None:
    no_racks: dict[int, str | None] = {1: None, 2: None, 3: None}
    assert place_replicas([1, 2, 3], 3, 2, random.Random(0), racks=no_racks) == place_replicas(
        [1, 2, 3], 3, 2, random.Random(0)
    )
