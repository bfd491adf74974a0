"""The client's side of SASL on a gRPC listener (``proto/rillet/v1/sasl.proto``): call
credentials for every call on a channel.

Before its first call to a broker, the channel runs the mechanism's exchange
(:meth:`~rillet.client.sasl.ClientSasl.exchange`: PLAIN in one round, SCRAM in two, the
broker's final SCRAM message checked) over SaslService.Authenticate, and keeps the session
token it ends with; every call then carries it as ``authorization: Bearer <token>``. A
refused exchange raises the broker's error (SASL_AUTHENTICATION_FAILED with its reason). A
call refused UNAUTHENTICATED (the broker restarted, so the token is no longer one it issued)
drops the token: a blocking call authenticates again and is sent once more at once; a
future's caller sees the error, and its next call authenticates again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import grpc

from rillet.client.sasl import ClientSasl
from rillet.errors import IllegalSaslStateError, error_for_code
from rillet.protocol.gen.v1 import sasl_pb2, sasl_pb2_grpc

__all__ = ["SaslCallCredentials"]


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class _Details(_CallDetails, grpc.ClientCallDetails):
    """Call details with the ``authorization`` metadata added."""


class SaslCallCredentials(grpc.UnaryUnaryClientInterceptor):
    """Adds the session token of ``sasl`` on the broker at ``address`` (authenticated over
    ``channel``, the channel without this interceptor) to each call. ``timeout_s`` bounds
    each round of the exchange."""

    def __init__(
        self, channel: grpc.Channel, sasl: ClientSasl, address: str, timeout_s: float = 30.0
    ) -> None:
        self._stub = sasl_pb2_grpc.SaslServiceStub(channel)
        self.sasl = sasl
        self.address = address
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._token: str | None = None

    def token(self) -> str:
        """The session token, authenticating first when there is none."""
        with self._lock:
            if self._token is None:
                self._token = self._authenticate()
            return self._token

    def forget(self, token: str) -> None:
        """Drop ``token`` (the broker no longer takes it), unless a new one replaced it."""
        with self._lock:
            if self._token == token:
                self._token = None

    def _authenticate(self) -> str:
        exchange = self.sasl.exchange()
        client_token = next(exchange)
        exchange_id = b""
        while True:
            request = sasl_pb2.SaslAuthenticateRequest(
                mechanism=self.sasl.mechanism, auth_bytes=client_token, exchange_id=exchange_id
            )
            try:
                response = self._stub.Authenticate(request, timeout=self.timeout_s)
            except grpc.RpcError as e:
                if isinstance(e, grpc.Call) and e.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise IllegalSaslStateError(
                        f"{self.address} is not a SASL listener (it serves no SaslService): "
                        "its security.protocol is PLAINTEXT or SSL"
                    ) from None
                raise
            if response.error_code:
                raise error_for_code(response.error_code)(
                    f"{self.sasl.mechanism} authentication of {self.sasl.username} with "
                    f"{self.address} failed: {response.error_message}"
                )
            try:
                client_token = exchange.send(bytes(response.auth_bytes))
            except StopIteration:
                break
            if response.session_token or not response.exchange_id:
                raise IllegalSaslStateError(
                    f"{self.address} ended the {self.sasl.mechanism} exchange early"
                )
            exchange_id = bytes(response.exchange_id)
        if not response.session_token:
            raise IllegalSaslStateError(
                f"{self.address} gave no session token at the end of the "
                f"{self.sasl.mechanism} exchange"
            )
        return response.session_token

    def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.ClientCallDetails, Any], Any],
        client_call_details: grpc.ClientCallDetails,
        request: Any,
    ) -> Any:
        token = self.token()
        outcome = continuation(self._with_token(client_call_details, token), request)
        if not outcome.done():  # a future: drop the token if the broker refuses it
            outcome.add_done_callback(lambda call: self._check(call, token))
            return outcome
        if outcome.code() != grpc.StatusCode.UNAUTHENTICATED:
            return outcome
        self.forget(token)
        return continuation(self._with_token(client_call_details, self.token()), request)

    def _check(self, call: Any, token: str) -> None:
        if call.code() == grpc.StatusCode.UNAUTHENTICATED:
            self.forget(token)

    @staticmethod
    def _with_token(details: grpc.ClientCallDetails, token: str) -> _Details:
        metadata = [*(details.metadata or ()), ("authorization", f"Bearer {token}")]
        return _Details(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )
