"""Transaction markers (Kafka's ``TransactionMarkerChannelManager`` and its completion handler):
per-partition answers, retries, dropped partitions, fenced markers, duplicates and answers for
a deposed shard, and a loaded shard resuming the markers of every Prepare* transaction."""

from __future__ import annotations

import pytest
from test_txn_harness import BAR0, FOO0, FOO1, TxnHarness

from rillet.coordinator.transaction import TransactionState
from rillet.errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    NetworkError,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)

S = TransactionState


def committing(h: TxnHarness) -> None:
    pid, epoch = h.begin("t", FOO0, FOO1, BAR0)
    assert h.end("t", pid, epoch).error is None


@pytest.mark.parametrize(
    "error",
    [
        UnknownTopicOrPartitionError(),
        NotLeaderOrFollowerError(),
        NetworkError(),  # the request was lost with its connection
    ],
)
def test_partitions_that_failed_retriably_get_a_new_marker(error: KafkaError) -> None:
    h = TxnHarness()
    committing(h)
    first = h.handed_out[-1]
    result = h.ack(first, {FOO0: None, BAR0: None, FOO1: error})
    assert not result.records and h.state_of("t") is S.PREPARE_COMMIT
    (retry,) = result.markers
    assert retry.partitions == (FOO1,) and retry.marker_id != first.marker_id
    assert (retry.committed, retry.producer_epoch, retry.coordinator_epoch) == (True, 0, 7)
    done = h.ack(retry)
    assert h.state_of("t") is S.COMPLETE_COMMIT and len(done.records) == 1


def test_answers_may_come_in_parts_one_per_writetxnmarkers_request() -> None:
    h = TxnHarness()
    committing(h)
    marker = h.handed_out[-1]
    first = h.ack(marker, {FOO0: None, FOO1: NotLeaderOrFollowerError()})
    (retry,) = first.markers
    assert retry.partitions == (FOO1,) and h.state_of("t") is S.PREPARE_COMMIT
    assert not h.ack(marker, {FOO0: None}).markers  # answered already: ignored
    h.ack(retry)
    assert h.state_of("t") is S.PREPARE_COMMIT  # BAR0 is still awaited
    assert h.shard.pending_markers["t"].outstanding[marker.marker_id].unanswered == {BAR0}
    h.ack(marker, {BAR0: None})
    assert h.state_of("t") is S.COMPLETE_COMMIT


def test_partitions_of_deleted_topics_and_unsupported_ones_are_dropped() -> None:
    h = TxnHarness()
    committing(h)
    result = h.ack(h.handed_out[-1], {FOO0: None, FOO1: UnsupportedVersionError()}, deleted=[BAR0])
    assert not result.markers and h.state_of("t") is S.COMPLETE_COMMIT


@pytest.mark.parametrize(
    "error", [InvalidProducerEpochError(), TransactionCoordinatorFencedError()]
)
def test_a_fenced_marker_stops_the_transaction_until_the_partition_is_loaded_again(
    error: KafkaError,
) -> None:
    h = TxnHarness()
    committing(h)
    marker = h.handed_out[-1]
    result = h.ack(marker, {FOO0: None, FOO1: error, BAR0: NotLeaderOrFollowerError()})
    assert not result.markers and not result.records
    assert h.state_of("t") is S.PREPARE_COMMIT and h.shard.pending_markers["t"].stopped
    assert not h.ack(marker).records  # a repeated answer changes nothing
    h.load(8)
    (resumed,) = h.markers
    assert resumed.coordinator_epoch == 8 and resumed.partitions == (BAR0, FOO0, FOO1)


@pytest.mark.parametrize(
    "error", [CorruptRecordError(), RecordTooLargeError(), InvalidTxnStateError()]
)
def test_fatal_and_unexpected_marker_errors_are_refused_loudly(error: KafkaError) -> None:
    h = TxnHarness()
    committing(h)
    with pytest.raises(IllegalStateError):
        h.ack(h.handed_out[-1], {FOO0: error})


def test_a_duplicated_or_stale_answer_is_ignored() -> None:
    h = TxnHarness()
    committing(h)
    marker = h.handed_out[-1]
    partial = h.ack(marker, {FOO0: None, FOO1: None, BAR0: NotLeaderOrFollowerError()})
    (retry,) = partial.markers
    # The first answer again (duplicated on the way) must not count for BAR0.
    assert h.ack(marker) == h.last and not h.last.records and not h.last.markers
    assert h.state_of("t") is S.PREPARE_COMMIT
    h.ack(retry)
    assert h.state_of("t") is S.COMPLETE_COMMIT
    # After completion, and for another shard, answers are ignored too.
    assert not h.ack(retry).records


def test_a_new_transactions_marker_is_not_completed_by_an_old_answer() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    h.end("t", pid, epoch)
    old = h.handed_out[-1]
    h.ack(old)
    h.add("t", pid, epoch, FOO0)
    h.end("t", pid, epoch)
    new = h.handed_out[-1]
    assert (new.producer_id, new.producer_epoch, new.partitions) == (
        old.producer_id,
        old.producer_epoch,
        old.partitions,
    )
    h.ack(old)  # a late duplicate of the first transaction's answer
    assert h.state_of("t") is S.PREPARE_COMMIT
    h.ack(new)
    assert h.state_of("t") is S.COMPLETE_COMMIT


def test_answers_to_a_deposed_shard_are_ignored_by_it_and_its_successor() -> None:
    h = TxnHarness()
    committing(h)
    marker = h.handed_out[-1]
    old = h.shard
    h.load(8)
    assert not old.on_markers_written(marker, dict.fromkeys(marker.partitions), h.now).records
    assert not h.ack(marker).records and h.state_of("t") is S.PREPARE_COMMIT
    (resumed,) = h.handed_out[-1:]
    assert resumed.coordinator_epoch == 8
    h.ack(resumed)
    assert h.state_of("t") is S.COMPLETE_COMMIT


@pytest.mark.parametrize("committed", [True, False])
def test_a_loaded_shard_resumes_the_markers_of_every_prepared_transaction(
    committed: bool,
) -> None:
    h = TxnHarness()
    pid, epoch = h.begin("a", FOO0)
    h.end("a", pid, epoch, committed=committed)
    pid2, epoch2 = h.begin("b", BAR0)
    h.end("b", pid2, epoch2, committed=not committed)
    h.begin("c", FOO1)  # ongoing: no markers
    h.load(9)
    result = h.last
    assert not result.records
    by_id = {m.transactional_id: m for m in result.markers}
    assert set(by_id) == {"a", "b"}
    assert (by_id["a"].committed, by_id["b"].committed) == (committed, not committed)
    assert {m.coordinator_epoch for m in result.markers} == {9}
    for marker in result.markers:
        h.ack(marker)
    assert h.state_of("a") is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    assert h.state_of("b") is (S.COMPLETE_ABORT if committed else S.COMPLETE_COMMIT)
    assert h.state_of("c") is S.ONGOING


def test_a_loaded_prepared_transaction_without_partitions_completes_at_load() -> None:
    h = TxnHarness()
    init = h.init("t")
    h.add("t", init.producer_id, 0)
    # The PrepareCommit record was committed, the CompleteCommit record was lost.
    h.end("t", init.producer_id, 0)
    h.log.pop()
    h.load(8)
    result = h.last
    assert not result.markers and len(result.records) == 1
    assert h.state_of("t") is S.COMPLETE_COMMIT
