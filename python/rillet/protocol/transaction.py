"""TransactionService messages (``proto/rillet/v1/transaction.proto``), both ends.

A producer builds its InitProducerId with :func:`init_producer_id_request` and reads the
answer with :func:`read_init_producer_id_response`, which raises the :mod:`rillet.errors`
exception of an error code (COORDINATOR_LOAD_IN_PROGRESS and the other retriable ones have
``retriable`` set; the producer retries those). The other requests follow the same pattern:
``<name>_request`` builds a request from the domain values of
:mod:`rillet.coordinator.transaction` (or :class:`~rillet.broker.txn_broker_clients.
TxnMarkerEntry`), ``read_<name>_response`` reads the answer (raising a single error, or
returning per-partition errors as :class:`~rillet.errors.KafkaError` or None), and a broker
decodes with ``<name>_request_from_pb`` and encodes with ``<name>_response``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rillet.broker.producer_id_manager import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResult,
)
from rillet.broker.txn_broker_clients import MarkerErrors, TxnMarkerEntry
from rillet.broker.txn_marker_writer import DescribedProducers
from rillet.coordinator.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribedTransaction,
    EndTxnRequest,
    EndTxnResponse,
    ListedTransaction,
    ListTransactionsResponse,
)
from rillet.errors import KafkaError
from rillet.protocol.errors import error_from_wire, set_error
from rillet.protocol.gen.v1 import transaction_pb2
from rillet.types import TopicPartition

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "add_offsets_to_txn_request",
    "add_offsets_to_txn_request_from_pb",
    "add_offsets_to_txn_response",
    "add_partitions_to_txn_request",
    "add_partitions_to_txn_request_from_pb",
    "add_partitions_to_txn_response",
    "describe_producers_request_from_pb",
    "describe_producers_response",
    "describe_transactions_response",
    "end_txn_request",
    "end_txn_request_from_pb",
    "end_txn_response",
    "init_producer_id_request",
    "init_producer_id_request_from_pb",
    "init_producer_id_response",
    "list_transactions_request_from_pb",
    "list_transactions_response",
    "read_add_offsets_to_txn_response",
    "read_add_partitions_to_txn_response",
    "read_describe_transactions_response",
    "read_end_txn_response",
    "read_init_producer_id_response",
    "read_list_transactions_response",
    "read_write_txn_markers_response",
    "write_txn_markers_request",
    "write_txn_markers_request_from_pb",
    "write_txn_markers_response",
]

# Kafka's producer default for transaction.timeout.ms.
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


# -- the producer's side ---------------------------------------------------------------------


def init_producer_id_request(
    transactional_id: str | None = None,
    timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
) -> transaction_pb2.InitProducerIdRequest:
    """InitProducerId for a new idempotent producer (``transactional_id`` None, the
    defaults), or for a transactional one; ``producer_id`` and ``producer_epoch`` are the
    producer's current ones when it asks for its epoch to be bumped (KIP-360)."""
    request = transaction_pb2.InitProducerIdRequest(
        transaction_timeout_ms=timeout_ms, producer_id=producer_id, producer_epoch=producer_epoch
    )
    if transactional_id is not None:
        request.transactional_id = transactional_id
    return request


def read_init_producer_id_response(
    resp: transaction_pb2.InitProducerIdResponse,
) -> tuple[int, int]:
    """``(producer_id, producer_epoch)`` of an answer; raises the
    :class:`~rillet.errors.KafkaError` of its error code."""
    err = error_from_wire(resp.error_code, resp.error_message)
    if err is not None:
        raise err
    return resp.producer_id, resp.producer_epoch


# -- the broker's side -----------------------------------------------------------------------


def init_producer_id_request_from_pb(
    request: transaction_pb2.InitProducerIdRequest,
) -> InitProducerIdRequest:
    return InitProducerIdRequest(
        transactional_id=(
            request.transactional_id if request.HasField("transactional_id") else None
        ),
        transaction_timeout_ms=request.transaction_timeout_ms,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
    )


def init_producer_id_response(
    result: InitProducerIdResult | BaseException,
) -> transaction_pb2.InitProducerIdResponse:
    """The answer: the id and epoch, or the error with -1 and -1 (as Kafka answers)."""
    if isinstance(result, BaseException):
        response = transaction_pb2.InitProducerIdResponse(
            producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
        )
        set_error(response, result)
        return response
    return transaction_pb2.InitProducerIdResponse(
        producer_id=result.producer_id, producer_epoch=result.producer_epoch
    )


# -- shared shapes ----------------------------------------------------------------------------


