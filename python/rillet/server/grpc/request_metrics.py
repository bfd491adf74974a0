"""Counts and times the unary calls of a gRPC listener (every Rillet RPC and the health
check), as go-grpc-prometheus does: a call is started, then handled with its status code
(``OK``, the code it was aborted with, ``CANCELLED``, or ``UNKNOWN`` for an exception), and
its handling time is observed in seconds. The series are
:meth:`~rillet.broker.metrics.BrokerMetrics.grpc_method`'s; the interceptor holds no state
of its own and costs a call two counter increments and a histogram observation. Streaming
calls (health Watch, reflection) pass through uncounted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from rillet.broker.metrics import BrokerMetrics

__all__ = ["GrpcRequestMetrics"]


class GrpcRequestMetrics(grpc.aio.ServerInterceptor):
    """See the module doc. First among a listener's interceptors, it times the others too
    (a call the ACL gate refuses counts as PERMISSION_DENIED)."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        method = self.metrics.grpc_method(handler_call_details.method)

        async def unary_unary(request: Any, context: Any) -> Any:
            method.started.inc()
            started = time.perf_counter()
            code = "UNKNOWN"
            try:
                response = await inner(request, context)
                code = _code(context) or "OK"
                return response
            except asyncio.CancelledError:
                code = "CANCELLED"
                raise
            except BaseException:
                code = _code(context) or "UNKNOWN"
                raise
            finally:
                method.handling_seconds.observe(time.perf_counter() - started)
                method.handled(code).inc()

        return grpc.unary_unary_rpc_method_handler(
            unary_unary, handler.request_deserializer, handler.response_serializer
        )


def _code(context: Any) -> str | None:
    """The status code the handler set or aborted with (None: none set)."""
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else None
