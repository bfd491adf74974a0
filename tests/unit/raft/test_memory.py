"""MemoryRaftLog and MemoryQuorumStateStore: the in-memory stores behind the Protocols, and
fetch-position validation (KIP-595 "Fetch": DivergingEpoch)."""

from __future__ import annotations

import pytest
from raft_harness import log_of

from rillet.raft import (
    ElectionState,
    Entry,
    EpochEndOffset,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    validate_offset_and_epoch,
)


def test_append_as_leader_assigns_contiguous_offsets_and_caches_epoch_starts() -> None:
    log = MemoryRaftLog()
    assert (log.end_offset, log.last_fetched_epoch, log.log_start_offset) == (0, 0, 0)
    assert log.append_as_leader([b"a", b"b"], 1) == range(0, 2)
    assert log.append_as_leader([b"c"], 3, control=True) == range(2, 3)
    assert log.entries() == [
        Entry(0, 1, b"a"),
        Entry(1, 1, b"b"),
        Entry(2, 3, b"c", control=True),
    ]
    assert log.epochs() == [(1, 0), (3, 2)]
    assert log.last_fetched_epoch == 3


def test_read_is_bounded_by_max_entries_and_the_end() -> None:
    log = log_of(1, 1, 2, 2)
    assert [e.offset for e in log.read(1, 2)] == [1, 2]
    assert [e.offset for e in log.read(3, 10)] == [3]
    assert log.read(4, 10) == []
    with pytest.raises(ValueError):
        log.read(5, 1)


def test_append_as_follower_rejects_gaps_and_decreasing_epochs_without_partial_writes() -> None:
    log = log_of(2)
    with pytest.raises(ValueError, match="does not follow"):
        log.append_as_follower([Entry(2, 2, b"x")])
    with pytest.raises(ValueError, match="below"):
        log.append_as_follower([Entry(1, 3, b"x"), Entry(2, 1, b"y")])
    assert log.end_offset == 1
    assert log.epochs() == [(2, 0)]


# Kafka's LeaderEpochFileCache.endOffsetFor semantics, log epochs 1 1 3 3 3 5 (offsets 0-5).
@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (5, EpochEndOffset(5, 6)),  # the latest epoch ends at the log end offset
        (3, EpochEndOffset(3, 5)),  # a middle epoch ends where the next one starts
        (1, EpochEndOffset(1, 2)),
        (4, EpochEndOffset(3, 5)),  # an absent epoch: the largest epoch below it
        (2, EpochEndOffset(1, 2)),
        (9, EpochEndOffset(5, 6)),  # newer than any: the latest epoch
        (0, EpochEndOffset(0, 0)),  # older than any: itself, ending where the first starts
    ],
)
def test_end_offset_for_epoch(requested: int, expected: EpochEndOffset) -> None:
    assert log_of(1, 1, 3, 3, 3, 5).end_offset_for_epoch(requested) == expected


def test_end_offset_for_epoch_of_an_empty_log() -> None:
    assert MemoryRaftLog().end_offset_for_epoch(4) == EpochEndOffset(4, 0)


def test_truncate_to_drops_entries_and_their_epochs() -> None:
    log = log_of(1, 1, 3, 3, 5)
    log.truncate_to(3)
    assert log.end_offset == 3
    assert log.epochs() == [(1, 0), (3, 2)]
    log.truncate_to(2)
    assert log.epochs() == [(1, 0)]
    assert log.last_fetched_epoch == 1
    log.truncate_to(10)  # beyond the end: nothing to do
    assert log.end_offset == 2
    log.append_as_leader([b"n"], 4)
    assert log.epochs() == [(1, 0), (4, 2)]


def test_a_crash_loses_exactly_what_was_not_flushed() -> None:
    log = log_of(1, 1)
    log.append_as_leader([b"x"], 2)
    log.lose_unflushed()
    assert log.end_offset == 2 and log.epochs() == [(1, 0)]
    log.append_as_leader([b"x"], 2)
    log.flush()
    log.truncate_to(1)  # an unflushed truncation comes back after a crash
    assert log.flushed_end_offset == 3
    log.lose_unflushed()
    assert [e.epoch for e in log.entries()] == [1, 1, 2]
    assert log.durable_entry(2) == Entry(2, 2, b"x")
    assert log.durable_entry(3) is None


@pytest.mark.parametrize(
    ("fetch_offset", "last_fetched_epoch", "diverging"),
    [
        (0, 0, None),  # an empty prefix matches any log
        (0, 7, None),
        (2, 1, None),  # epoch 1 ends at 2 here: consistent
        (4, 3, None),
        (6, 5, None),
        (3, 1, EpochEndOffset(1, 2)),  # epoch 1 ends before 3 here
        (7, 5, EpochEndOffset(5, 6)),  # beyond our end
        (4, 4, EpochEndOffset(3, 5)),  # we never had epoch 4
        (3, 2, EpochEndOffset(1, 2)),
    ],
)
def test_validate_offset_and_epoch(
    fetch_offset: int, last_fetched_epoch: int, diverging: EpochEndOffset | None
) -> None:
    log = log_of(1, 1, 3, 3, 3, 5)
    assert validate_offset_and_epoch(log, fetch_offset, last_fetched_epoch).diverging == diverging


def test_quorum_state_store_round_trip() -> None:
    store = MemoryQuorumStateStore()
    assert store.load() is None
    store.persist(3, 2, None)
    assert store.load() == ElectionState(3, 2, None)
    assert store.persist_count == 1
