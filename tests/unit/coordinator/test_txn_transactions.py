"""AddPartitionsToTxn (and its KIP-890 ``verify_only`` form), AddOffsetsToTxn and EndTxn on the
transaction coordinator (Kafka's ``handleAddPartitionsToTransaction``,
``handleVerifyPartitionsInTransaction``, ``handleEndTransaction``): every transition of a
transaction and every error, with Kafka's answers to retries."""

from __future__ import annotations

import pytest
from test_txn_harness import BAR0, FOO0, FOO1, TxnHarness

from rillet.coordinator.group import partition_for as group_partition_for
from rillet.coordinator.transaction import TransactionState
from rillet.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortableError,
)
from rillet.types import TopicPartition

S = TransactionState


def test_adding_partitions_starts_the_transaction_and_adding_more_keeps_its_start() -> None:
    h = TxnHarness()
    init = h.init("t")
    start = h.now
    response = h.add("t", init.producer_id, 0, FOO0, BAR0)
    assert response.errors == {FOO0: None, BAR0: None} and response.error is None
    (record,) = h.last.records
    assert record.value is not None and record.value.transaction_status == S.ONGOING.id
    m = h.metadata("t")
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (
        S.ONGOING,
        frozenset({FOO0, BAR0}),
        start,
    )
    h.now += 100
    h.add("t", init.producer_id, 0, FOO1)
    assert len(h.last.records) == 1
    assert h.metadata("t").topic_partitions == {FOO0, FOO1, BAR0}
    assert h.metadata("t").txn_start_timestamp == start
    assert h.metadata("t").txn_last_update_timestamp == h.now


def test_partitions_already_in_the_transaction_are_answered_without_a_write() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0, FOO1)
    assert h.add("t", pid, epoch, FOO1).error is None
    assert not h.last.records


def test_add_partitions_refusals_in_kafkas_order() -> None:
    h = TxnHarness()
    unknown = h.add("nobody", 1, 0, FOO0, FOO1)
    assert set(unknown.errors) == {FOO0, FOO1}
    assert all(isinstance(e, InvalidProducerIdMappingError) for e in unknown.errors.values())
    pid, epoch = h.begin("t", FOO0)
    assert isinstance(h.add("t", pid + 1, epoch, FOO1).error, InvalidProducerIdMappingError)
    assert isinstance(h.add("t", pid, epoch + 1, FOO1).error, ProducerFencedError)
    assert isinstance(h.add("t", pid, epoch - 1, FOO1).error, ProducerFencedError)
    assert isinstance(h.add("", pid, epoch, FOO1).error, InvalidRequestError)
    h.end("t", pid, epoch)
    assert isinstance(h.add("t", pid, epoch, FOO1).error, ConcurrentTransactionsError)
    assert not h.last.records


def test_a_completed_transaction_is_followed_by_a_new_one() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    h.end("t", pid, epoch)
    h.ack()
    assert h.state_of("t") is S.COMPLETE_COMMIT
    assert h.metadata("t").topic_partitions == frozenset()
    h.now += 1_000
    assert h.add("t", pid, epoch, BAR0).error is None
    m = h.metadata("t")
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (
        S.ONGOING,
        frozenset({BAR0}),
        h.now,
    )


def test_verification_answers_per_partition_and_writes_nothing() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    response = h.add("t", pid, epoch, FOO0, FOO1, verify_only=True)
    assert response.errors[FOO0] is None
    assert isinstance(response.errors[FOO1], TransactionAbortableError)
    assert not h.last.records and h.metadata("t").topic_partitions == {FOO0}


def test_verification_refusals() -> None:
    h = TxnHarness()
    nobody = h.add("nobody", 1, 0, FOO0, verify_only=True)
    assert isinstance(nobody.error, InvalidProducerIdMappingError)
    pid, epoch = h.begin("t", FOO0)
    assert isinstance(
        h.add("t", pid + 1, epoch, FOO0, verify_only=True).error, InvalidProducerIdMappingError
    )
    stale = h.add("t", pid, epoch - 1, FOO0, verify_only=True)
    assert isinstance(stale.error, ProducerFencedError)
    h.end("t", pid, epoch, committed=False)
    writing = h.add("t", pid, epoch, FOO0, verify_only=True)
    assert isinstance(writing.error, ConcurrentTransactionsError)
    h.ack()
    # Complete: the partition is no longer in a transaction; its late write must not open one.
    done = h.add("t", pid, epoch, FOO0, verify_only=True)
    assert isinstance(done.error, TransactionAbortableError)


