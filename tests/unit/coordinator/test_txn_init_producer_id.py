"""InitProducerId on the transaction coordinator (Kafka's ``handleInitProducerId``, KIP-98 and
KIP-360): new ids, epoch bumps that fence older instances, the abort of an ongoing transaction
first, producer id rotation when the epoch is exhausted, and every refusal."""

from __future__ import annotations

import pytest
from test_txn_harness import FOO0, TIMEOUT_MS, TxnHarness

from rillet.coordinator.transaction import (
    InitProducerIdRequest,
    TransactionCoordinatorConfig,
    TransactionCoordinatorShard,
    TransactionLogKey,
    TransactionLogPartitions,
    TransactionLogValue,
    TransactionRecord,
    TransactionState,
)
from rillet.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    NotCoordinatorError,
    ProducerFencedError,
)

S = TransactionState
EXHAUSTED = 2**15 - 2


def test_a_new_id_gets_a_producer_id_at_epoch_0_and_a_record() -> None:
    h = TxnHarness()
    response = h.init("t")
    assert (response.error, response.producer_id, response.producer_epoch) == (None, 1000, 0)
    (record,) = h.last.records
    assert record.key == TransactionLogKey("t")
    assert record.value is not None and record.version == 1
    assert (record.value.producer_id, record.value.producer_epoch) == (1000, 0)
    assert record.value.transaction_status == S.EMPTY.id
    assert record.value.transaction_partitions is None
    assert record.value.transaction_timeout_ms == TIMEOUT_MS
    assert record.value.transaction_start_timestamp_ms == -1
    assert record.value.transaction_last_update_timestamp_ms == h.now
    assert h.state_of("t") is S.EMPTY


