"""A transactional producer's side of Kafka's transactions (the client-side
``TransactionManager``): its transactional id's coordinator, the producer id and epoch that
coordinator hands out (fencing older instances of the same id), the partitions and group
offsets added to the ongoing transaction, and its end.

States, as Kafka's::

    UNINITIALIZED --init_transactions--> READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> READY       (EndTxn COMMIT)
    IN_TRANSACTION --abort_transaction--> READY        (EndTxn ABORT)
    IN_TRANSACTION --a send failed--> ABORTABLE_ERROR --abort_transaction--> READY
    any --fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)--> FATAL_ERROR

The application calls the blocking methods from its own thread; the sender thread calls
:meth:`TransactionManager.add_partitions` before it sends batches of partitions new to the
transaction (Kafka's AddPartitionsToTxn before the first write). Requests to the coordinator
retry what is retriable (the coordinator loading or moving, a previous transaction's markers
still being written) until ``max_block_ms``.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import grpc

from rillet.client.cluster import ClusterMetadata
from rillet.client.configs import parse_bootstrap
from rillet.client.consumer.group_client import GroupClient
from rillet.client.security import refusal
from rillet.errors import (
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    error_for_code,
)
from rillet.protocol.gen.v1 import transaction_pb2, transaction_pb2_grpc
from rillet.protocol.group import read_txn_offset_commit_response, txn_offset_commit_request
from rillet.protocol.transaction import init_producer_id_request, read_init_producer_id_response
from rillet.security.tls import ClientTls
from rillet.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

__all__ = ["TransactionManager", "TransactionState", "end_transaction"]

_log = logging.getLogger(__name__)

COORDINATOR_TRANSACTION = 1

R = TypeVar("R")

# Errors that end the producer: another instance with the same transactional id took over.
_FATAL = (ProducerFencedError, InvalidProducerEpochError, TransactionalIdAuthorizationFailedError)


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class TransactionManager:
    def __init__(
        self,
        cluster: ClusterMetadata,
        transactional_id: str,
        transaction_timeout_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        max_block_ms: int,
        client_id: str,
    ) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._cluster = cluster
        self._timeout_s = request_timeout_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._max_block_s = max_block_ms / 1000
        self._coordinator = GroupClient(
            cluster, transactional_id, request_timeout_ms, client_id, COORDINATOR_TRANSACTION
        )
        self._lock = threading.Lock()
        self.state = TransactionState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        # Partitions the coordinator has in the ongoing transaction.
        self.partitions: set[TopicPartition] = set()
        # Why the transaction must be aborted (or why the producer is finished).
        self.error: KafkaError | None = None
        # The coordinator has something in the ongoing transaction (partitions, a group's
        # offsets, or, resumed, what another producer added): EndTxn must be sent.
        self._started = False

    # -- state -----------------------------------------------------------------------------

    def _require(self, *states: TransactionState, doing: str) -> None:
        if self.state == TransactionState.FATAL_ERROR and self.error is not None:
            raise self.error
        if self.state not in states:
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id}: Invalid transition attempted from "
                f"state {self.state.value} to {doing}"
            )

    def check_send(self) -> None:
        """A send is allowed only inside a transaction (Kafka's ``maybeAddPartition``)."""
        if self.state == TransactionState.IN_TRANSACTION:
            return
        if self.state == TransactionState.ABORTABLE_ERROR and self.error is not None:
            raise self.error
        if self.state == TransactionState.UNINITIALIZED:
            raise IllegalStateError(
                "Cannot perform a 'send' before completing a call to init_transactions when "
                "transactions are enabled."
            )
        self._require(TransactionState.IN_TRANSACTION, doing="send")

    def send_error(self) -> KafkaError | None:
        """Why the ongoing transaction's batches must not be sent: it can only be aborted,
        or this producer was fenced (None: they may)."""
        if self.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            return self.error
        return None

    def fail(self, err: BaseException) -> None:
        """A send of the ongoing transaction failed: the transaction can only be aborted,
        or, when this producer was fenced, nothing more can be done."""
        with self._lock:
            if isinstance(err, _FATAL):
                self.state, self.error = TransactionState.FATAL_ERROR, err
            elif self.state in (
                TransactionState.IN_TRANSACTION,
                TransactionState.COMMITTING_TRANSACTION,
            ):
                self.state = TransactionState.ABORTABLE_ERROR
                self.error = err if isinstance(err, KafkaError) else KafkaError(str(err))

    # -- the API -----------------------------------------------------------------------------

    def init(self, bump_from: tuple[int, int] | None = None) -> tuple[int, int]:
        """InitProducerId for the transactional id: a producer id and a new epoch, which
        fences every older instance (an ongoing transaction of theirs is aborted first).
        ``bump_from``: this producer's id and epoch, to bump it after an abortable error
        (KIP-360)."""
        if bump_from is None:
            self._require(TransactionState.UNINITIALIZED, doing="INITIALIZING")
        pid, epoch = bump_from or (-1, -1)
        self.state = TransactionState.INITIALIZING
        request = init_producer_id_request(
            self.transactional_id, self.transaction_timeout_ms, pid, epoch
        )
        self.producer_id, self.producer_epoch = self._call(
            lambda stub, t: read_init_producer_id_response(stub.InitProducerId(request, timeout=t))
        )
        self.partitions.clear()
        self._started = False
        self.error = None
        self.state = TransactionState.READY
        return self.producer_id, self.producer_epoch

    def resume(self, producer_id: int, producer_epoch: int) -> None:
        """Take over an open transaction another producer began with this transactional
        id, producer id and epoch, only to end it (a Spark job's driver commits what its
        tasks wrote; Flink's ``resumeTransaction``)."""
        self._require(TransactionState.UNINITIALIZED, doing="IN_TRANSACTION")
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.state = TransactionState.IN_TRANSACTION
        self._started = True

    def begin(self) -> None:
        self._require(TransactionState.READY, doing="IN_TRANSACTION")
        self.state = TransactionState.IN_TRANSACTION

    def add_partitions(self, tps: Iterable[TopicPartition]) -> KafkaError | None:
        """Add partitions to the ongoing transaction before their first batch is sent
        (called by the sender thread). Returns the error that failed them, if any."""
        new = {tp for tp in tps if tp not in self.partitions}
        if not new:
            return None
        topics: dict[str, list[int]] = {}
        for tp in sorted(new):
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = transaction_pb2.AddPartitionsToTxnRequest(
            transactions=[
                transaction_pb2.AddPartitionsToTxnRequest.Transaction(
                    transactional_id=self.transactional_id,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    topics=[
                        transaction_pb2.TxnTopic(name=t, partitions=ps) for t, ps in topics.items()
                    ],
                )
            ]
        )

        def send(stub: Any, timeout: float) -> None:
            response = stub.AddPartitionsToTxn(request, timeout=timeout)
            if response.error_code:
                raise error_for_code(response.error_code)(response.error_message)
            for result in response.results:
                for topic in result.topics:
                    for p in topic.partitions:
                        if p.error_code:
                            raise error_for_code(p.error_code)(
                                p.error_message or f"{topic.name}-{p.partition}"
                            )

        try:
            self._call(send)
        except KafkaError as e:
            self.fail(e)
            return e
        self.partitions |= new
        self._started = True
        return None

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group: ConsumerGroupMetadata,
    ) -> None:
        """AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the
        group's coordinator: the offsets count when the transaction commits."""
        self._require(TransactionState.IN_TRANSACTION, doing="send_offsets_to_transaction")
        add = transaction_pb2.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            group_id=group.group_id,
        )

        def send_add(stub: Any, timeout: float) -> None:
            response = stub.AddOffsetsToTxn(add, timeout=timeout)
            if response.error_code:
                raise error_for_code(response.error_code)(response.error_message)

        try:
            self._call(send_add)
            self._started = True  # AddOffsetsToTxn starts the transaction, as partitions do
            self._commit_offsets(offsets, group)
        except KafkaError as e:
            self.fail(e)
            raise

    def _commit_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata
    ) -> None:
        """TxnOffsetCommit to the group's coordinator, retrying retriable partition errors
        until ``max_block_ms``."""
        client = GroupClient(self._cluster, group.group_id, int(self._timeout_s * 1000))
        pending = dict(offsets)
        deadline = time.monotonic() + self._max_block_s
        while True:
            request = txn_offset_commit_request(
                self.transactional_id,
                self.producer_id,
                self.producer_epoch,
                group.group_id,
                pending,
                generation_id=group.generation_id,
                member_id=group.member_id,
                group_instance_id=group.group_instance_id,
            )
            send = functools.partial(_txn_offset_commit, request)
            try:
                response = client.call(send)
                failed = {
                    tp: e
                    for tp, e in read_txn_offset_commit_response(response).items()
                    if e is not None
                }
            except CoordinatorNotAvailableError as e:
                failed = dict.fromkeys(pending, e)
            if not failed:
                return
            err = next(iter(failed.values()))
            if any(
                isinstance(e, NotCoordinatorError | CoordinatorNotAvailableError)
                for e in failed.values()
            ):
                client.forget_coordinator()
            fatal = [e for e in failed.values() if not e.retriable]
            if fatal:
                raise fatal[0]
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"TxnOffsetCommit for group {group.group_id}: {err}")
            pending = {tp: pending[tp] for tp in failed}
            time.sleep(self._backoff_s)

    def end(self, committed: bool) -> None:
        """EndTxn: commit or abort the ongoing transaction; returns once the coordinator
        has decided (it writes the markers after)."""
        doing = "COMMITTING_TRANSACTION" if committed else "ABORTING_TRANSACTION"
        if committed:
            if self.state == TransactionState.ABORTABLE_ERROR and self.error is not None:
                raise self.error
            self._require(TransactionState.IN_TRANSACTION, doing=doing)
            self.state = TransactionState.COMMITTING_TRANSACTION
        else:
            self._require(
                TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR, doing=doing
            )
            self.state = TransactionState.ABORTING_TRANSACTION
        if self._started:
            request = transaction_pb2.EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=committed,
            )

            def send(stub: Any, timeout: float) -> None:
                response = stub.EndTxn(request, timeout=timeout)
                if response.error_code:
                    raise error_for_code(response.error_code)(response.error_message)

            try:
                self._call(send)
            except KafkaError as e:
                self.fail(e)
                raise
        self.partitions.clear()
        self._started = False
        self.error = None
        self.state = TransactionState.READY

    # -- talking to the coordinator --------------------------------------------------------

    def _call(self, send: Callable[[Any, float], R]) -> R:
        """``send(stub, timeout)`` to the transaction coordinator, retried while the error
        is retriable (finding the coordinator again when it moved) until ``max_block_ms``."""
        deadline = time.monotonic() + self._max_block_s
        while True:
            try:
                _, address = self._coordinator.find_coordinator()
                stub = transaction_pb2_grpc.TransactionServiceStub(self._cluster.channel(address))
                try:
                    return send(stub, self._timeout_s)
                except grpc.RpcError as e:
                    refused = refusal(e)
                    if refused is not None:
                        raise refused from None
                    self._coordinator.forget_coordinator()
                    code = e.code() if isinstance(e, grpc.Call) else None
                    raise CoordinatorNotAvailableError(
                        f"the transaction coordinator at {address} did not answer "
                        f"({code.name if code else e})"
                    ) from None
            except KafkaError as e:
                if isinstance(e, NotCoordinatorError | CoordinatorNotAvailableError):
                    self._coordinator.forget_coordinator()
                if isinstance(e, _FATAL):
                    self.state, self.error = TransactionState.FATAL_ERROR, e
                    raise
                if not e.retriable:
                    raise
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(
                        f"Timeout expired after {self._max_block_s * 1000:.0f} ms while "
                        f"awaiting the transaction coordinator: {e}"
                    ) from e
                _log.debug("transaction %s: retrying after %s", self.transactional_id, e)
                # The previous transaction's markers are still being written: they take a
                # few ms, so ask again soon (Kafka's client waits 20 ms here, KAFKA-5477).
                short = isinstance(e, ConcurrentTransactionsError)
                time.sleep(min(self._backoff_s, 0.02) if short else self._backoff_s)


def end_transaction(
    bootstrap_servers: str,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    request_timeout_ms: int = 30_000,
    tls: ClientTls | None = None,
) -> None:
    """Commit or abort the open transaction of ``transactional_id`` that a producer with this
    id and epoch began (and left open): the second phase of a write whose tasks each prepared
    a transaction, such as the Spark sink's. Raises PRODUCER_FENCED when a newer producer
    took the transactional id meanwhile."""
    cluster = ClusterMetadata(parse_bootstrap(bootstrap_servers), request_timeout_ms, tls=tls)
    try:
        txn = TransactionManager(
            cluster, transactional_id, 60_000, request_timeout_ms, 100, request_timeout_ms, ""
        )
        txn.resume(producer_id, producer_epoch)
        txn.end(committed)
    finally:
        cluster.close()


def _txn_offset_commit(request: Any, stub: Any, timeout: float, metadata: Any) -> Any:
    return stub.TxnOffsetCommit(request, timeout=timeout, metadata=metadata)
