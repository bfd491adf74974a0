"""Transactional offset commits on the group coordinator's shard: TxnOffsetCommit's records are
pending for their producer until its COMMIT or ABORT marker, live and on replay; OffsetFetch
with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile; KIP-447 fencing; deletion and
expiry with open transactions; the undo of an append the log refused (Kafka's
OffsetMetadataManagerTest, transactional parts)."""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from group_harness import (
    TEST_CONFIG,
    TOPICS,
    assignment_bytes,
    beat,
    commit,
    committed,
    completions,
    join,
    join_classic,
    new_shard,
    observable_state,
    sync,
)

from rillet.coordinator.group import (
    ClassicGroupState,
    CoordinatorResult,
    EndTxnMarker,
    GroupCoordinatorShard,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProducerIdAndEpoch,
    TopicPartitionIndexes,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from rillet.coordinator.group.records import GroupMetadataKey, OffsetCommitKey
from rillet.errors import (
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InvalidGroupIdError,
    InvalidProducerIdMappingError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)

HOUR = 3600 * 1000
WEEK = 7 * 24 * HOUR
PID, OTHER = 1000, 2000


def txn_commit(
    group_id: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    producer_id: int = PID,
    producer_epoch: int = 0,
    member_id: str = "",
    generation: int = -1,
    instance_id: str | None = None,
    metadata: str | None = None,
) -> TxnOffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequestPartition(partition, offset, 3, metadata)
        )
    return TxnOffsetCommitRequest(
        f"txn-{producer_id}",
        group_id,
        producer_id,
        producer_epoch,
        tuple(OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in by_topic.items()),
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
    )


@dataclass
class TxnLog:
    """The partition as the driver writes it: batches of records (transactional ones with
    their producer id) and markers, in order."""

    entries: list[tuple[Any, ...]] = field(default_factory=list)

    def append(self, result: CoordinatorResult[Any]) -> None:
        if result.marker is not None:
            m = result.marker
            self.entries.append(("marker", m.producer_id, m.producer_epoch, m.committed))
        producer = result.producer
        for record in result.records:
            pid = -1 if producer is None else producer.producer_id
            self.entries.append(("record", record.key_bytes(), record.value_bytes(), pid))

    def reload(self, now_ms: int = 0) -> GroupCoordinatorShard:
        shard = GroupCoordinatorShard(0, TEST_CONFIG, rng=random.Random(99), topics=TOPICS)
        for entry in self.entries:
            if entry[0] == "marker":
                shard.replay_end_transaction_marker(entry[1], entry[3], producer_epoch=entry[2])
            else:
                shard.replay(entry[1], entry[2], producer_id=entry[3])
        shard.on_loaded(now_ms)
        return shard


def tombstoned(result: CoordinatorResult[Any]) -> list[tuple[str, int]]:
    """The partitions whose offsets ``result`` deletes."""
    return [
        (r.key.topic, r.key.partition)
        for r in result.records
        if isinstance(r.key, OffsetCommitKey) and r.value is None
    ]


def run(log: TxnLog, result: CoordinatorResult[Any]) -> Any:
    log.append(result)
    return result.response


def errors_of(response: TxnOffsetCommitResponse | None) -> dict[tuple[str, int], str | None]:
    assert response is not None
    return {
        (t.name, p.partition_index): None if p.error is None else p.error.name
        for t in response.topics
        for p in t.partitions
    }


def fetch(
    shard: GroupCoordinatorShard,
    group_id: str,
    partitions: Mapping[str, tuple[int, ...]] | None = None,
    *,
    require_stable: bool = True,
) -> dict[tuple[str, int], int | str]:
    """Offsets by partition, or the partition's error name."""
    topics = (
        None
        if partitions is None
        else tuple(TopicPartitionIndexes(t, ps) for t, ps in partitions.items())
    )
    request = OffsetFetchRequest(group_id, topics, require_stable=require_stable)
    response = shard.fetch_offsets(request).response
    assert response is not None and response.error is None
    return {
        (t.name, p.partition_index): p.committed_offset if p.error is None else p.error.name
        for t in response.topics
        for p in t.partitions
    }