def test_each_new_instance_bumps_the_epoch_and_fences_the_older_ones() -> None:
    h = TxnHarness()
    first = h.init("t")
    second = h.init("t", timeout_ms=5_000)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert h.metadata("t").txn_timeout_ms == 5_000
    # The first instance is fenced everywhere.
    added = h.add("t", first.producer_id, first.producer_epoch, FOO0)
    assert isinstance(added.error, ProducerFencedError)
    again = h.init("t", producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert isinstance(again.error, ProducerFencedError) and again.producer_id == -1
    assert not h.last.records


def test_a_producer_naming_its_current_epoch_is_bumped_and_its_retry_answered_again() -> None:
    h = TxnHarness()
    init = h.init("t")
    bumped = h.init("t", producer_id=init.producer_id, producer_epoch=0)
    assert (bumped.producer_id, bumped.producer_epoch) == (init.producer_id, 1)
    assert h.metadata("t").last_producer_epoch == 0
    # The answer was lost: the same request again gets the same epoch, not another bump.
    retry = h.init("t", producer_id=init.producer_id, producer_epoch=0)
    assert (retry.error, retry.producer_epoch) == (None, 1)
    # Across a coordinator change the last epoch is gone (Kafka does not persist it).
    h.load(8)
    late = h.init("t", producer_id=init.producer_id, producer_epoch=0)
    assert isinstance(late.error, ProducerFencedError)


def test_an_unknown_id_named_with_a_producer_id_gets_a_new_one_kip_360() -> None:
    h = TxnHarness()
    response = h.init("t", producer_id=55, producer_epoch=9)
    assert (response.error, response.producer_id, response.producer_epoch) == (None, 1000, 0)


def test_a_producer_id_that_is_not_the_ids_is_fenced() -> None:
    h = TxnHarness()
    h.init("t")
    response = h.init("t", producer_id=55, producer_epoch=0)
    assert isinstance(response.error, ProducerFencedError)


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_a_timeout_out_of_range_is_refused(timeout_ms: int) -> None:
    h = TxnHarness()
    response = h.init("t", timeout_ms=timeout_ms)
    assert isinstance(response.error, InvalidTransactionTimeoutError)
    assert not h.last.records and h.shard.state.get("t") is None
    assert h.init("t", timeout_ms=900_000).error is None


@pytest.mark.parametrize(("producer_id", "producer_epoch"), [(5, -1), (-1, 5)])
def test_a_producer_id_without_an_epoch_or_the_reverse_is_an_invalid_request(
    producer_id: int, producer_epoch: int
) -> None:
    h = TxnHarness()
    response = h.init("t", producer_id=producer_id, producer_epoch=producer_epoch)
    assert isinstance(response.error, InvalidRequestError)


def test_an_empty_transactional_id_is_an_invalid_request() -> None:
    assert isinstance(TxnHarness().init("").error, InvalidRequestError)


def test_an_ongoing_transaction_is_aborted_first_and_the_producer_told_to_retry() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    response = h.init("t")
    assert isinstance(response.error, ConcurrentTransactionsError)
    assert (response.producer_id, response.producer_epoch) == (-1, -1)
    # PrepareEpochFence is never written: PrepareAbort at the bumped epoch is.
    (record,) = h.last.records
    assert record.value is not None and record.value.transaction_status == S.PREPARE_ABORT.id
    assert record.value.producer_epoch == epoch + 1
    (marker,) = h.markers
    assert (marker.committed, marker.producer_id, marker.producer_epoch) == (
        False,
        pid,
        epoch + 1,
    )
    assert marker.coordinator_epoch == 7 and marker.partitions == (FOO0,)
    # The fenced producer cannot commit, and the new one must wait for the abort.
    assert isinstance(h.end("t", pid, epoch, committed=True).error, ProducerFencedError)
    assert isinstance(h.init("t").error, ConcurrentTransactionsError)
    h.ack(marker)
    assert h.state_of("t") is S.COMPLETE_ABORT
    retry = h.init("t")
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (None, pid, epoch + 2)


@pytest.mark.parametrize("committed", [True, False])
def test_while_markers_are_written_init_producer_id_is_concurrent(committed: bool) -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    h.end("t", pid, epoch, committed=committed)
    assert isinstance(h.init("t").error, ConcurrentTransactionsError)
    assert not h.last.records


def replay_value(h: TxnHarness, state: TransactionState, epoch: int, partitions: bool) -> None:
    """Puts an id into the log directly (as if written long ago) and reloads."""
    value = TransactionLogValue(
        producer_id=500,
        producer_epoch=epoch,
        transaction_timeout_ms=TIMEOUT_MS,
        transaction_status=state.id,
        transaction_partitions=(TransactionLogPartitions("foo", (0,)),) if partitions else None,
        transaction_last_update_timestamp_ms=h.now,
        transaction_start_timestamp_ms=h.now if partitions else -1,
    )
    record = TransactionRecord(TransactionLogKey("t"), value)
    h.log.append((record.key_bytes(), record.value_bytes()))
    h.load(h.shard.coordinator_epoch + 1)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    h = TxnHarness()
    replay_value(h, S.COMPLETE_COMMIT, EXHAUSTED, partitions=False)
    response = h.init("t")
    assert (response.error, response.producer_id, response.producer_epoch) == (None, 1000, 0)
    m = h.metadata("t")
    assert (m.previous_producer_id, m.last_producer_epoch) == (500, -1)


def test_the_producer_with_the_exhausted_epoch_gets_the_new_id_and_its_retry_too() -> None:
    h = TxnHarness()
    replay_value(h, S.EMPTY, EXHAUSTED, partitions=False)
    response = h.init("t", producer_id=500, producer_epoch=EXHAUSTED)
    assert (response.producer_id, response.producer_epoch) == (1000, 0)
    assert h.metadata("t").last_producer_epoch == EXHAUSTED
    retry = h.init("t", producer_id=500, producer_epoch=EXHAUSTED)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (None, 1000, 0)
    # An older epoch of the old id is a zombie.
    stale = h.init("t", producer_id=500, producer_epoch=EXHAUSTED - 1)
    assert isinstance(stale.error, ProducerFencedError)


def test_a_fence_that_exhausts_the_epoch_leads_to_a_new_producer_id_on_retry() -> None:
    h = TxnHarness()
    replay_value(h, S.ONGOING, EXHAUSTED, partitions=True)
    assert isinstance(h.init("t").error, ConcurrentTransactionsError)
    (marker,) = h.markers
    assert marker.producer_epoch == EXHAUSTED + 1  # Short.MaxValue: never given out
    h.ack(marker)
    response = h.init("t")
    assert (response.error, response.producer_id, response.producer_epoch) == (None, 1000, 0)


def test_a_producer_id_source_that_cannot_give_one_is_the_producers_retriable_error() -> None:
    h = TxnHarness()
    h.producer_id_error = CoordinatorLoadInProgressError("fetching a new block")
    response = h.init("t")
    assert isinstance(response.error, CoordinatorLoadInProgressError)
    assert not h.last.records and h.shard.state.get("t") is None
    h.producer_id_error = None
    assert h.init("t").producer_id == 1000


def test_a_shard_answers_only_its_ids_and_only_while_loaded() -> None:
    config = TransactionCoordinatorConfig(transaction_state_log_num_partitions=50)
    request = InitProducerIdRequest("t", TIMEOUT_MS)  # "t" lives in partition 16

    def error(shard: TransactionCoordinatorShard) -> object:
        response = shard.init_producer_id(request, 0).response
        assert response is not None
        return response.error

    other = TransactionCoordinatorShard(0, 1, config, producer_ids=lambda: 1)
    other.on_loaded(0)
    assert isinstance(error(other), NotCoordinatorError)
    shard = TransactionCoordinatorShard(16, 1, config, producer_ids=lambda: 1)
    assert isinstance(error(shard), CoordinatorLoadInProgressError)
    shard.on_loaded(0)
    assert error(shard) is None
    shard.unload()
    assert isinstance(error(shard), NotCoordinatorError)