def test_add_offsets_adds_the_groups_consumer_offsets_partition() -> None:
    h = TxnHarness()
    init = h.init("t")
    assert h.add_offsets("t", init.producer_id, 0, "my-group").error is None
    partition = group_partition_for("my-group", 50)
    assert h.metadata("t").topic_partitions == {TopicPartition("__consumer_offsets", partition)}
    assert isinstance(
        h.add_offsets("t", init.producer_id, 1, "my-group").error, ProducerFencedError
    )
    assert isinstance(h.add_offsets("other", 1, 0, "my-group").error, InvalidProducerIdMappingError)


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_decides_the_outcome_and_hands_out_its_markers(committed: bool) -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0, BAR0)
    response = h.end("t", pid, epoch, committed=committed)
    assert (response.error, response.producer_id, response.producer_epoch) == (None, pid, epoch)
    prepare = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
    (record,) = h.last.records
    assert record.value is not None and record.value.transaction_status == prepare.id
    (marker,) = h.markers
    assert (marker.transactional_id, marker.producer_id, marker.producer_epoch) == ("t", pid, 0)
    assert (marker.committed, marker.coordinator_epoch) == (committed, 7)
    assert marker.partitions == (BAR0, FOO0)
    assert h.state_of("t") is prepare
    h.ack(marker)
    (complete,) = h.last.records
    done = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
    assert complete.value is not None and complete.value.transaction_status == done.id
    assert complete.value.transaction_partitions == ()
    assert h.state_of("t") is done and not h.shard.pending_markers


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_retries_get_kafkas_answers(committed: bool) -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    h.end("t", pid, epoch, committed=committed)
    marker = h.markers[0]
    # Markers pending: the same outcome is concurrent, the other one invalid.
    same = h.end("t", pid, epoch, committed=committed)
    assert isinstance(same.error, ConcurrentTransactionsError) and not h.last.records
    other = h.end("t", pid, epoch, committed=not committed)
    assert isinstance(other.error, InvalidTxnStateError)
    h.ack(marker)
    # Complete: the same outcome succeeds again (its answer was lost), the other is invalid.
    again = h.end("t", pid, epoch, committed=committed)
    assert (again.error, again.producer_id, again.producer_epoch) == (None, pid, epoch)
    assert not h.last.records and not h.markers
    assert isinstance(h.end("t", pid, epoch, committed=not committed).error, InvalidTxnStateError)


def test_end_txn_refusals() -> None:
    h = TxnHarness()
    assert isinstance(h.end("nobody", 1, 0).error, InvalidProducerIdMappingError)
    init = h.init("t")
    pid = init.producer_id
    assert isinstance(h.end("t", pid, 0).error, InvalidTxnStateError)  # Empty: no transaction
    h.add("t", pid, 0, FOO0)
    assert isinstance(h.end("t", pid + 1, 0).error, InvalidProducerIdMappingError)
    assert isinstance(h.end("t", pid, 1).error, ProducerFencedError)
    assert isinstance(h.end("", pid, 0).error, InvalidRequestError)
    assert h.state_of("t") is S.ONGOING and not h.last.records
    fenced = h.end("t", pid, 1)
    assert (fenced.producer_id, fenced.producer_epoch) == (-1, -1)


def test_a_transaction_without_partitions_completes_at_once() -> None:
    h = TxnHarness()
    init = h.init("t")
    assert h.add("t", init.producer_id, 0).error is None  # no partitions: Ongoing all the same
    assert h.end("t", init.producer_id, 0).error is None
    statuses = [r.value.transaction_status for r in h.last.records if r.value is not None]
    assert statuses == [S.PREPARE_COMMIT.id, S.COMPLETE_COMMIT.id]
    assert not h.markers and h.state_of("t") is S.COMPLETE_COMMIT
