"""InitProducerId on the wire (``transaction.proto``): the producer's request helper and
answer reader, the broker's decoding and encoding."""

from __future__ import annotations

import pytest

from rillet import errors
from rillet.broker.producer_id_manager import InitProducerIdRequest, InitProducerIdResult
from rillet.protocol.gen.v1 import common_pb2, transaction_pb2
from rillet.protocol.transaction import (
    init_producer_id_request,
    init_producer_id_request_from_pb,
    init_producer_id_response,
    read_init_producer_id_response,
)


def wire(request: transaction_pb2.InitProducerIdRequest) -> transaction_pb2.InitProducerIdRequest:
    return transaction_pb2.InitProducerIdRequest.FromString(request.SerializeToString())


def test_an_idempotent_producers_request() -> None:
    pb = init_producer_id_request()
    assert not pb.HasField("transactional_id")
    assert (pb.producer_id, pb.producer_epoch, pb.transaction_timeout_ms) == (-1, -1, 60_000)
    assert init_producer_id_request_from_pb(wire(pb)) == InitProducerIdRequest(None, 60_000)


def test_a_transactional_producers_request_keeps_every_field() -> None:
    pb = init_producer_id_request("tx-1", 30_000, 17, 4)
    assert init_producer_id_request_from_pb(wire(pb)) == InitProducerIdRequest(
        "tx-1", 30_000, 17, 4
    )
    # An empty transactional id is present, not absent (the broker refuses it).
    assert (
        init_producer_id_request_from_pb(wire(init_producer_id_request(""))).transactional_id == ""
    )


def test_an_answer_reads_as_id_and_epoch() -> None:
    response = init_producer_id_response(InitProducerIdResult(1234, 0))
    again = transaction_pb2.InitProducerIdResponse.FromString(response.SerializeToString())
    assert again.error_code == common_pb2.NONE
    assert read_init_producer_id_response(again) == (1234, 0)


@pytest.mark.parametrize(
    "error",
    [
        errors.CoordinatorLoadInProgressError("Producer ID block is full"),
        errors.InvalidRequestError("transactions are not supported yet"),
        errors.InvalidTransactionTimeoutError("must be positive"),
    ],
)
def test_an_error_is_raised_as_its_rillet_exception(error: errors.KafkaError) -> None:
    response = init_producer_id_response(error)
    assert (response.producer_id, response.producer_epoch) == (-1, -1)
    with pytest.raises(type(error), match=error.message) as raised:
        read_init_producer_id_response(response)
    assert raised.value.retriable == error.retriable