def complete(
    shard: GroupCoordinatorShard, log: TxnLog, committed_: bool, producer_id: int = PID
) -> None:
    result = shard.complete_transaction(producer_id, 0, 5, committed_)
    assert result.response is None and not result.records
    assert result.marker == EndTxnMarker(producer_id, 0, 5, committed_)
    log.append(result)


def assert_reload_matches(shard: GroupCoordinatorShard, log: TxnLog) -> None:
    fresh = log.reload()
    assert observable_state(fresh) == observable_state(shard)
    assert fresh.state.pending.by_producer == shard.state.pending.by_producer
    assert fresh.state.pending.open_by_group == shard.state.pending.open_by_group


FOO0 = {"foo": (0,)}


# -- pending, then COMMIT or ABORT --------------------------------------------------------------


def test_a_txn_commit_is_written_for_its_producer_and_stays_pending() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5}), 0))
    result = shard.txn_offset_commit(txn_commit("g", {("foo", 0): 10, ("foo", 1): 11}), 0)
    assert errors_of(result.response) == {("foo", 0): None, ("foo", 1): None}
    assert result.producer == ProducerIdAndEpoch(PID, 0)
    assert [r.key for r in result.records] == [
        OffsetCommitKey("g", "foo", 0),
        OffsetCommitKey("g", "foo", 1),
    ]
    log.append(result)
    # Pending: invisible; a stable fetch is told to retry, a plain one gets the last commit.
    assert committed(shard, "g") == {("foo", 0): 5}
    assert fetch(shard, "g", {"foo": (0, 1, 2)}) == {
        ("foo", 0): "UNSTABLE_OFFSET_COMMIT",
        ("foo", 1): "UNSTABLE_OFFSET_COMMIT",
        ("foo", 2): -1,
    }
    assert fetch(shard, "g", {"foo": (0, 1)}, require_stable=False) == {
        ("foo", 0): 5,
        ("foo", 1): -1,
    }
    assert UnstableOffsetCommitError.retriable
    assert_reload_matches(shard, log)


def test_commit_marker_makes_the_offsets_committed() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 10, ("bar", 2): 7}), 0))
    complete(shard, log, True)
    assert committed(shard, "g") == {("foo", 0): 10, ("bar", 2): 7}
    assert fetch(shard, "g", {"foo": (0,), "bar": (2,)}) == {("foo", 0): 10, ("bar", 2): 7}
    assert not shard.state.pending.has_open_transactions("g")
    assert_reload_matches(shard, log)


def test_abort_marker_drops_them_and_keeps_the_last_committed() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 10, ("foo", 1): 3}), 0))
    complete(shard, log, False)
    assert committed(shard, "g") == {("foo", 0): 5}
    assert fetch(shard, "g", {"foo": (0, 1)}) == {("foo", 0): 5, ("foo", 1): -1}
    assert_reload_matches(shard, log)


def test_later_commits_of_the_same_transaction_win_in_the_order_written() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 10}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 12, ("foo", 1): 1}), 0))
    complete(shard, log, True)
    assert committed(shard, "g") == {("foo", 0): 12, ("foo", 1): 1}
    assert_reload_matches(shard, log)


def test_a_plain_commit_written_after_the_txn_commit_wins_at_commit() -> None:
    # Kafka keeps the most recent record (by log offset): the transactional offset written
    # first does not replace a plain one written after it.
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 1): 1}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 10, ("foo", 1): 10}), 0))
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 20}), 0))
    complete(shard, log, True)
    assert committed(shard, "g") == {("foo", 0): 20, ("foo", 1): 10}
    assert_reload_matches(shard, log)


