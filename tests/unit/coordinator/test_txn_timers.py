"""The transaction coordinator's two periodic scans (Kafka's ``abortTimedOutTransactions`` and
``removeExpiredTransactionalIds``): ongoing transactions past ``transaction.timeout.ms`` are
aborted with their producer fenced, idle ids expire after ``transactional.id.expiration.ms``;
and clock jumps."""

from __future__ import annotations

from test_txn_harness import FOO0, TIMEOUT_MS, TxnHarness

from rillet.coordinator.transaction import TransactionCoordinatorConfig, TransactionState
from rillet.errors import ProducerFencedError, TransactionalIdNotFoundError

S = TransactionState
ABORT_EVERY = 10_000
EXPIRE_EVERY = 3_600_000
EXPIRATION = 604_800_000


def test_the_scans_are_scheduled_at_load_one_interval_apart() -> None:
    h = TxnHarness()
    assert h.new_shard(1).next_deadline_ms() is None  # not loaded
    assert h.shard.next_deadline_ms() == h.now + ABORT_EVERY
    h.tick(ABORT_EVERY)
    assert h.shard.next_deadline_ms() == h.now + ABORT_EVERY
    h.shard.unload()
    assert h.shard.next_deadline_ms() is None
    assert not h.shard.tick(h.now + EXPIRATION).records


def test_an_ongoing_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    h.tick(ABORT_EVERY)
    assert h.state_of("t") is S.ONGOING  # not yet
    h.tick(TIMEOUT_MS - ABORT_EVERY)  # start + timeout == now: not past it yet
    assert h.state_of("t") is S.ONGOING
    result = h.tick(ABORT_EVERY)
    (record,) = result.records
    assert record.value is not None and record.value.transaction_status == S.PREPARE_ABORT.id
    assert record.value.producer_epoch == epoch + 1
    (marker,) = result.markers
    assert (marker.committed, marker.producer_epoch, marker.partitions) == (
        False,
        epoch + 1,
        (FOO0,),
    )
    # The producer that let it time out is fenced, whatever it tries.
    assert isinstance(h.end("t", pid, epoch).error, ProducerFencedError)
    assert isinstance(h.add("t", pid, epoch, FOO0).error, ProducerFencedError)
    h.ack(marker)
    assert h.state_of("t") is S.COMPLETE_ABORT
    stale = h.init("t", producer_id=pid, producer_epoch=epoch)
    assert isinstance(stale.error, ProducerFencedError)
    fresh = h.init("t")
    assert (fresh.error, fresh.producer_epoch) == (None, epoch + 2)


def test_a_transaction_being_completed_is_not_aborted_again() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0)
    h.end("t", pid, epoch)
    assert not h.tick(TIMEOUT_MS + ABORT_EVERY).records
    assert h.state_of("t") is S.PREPARE_COMMIT


def test_idle_ids_expire_with_a_tombstone_and_busy_ones_do_not() -> None:
    config = TransactionCoordinatorConfig(
        transaction_state_log_num_partitions=1,
        transaction_max_timeout_ms=2 * EXPIRATION,
    )
    h = TxnHarness(config=config)
    h.init("empty")
    pid, epoch = h.begin("complete", FOO0)
    h.end("complete", pid, epoch, committed=False)
    h.ack()
    init = h.init("ongoing", timeout_ms=2 * EXPIRATION)
    h.add("ongoing", init.producer_id, 0, FOO0)
    h.now += EXPIRATION - EXPIRE_EVERY
    assert not h.tick(EXPIRE_EVERY - 1).records  # one ms short of the expiration
    result = h.tick(EXPIRE_EVERY)
    assert sorted((r.transactional_id, r.value) for r in result.records) == [
        ("complete", None),
        ("empty", None),
    ]
    assert set(h.shard.state.transactions) == {"ongoing"}
    (described,) = h.shard.describe_transactions(["empty"]).response or []
    assert isinstance(described.error, TransactionalIdNotFoundError)
    # An expired id starts over with a new producer id.
    assert h.init("empty").producer_id == init.producer_id + 1


def test_after_a_clock_jump_each_scan_runs_once_then_one_interval_later() -> None:
    h = TxnHarness()
    h.begin("t", FOO0)
    result = h.tick(EXPIRATION * 2)
    assert len(result.records) == 1  # the abort; the expiry scan saw it Ongoing
    assert h.shard.next_deadline_ms() == h.now + ABORT_EVERY
    h.ack()
    h.tick(EXPIRE_EVERY)
    assert h.state_of("t") is S.COMPLETE_ABORT  # just updated: not expired
