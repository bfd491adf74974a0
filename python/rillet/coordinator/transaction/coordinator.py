"""The transaction APIs' logic over one shard's ids (Kafka's ``TransactionCoordinator``):
InitProducerId, AddPartitionsToTxn (and its KIP-890 verification), AddOffsetsToTxn, EndTxn,
DescribeTransactions, and the two periodic scans (abort timed-out transactions, expire idle
transactional ids).

Each handler validates before it writes and raises a :class:`~rillet.errors.KafkaError` for a
refusal, which the shard turns into the response; the errors are Kafka's, in Kafka's order of
checks. Producer ids come from the injected ``producer_ids`` callable (the broker's block of
ids from the controller, KIP-730); it raises a retriable KafkaError (for example
COORDINATOR_LOAD_IN_PROGRESS while a new block is fetched), which the producer gets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rillet.coordinator.group.partitioner import partition_for as group_partition_for
from rillet.coordinator.transaction.markers import TxnMarkerManager
from rillet.coordinator.transaction.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribedTransaction,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from rillet.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from rillet.coordinator.transaction.results import Operation
from rillet.coordinator.transaction.state import TransactionState
from rillet.coordinator.transaction.state_manager import TransactionStateManager
from rillet.errors import (
    ConcurrentTransactionsError,
    IllegalStateError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
)
from rillet.types import TopicPartition

__all__ = ["GROUP_METADATA_TOPIC_NAME", "TransactionCoordinator"]

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

_S = TransactionState


class TransactionCoordinator:
    """The handlers; the shard routes requests to them and owns loading and timers."""

    def __init__(
        self,
        state: TransactionStateManager,
        markers: TxnMarkerManager,
        producer_ids: Callable[[], int],
    ) -> None:
        self.state = state
        self.markers = markers
        self.producer_ids = producer_ids

    # -- InitProducerId --------------------------------------------------------------------

    def handle_init_producer_id(
        self, op: Operation, request: InitProducerIdRequest, now_ms: int
    ) -> InitProducerIdResponse:
        """A new epoch (or producer id) for ``request.transactional_id``, fencing older
        producer instances. An ongoing transaction is aborted first (its epoch bumped,
        PrepareAbort written, markers sent) and the producer told CONCURRENT_TRANSACTIONS, so
        that its retry bumps the epoch again once the abort completes."""
        tid = request.transactional_id
        if not tid:
            raise InvalidRequestError("transactional id must not be empty")
        if not self.state.validate_transaction_timeout_ms(request.transaction_timeout_ms):
            raise InvalidTransactionTimeoutError(
                f"transaction timeout {request.transaction_timeout_ms} ms must be positive and "
                f"at most transaction.max.timeout.ms "
                f"({self.state.config.transaction_max_timeout_ms} ms)"
            )
        expected = _expected_producer(request.producer_id, request.producer_epoch)
        metadata = self.state.get(tid)
        if metadata is None:
            metadata = TransactionMetadata(
                transactional_id=tid,
                producer_id=self.producer_ids(),
                txn_timeout_ms=request.transaction_timeout_ms,
                state=_S.EMPTY,
                txn_last_update_timestamp=now_ms,
            )
        transit = self._prepare_init_producer_id_transit(
            metadata, request.transaction_timeout_ms, expected, now_ms
        )
        if transit.txn_state is _S.PREPARE_EPOCH_FENCE:
            self.end_transaction(
                op,
                tid,
                transit.producer_id,
                transit.producer_epoch,
                committed=False,
                from_client=False,
                now_ms=now_ms,
                fence=transit,
            )
            raise ConcurrentTransactionsError(
                f"the ongoing transaction of {tid} is being aborted to fence its producer"
            )
        self.state.write(op, metadata, transit)
        return InitProducerIdResponse(None, transit.producer_id, transit.producer_epoch)

    def _prepare_init_producer_id_transit(
        self,
        metadata: TransactionMetadata,
        txn_timeout_ms: int,
        expected: tuple[int, int] | None,
        now_ms: int,
    ) -> TxnTransitMetadata:
        if expected is not None and not _is_valid_producer_id(metadata, *expected):
            raise ProducerFencedError(
                f"producer id {expected[0]} and epoch {expected[1]} are not the current ones "
                f"of {metadata.transactional_id}"
            )
        state = metadata.state
        if state.is_prepare:
            raise ConcurrentTransactionsError(
                f"{metadata.transactional_id} is completing its transaction ({state})"
            )
        if state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                return metadata.prepare_producer_id_rotation(
                    self.producer_ids(), txn_timeout_ms, now_ms, expected is not None
                )
            return metadata.prepare_increment_producer_epoch(
                txn_timeout_ms, None if expected is None else expected[1], now_ms
            )
        if state is _S.ONGOING:
            # The fenced epoch is never returned: the client retries after the abort, which
            # bumps the epoch again (or rotates the producer id if the fence exhausted it).
            return metadata.prepare_fence_producer_epoch()
        raise IllegalStateError(
            f"Found transactionalId {metadata.transactional_id} with state {state}. This is "
            "illegal as we should never have transitioned to this state."
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------

    def _current(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TransactionMetadata:
        """The id's metadata, if the producer is its current one (Kafka's checks, in order)."""
        if not transactional_id:
            raise InvalidRequestError("transactional id must not be empty")
        metadata = self.state.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the one of {transactional_id}"
            )
        if metadata.producer_epoch != producer_epoch:
            raise ProducerFencedError(
                f"producer epoch {producer_epoch} of {transactional_id} is not the current "
                f"epoch {metadata.producer_epoch}"
            )
        if metadata.state.is_prepare:
            raise ConcurrentTransactionsError(
                f"{transactional_id} is completing its transaction ({metadata.state})"
            )
        return metadata

    def handle_add_partitions(
        self,
        op: Operation,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        now_ms: int,
    ) -> None:
        """Adds the partitions to the transaction (starting it); already there: nothing to
        write."""
        metadata = self._current(transactional_id, producer_id, producer_epoch)
        added = frozenset(partitions)
        if metadata.state is _S.ONGOING and added <= metadata.topic_partitions:
            return
        self.state.write(op, metadata, metadata.prepare_add_partitions(added, now_ms))

    def handle_verify_partitions(
        self, request: AddPartitionsToTxnRequest
    ) -> AddPartitionsToTxnResponse:
        """KIP-890 part 1: which of the partitions are in the ongoing transaction (else
        TRANSACTION_ABORTABLE for the partition); nothing is written."""
        metadata = self._current(
            request.transactional_id, request.producer_id, request.producer_epoch
        )
        errors: dict[TopicPartition, KafkaError | None] = {}
        for tp in request.partitions:
            if tp in metadata.topic_partitions:
                errors[tp] = None
            else:
                errors[tp] = TransactionAbortableError(
                    f"{tp} is not in the transaction of {request.transactional_id}"
                )
        return AddPartitionsToTxnResponse(request.transactional_id, errors)

    def offsets_partition(self, group_id: str) -> TopicPartition:
        """The ``__consumer_offsets`` partition that AddOffsetsToTxn adds for a group."""
        n = self.state.config.offsets_topic_num_partitions
        return TopicPartition(GROUP_METADATA_TOPIC_NAME, group_partition_for(group_id, n))

    # -- EndTxn ----------------------------------------------------------------------------

    def end_transaction(
        self,
        op: Operation,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        committed: bool,
        from_client: bool,
        now_ms: int,
        fence: TxnTransitMetadata | None = None,
    ) -> EndTxnResponse:
        """Ongoing -> PrepareCommit/PrepareAbort and its markers; a retry after the outcome
        was decided gets CONCURRENT_TRANSACTIONS (markers pending) or NONE (complete) for
        the same outcome, INVALID_TXN_STATE for the other. ``fence``: an abort the
        coordinator itself starts at the bumped epoch (a fence or a timeout)."""
        if not transactional_id:
            raise InvalidRequestError("transactional id must not be empty")
        metadata = self.state.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the one of {transactional_id}"
            )
        # transaction.version < 2: a client's epoch must be the current one; the
        # coordinator's own abort comes with the bumped one.
        current = metadata.producer_epoch
        if (from_client and producer_epoch != current) or producer_epoch < current:
            raise ProducerFencedError(
                f"producer epoch {producer_epoch} of {transactional_id} is not the current "
                f"epoch {current}"
            )
        state = metadata.state
        outcome = "commit" if committed else "abort"
        invalid = InvalidTxnStateError(
            f"{transactional_id} is {state}, which cannot take an EndTxn({outcome})"
        )
        if state is _S.ONGOING:
            new_state = _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT
            transit = metadata.prepare_abort_or_commit(new_state, now_ms, fence=fence)
            self.state.write(op, metadata, transit)
            self.markers.add_txn_markers_to_send(op, metadata, now_ms)
            return EndTxnResponse(None, transit.producer_id, transit.producer_epoch)
        if state.is_complete:
            if committed != (state is _S.COMPLETE_COMMIT):
                raise invalid
            return EndTxnResponse(None, metadata.producer_id, metadata.producer_epoch)
        if state.is_prepare:
            if committed != (state is _S.PREPARE_COMMIT):
                raise invalid
            raise ConcurrentTransactionsError(
                f"{transactional_id} is writing the markers of its {outcome}"
            )
        if state is _S.EMPTY:
            raise invalid
        raise IllegalStateError(
            f"Found transactionalId {transactional_id} with state {state}. This is illegal "
            "as we should never have transitioned to this state."
        )

    # -- the periodic scans ----------------------------------------------------------------

    def abort_timed_out_transactions(self, op: Operation, now_ms: int) -> None:
        """Aborts every ongoing transaction past its timeout, fencing its producer with an
        epoch bump (Kafka's ``abortTimedOutTransactions``)."""
        for metadata in self.state.timed_out_transactions(now_ms):
            if metadata.producer_epoch == SHORT_MAX:
                continue  # cannot be fenced; never reached (such an epoch is never given out)
            fence = metadata.prepare_fence_producer_epoch()
            self.end_transaction(
                op,
                metadata.transactional_id,
                fence.producer_id,
                fence.producer_epoch,
                committed=False,
                from_client=False,
                now_ms=now_ms,
                fence=fence,
            )

    def remove_expired_transactional_ids(self, op: Operation, now_ms: int) -> None:
        """Writes a tombstone for every id idle past ``transactional.id.expiration.ms``."""
        for metadata in self.state.expired_transactional_ids(now_ms):
            self.state.write(op, metadata, metadata.prepare_dead())

    # -- DescribeTransactions --------------------------------------------------------------

    def describe(self, transactional_id: str) -> DescribedTransaction:
        if not transactional_id:
            return DescribedTransaction(transactional_id, InvalidRequestError())
        metadata = self.state.get(transactional_id)
        if metadata is None or metadata.state is _S.DEAD:
            return DescribedTransaction(
                transactional_id,
                TransactionalIdNotFoundError(f"transactional id {transactional_id} not found"),
            )
        return DescribedTransaction(
            transactional_id,
            None,
            str(metadata.state),
            metadata.txn_timeout_ms,
            metadata.txn_start_timestamp,
            metadata.producer_id,
            metadata.producer_epoch,
            tuple(sorted(metadata.topic_partitions)),
        )


def _expected_producer(producer_id: int, producer_epoch: int) -> tuple[int, int] | None:
    """The producer id and epoch an InitProducerId names, None for a new producer; one
    without the other is INVALID_REQUEST (as Kafka's ``KafkaApis``)."""
    if producer_id == NO_PRODUCER_ID and producer_epoch == NO_PRODUCER_EPOCH:
        return None
    if producer_id == NO_PRODUCER_ID or producer_epoch == NO_PRODUCER_EPOCH:
        raise InvalidRequestError("producer id and epoch must both be set, or neither")
    return producer_id, producer_epoch


def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """Whether a producer naming this id and epoch may re-initialise (else it is fenced):
    the id was just created (epoch -1: the producer recovers from UNKNOWN_PRODUCER_ID), the
    id is the current one (its epoch is checked when bumped), or it is the previous one and
    its epoch was exhausted (a retry of the rotation to a new producer id, KIP-360)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == metadata.producer_id
        or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(epoch))
    )