def test_two_producers_are_independent() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 10}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 20}, producer_id=OTHER), 0))
    complete(shard, log, True)
    assert fetch(shard, "g", FOO0) == {("foo", 0): "UNSTABLE_OFFSET_COMMIT"}
    assert fetch(shard, "g", FOO0, require_stable=False) == {("foo", 0): 10}
    assert_reload_matches(shard, log)
    complete(shard, log, False, producer_id=OTHER)
    assert fetch(shard, "g", FOO0) == {("foo", 0): 10}
    assert_reload_matches(shard, log)


def test_a_marker_without_pending_offsets_changes_nothing() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5}), 0))
    complete(shard, log, True, producer_id=OTHER)
    complete(shard, log, False, producer_id=OTHER)
    assert committed(shard, "g") == {("foo", 0): 5}
    assert_reload_matches(shard, log)


def test_offsets_still_pending_at_the_end_of_the_log_stay_pending_after_a_reload() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 10}), 0))
    fresh = log.reload()
    assert fetch(fresh, "g", FOO0) == {("foo", 0): "UNSTABLE_OFFSET_COMMIT"}
    # The marker reaches the reloaded shard live.
    complete(fresh, log, True)
    assert fetch(fresh, "g", FOO0) == {("foo", 0): 10}
    assert_reload_matches(fresh, log)


def test_fetch_all_with_require_stable_marks_the_pending_partitions() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5, ("foo", 1): 6}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 1): 10, ("foo", 2): 10}), 0))
    # Every committed offset, as Kafka lists them: a partition with only a pending offset
    # is not listed.
    assert fetch(shard, "g") == {("foo", 0): 5, ("foo", 1): "UNSTABLE_OFFSET_COMMIT"}
    assert fetch(shard, "g", require_stable=False) == {("foo", 0): 5, ("foo", 1): 6}


def test_a_transaction_may_commit_offsets_of_several_groups() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("a", {("foo", 0): 1}), 0))
    run(log, shard.txn_offset_commit(txn_commit("b", {("foo", 0): 2}), 0))
    assert (
        fetch(shard, "a", FOO0) == fetch(shard, "b", FOO0) == {("foo", 0): "UNSTABLE_OFFSET_COMMIT"}
    )
    complete(shard, log, True)
    assert committed(shard, "a") == {("foo", 0): 1}
    assert committed(shard, "b") == {("foo", 0): 2}
    assert_reload_matches(shard, log)


# -- request validation and fencing (KIP-447) --------------------------------------------------


def test_unknown_group_with_a_generation_is_illegal_generation() -> None:
    shard = new_shard()
    result = shard.txn_offset_commit(
        txn_commit("g", {("foo", 0): 1}, generation=3, member_id="m"), 0
    )
    assert errors_of(result.response) == {("foo", 0): "ILLEGAL_GENERATION"}
    assert not result.records and "g" not in shard.state.groups


def test_unknown_group_without_generation_creates_a_simple_group() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 1}), 0))
    group = shard.state.classic_group("g")
    assert group is not None and group.is_simple()
    complete(shard, log, False)
    # Aborted: the simple group stays, empty, until expiry deletes it.
    assert "g" in shard.state.groups
    assert_reload_matches(shard, log)
    result = shard.tick(TEST_CONFIG.offsets_retention_check_interval_ms)
    assert [r.key for r in result.records] == [GroupMetadataKey("g")]  # a tombstone
    assert "g" not in shard.state.groups


def test_request_level_errors() -> None:
    shard = new_shard()
    empty = shard.txn_offset_commit(txn_commit("", {("foo", 0): 1}), 0)
    assert errors_of(empty.response) == {("foo", 0): InvalidGroupIdError.name}
    no_producer = shard.txn_offset_commit(txn_commit("g", {("foo", 0): 1}, producer_id=-1), 0)
    assert errors_of(no_producer.response) == {("foo", 0): InvalidProducerIdMappingError.name}
    assert not empty.records and not no_producer.records


