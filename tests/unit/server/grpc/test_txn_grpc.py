"""Transactions between brokers over gRPC: GrpcTxnBrokerClient against a TransactionServicer
(WriteTxnMarkers to the partition leader's writer, AddPartitionsToTxn to the coordinator),
a broker that does not answer, and the servicer of a listener without transactions."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import pytest

from rillet import errors
from rillet.broker.txn_broker_clients import MarkerErrors, TxnMarkerEntry
from rillet.coordinator.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from rillet.protocol.gen.v1 import transaction_pb2, transaction_pb2_grpc
from rillet.server.grpc.transaction import TransactionServicer
from rillet.server.grpc.txn_client import GrpcTxnBrokerClient
from rillet.types import TopicPartition
from tests.support.server_process import free_port

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


class Writer:
    def __init__(self) -> None:
        self.got: list[TxnMarkerEntry] = []

    async def write_txn_markers(self, markers: Sequence[TxnMarkerEntry]) -> list[MarkerErrors]:
        self.got.extend(markers)
        return [
            {
                tp: None if tp.partition == 0 else errors.NotEnoughReplicasError("isr")
                for tp in m.partitions
            }
            for m in markers
        ]


class Coordinator:
    async def add_partitions_to_txn(
        self, requests: Sequence[AddPartitionsToTxnRequest]
    ) -> list[AddPartitionsToTxnResponse]:
        return [
            AddPartitionsToTxnResponse(
                r.transactional_id,
                {tp: errors.TransactionAbortableError("not in it") for tp in r.partitions},
            )
            for r in requests
        ]


async def serve(servicer: TransactionServicer) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    transaction_pb2_grpc.add_TransactionServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_markers_and_verifications_cross_the_wire() -> None:
    writer = Writer()
    servicer = TransactionServicer(
        None,  # type: ignore[arg-type]
        Coordinator(),  # type: ignore[arg-type]
        writer,  # type: ignore[arg-type]
    )
    server, address = await serve(servicer)
    client = GrpcTxnBrokerClient(2, address)
    try:
        entries = [TxnMarkerEntry(5, 1, 3, True, (A0, A1)), TxnMarkerEntry(6, 0, 3, False, (A0,))]
        first, second = await client.write_txn_markers(entries, 5000)
        assert writer.got == entries
        assert first[A0] is None and isinstance(first[A1], errors.NotEnoughReplicasError)
        assert second == {A0: None}
        (answer,) = await client.add_partitions_to_txn(
            [AddPartitionsToTxnRequest("t", 5, 1, (A1,), verify_only=True)], 5000
        )
        assert answer.transactional_id == "t"
        assert isinstance(answer.errors[A1], errors.TransactionAbortableError)
    finally:
        await client.close()
        await server.stop(None)


async def test_a_broker_that_does_not_answer_is_a_network_exception() -> None:
    client = GrpcTxnBrokerClient(3, f"127.0.0.1:{free_port()}")
    try:
        with pytest.raises(errors.NetworkError, match="broker 3"):
            await client.write_txn_markers([TxnMarkerEntry(5, 1, 3, True, (A0,))], 500)
        with pytest.raises(errors.NetworkError, match="AddPartitionsToTxn"):
            await client.add_partitions_to_txn([AddPartitionsToTxnRequest("t", 5, 1, (A0,))], 500)
    finally:
        await client.close()


async def test_a_listener_without_transactions_refuses_them() -> None:
    server, address = await serve(TransactionServicer(None))  # type: ignore[arg-type]
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = transaction_pb2_grpc.TransactionServiceStub(channel)
            end = await stub.EndTxn(transaction_pb2.EndTxnRequest(transactional_id="t"))
            assert end.error_code == errors.InvalidRequestError.code
            client = GrpcTxnBrokerClient(1, address)
            with pytest.raises(errors.InvalidRequestError):
                await client.add_partitions_to_txn(
                    [AddPartitionsToTxnRequest("t", 5, 1, (A0,))], 500
                )
            (refused,) = await client.write_txn_markers([TxnMarkerEntry(5, 1, 3, True, (A0,))], 500)
            assert isinstance(refused[A0], errors.InvalidRequestError)
            await client.close()
    finally:
        await server.stop(None)
