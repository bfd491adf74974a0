"""FetchService (Fetch, ListOffsets) over :class:`~rillet.broker.apis.BrokerApis`, with
client quotas (:mod:`rillet.server.grpc.quotas`) and, with an authorizer, READ checked per
topic: a topic the consumer may not read is answered TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import Any

import grpc

from rillet.broker.apis import BrokerApis
from rillet.broker.replica_manager import FetchedPartition
from rillet.protocol.fetch import (
    fetch_request_from_pb,
    fetch_response_bytes,
    list_offsets_request_from_pb,
    list_offsets_response,
    structured_fetch_response,
)
from rillet.protocol.gen.v1 import fetch_pb2, fetch_pb2_grpc
from rillet.security.acls import AclOperation
from rillet.server.grpc.acl_policy import topic_refusals
from rillet.server.grpc.authorization import call_session
from rillet.server.grpc.quotas import caller, hold

__all__ = ["FetchServicer", "add_fetch_servicer"]

Context = grpc.aio.ServicerContext[object, object]


class FetchServicer(fetch_pb2_grpc.FetchServiceServicer):
    """Fetch answers with the response's wire bytes, or with a protobuf message when the
    request asks for structured records. Register with :func:`add_fetch_servicer`, whose
    serializer takes both."""

    def __init__(self, apis: BrokerApis) -> None:
        self.apis = apis

    async def Fetch(  # type: ignore[override]  # answers wire bytes (see add_fetch_servicer)
        self, request: fetch_pb2.FetchRequest, context: Context
    ) -> fetch_pb2.FetchResponse | bytes:
        q = fetch_request_from_pb(request)
        quotas = self.apis.quotas
        if quotas is not None and (q.replica_id >= 0 or not quotas.active()):
            quotas = None  # followers are not throttled, nor is anyone without quotas
        who = caller(context) if quotas is not None else ("", "")
        max_bytes = q.max_bytes
        if quotas is not None:
            await hold(lambda: quotas.fetch_wait_s(*who))
            # As Kafka: one fetch takes at most the quota of all but one of its windows.
            max_bytes = min(max_bytes, quotas.fetch.max_bytes_in_window(*who) or max_bytes)
        refused = topic_refusals(call_session(), AclOperation.READ, (tp.topic for tp in q.wanted))
        wanted = {tp: p for tp, p in q.wanted.items() if tp.topic not in refused}
        results = await self.apis.handle_fetch(
            wanted,
            replica_id=q.replica_id,
            max_wait_ms=q.max_wait_ms,
            min_bytes=q.min_bytes,
            max_bytes=max_bytes,
        )
        for tp in q.wanted:
            if tp.topic in refused:
                results[tp] = FetchedPartition(refused[tp.topic])
        if q.structured:
            structured = structured_fetch_response(q.wanted, results)
            if quotas is not None:
                structured.throttle_time_ms = quotas.record_fetch(*who, structured.ByteSize())
            return structured
        response = fetch_response_bytes(q.wanted, results)
        if quotas is not None:
            throttle_ms = quotas.record_fetch(*who, len(response))
            if throttle_ms > 0:
                # Protobuf fields may come in any order: the throttle time goes first.
                throttled = fetch_pb2.FetchResponse(throttle_time_ms=throttle_ms)
                response = throttled.SerializeToString() + response
        return response

    async def ListOffsets(
        self, request: fetch_pb2.ListOffsetsRequest, context: Context
    ) -> fetch_pb2.ListOffsetsResponse:
        results = self.apis.handle_list_offsets(list_offsets_request_from_pb(request))
        return list_offsets_response(results)


def _serialize_fetch_response(response: fetch_pb2.FetchResponse | bytes) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()


def add_fetch_servicer(servicer: FetchServicer, server: grpc.aio.Server) -> None:
    """Register FetchService as the generated ``add_FetchServiceServicer_to_server`` does,
    with a response serializer that passes Fetch's wire bytes through."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Fetch": grpc.unary_unary_rpc_method_handler(
            servicer.Fetch,
            request_deserializer=fetch_pb2.FetchRequest.FromString,
            response_serializer=_serialize_fetch_response,
        ),
        "ListOffsets": grpc.unary_unary_rpc_method_handler(
            servicer.ListOffsets,
            request_deserializer=fetch_pb2.ListOffsetsRequest.FromString,
            response_serializer=fetch_pb2.ListOffsetsResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("rillet.v1.FetchService", handlers),)
    )
    server.add_registered_method_handlers("rillet.v1.FetchService", handlers)
