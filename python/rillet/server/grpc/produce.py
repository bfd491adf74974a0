"""ProduceService over :meth:`BrokerApis.handle_produce`, with client quotas
(:mod:`rillet.server.grpc.quotas`) and, with an authorizer, WRITE checked per topic: a topic
the caller may not write is answered TOPIC_AUTHORIZATION_FAILED, the others are appended."""

from __future__ import annotations

from typing import Any

import grpc

from rillet.broker.apis import BrokerApis
from rillet.protocol.gen.v1 import produce_pb2, produce_pb2_grpc
from rillet.protocol.produce import (
    ProduceWire,
    produce_request_from_pb,
    produce_request_from_wire,
    produce_response,
    read_produce_request,
)
from rillet.scheduler import Clock
from rillet.security.acls import AclOperation
from rillet.server.grpc.acl_policy import topic_refusals
from rillet.server.grpc.authorization import call_session
from rillet.server.grpc.quotas import caller, hold

__all__ = ["ProduceServicer", "add_produce_servicer"]

Context = grpc.aio.ServicerContext[object, object]


class ProduceServicer(produce_pb2_grpc.ProduceServiceServicer):
    """Produce takes a request as :func:`add_produce_servicer` reads it (its wire bytes with
    each partition's batches located in place); a ``ProduceRequest`` message works too.
    ``clock`` stamps records sent without a timestamp."""

    def __init__(self, apis: BrokerApis, clock: Clock) -> None:
        self.apis = apis
        self.clock = clock

    async def Produce(  # takes wire bytes too (see add_produce_servicer)
        self, request: produce_pb2.ProduceRequest | ProduceWire, context: Context
    ) -> produce_pb2.ProduceResponse:
        quotas = self.apis.quotas
        throttle_ms = 0
        if quotas is not None and quotas.active():
            # Recorded as soon as let through, so that calls held with it see its bytes.
            who = caller(context)
            await hold(lambda: quotas.produce_wait_s(*who))
            size = len(request[0]) if isinstance(request, tuple) else request.ByteSize()
            throttle_ms = quotas.record_produce(*who, size)
        if isinstance(request, tuple):
            entries, acks, timeout_ms = produce_request_from_wire(request, self.clock())
            transactional_id = request[1].transactional_id
        else:
            entries, acks, timeout_ms = produce_request_from_pb(request, self.clock())
            has_id = request.HasField("transactional_id")
            transactional_id = request.transactional_id if has_id else None
        refused = topic_refusals(call_session(), AclOperation.WRITE, (e[0] for e in entries))
        if refused:
            entries = [(t, p, refused[t]) if t in refused else (t, p, r) for t, p, r in entries]
        results = await self.apis.handle_produce(entries, acks, timeout_ms, transactional_id)
        response = produce_response(entries, results)
        response.throttle_time_ms = throttle_ms
        return response


def add_produce_servicer(servicer: ProduceServicer, server: grpc.aio.Server) -> None:
    """Register ProduceService as the generated ``add_ProduceServiceServicer_to_server``
    does, with a request deserializer that reads the request in place."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Produce": grpc.unary_unary_rpc_method_handler(
            servicer.Produce,
            request_deserializer=read_produce_request,
            response_serializer=produce_pb2.ProduceResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("rillet.v1.ProduceService", handlers),)
    )
    server.add_registered_method_handlers("rillet.v1.ProduceService", handlers)
