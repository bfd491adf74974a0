"""The idempotent producer's bookkeeping: acknowledged sequences, which
OUT_OF_ORDER_SEQUENCE_NUMBER answers are retriable, and epoch bumps (KIP-360)."""

from __future__ import annotations

from rillet.client.producer.idempotence import (
    MAX_PRODUCER_EPOCH,
    MAX_SEQUENCE,
    IdempotentState,
    increment_sequence,
)


def test_sequences_wrap_as_kafka_does() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1


def test_out_of_order_is_retriable_only_behind_an_unresolved_batch() -> None:
    s = IdempotentState()
    s.set_id(7, 0)
    # Nothing acknowledged: the batch at 0 is the next one the broker should take, so an
    # OUT_OF_ORDER answer for it means the broker lost this producer's state.
    assert not s.out_of_order_is_retriable(slot=0, base_sequence=0)
    # A later batch is behind one still unresolved (0..9): the gap may close.
    assert s.out_of_order_is_retriable(slot=0, base_sequence=10)
    s.on_acknowledged(0, 0, 10)
    assert not s.out_of_order_is_retriable(slot=0, base_sequence=10)
    assert s.out_of_order_is_retriable(slot=0, base_sequence=20)
    # Partitions are independent.
    assert not s.out_of_order_is_retriable(slot=1, base_sequence=0)


def test_a_late_duplicate_answer_does_not_move_the_acknowledged_sequence_back() -> None:
    s = IdempotentState()
    s.set_id(7, 0)
    s.on_acknowledged(0, 10, 10)  # 10..19 answered first
    s.on_acknowledged(0, 0, 10)  # then the retry of 0..9, a duplicate
    assert s.last_acked[0] == 19
    s.on_acknowledged(0, MAX_SEQUENCE - 4, 10)  # wraps: 2^31-5 .. 4
    s.on_acknowledged(0, 20, 5)
    assert s.last_acked[0] == 24


def test_a_failed_batch_asks_for_a_bump_that_restarts_sequences() -> None:
    s = IdempotentState()
    s.set_id(7, 3)
    s.on_acknowledged(0, 0, 10)
    s.on_failed()
    assert s.bump_needed
    assert s.bump_epoch()
    assert (s.producer_id, s.producer_epoch, s.bump_needed) == (7, 4, False)
    assert s.last_acked == {}
    assert not s.out_of_order_is_retriable(slot=0, base_sequence=0)


def test_an_exhausted_epoch_needs_a_new_producer_id() -> None:
    s = IdempotentState()
    s.set_id(7, MAX_PRODUCER_EPOCH)
    assert not s.bump_epoch()
    assert not s.has_id
    s.set_id(8, 0)
    assert s.has_id
