"""The gRPC request metrics interceptor on a real grpc.aio server: each unary call is
started, handled with the status it ended with (OK, the aborted code, UNKNOWN for an
exception) and timed; a refusal by a later interceptor counts with its code, and a
streaming call passes through uncounted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import generate_latest

from rillet.broker.metrics import BrokerMetrics, NodeState
from rillet.metadata.image import MetadataImage
from rillet.server.grpc.request_metrics import GrpcRequestMetrics


async def _ok(request: bytes, context: Any) -> bytes:
    return request


async def _missing(request: bytes, context: Any) -> bytes:
    await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
    raise AssertionError("abort returns no more")


async def _broken(request: bytes, context: Any) -> bytes:
    raise RuntimeError("a bug")


async def _stream(request: bytes, context: Any) -> AsyncIterator[bytes]:
    yield request
    yield request


class _Refuse(grpc.aio.ServerInterceptor):
    """Stands for the ACL gate: refuses every call of the Secret method."""

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        if not handler_call_details.method.endswith("/Secret"):
            return await continuation(handler_call_details)

        async def refuse(request: bytes, context: Any) -> bytes:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "refused")
            raise AssertionError("abort returns no more")

        return grpc.unary_unary_rpc_method_handler(refuse)


async def test_calls_are_counted_by_method_and_status_and_timed() -> None:
    metrics = BrokerMetrics(NodeState(1, MetadataImage, lambda t: 1, lambda: False, lambda: 0))
    server = grpc.aio.server(interceptors=[GrpcRequestMetrics(metrics), _Refuse()])
    unary = {
        name: grpc.unary_unary_rpc_method_handler(fn)
        for name, fn in [("Ok", _ok), ("Missing", _missing), ("Broken", _broken), ("Secret", _ok)]
    }
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "test.v1.Svc", {**unary, "Stream": grpc.unary_stream_rpc_method_handler(_stream)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _ in range(3):
                assert await channel.unary_unary("/test.v1.Svc/Ok")(b"x") == b"x"
            for method, code in [
                ("Missing", grpc.StatusCode.NOT_FOUND),
                ("Broken", grpc.StatusCode.UNKNOWN),
                ("Secret", grpc.StatusCode.PERMISSION_DENIED),
            ]:
                try:
                    await channel.unary_unary(f"/test.v1.Svc/{method}")(b"x")
                except grpc.aio.AioRpcError as e:
                    assert e.code() == code
                else:
                    raise AssertionError(f"{method} succeeded")
            assert [r async for r in channel.unary_stream("/test.v1.Svc/Stream")(b"s")] == [
                b"s",
                b"s",
            ]
    finally:
        await server.stop(None)

    text = generate_latest(metrics.registry).decode()

    def labels(method: str) -> str:
        return f'grpc_method="{method}",grpc_service="test.v1.Svc",grpc_type="unary"'

    assert f"grpc_server_started_total{{{labels('Ok')}}} 3.0" in text
    assert f'grpc_server_handled_total{{grpc_code="OK",{labels("Ok")}}} 3.0' in text
    assert f"grpc_server_handling_seconds_count{{{labels('Ok')}}} 3.0" in text
    assert f'grpc_server_handled_total{{grpc_code="NOT_FOUND",{labels("Missing")}}} 1.0' in text
    assert f'grpc_server_handled_total{{grpc_code="UNKNOWN",{labels("Broken")}}} 1.0' in text
    assert (
        f'grpc_server_handled_total{{grpc_code="PERMISSION_DENIED",{labels("Secret")}}} 1.0' in text
    )
    assert 'grpc_method="Stream"' not in text
