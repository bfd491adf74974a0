"""TransactionCoordinatorShard: the transaction coordinator of one ``__transaction_state``
partition, as a pure state machine (Kafka's ``TransactionCoordinator`` and
``TransactionStateManager`` for one partition, in the shape of the group coordinator's shard).

It owns the transactional ids that map to its partition (:func:`partition_for`); its whole
durable state is the replay of the partition's records. It has no sockets, clocks, threads
or files: time comes in as ``now_ms``, producer ids from the injected ``producer_ids``
callable, marker answers through :meth:`on_markers_written`. The same object runs under the
broker's driver and under the seeded simulation of ``tests/sim``.

Lifecycle (the legal transitions; anything else is refused loudly)::

    created --replay()*--> on_loaded(now) --> serving --unload()--> (thrown away)

While not loaded, every request is answered COORDINATOR_LOAD_IN_PROGRESS; after unload, and
for an id of another partition, NOT_COORDINATOR. ``coordinator_epoch`` is the partition's
leader epoch when this shard was loaded; it is stamped into every marker.

Every operation returns a :class:`~rillet.coordinator.transaction.results.CoordinatorResult`;
see :mod:`rillet.coordinator.transaction` for how the driver must use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from rillet.coordinator.group.timers import Timers
from rillet.coordinator.transaction.config import TransactionCoordinatorConfig, partition_for
from rillet.coordinator.transaction.coordinator import TransactionCoordinator
from rillet.coordinator.transaction.markers import PendingCompleteTxn, TxnMarkerManager
from rillet.coordinator.transaction.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribedTransaction,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsResponse,
    TxnMarker,
)
from rillet.coordinator.transaction.records import (
    KEY_VERSION,
    TransactionRecord,
    decode_record,
)
from rillet.coordinator.transaction.results import CoordinatorResult, Operation
from rillet.coordinator.transaction.state_manager import TransactionStateManager
from rillet.errors import (
    CoordinatorLoadInProgressError,
    IllegalStateError,
    KafkaError,
    NotCoordinatorError,
)
from rillet.types import TopicPartition

__all__ = ["ABORT_TIMER", "EXPIRATION_TIMER", "TransactionCoordinatorShard"]

R = TypeVar("R")

# The two periodic scans, as timer keys (Kafka's scheduler task names).
ABORT_TIMER = ("transaction-abort", "", "")
EXPIRATION_TIMER = ("transactionalId-expiration", "", "")


class TransactionCoordinatorShard:
    """The coordinator of partition ``partition_index`` of ``__transaction_state``."""

    def __init__(
        self,
        partition_index: int,
        coordinator_epoch: int,
        config: TransactionCoordinatorConfig | None = None,
        *,
        producer_ids: Callable[[], int],
    ) -> None:
        self.partition_index = partition_index
        self.coordinator_epoch = coordinator_epoch
        self.config = config or TransactionCoordinatorConfig()
        self._state = TransactionStateManager(self.config)
        self._markers = TxnMarkerManager(self._state, coordinator_epoch)
        self._coordinator = TransactionCoordinator(self._state, self._markers, producer_ids)
        self._timers = Timers()
        self.loaded = False
        self.unloaded = False
        self.skipped_records = 0

    @property
    def state(self) -> TransactionStateManager:
        """The transactional ids (read-only for callers: change them through requests)."""
        return self._state

    @property
    def pending_markers(self) -> Mapping[str, PendingCompleteTxn]:
        """Prepare* transactions whose markers are being written, by transactional id."""
        return self._markers.pending

    # -- loading ---------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Applies one record of the partition, read from the log (value None: tombstone).
        A key of a version this coordinator does not know is skipped, as Kafka's loader does
        (a leftover of an aborted upgrade); ``skipped_records`` counts them."""
        if len(key) >= 2 and int.from_bytes(key[:2], "big", signed=True) != KEY_VERSION:
            self.skipped_records += 1
            return
        self.replay_record(decode_record(key, value))

    def replay_record(self, record: TransactionRecord) -> None:
        if self.loaded or self.unloaded:
            raise IllegalStateError("replay after on_loaded: a loaded shard writes its records")
        self._state.replay(record)

    def on_loaded(self, now_ms: int) -> CoordinatorResult[None]:
        """The partition is replayed up to its end: start serving. Every PrepareCommit or
        PrepareAbort id gets its markers again (or, without partitions, its completion), and
        the two periodic scans are scheduled one interval from now."""
        if self.loaded or self.unloaded:
            raise IllegalStateError("on_loaded twice, or after unload")
        self.loaded = True
        config = self.config
        self._timers.schedule(ABORT_TIMER, now_ms + config.abort_timed_out_transactions_interval_ms)
        self._timers.schedule(
            EXPIRATION_TIMER, now_ms + config.remove_expired_transactional_ids_interval_ms
        )
        op = Operation()
        for tid in sorted(self._state.transactions):
            metadata = self._state.transactions[tid]
            if metadata.state.is_prepare:
                self._markers.add_txn_markers_to_send(op, metadata, now_ms)
        return op.result()

    def unload(self) -> None:
        """The shard is being thrown away (the partition moved, or an append failed): its
        markers in flight are forgotten (their answers are ignored); a shard loaded from the
        log sends them again."""
        self.unloaded = True
        self.loaded = False
        self._markers.unload()

    # -- time ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do (None: nothing scheduled)."""
        return self._timers.next_deadline_ms() if self.loaded else None

    def tick(self, now_ms: int) -> CoordinatorResult[None]:
        """Runs the scans due at ``now_ms``: abort the ongoing transactions past their
        timeout (``transaction.abort.timed.out.transaction.cleanup.interval.ms``), expire
        idle transactional ids (``transaction.remove.expired.transaction.cleanup.
        interval.ms``). A scan looks at the state as of ``now_ms``, as Kafka's scheduled tasks
        read the clock; after a clock jump it runs once, and again one interval later."""
        op = Operation()
        if not self.loaded:
            return op.result()
        while (timer := self._timers.pop_due(now_ms)) is not None:
            if timer.key == ABORT_TIMER:
                self._coordinator.abort_timed_out_transactions(op, now_ms)
                interval = self.config.abort_timed_out_transactions_interval_ms
            else:
                self._coordinator.remove_expired_transactional_ids(op, now_ms)
                interval = self.config.remove_expired_transactional_ids_interval_ms
            next_ms = timer.deadline_ms + interval
            self._timers.schedule(timer.key, next_ms if next_ms > now_ms else now_ms + interval)
        return op.result()

    # -- requests --------------------------------------------------------------------------

    def _refusal(self, transactional_id: str | None) -> KafkaError | None:
        if self.unloaded:
            return NotCoordinatorError(
                f"__transaction_state-{self.partition_index} is no longer coordinated here"
            )
        if not self.loaded:
            return CoordinatorLoadInProgressError(
                f"__transaction_state-{self.partition_index} is loading"
            )
        if transactional_id:  # an empty id is the handler's INVALID_REQUEST
            n = self.config.transaction_state_log_num_partitions
            owner = partition_for(transactional_id, n)
            if owner != self.partition_index:
                return NotCoordinatorError(
                    f"transactional id {transactional_id} is coordinated by partition {owner}"
                )
        return None

    def _run(
        self,
        transactional_id: str | None,
        handler: Callable[[Operation], R],
        on_error: Callable[[KafkaError], R],
    ) -> CoordinatorResult[R]:
        op = Operation()
        refusal = self._refusal(transactional_id)
        if refusal is not None:
            return op.result(on_error(refusal))
        try:
            response = handler(op)
        except KafkaError as e:
            # Handlers validate before writing, but for InitProducerId's fence: its abort
            # (record and markers) stays and goes with the CONCURRENT_TRANSACTIONS answer.
            return op.result(on_error(e))
        return op.result(response)

    def init_producer_id(
        self, request: InitProducerIdRequest, now_ms: int
    ) -> CoordinatorResult[InitProducerIdResponse]:
        return self._run(
            request.transactional_id,
            lambda op: self._coordinator.handle_init_producer_id(op, request, now_ms),
            lambda e: InitProducerIdResponse(error=e),
        )

    def add_partitions_to_txn(
        self, request: AddPartitionsToTxnRequest, now_ms: int
    ) -> CoordinatorResult[AddPartitionsToTxnResponse]:
        """Adds partitions to the transaction, or with ``verify_only`` answers whether they
        are in it (KIP-890); every partition gets the same error but in a verification."""

        def handle(op: Operation) -> AddPartitionsToTxnResponse:
            if request.verify_only:
                return self._coordinator.handle_verify_partitions(request)
            self._coordinator.handle_add_partitions(
                op,
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.partitions,
                now_ms,
            )
            return AddPartitionsToTxnResponse(
                request.transactional_id, dict.fromkeys(request.partitions)
            )

        return self._run(
            request.transactional_id,
            handle,
            lambda e: AddPartitionsToTxnResponse(
                request.transactional_id, dict.fromkeys(request.partitions, e)
            ),
        )

    def add_offsets_to_txn(
        self, request: AddOffsetsToTxnRequest, now_ms: int
    ) -> CoordinatorResult[AddOffsetsToTxnResponse]:
        """Adds the group's ``__consumer_offsets`` partition to the transaction."""

        def handle(op: Operation) -> AddOffsetsToTxnResponse:
            self._coordinator.handle_add_partitions(
                op,
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                [self._coordinator.offsets_partition(request.group_id)],
                now_ms,
            )
            return AddOffsetsToTxnResponse()

        return self._run(
            request.transactional_id, handle, lambda e: AddOffsetsToTxnResponse(error=e)
        )

    def end_txn(self, request: EndTxnRequest, now_ms: int) -> CoordinatorResult[EndTxnResponse]:
        """Commits or aborts: the PrepareCommit/PrepareAbort record, then (once it is
        committed) the answer and the markers; :meth:`on_markers_written` completes it."""
        return self._run(
            request.transactional_id,
            lambda op: self._coordinator.end_transaction(
                op,
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                committed=request.committed,
                from_client=True,
                now_ms=now_ms,
            ),
            lambda e: EndTxnResponse(error=e),
        )

    def on_markers_written(
        self,
        marker: TxnMarker,
        errors: Mapping[TopicPartition, KafkaError | None],
        now_ms: int,
        *,
        deleted: Iterable[TopicPartition] = (),
    ) -> CoordinatorResult[None]:
        """The answers of partition leaders to ``marker``: an error or None for each
        partition answered (all of the marker's, or those of one WriteTxnMarkers request;
        ``deleted``: partitions without a leader because their topic is gone). The result
        holds markers to retry, and the CompleteCommit/CompleteAbort record once every
        partition is written. An answer this shard is not waiting for is ignored (see
        :mod:`rillet.coordinator.transaction.markers`)."""
        op = Operation()
        if self.loaded:
            self._markers.on_markers_written(op, marker, errors, deleted, now_ms)
        return op.result()

    # -- DescribeTransactions / ListTransactions ------------------------------------------

    def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> CoordinatorResult[list[DescribedTransaction]]:
        def describe(tid: str) -> DescribedTransaction:
            refusal = self._refusal(tid)
            if refusal is not None:
                return DescribedTransaction(tid, refusal)
            return self._coordinator.describe(tid)

        return CoordinatorResult(response=[describe(tid) for tid in transactional_ids])

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
        *,
        now_ms: int,
    ) -> CoordinatorResult[ListTransactionsResponse]:
        """The ids of this shard matching the filters (the driver merges its shards')."""
        return self._run(
            None,
            lambda op: self._state.list_transaction_states(
                producer_id_filters, state_filters, duration_filter_ms, now_ms
            ),
            lambda e: ListTransactionsResponse(error=e),
        )