def test_per_partition_errors() -> None:
    shard = new_shard()
    big = "x" * (TEST_CONFIG.offset_metadata_max_bytes + 1)
    request = txn_commit("g", {("foo", 0): 1, ("foo", 9): 1, ("nope", 0): 1}, metadata=big)
    result = shard.txn_offset_commit(request, 0)
    assert errors_of(result.response) == {
        ("foo", 0): OffsetMetadataTooLargeError.name,
        ("foo", 9): UnknownTopicOrPartitionError.name,
        ("nope", 0): UnknownTopicOrPartitionError.name,
    }
    ok = shard.txn_offset_commit(txn_commit("g", {("foo", 0): 1, ("nope", 0): 1}), 0)
    assert errors_of(ok.response) == {
        ("foo", 0): None,
        ("nope", 0): UnknownTopicOrPartitionError.name,
    }
    assert len(ok.records) == 1


def test_a_loading_or_unloaded_shard_refuses() -> None:
    loading = GroupCoordinatorShard(0, TEST_CONFIG, rng=random.Random(1), topics=TOPICS)
    result = loading.txn_offset_commit(txn_commit("g", {("foo", 0): 1}), 0)
    assert errors_of(result.response) == {("foo", 0): CoordinatorLoadInProgressError.name}
    marker = loading.complete_transaction(PID, 0, 0, True)
    assert isinstance(marker.response, CoordinatorLoadInProgressError) and marker.marker is None
    loaded = new_shard()
    loaded.unload()
    marker = loaded.complete_transaction(PID, 0, 0, True)
    assert isinstance(marker.response, NotCoordinatorError) and marker.marker is None


def test_replay_after_loading_is_refused() -> None:
    shard = new_shard()
    with pytest.raises(Exception, match="after on_loaded"):
        shard.replay_end_transaction_marker(PID, True)


def _consumer_group(shard: GroupCoordinatorShard, log: TxnLog) -> int:
    """m1 alone in KIP-848 group "g" on foo, owning all of it: its epoch."""
    response = run(log, shard.consumer_group_heartbeat(join("g", "m1"), 0))
    assert response.error is None
    return int(response.member_epoch)


def test_kip_848_member_fencing() -> None:
    shard, log = new_shard(), TxnLog()
    epoch = _consumer_group(shard, log)
    ok = shard.txn_offset_commit(
        txn_commit("g", {("foo", 0): 1}, member_id="m1", generation=epoch), 0
    )
    assert errors_of(ok.response) == {("foo", 0): None}
    stale = shard.txn_offset_commit(
        txn_commit("g", {("foo", 0): 1}, member_id="m1", generation=epoch - 1), 0
    )
    # Where OffsetCommit says STALE_MEMBER_EPOCH, TxnOffsetCommit says ILLEGAL_GENERATION.
    assert errors_of(stale.response) == {("foo", 0): IllegalGenerationError.name}
    unknown = shard.txn_offset_commit(
        txn_commit("g", {("foo", 0): 1}, member_id="zz", generation=epoch), 0
    )
    assert errors_of(unknown.response) == {("foo", 0): UnknownMemberIdError.name}
    anonymous = shard.txn_offset_commit(txn_commit("g", {("foo", 0): 1}), 0)
    assert errors_of(anonymous.response) == {("foo", 0): UnknownMemberIdError.name}
    # bar is not the member's: that partition is refused, the others written.
    mixed = shard.txn_offset_commit(
        txn_commit("g", {("foo", 1): 1, ("bar", 0): 1}, member_id="m1", generation=epoch), 0
    )
    assert errors_of(mixed.response) == {("foo", 1): None, ("bar", 0): IllegalGenerationError.name}
    assert len(mixed.records) == 1


def test_kip_848_group_without_members_takes_anonymous_commits() -> None:
    shard, log = new_shard(), TxnLog()
    epoch = _consumer_group(shard, log)
    run(log, shard.consumer_group_heartbeat(beat("g", "m1", -1), 0))  # leaves
    result = shard.txn_offset_commit(txn_commit("g", {("foo", 0): 1}), 0)
    assert errors_of(result.response) == {("foo", 0): None}
    assert epoch > 0


