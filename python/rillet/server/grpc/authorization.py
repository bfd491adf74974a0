"""Who a gRPC call is from, and whether it may be served: the interceptor of a gRPC listener
with SASL, TLS client certificates or an authorizer.

The caller is, on a SASL listener, the principal of the call's session token
(:mod:`rillet.server.grpc.sasl`; a call without a valid one is refused UNAUTHENTICATED with
SASL_AUTHENTICATION_FAILED, except SaslService itself); else the principal of its client
certificate on an SSL listener (mapped with ``ssl.principal.mapping.rules``); else
``User:ANONYMOUS``. Handlers read it with :func:`call_principal` (client quotas go by it).

With an authorizer, each call is checked against the ACLs as Kafka checks the request it
stands for (:mod:`rillet.server.grpc.acl_policy`): a refused call ends with
PERMISSION_DENIED and Kafka's error name and message (TOPIC_AUTHORIZATION_FAILED: ...), and
listing calls answer only what the caller may describe. Produce, Fetch and Metadata answer
a topic the caller may not use with its error in the response instead, as Kafka does, so
that one such topic does not fail the others (:func:`call_session`). The health and
reflection services stay open, as they say nothing about the data.
"""

from __future__ import annotations

import contextvars
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from rillet.broker.authorizer import BrokerAuthorizer
from rillet.errors import SslAuthenticationError
from rillet.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper
from rillet.server.grpc.acl_policy import CallSession, check_call, filter_response
from rillet.server.grpc.sasl import AUTHENTICATE_METHOD, GrpcSasl

__all__ = ["CallGate", "call_principal", "call_session", "peer_host"]

_OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

_PRINCIPAL: contextvars.ContextVar[KafkaPrincipal] = contextvars.ContextVar(
    "rillet_grpc_principal", default=ANONYMOUS
)
_SESSION: contextvars.ContextVar[CallSession | None] = contextvars.ContextVar(
    "rillet_grpc_session", default=None
)


def call_principal() -> KafkaPrincipal:
    """The principal of the gRPC call being served (``User:ANONYMOUS`` without a gate)."""
    return _PRINCIPAL.get()


def call_session() -> CallSession | None:
    """The gRPC call being served as the authorizer sees it (None without an authorizer):
    handlers that answer per partition (Produce, Fetch, Metadata) check their topics with
    it, as Kafka does, rather than refuse the whole call."""
    return _SESSION.get()


def peer_host(peer: str) -> str:
    """``ipv4:127.0.0.1:5555`` or ``ipv6:%5B::1%5D:5555`` (gRPC escapes the brackets) as
    the host alone."""
    kind, _, rest = urllib.parse.unquote(peer).partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return rest.rpartition(":")[0] if kind == "ipv4" else rest


class CallGate(grpc.aio.ServerInterceptor):
    """See the module doc: ``sasl`` for a SASL listener, ``mapper`` names certificate
    principals, and ``authorizer`` (None: every call is allowed) checks the ACLs."""

    def __init__(
        self,
        authorizer: BrokerAuthorizer | None,
        mapper: SslPrincipalMapper | None = None,
        sasl: GrpcSasl | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.mapper = mapper
        self.sasl = sasl

    def principal(self, context: grpc.aio.ServicerContext[Any, Any]) -> KafkaPrincipal | str:
        """The caller, or why it is not authenticated."""
        if self.sasl is not None:
            return self.sasl.principal(context.invocation_metadata())
        certs = list(context.auth_context().get("x509_pem_cert") or ())
        if not certs or self.mapper is None:
            return ANONYMOUS
        try:
            return self.mapper.principal(ssl.PEM_cert_to_DER_cert(certs[0].decode()))
        except SslAuthenticationError as e:
            return f"SSL_AUTHENTICATION_FAILED: {e.message}"

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(_OPEN_SERVICES) or method == AUTHENTICATE_METHOD:
            return handler
        if handler.unary_unary is None:
            # Every Rillet service is unary: a streaming one added later must get its own
            # check before it is served, so it fails at registration, never unchecked.
            raise TypeError(f"{method}: a streaming RPC has no authorization check")
        inner = handler.unary_unary
        authorizer = self.authorizer

        async def unary_unary(request: Any, context: Any) -> Any:
            principal = self.principal(context)
            if isinstance(principal, str):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, principal)
            assert isinstance(principal, KafkaPrincipal)
            session = None
            if authorizer is not None:
                host = peer_host(context.peer())
                session = CallSession(principal, host, authorizer, authorizer.image)
                refusal = check_call(method, request, session)
                if refusal is not None:
                    await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
            token, session_token = _PRINCIPAL.set(principal), _SESSION.set(session)
            try:
                response = await inner(request, context)
            finally:
                _PRINCIPAL.reset(token)
                _SESSION.reset(session_token)
            if session is not None:
                response = filter_response(method, request, response, session)
            return response

        return grpc.unary_unary_rpc_method_handler(
            unary_unary, handler.request_deserializer, handler.response_serializer
        )
