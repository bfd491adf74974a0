"""AllocateProducerIds (KIP-730) on the wire: requests and blocks both ways, errors as
Kafka's codes."""

from __future__ import annotations

from rillet import errors
from rillet.controller import ProducerIdsBlock
from rillet.protocol.controller import (
    allocate_producer_ids_block_from_pb,
    allocate_producer_ids_request_from_pb,
    allocate_producer_ids_request_to_pb,
    allocate_producer_ids_response,
)
from rillet.protocol.gen.v1 import common_pb2, controller_pb2


def test_request_round_trip() -> None:
    pb = allocate_producer_ids_request_to_pb(3, 1 << 40)
    again = controller_pb2.AllocateProducerIdsRequest.FromString(pb.SerializeToString())
    assert allocate_producer_ids_request_from_pb(again) == (3, 1 << 40)


def test_a_block_round_trips() -> None:
    block = ProducerIdsBlock(3, 5000, 1000)
    response = allocate_producer_ids_response(block)
    assert response.error_code == common_pb2.NONE
    assert (response.producer_id_start, response.producer_id_len) == (5000, 1000)
    assert allocate_producer_ids_block_from_pb(3, response) == block


def test_an_error_carries_kafkas_code_and_no_block() -> None:
    response = allocate_producer_ids_response(errors.StaleBrokerEpochError("Expected 4"))
    assert response.error_code == common_pb2.STALE_BROKER_EPOCH
    assert (response.producer_id_start, response.producer_id_len) == (-1, 0)
    err = allocate_producer_ids_block_from_pb(3, response)
    assert isinstance(err, errors.StaleBrokerEpochError) and err.message == "Expected 4"