def _txn_topics(partitions: Iterable[TopicPartition]) -> list[transaction_pb2.TxnTopic]:
    """Partitions grouped by topic, topics in first-seen order."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [transaction_pb2.TxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]


def _partitions(topics: Iterable[transaction_pb2.TxnTopic]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(t.name, p) for t in topics for p in t.partitions)


def _error(error_code: int, error_message: str) -> KafkaError | None:
    return error_from_wire(error_code, error_message)


# -- AddPartitionsToTxn -----------------------------------------------------------------------


def add_partitions_to_txn_request(
    transactions: Sequence[AddPartitionsToTxnRequest],
) -> transaction_pb2.AddPartitionsToTxnRequest:
    return transaction_pb2.AddPartitionsToTxnRequest(
        transactions=[
            transaction_pb2.AddPartitionsToTxnRequest.Transaction(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                producer_epoch=t.producer_epoch,
                verify_only=t.verify_only,
                topics=_txn_topics(t.partitions),
            )
            for t in transactions
        ]
    )


def add_partitions_to_txn_request_from_pb(
    request: transaction_pb2.AddPartitionsToTxnRequest,
) -> list[AddPartitionsToTxnRequest]:
    return [
        AddPartitionsToTxnRequest(
            t.transactional_id,
            t.producer_id,
            t.producer_epoch,
            tuple(dict.fromkeys(_partitions(t.topics))),
            verify_only=t.verify_only,
        )
        for t in request.transactions
    ]


def add_partitions_to_txn_response(
    results: Sequence[AddPartitionsToTxnResponse] | KafkaError,
) -> transaction_pb2.AddPartitionsToTxnResponse:
    """One result per transaction, or a whole-request error."""
    response = transaction_pb2.AddPartitionsToTxnResponse()
    if isinstance(results, KafkaError):
        set_error(response, results)
        return response
    for r in results:
        out = response.results.add(transactional_id=r.transactional_id)
        by_topic: dict[str, transaction_pb2.AddPartitionsToTxnResponse.TopicResult] = {}
        for tp, err in r.errors.items():
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = out.topics.add(name=tp.topic)
            part = topic.partitions.add(partition=tp.partition)
            if err is not None:
                set_error(part, err)
    return response


def read_add_partitions_to_txn_response(
    response: transaction_pb2.AddPartitionsToTxnResponse,
) -> list[AddPartitionsToTxnResponse]:
    """Each transaction's per-partition errors; raises the whole request's error."""
    err = _error(response.error_code, response.error_message)
    if err is not None:
        raise err
    return [
        AddPartitionsToTxnResponse(
            r.transactional_id,
            {
                TopicPartition(t.name, p.partition): _error(p.error_code, p.error_message)
                for t in r.topics
                for p in t.partitions
            },
        )
        for r in response.results
    ]


# -- AddOffsetsToTxn, EndTxn ------------------------------------------------------------------


def add_offsets_to_txn_request(r: AddOffsetsToTxnRequest) -> transaction_pb2.AddOffsetsToTxnRequest:
    return transaction_pb2.AddOffsetsToTxnRequest(
        transactional_id=r.transactional_id,
        producer_id=r.producer_id,
        producer_epoch=r.producer_epoch,
        group_id=r.group_id,
    )


def add_offsets_to_txn_request_from_pb(
    r: transaction_pb2.AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(r.transactional_id, r.producer_id, r.producer_epoch, r.group_id)


def add_offsets_to_txn_response(
    r: AddOffsetsToTxnResponse,
) -> transaction_pb2.AddOffsetsToTxnResponse:
    response = transaction_pb2.AddOffsetsToTxnResponse()
    if r.error is not None:
        set_error(response, r.error)
    return response


def read_add_offsets_to_txn_response(response: transaction_pb2.AddOffsetsToTxnResponse) -> None:
    """Raises the answer's error, if any."""
    err = _error(response.error_code, response.error_message)
    if err is not None:
        raise err


def end_txn_request(r: EndTxnRequest) -> transaction_pb2.EndTxnRequest:
    return transaction_pb2.EndTxnRequest(
        transactional_id=r.transactional_id,
        producer_id=r.producer_id,
        producer_epoch=r.producer_epoch,
        committed=r.committed,
    )


def end_txn_request_from_pb(r: transaction_pb2.EndTxnRequest) -> EndTxnRequest:
    return EndTxnRequest(r.transactional_id, r.producer_id, r.producer_epoch, r.committed)


def end_txn_response(r: EndTxnResponse) -> transaction_pb2.EndTxnResponse:
    response = transaction_pb2.EndTxnResponse()
    if r.error is not None:
        set_error(response, r.error)
    return response


def read_end_txn_response(response: transaction_pb2.EndTxnResponse) -> None:
    """Raises the answer's error, if any."""
    err = _error(response.error_code, response.error_message)
    if err is not None:
        raise err


# -- WriteTxnMarkers --------------------------------------------------------------------------


def write_txn_markers_request(
    markers: Sequence[TxnMarkerEntry],
) -> transaction_pb2.WriteTxnMarkersRequest:
    return transaction_pb2.WriteTxnMarkersRequest(
        markers=[
            transaction_pb2.WriteTxnMarkersRequest.Marker(
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                committed=m.committed,
                topics=_txn_topics(m.partitions),
                coordinator_epoch=m.coordinator_epoch,
            )
            for m in markers
        ]
    )


