"""TransactionService on every broker listener: decode InitProducerId, hand it to
:func:`~rillet.broker.producer_id_manager.handle_init_producer_id` over this broker's
:class:`~rillet.broker.producer_id_manager.ProducerIdManager`, encode the answer. Errors
are answered in the response with Kafka's codes."""

from __future__ import annotations

import grpc

from rillet.broker.producer_id_manager import (
    ProducerIdManager,
    TransactionalInitProducerId,
    handle_init_producer_id,
    init_transactional_producer_id,
)
from rillet.errors import KafkaError
from rillet.protocol.gen.v1 import transaction_pb2, transaction_pb2_grpc
from rillet.protocol.transaction import (
    init_producer_id_request_from_pb,
    init_producer_id_response,
)

__all__ = ["TransactionServicer"]

Context = grpc.aio.ServicerContext[object, object]


class TransactionServicer(transaction_pb2_grpc.TransactionServiceServicer):
    """``transactional`` answers InitProducerId for transactional producers (the
    transaction coordinator's part; refused until it exists)."""

    def __init__(
        self,
        producer_ids: ProducerIdManager,
        transactional: TransactionalInitProducerId = init_transactional_producer_id,
    ) -> None:
        self.producer_ids = producer_ids
        self.transactional = transactional

    async def InitProducerId(
        self, request: transaction_pb2.InitProducerIdRequest, context: Context
    ) -> transaction_pb2.InitProducerIdResponse:
        try:
            result = await handle_init_producer_id(
                init_producer_id_request_from_pb(request), self.producer_ids, self.transactional
            )
        except KafkaError as e:
            return init_producer_id_response(e)
        return init_producer_id_response(result)
