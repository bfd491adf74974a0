"""ACLs on gRPC listeners: with an authorizer, a call is served only to a principal allowed
CLUSTER_ACTION on the cluster (or a super user), the principal of brokers and controllers
talking to each other, and of operators' tools run as a super user.

The caller is the principal of its client certificate on an SSL listener (mapped with
``ssl.principal.mapping.rules``), else ``User:ANONYMOUS``; gRPC listeners take no SASL yet.
Per-resource ACLs (a producer allowed WRITE on one topic) are enforced on Kafka-protocol
listeners, whose clients authenticate with SASL or certificates. A refused call ends with
PERMISSION_DENIED and the message of Kafka's CLUSTER_AUTHORIZATION_FAILED; the health and
reflection services stay open, as they say nothing about the data.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from rillet.broker.authorizer import BrokerAuthorizer
from rillet.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from rillet.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper

__all__ = ["ClusterActionGate"]

_OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _peer_host(peer: str) -> str:
    """``ipv4:127.0.0.1:5555`` or ``ipv6:[::1]:5555`` as the host alone."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return rest.rpartition(":")[0] if kind == "ipv4" else rest


class ClusterActionGate(grpc.aio.ServerInterceptor):
    """See the module doc. ``mapper`` names certificate principals."""

    def __init__(self, authorizer: BrokerAuthorizer, mapper: SslPrincipalMapper | None) -> None:
        self.authorizer = authorizer
        self.mapper = mapper

    def principal(self, context: grpc.aio.ServicerContext[Any, Any]) -> KafkaPrincipal:
        certs = list(context.auth_context().get("x509_pem_cert") or ())
        if not certs or self.mapper is None:
            return ANONYMOUS
        return self.mapper.principal(ssl.PEM_cert_to_DER_cert(certs[0].decode()))

    def _refusal(self, context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
        principal = self.principal(context)
        host = _peer_host(context.peer())
        if self.authorizer.authorize(
            principal, host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            return None
        return (
            f"CLUSTER_AUTHORIZATION_FAILED: {principal} is not allowed CLUSTER_ACTION on the "
            "cluster; gRPC listeners serve brokers and super users (use a Kafka-protocol "
            "listener for per-topic ACLs)"
        )

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(_OPEN_SERVICES):
            return handler
        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            async def unary_unary(request: Any, context: Any) -> Any:
                refusal = self._refusal(context)
                if refusal is not None:
                    await context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
                return await inner_uu(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary, handler.request_deserializer, handler.response_serializer
            )
        # Every Rillet service is unary; refuse what could not be checked.
        raise NotImplementedError(f"{method}: only unary calls are authorized")