def _classic_group(
    shard: GroupCoordinatorShard, log: TxnLog, *, synced: bool = True
) -> tuple[str, int]:
    """Static member "i1" alone in classic group "k", Stable (or still CompletingRebalance
    unless ``synced``): (member id, generation)."""
    log.append(shard.join_group(join_classic("k", instance_id="i1"), "j", 0))
    delay = TEST_CONFIG.classic_group_initial_rebalance_delay_ms
    result = shard.tick(delay)
    log.append(result)
    joined = completions(result)["j"]
    member_id, generation = joined.member_id, joined.generation_id
    if synced:
        assignments = {member_id: assignment_bytes({"foo": (0, 1)})}
        log.append(
            shard.sync_group(sync("k", member_id, generation, assignments, "i1"), "s", delay)
        )
    group = shard.state.classic_group("k")
    expected = ClassicGroupState.STABLE if synced else ClassicGroupState.COMPLETING_REBALANCE
    assert group is not None and group.is_in(expected)
    return member_id, generation


def test_classic_member_fencing() -> None:
    shard, log = new_shard(), TxnLog()
    member_id, generation = _classic_group(shard, log)
    ok = shard.txn_offset_commit(
        txn_commit(
            "k", {("foo", 0): 1}, member_id=member_id, generation=generation, instance_id="i1"
        ),
        0,
    )
    assert errors_of(ok.response) == {("foo", 0): None}
    old = shard.txn_offset_commit(
        txn_commit("k", {("foo", 0): 1}, member_id=member_id, generation=generation - 1), 0
    )
    assert errors_of(old.response) == {("foo", 0): IllegalGenerationError.name}
    unknown = shard.txn_offset_commit(
        txn_commit("k", {("foo", 0): 1}, member_id="nobody", generation=generation), 0
    )
    assert errors_of(unknown.response) == {("foo", 0): UnknownMemberIdError.name}
    fenced = shard.txn_offset_commit(
        txn_commit(
            "k", {("foo", 0): 1}, member_id="nobody", generation=generation, instance_id="i1"
        ),
        0,
    )
    assert errors_of(fenced.response) == {("foo", 0): FencedInstanceIdError.name}
    # Older producers send no group metadata: accepted even though the group has members
    # (OffsetCommit would say UNKNOWN_MEMBER_ID).
    anonymous = shard.txn_offset_commit(txn_commit("k", {("foo", 0): 1}), 0)
    assert errors_of(anonymous.response) == {("foo", 0): None}


def test_classic_group_completing_a_rebalance_takes_txn_commits() -> None:
    shard, log = new_shard(), TxnLog()
    member_id, generation = _classic_group(shard, log, synced=False)
    result = shard.txn_offset_commit(
        txn_commit("k", {("foo", 0): 1}, member_id=member_id, generation=generation), 0
    )
    assert errors_of(result.response) == {("foo", 0): None}


# -- deletion and expiry -------------------------------------------------------------------------


def test_delete_groups_tombstones_pending_offsets_once() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 6, ("foo", 1): 6}), 0))
    result = shard.delete_groups(["g"])
    log.append(result)
    assert result.response is not None and result.response[0].error is None
    assert tombstoned(result) == [("foo", 0), ("foo", 1)]
    assert "g" not in shard.state.groups
    assert not shard.state.pending.has_pending("g", "foo", 1)
    # The transaction still ends on this partition; its deleted offsets do not come back.
    complete(shard, log, True)
    assert "g" not in shard.state.groups and committed(shard, "g") == {}
    assert_reload_matches(shard, log)


