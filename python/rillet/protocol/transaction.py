"""TransactionService messages (``proto/rillet/v1/transaction.proto``), both ends.

A producer builds its InitProducerId with :func:`init_producer_id_request` and reads the
answer with :func:`read_init_producer_id_response`, which raises the :mod:`rillet.errors`
exception of an error code (COORDINATOR_LOAD_IN_PROGRESS and the other retriable ones have
``retriable`` set; the producer retries those). A broker decodes requests with
:func:`init_producer_id_request_from_pb` and encodes answers with
:func:`init_producer_id_response`.
"""

from __future__ import annotations

from rillet.broker.producer_id_manager import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResult,
)
from rillet.protocol.errors import error_from_wire, set_error
from rillet.protocol.gen.v1 import transaction_pb2

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "init_producer_id_request",
    "init_producer_id_request_from_pb",
    "init_producer_id_response",
    "read_init_producer_id_response",
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
