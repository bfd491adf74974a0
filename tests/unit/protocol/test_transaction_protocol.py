"""TransactionService conversions (protocol/transaction.py): what one end builds, the other
reads back, errors per partition included."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from rillet import errors
from rillet._core import BatchBuilder, Log
from rillet.broker.txn_broker_clients import TxnMarkerEntry
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
from rillet.protocol import transaction as conv
from rillet.protocol.gen.v1 import transaction_pb2
from rillet.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def wire(message: object) -> bytes:
    return message.SerializeToString()  # type: ignore[attr-defined,no-any-return]


def test_add_partitions_to_txn_both_ends() -> None:
    sent = [
        AddPartitionsToTxnRequest("t1", 5, 2, (A0, B0, A1)),
        AddPartitionsToTxnRequest("t2", 6, 0, (B0,), verify_only=True),
    ]
    request = transaction_pb2.AddPartitionsToTxnRequest.FromString(
        wire(conv.add_partitions_to_txn_request(sent))
    )
    assert [t.topics[0].partitions for t in request.transactions] == [[0, 1], [0]]
    # Partitions come back grouped by topic; order within a transaction does not matter.
    got = conv.add_partitions_to_txn_request_from_pb(request)
    assert [(r.transactional_id, set(r.partitions), r.verify_only) for r in got] == [
        ("t1", {A0, A1, B0}, False),
        ("t2", {B0}, True),
    ]
    answers = [
        AddPartitionsToTxnResponse("t1", {A0: None, A1: errors.ConcurrentTransactionsError("x")}),
        AddPartitionsToTxnResponse("t2", {B0: errors.TransactionAbortableError("not in it")}),
    ]
    response = transaction_pb2.AddPartitionsToTxnResponse.FromString(
        wire(conv.add_partitions_to_txn_response(answers))
    )
    t1, t2 = conv.read_add_partitions_to_txn_response(response)
    assert t1.errors[A0] is None and isinstance(t1.errors[A1], errors.ConcurrentTransactionsError)
    assert isinstance(t2.errors[B0], errors.TransactionAbortableError)
    assert t2.errors[B0].message == "not in it"
    whole = conv.add_partitions_to_txn_response(errors.InvalidRequestError("bad"))
    with pytest.raises(errors.InvalidRequestError, match="bad"):
        conv.read_add_partitions_to_txn_response(whole)


def test_add_offsets_and_end_txn_both_ends() -> None:
    offsets = AddOffsetsToTxnRequest("t", 5, 1, "g")
    assert conv.add_offsets_to_txn_request_from_pb(conv.add_offsets_to_txn_request(offsets)) == (
        offsets
    )
    conv.read_add_offsets_to_txn_response(
        conv.add_offsets_to_txn_response(AddOffsetsToTxnResponse())
    )
    with pytest.raises(errors.ProducerFencedError):
        conv.read_add_offsets_to_txn_response(
            conv.add_offsets_to_txn_response(AddOffsetsToTxnResponse(errors.ProducerFencedError()))
        )
    end = EndTxnRequest("t", 5, 1, committed=True)
    assert conv.end_txn_request_from_pb(conv.end_txn_request(end)) == end
    conv.read_end_txn_response(conv.end_txn_response(EndTxnResponse(None, 5, 1)))
    with pytest.raises(errors.InvalidTxnStateError):
        conv.read_end_txn_response(
            conv.end_txn_response(EndTxnResponse(errors.InvalidTxnStateError()))
        )


def test_write_txn_markers_both_ends() -> None:
    markers = [TxnMarkerEntry(5, 1, 3, True, (A0, B0)), TxnMarkerEntry(5, 1, 3, False, (A1,))]
    request = transaction_pb2.WriteTxnMarkersRequest.FromString(
        wire(conv.write_txn_markers_request(markers))
    )
    assert conv.write_txn_markers_request_from_pb(request) == markers
    results = [
        {A0: None, B0: errors.NotLeaderOrFollowerError("moved")},
        {A1: errors.TransactionCoordinatorFencedError("old")},
    ]
    first, second = conv.read_write_txn_markers_response(
        conv.write_txn_markers_response(markers, results)
    )
    assert first[A0] is None and isinstance(first[B0], errors.NotLeaderOrFollowerError)
    assert isinstance(second[A1], errors.TransactionCoordinatorFencedError)


def test_describe_and_list_transactions() -> None:
    described = [
        DescribedTransaction("t", None, "Ongoing", 60_000, 123, 5, 1, (A0, A1)),
        DescribedTransaction("u", errors.NotCoordinatorError("elsewhere")),
    ]
    back = conv.read_describe_transactions_response(conv.describe_transactions_response(described))
    assert back[0] == described[0]
    assert isinstance(back[1].error, errors.NotCoordinatorError)
    request = transaction_pb2.ListTransactionsRequest(state_filters=["Ongoing"])
    assert conv.list_transactions_request_from_pb(request) == (["Ongoing"], [], -1)
    request.duration_filter_ms = 0
    request.producer_id_filters.append(5)
    assert conv.list_transactions_request_from_pb(request) == (["Ongoing"], [5], 0)
    listed = ListTransactionsResponse(None, ("Bogus",), (ListedTransaction("t", 5, "Ongoing"),))
    assert conv.read_list_transactions_response(conv.list_transactions_response(listed)) == listed


def test_describe_producers_response() -> None:
    with tempfile.TemporaryDirectory() as d:
        log = Log.open(Path(d) / "a-0")
        b = BatchBuilder(producer_id=5, producer_epoch=1, base_sequence=0, is_transactional=True)
        b.append(42, None, b"x")
        log.append_as_leader(b.build(), 0)
        entries = tuple(log.producer_state())
        log.close()
    request = transaction_pb2.DescribeProducersRequest(
        topics=[transaction_pb2.TxnTopic(name="a", partitions=[0, 1])]
    )
    partitions = conv.describe_producers_request_from_pb(request)
    assert partitions == [A0, A1]
    response = conv.describe_producers_response(
        partitions,
        [DescribedProducers(None, entries), DescribedProducers(errors.NotLeaderOrFollowerError())],
    )
    (topic,) = response.topics
    (p,) = topic.partitions[0].active_producers
    assert (p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp) == (5, 1, 0, 42)
    assert (p.coordinator_epoch, p.current_txn_start_offset) == (-1, 0)
    assert topic.partitions[1].error_code == errors.NotLeaderOrFollowerError.code
