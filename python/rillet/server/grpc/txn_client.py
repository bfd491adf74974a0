""":class:`~rillet.broker.txn_broker_clients.TxnBrokerClient` over gRPC: a broker's connection
to another broker's inter-broker listener for WriteTxnMarkers (coordinator to partition
leader) and AddPartitionsToTxn with verify_only (partition leader to coordinator). A call
that gets no answer raises NETWORK_EXCEPTION."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from rillet.broker.txn_broker_clients import MarkerErrors, TxnMarkerEntry
from rillet.coordinator.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from rillet.errors import NetworkError
from rillet.protocol.gen.v1 import transaction_pb2_grpc
from rillet.protocol.transaction import (
    add_partitions_to_txn_request,
    read_add_partitions_to_txn_response,
    read_write_txn_markers_response,
    write_txn_markers_request,
)
from rillet.security.tls import ClientTls, grpc_channel

__all__ = ["GrpcTxnBrokerClient"]


class GrpcTxnBrokerClient:
    def __init__(self, broker_id: int, address: str, tls: ClientTls | None = None) -> None:
        self.broker_id = broker_id
        self.address = address
        self._channel = grpc_channel(address, tls)
        self._stub = transaction_pb2_grpc.TransactionServiceStub(self._channel)

    def _lost(self, what: str, e: grpc.RpcError) -> NetworkError:
        code = e.code() if isinstance(e, grpc.aio.AioRpcError) else None
        return NetworkError(
            f"broker {self.broker_id} at {self.address} did not answer {what}"
            f" ({code.name if code else e})"
        )

    async def write_txn_markers(
        self, markers: Sequence[TxnMarkerEntry], timeout_ms: int
    ) -> list[MarkerErrors]:
        try:
            response = await self._stub.WriteTxnMarkers(
                write_txn_markers_request(markers), timeout=timeout_ms / 1000
            )
        except grpc.RpcError as e:
            raise self._lost("WriteTxnMarkers", e) from None
        return read_write_txn_markers_response(response)

    async def add_partitions_to_txn(
        self, transactions: Sequence[AddPartitionsToTxnRequest], timeout_ms: int
    ) -> list[AddPartitionsToTxnResponse]:
        try:
            response = await self._stub.AddPartitionsToTxn(
                add_partitions_to_txn_request(transactions), timeout=timeout_ms / 1000
            )
        except grpc.RpcError as e:
            raise self._lost("AddPartitionsToTxn", e) from None
        return read_add_partitions_to_txn_response(response)

    async def close(self) -> None:
        await self._channel.close()