def write_txn_markers_request_from_pb(
    request: transaction_pb2.WriteTxnMarkersRequest,
) -> list[TxnMarkerEntry]:
    return [
        TxnMarkerEntry(
            m.producer_id,
            m.producer_epoch,
            m.coordinator_epoch,
            m.committed,
            tuple(dict.fromkeys(_partitions(m.topics))),
        )
        for m in request.markers
    ]


def write_txn_markers_response(
    markers: Sequence[TxnMarkerEntry], results: Sequence[MarkerErrors]
) -> transaction_pb2.WriteTxnMarkersResponse:
    """One answer per marker of the request, in its order."""
    response = transaction_pb2.WriteTxnMarkersResponse()
    for marker, result in zip(markers, results, strict=True):
        out = response.markers.add(producer_id=marker.producer_id)
        by_topic: dict[str, transaction_pb2.WriteTxnMarkersResponse.TopicResult] = {}
        for tp, err in result.items():
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = out.topics.add(name=tp.topic)
            part = topic.partitions.add(partition=tp.partition)
            if err is not None:
                set_error(part, err)
    return response


def read_write_txn_markers_response(
    response: transaction_pb2.WriteTxnMarkersResponse,
) -> list[MarkerErrors]:
    return [
        {
            TopicPartition(t.name, p.partition): _error(p.error_code, p.error_message)
            for t in m.topics
            for p in t.partitions
        }
        for m in response.markers
    ]


# -- DescribeTransactions, ListTransactions, DescribeProducers ---------------------------------


def describe_transactions_response(
    described: Sequence[DescribedTransaction],
) -> transaction_pb2.DescribeTransactionsResponse:
    response = transaction_pb2.DescribeTransactionsResponse()
    for d in described:
        out = response.transaction_states.add(transactional_id=d.transactional_id)
        if d.error is not None:
            set_error(out, d.error)
            continue
        out.transaction_state = d.transaction_state
        out.transaction_timeout_ms = d.transaction_timeout_ms
        out.transaction_start_time_ms = d.transaction_start_time_ms
        out.producer_id = d.producer_id
        out.producer_epoch = d.producer_epoch
        out.topics.extend(_txn_topics(d.topic_partitions))
    return response


def read_describe_transactions_response(
    response: transaction_pb2.DescribeTransactionsResponse,
) -> list[DescribedTransaction]:
    out = []
    for s in response.transaction_states:
        err = _error(s.error_code, s.error_message)
        if err is not None:
            out.append(DescribedTransaction(s.transactional_id, err))
            continue
        out.append(
            DescribedTransaction(
                s.transactional_id,
                None,
                s.transaction_state,
                s.transaction_timeout_ms,
                s.transaction_start_time_ms,
                s.producer_id,
                s.producer_epoch,
                _partitions(s.topics),
            )
        )
    return out


def list_transactions_request_from_pb(
    request: transaction_pb2.ListTransactionsRequest,
) -> tuple[list[str], list[int], int]:
    """``(state filters, producer id filters, duration filter ms)``; -1: no duration filter."""
    duration = request.duration_filter_ms if request.HasField("duration_filter_ms") else -1
    return list(request.state_filters), list(request.producer_id_filters), duration


def list_transactions_response(
    r: ListTransactionsResponse,
) -> transaction_pb2.ListTransactionsResponse:
    response = transaction_pb2.ListTransactionsResponse(
        unknown_state_filters=r.unknown_state_filters,
        transaction_states=[
            transaction_pb2.ListTransactionsResponse.TransactionState(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.transaction_state,
            )
            for t in r.transaction_states
        ],
    )
    if r.error is not None:
        set_error(response, r.error)
    return response


def read_list_transactions_response(
    response: transaction_pb2.ListTransactionsResponse,
) -> ListTransactionsResponse:
    return ListTransactionsResponse(
        _error(response.error_code, response.error_message),
        tuple(response.unknown_state_filters),
        tuple(
            ListedTransaction(t.transactional_id, t.producer_id, t.transaction_state)
            for t in response.transaction_states
        ),
    )


def describe_producers_request_from_pb(
    request: transaction_pb2.DescribeProducersRequest,
) -> list[TopicPartition]:
    return list(_partitions(request.topics))


def describe_producers_response(
    partitions: Sequence[TopicPartition], results: Sequence[DescribedProducers]
) -> transaction_pb2.DescribeProducersResponse:
    response = transaction_pb2.DescribeProducersResponse()
    by_topic: dict[str, transaction_pb2.DescribeProducersResponse.TopicResult] = {}
    for tp, result in zip(partitions, results, strict=True):
        topic = by_topic.get(tp.topic)
        if topic is None:
            topic = by_topic[tp.topic] = response.topics.add(name=tp.topic)
        part = topic.partitions.add(partition=tp.partition)
        if result.error is not None:
            set_error(part, result.error)
            continue
        for e in result.active_producers:
            start = e.current_txn_start_offset
            part.active_producers.add(
                producer_id=e.producer_id,
                producer_epoch=e.producer_epoch,
                last_sequence=e.last_sequence,
                last_timestamp=e.last_timestamp,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=-1 if start is None else start,
            )
    return response
