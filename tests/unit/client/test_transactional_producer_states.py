"""The transactional producer's states and config rules, without a broker: what Kafka's
client refuses before any request is sent."""

from __future__ import annotations

import pytest

from rillet.client.producer import Producer
from rillet.client.producer.transactions import TransactionState
from rillet.errors import (
    IllegalStateError,
    InvalidConfigurationError,
    NotEnoughReplicasError,
    ProducerFencedError,
)

NO_BROKER = "127.0.0.1:1"


def test_a_transactional_id_needs_idempotence() -> None:
    with pytest.raises(InvalidConfigurationError, match="without also enabling idempotence"):
        Producer(bootstrap_servers=NO_BROKER, transactional_id="t", enable_idempotence=False)
    with pytest.raises(InvalidConfigurationError, match="acks to all"):
        Producer(bootstrap_servers=NO_BROKER, transactional_id="t", acks=1)


def test_transactional_calls_on_a_plain_producer_are_refused() -> None:
    p = Producer(bootstrap_servers=NO_BROKER)
    try:
        with pytest.raises(IllegalStateError, match="non-transactional"):
            p.begin_transaction()
        assert p.producer_id_and_epoch is None
    finally:
        p.close(0)


def test_sends_and_transitions_follow_kafkas_state_machine() -> None:
    p = Producer(bootstrap_servers=NO_BROKER, transactional_id="t")
    try:
        with pytest.raises(IllegalStateError, match="before completing a call to init"):
            p.send("topic", b"v")
        with pytest.raises(IllegalStateError, match="UNINITIALIZED to IN_TRANSACTION"):
            p.begin_transaction()
        txn = p._txn
        assert txn is not None
        # As if init_transactions had answered.
        txn.producer_id, txn.producer_epoch, txn.state = 5, 0, TransactionState.READY
        with pytest.raises(IllegalStateError, match="READY to send"):
            p.send("topic", b"v")
        p.begin_transaction()
        with pytest.raises(IllegalStateError, match="IN_TRANSACTION to IN_TRANSACTION"):
            p.begin_transaction()
        # A failed send makes the transaction abortable: commit raises the failure.
        txn.fail(NotEnoughReplicasError("the ISR is too small"))
        assert txn.state is TransactionState.ABORTABLE_ERROR
        with pytest.raises(NotEnoughReplicasError):
            p.send("topic", b"v")
        with pytest.raises(NotEnoughReplicasError):
            txn.end(committed=True)
        # Being fenced ends the producer.
        txn.fail(ProducerFencedError("a newer producer took t"))
        with pytest.raises(ProducerFencedError):
            p.begin_transaction()
    finally:
        p.close(0)