def test_offset_delete_tombstones_a_partition_with_only_a_pending_offset() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 6, ("foo", 1): 6}), 0))
    result = shard.delete_offsets(OffsetDeleteRequest("g", (TopicPartitionIndexes("foo", (0, 2)),)))
    log.append(result)
    assert tombstoned(result) == [("foo", 0)]
    complete(shard, log, True)
    assert committed(shard, "g") == {("foo", 1): 6}
    assert_reload_matches(shard, log)


def test_expiry_waits_for_open_transactions() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5, ("foo", 1): 5}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 6}), 0))
    now = WEEK + HOUR
    # foo-1 expires; foo-0 has a pending offset, and the group an open transaction.
    result = shard.tick(now)
    log.append(result)
    assert tombstoned(result) == [("foo", 1)]
    assert "g" in shard.state.groups
    complete(shard, log, False)
    result = shard.tick(now + TEST_CONFIG.offsets_retention_check_interval_ms)
    log.append(result)
    assert "g" not in shard.state.groups
    assert_reload_matches(shard, log)


def test_a_group_whose_pending_offsets_were_deleted_is_kept_until_the_marker() -> None:
    # KAFKA-19163/19164: the transaction stays open for the group after its offsets go.
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 6}), 0))
    log.append(
        shard.delete_offsets(OffsetDeleteRequest("g", (TopicPartitionIndexes("foo", (0,)),)))
    )
    assert shard.state.pending.has_open_transactions("g")
    log.append(shard.tick(TEST_CONFIG.offsets_retention_check_interval_ms))
    assert "g" in shard.state.groups
    complete(shard, log, True)
    assert not shard.state.pending.has_open_transactions("g")
    log.append(shard.tick(2 * TEST_CONFIG.offsets_retention_check_interval_ms))
    assert "g" not in shard.state.groups
    assert_reload_matches(shard, log)


# -- undo: the log refused the append ------------------------------------------------------------


def test_undo_of_a_txn_commit_restores_the_shard() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.txn_offset_commit(txn_commit("a", {("foo", 0): 1}), 0))
    before = observable_state(shard), copy.deepcopy(shard.state.pending.by_producer)
    result = shard.txn_offset_commit(txn_commit("a", {("foo", 0): 2, ("foo", 1): 2}), 0)
    other = shard.txn_offset_commit(txn_commit("new", {("foo", 0): 2}), 0)
    assert result.undo is not None and other.undo is not None
    other.undo()
    result.undo()
    assert "new" not in shard.state.groups
    assert (observable_state(shard), shard.state.pending.by_producer) == before
    complete(shard, log, True)
    assert committed(shard, "a") == {("foo", 0): 1}
    assert_reload_matches(shard, log)


def test_undo_of_a_marker_restores_the_pending_and_committed_offsets() -> None:
    shard, log = new_shard(), TxnLog()
    run(log, shard.commit_offsets(commit("g", {("foo", 0): 5}), 0))
    run(log, shard.txn_offset_commit(txn_commit("g", {("foo", 0): 6, ("foo", 1): 6}), 0))
    run(log, shard.txn_offset_commit(txn_commit("s", {("foo", 0): 6}, producer_id=OTHER), 0))
    result = shard.complete_transaction(PID, 0, 1, True)
    assert committed(shard, "g") == {("foo", 0): 6, ("foo", 1): 6}
    assert result.undo is not None
    result.undo()
    assert committed(shard, "g") == {("foo", 0): 5}
    assert fetch(shard, "g", {"foo": (0, 1)}) == {
        ("foo", 0): "UNSTABLE_OFFSET_COMMIT",
        ("foo", 1): "UNSTABLE_OFFSET_COMMIT",
    }
    assert_reload_matches(shard, log)
    complete(shard, log, False)
    assert committed(shard, "g") == {("foo", 0): 5}
    assert_reload_matches(shard, log)


def test_no_undo_without_records() -> None:
    shard = new_shard()
    result = shard.txn_offset_commit(txn_commit("g", {("nope", 0): 1}), 0)
    assert result.undo is None and not result.records
