"""One transactional id's state (Kafka's ``TransactionMetadata``) and the target of a state
change (``TxnTransitMetadata``).

A change is prepared from the current metadata by one of the ``prepare_*`` methods, which
checks it against :attr:`TransactionState.valid_previous_states` and raises
:class:`~rillet.errors.IllegalStateError` for any other (a bug, never a client's error);
the coordinator then writes the target as a record and applies it with :meth:`apply`. Unlike
Kafka's coordinator, which holds a *pending state* until its write is committed, the shard
applies a change as it writes it and the driver holds the answer until the record is
committed (the shape of Kafka 4's coordinator runtime), so there is no pending state here.

Everything but ``last_producer_epoch`` is persisted; as in Kafka, an id loaded from the log
has ``last_producer_epoch`` -1, so a retried InitProducerId that spans a coordinator change
is fenced instead of answered again (Kafka expects this to be rare).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from rillet.coordinator.transaction.records import (
    TransactionLogPartitions,
    TransactionLogValue,
)
from rillet.coordinator.transaction.state import TransactionState
from rillet.errors import IllegalStateError, ProducerFencedError
from rillet.types import TopicPartition

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TransactionMetadata",
    "TxnTransitMetadata",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 2**15 - 1

_S = TransactionState


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No client may use Short.MaxValue, so that the coordinator can always fence it."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The target of one state change: what the record carries, and the epoch before."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0

    def to_record_value(self) -> TransactionLogValue:
        """The TransactionLogValue (Kafka's ``TransactionLog.valueToBytes``): an Empty id has
        null partitions, the others their partitions grouped by topic, sorted."""
        if self.txn_state is _S.EMPTY and self.topic_partitions:
            raise IllegalStateError(f"an Empty transaction has no partitions: {self}")
        partitions = None
        if self.txn_state is not _S.EMPTY:
            topics: dict[str, list[int]] = {}
            for tp in sorted(self.topic_partitions):
                topics.setdefault(tp.topic, []).append(tp.partition)
            partitions = tuple(TransactionLogPartitions(t, tuple(ps)) for t, ps in topics.items())
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            transaction_status=self.txn_state.id,
            transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=self.txn_last_update_timestamp,
            transaction_start_timestamp_ms=self.txn_start_timestamp,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )


@dataclass
class TransactionMetadata:
    """The coordinator's view of one transactional id (see the module doc).

    ``producer_epoch`` is -1 only for an id created by InitProducerId before its first epoch
    is written; ``topic_partitions`` are the partitions of the transaction in progress (empty
    when Empty or Complete*); ``txn_start_timestamp`` is when its first partition was added.
    """

    transactional_id: str
    producer_id: int
    txn_timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    topic_partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    txn_start_timestamp: int = -1
    client_transaction_version: int = 0

    @classmethod
    def from_record(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """An id as loaded from its last record (Kafka's ``readTxnRecordValue``)."""
        state = _S.from_id(value.transaction_status)
        partitions: frozenset[TopicPartition] = frozenset()
        if state is not _S.EMPTY:
            partitions = frozenset(
                TopicPartition(p.topic, i)
                for p in value.transaction_partitions or ()
                for i in p.partition_ids
            )
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
            producer_epoch=value.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_timeout_ms=value.transaction_timeout_ms,
            state=state,
            topic_partitions=partitions,
            txn_start_timestamp=value.transaction_start_timestamp_ms,
            txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
            client_transaction_version=value.client_transaction_version,
        )

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    # -- preparing changes (Kafka's prepare* methods) --------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with the epoch bumped: the first half of fencing an
        ongoing transaction (its producer re-initialised, or it timed out); the second is
        :meth:`prepare_abort_or_commit` to PrepareAbort from the returned target."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalStateError(
                "Cannot fence producer with epoch equal to Short.MaxValue since this would overflow"
            )
        return self._transit(
            _S.PREPARE_EPOCH_FENCE,
            producer_epoch=self.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata:
        """InitProducerId on an id with no transaction in progress: -> Empty with the epoch
        bumped. ``expected_producer_epoch`` is the epoch the producer says it has (KIP-360):
        None bumps (a new producer instance fences any older one); the current epoch bumps
        and remembers it as the last epoch; the last epoch is a retry of a bump whose answer
        was lost, answered with the current epoch again; any other is PRODUCER_FENCED."""
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif (
            self.producer_epoch == NO_PRODUCER_EPOCH
            or expected_producer_epoch == self.producer_epoch
        ):
            epoch, last = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"Expected producer epoch {expected_producer_epoch} does not match current "
                f"producer epoch {self.producer_epoch} or previous producer epoch "
                f"{self.last_producer_epoch}"
            )
        if epoch != self.producer_epoch and self.is_producer_epoch_exhausted:
            raise IllegalStateError(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}"
            )
        return self._transit(
            _S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=new_txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms,
            previous_producer_id=self.producer_id,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId with the epoch exhausted: -> Empty with a new producer id at epoch 0
        (KIP-360); the old id is kept as the previous one, and its epoch as the last when the
        producer named it (so that a retry of this call is recognised)."""
        if self.has_pending_transaction:
            raise IllegalStateError(
                "Cannot rotate producer ids while a transaction is still pending"
            )
        return self._transit(
            _S.EMPTY,
            producer_id=new_producer_id,
            previous_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_txn_timeout_ms,
            topic_partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_add_partitions(
        self, added: Iterable[TopicPartition], now_ms: int
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn / AddOffsetsToTxn: -> Ongoing with the partitions added; a
        transaction starts (its start timestamp set) when the first partitions are added."""
        starts = self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT)
        return self._transit(
            _S.ONGOING,
            topic_partitions=self.topic_partitions | frozenset(added),
            txn_start_timestamp=now_ms if starts else self.txn_start_timestamp,
            txn_last_update_timestamp=now_ms,
        )

    def prepare_abort_or_commit(
        self, new_state: TransactionState, now_ms: int, *, fence: TxnTransitMetadata | None = None
    ) -> TxnTransitMetadata:
        """EndTxn: Ongoing -> PrepareCommit or PrepareAbort, the outcome decided. With
        ``fence`` (from :meth:`prepare_fence_producer_epoch`), PrepareEpochFence ->
        PrepareAbort at the fenced epoch. The epoch is not bumped (transaction.version < 2)."""
        if new_state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalStateError(f"EndTxn does not lead to {new_state}")
        base = self
        if fence is not None:
            if new_state is not _S.PREPARE_ABORT or fence.txn_state is not _S.PREPARE_EPOCH_FENCE:
                raise IllegalStateError("a fenced transaction can only be aborted")
            base = replace(
                self,
                state=_S.PREPARE_EPOCH_FENCE,
                producer_epoch=fence.producer_epoch,
                last_producer_epoch=fence.last_producer_epoch,
            )
        return base._transit(new_state, txn_last_update_timestamp=now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """Every marker written: PrepareCommit -> CompleteCommit, PrepareAbort ->
        CompleteAbort; the transaction's partitions are cleared."""
        new_state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        return self._transit(
            new_state,
            topic_partitions=frozenset(),
            txn_last_update_timestamp=now_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """Expiry: an idle Empty or Complete* id -> Dead, written as a tombstone."""
        return self._transit(_S.DEAD, topic_partitions=frozenset())

    def _transit(self, new_state: TransactionState, **changes: Any) -> TxnTransitMetadata:
        if self.state not in new_state.valid_previous_states:
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id}: preparing transaction state "
                f"transition to {new_state} failed since the current state {self.state} is "
                "not a valid previous state of the target state"
            )
        current = TxnTransitMetadata(
            producer_id=self.producer_id,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms,
            txn_state=new_state,
            topic_partitions=self.topic_partitions,
            txn_start_timestamp=self.txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp,
            client_transaction_version=self.client_transaction_version,
        )
        transit = replace(current, **changes)
        if transit.producer_id < 0:
            raise IllegalStateError(f"Illegal new producer id {transit.producer_id}")
        if new_state is not _S.DEAD and transit.producer_epoch < 0:
            raise IllegalStateError(f"Illegal new producer epoch {transit.producer_epoch}")
        return transit

    # -- applying a change ----------------------------------------------------------------

    def apply(self, transit: TxnTransitMetadata) -> None:
        """Takes on ``transit`` (prepared from this metadata and written as a record)."""
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.txn_state
        self.topic_partitions = transit.topic_partitions
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
