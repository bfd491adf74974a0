"""TransactionService on every broker listener: decode, hand to the broker's transaction
components, encode. Errors are answered in the responses with Kafka's codes.

- InitProducerId: :func:`~rillet.broker.producer_id_manager.handle_init_producer_id` over
  this broker's :class:`~rillet.broker.producer_id_manager.ProducerIdManager`; a
  transactional producer's is the transaction coordinator's
  (:class:`~rillet.broker.transaction_coordinator.TransactionCoordinator`).
- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions: the
  transaction coordinator.
- WriteTxnMarkers, DescribeProducers: the partition leader's side
  (:class:`~rillet.broker.txn_marker_writer.TxnMarkerWriter`).
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from rillet.broker.producer_id_manager import (
    InitProducerIdRequest,
    InitProducerIdResult,
    ProducerIdManager,
    handle_init_producer_id,
    init_transactional_producer_id,
)
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.broker.txn_marker_writer import DescribedProducers, TxnMarkerWriter
from rillet.coordinator.transaction import (
    AddOffsetsToTxnResponse,
    DescribedTransaction,
    EndTxnResponse,
    ListTransactionsResponse,
)
from rillet.errors import InvalidRequestError, KafkaError
from rillet.metadata.image import MetadataImage
from rillet.protocol import transaction as conv
from rillet.protocol.gen.v1 import transaction_pb2, transaction_pb2_grpc

__all__ = ["TransactionServicer"]

Context = grpc.aio.ServicerContext[object, object]


def _not_served() -> KafkaError:
    return InvalidRequestError("transactions are not served by this listener")


class TransactionServicer(transaction_pb2_grpc.TransactionServiceServicer):
    """``coordinator`` serves the transaction coordinator's RPCs and ``markers`` the
    partition leader's; without them those RPCs are refused (INVALID_REQUEST). ``image``
    gives the broker's current metadata (DescribeProducers)."""

    def __init__(
        self,
        producer_ids: ProducerIdManager,
        coordinator: TransactionCoordinator | None = None,
        markers: TxnMarkerWriter | None = None,
        image: Callable[[], MetadataImage] = MetadataImage,
    ) -> None:
        self.producer_ids = producer_ids
        self.coordinator = coordinator
        self.markers = markers
        self.image = image

    async def _transactional(self, request: InitProducerIdRequest) -> InitProducerIdResult:
        if self.coordinator is None:
            return await init_transactional_producer_id(request)
        return await self.coordinator.init_producer_id(request)

    async def InitProducerId(
        self, request: transaction_pb2.InitProducerIdRequest, context: Context
    ) -> transaction_pb2.InitProducerIdResponse:
        try:
            result = await handle_init_producer_id(
                conv.init_producer_id_request_from_pb(request),
                self.producer_ids,
                self._transactional,
            )
        except KafkaError as e:
            return conv.init_producer_id_response(e)
        return conv.init_producer_id_response(result)

    async def AddPartitionsToTxn(
        self, request: transaction_pb2.AddPartitionsToTxnRequest, context: Context
    ) -> transaction_pb2.AddPartitionsToTxnResponse:
        if self.coordinator is None:
            return conv.add_partitions_to_txn_response(_not_served())
        results = await self.coordinator.add_partitions_to_txn(
            conv.add_partitions_to_txn_request_from_pb(request)
        )
        return conv.add_partitions_to_txn_response(results)

    async def AddOffsetsToTxn(
        self, request: transaction_pb2.AddOffsetsToTxnRequest, context: Context
    ) -> transaction_pb2.AddOffsetsToTxnResponse:
        r = conv.add_offsets_to_txn_request_from_pb(request)
        if self.coordinator is None:
            return conv.add_offsets_to_txn_response(AddOffsetsToTxnResponse(_not_served()))
        return conv.add_offsets_to_txn_response(await self.coordinator.add_offsets_to_txn(r))

    async def EndTxn(
        self, request: transaction_pb2.EndTxnRequest, context: Context
    ) -> transaction_pb2.EndTxnResponse:
        r = conv.end_txn_request_from_pb(request)
        if self.coordinator is None:
            return conv.end_txn_response(EndTxnResponse(_not_served()))
        return conv.end_txn_response(await self.coordinator.end_txn(r))

    async def WriteTxnMarkers(
        self, request: transaction_pb2.WriteTxnMarkersRequest, context: Context
    ) -> transaction_pb2.WriteTxnMarkersResponse:
        markers = conv.write_txn_markers_request_from_pb(request)
        if self.markers is None:
            err = _not_served()
            return conv.write_txn_markers_response(
                markers, [dict.fromkeys(m.partitions, err) for m in markers]
            )
        results = await self.markers.write_txn_markers(markers)
        return conv.write_txn_markers_response(markers, results)

    async def DescribeTransactions(
        self, request: transaction_pb2.DescribeTransactionsRequest, context: Context
    ) -> transaction_pb2.DescribeTransactionsResponse:
        ids = list(request.transactional_ids)
        if self.coordinator is None:
            described = [DescribedTransaction(tid, _not_served()) for tid in ids]
        else:
            described = await self.coordinator.describe_transactions(ids)
        return conv.describe_transactions_response(described)

    async def ListTransactions(
        self, request: transaction_pb2.ListTransactionsRequest, context: Context
    ) -> transaction_pb2.ListTransactionsResponse:
        states, pids, duration = conv.list_transactions_request_from_pb(request)
        if self.coordinator is None:
            return conv.list_transactions_response(ListTransactionsResponse(_not_served()))
        response = await self.coordinator.list_transactions(states, pids, duration)
        return conv.list_transactions_response(response)

    async def DescribeProducers(
        self, request: transaction_pb2.DescribeProducersRequest, context: Context
    ) -> transaction_pb2.DescribeProducersResponse:
        partitions = conv.describe_producers_request_from_pb(request)
        if self.markers is None:
            err = _not_served()
            results = [DescribedProducers(err) for _ in partitions]
        else:
            results = self.markers.describe_producers(self.image(), partitions)
        return conv.describe_producers_response(partitions, results)
