"""SASL on gRPC listeners (``SASL_PLAINTEXT``, ``SASL_SSL``): the SaslService exchange
(``proto/rillet/v1/sasl.proto``) and the session tokens it ends with.

gRPC multiplexes calls over connections it opens and closes as it likes, so a principal
cannot belong to a connection as on a Kafka listener. A client authenticates once per
broker instead, with the same exchange Kafka's SaslHandshake and SaslAuthenticate carry
(:class:`~rillet.security.sasl.SaslConnection`: PLAIN in one round, SCRAM in two, checked
against the listener's JAAS users and the metadata log's SCRAM credentials), and is given a
session token that its other calls send as call credentials (``authorization: Bearer
<token>``). A round of an exchange that is not the last is kept under a random exchange id
for the next call, for :data:`EXCHANGE_TIMEOUT_S` at most and :data:`MAX_PENDING` exchanges
at once (the oldest dropped), so that clients that never finish cannot fill the broker.

A token is the principal with an HMAC-SHA256 over it and the listener's name, under a key
made when the listener starts: nothing is stored per client, a token is good on the listener
that issued it only, and none survives a restart (the client then authenticates again). As
Kafka with its default ``connections.max.reauth.ms`` (0), a session lasts while the broker
runs: a credential deleted later does not end it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from rillet.protocol.gen.v1 import sasl_pb2, sasl_pb2_grpc
from rillet.security.principal import KafkaPrincipal
from rillet.security.sasl import Answer, ListenerSasl, SaslConnection

__all__ = [
    "AUTHENTICATE_METHOD",
    "EXCHANGE_TIMEOUT_S",
    "MAX_PENDING",
    "GrpcSasl",
    "SaslServicer",
    "SessionTokens",
]

AUTHENTICATE_METHOD = "/rillet.v1.SaslService/Authenticate"
EXCHANGE_TIMEOUT_S = 30.0
MAX_PENDING = 1024

_ILLEGAL_SASL_STATE, _SASL_AUTHENTICATION_FAILED = 34, 58
_BEARER = "bearer "


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionTokens:
    """The session tokens of one listener (see the module doc)."""

    def __init__(self, listener_name: str, key: bytes | None = None) -> None:
        self.listener_name = listener_name
        self._key = key if key is not None else secrets.token_bytes(32)

    def _mac(self, payload: bytes) -> bytes:
        message = self.listener_name.encode() + b"\x00" + payload
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def issue(self, principal: KafkaPrincipal) -> str:
        payload = f"{principal.type}:{principal.name}".encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def principal(self, token: str) -> KafkaPrincipal | None:
        """Whom ``token`` was issued to, or None when this listener did not issue it."""
        payload_text, dot, mac_text = token.partition(".")
        if not dot:
            return None
        try:
            payload, mac = _unb64(payload_text), _unb64(mac_text)
        except (binascii.Error, ValueError):
            return None
        if not hmac.compare_digest(mac, self._mac(payload)):
            return None
        kind, _, name = payload.decode("utf-8", "replace").partition(":")
        return KafkaPrincipal(kind, name)


class GrpcSasl:
    """One SASL gRPC listener: its exchanges in progress and its tokens. ``now`` is a
    monotonic clock in seconds."""

    def __init__(
        self,
        listener: ListenerSasl,
        *,
        now: Callable[[], float] = time.monotonic,
        tokens: SessionTokens | None = None,
    ) -> None:
        self.listener = listener
        self.tokens = tokens or SessionTokens(listener.listener_name)
        self._now = now
        # exchange id -> (the exchange, when it was started)
        self._pending: OrderedDict[bytes, tuple[SaslConnection, float]] = OrderedDict()

    @property
    def listener_name(self) -> str:
        return self.listener.listener_name

    def authenticate(
        self, request: sasl_pb2.SaslAuthenticateRequest
    ) -> sasl_pb2.SaslAuthenticateResponse:
        """One round of an exchange (see the module doc)."""
        self._expire()
        if request.exchange_id:
            found = self._pending.pop(bytes(request.exchange_id), None)
            if found is None:
                return _failed(
                    _ILLEGAL_SASL_STATE,
                    "Unknown SASL exchange: it timed out or was already finished; start again",
                )
            exchange = found[0]
            if exchange.mechanism != request.mechanism:
                return _failed(
                    _ILLEGAL_SASL_STATE,
                    f"The exchange was started with {exchange.mechanism}, not {request.mechanism}",
                )
        else:
            exchange = self.listener.connection()
            shake = exchange.handshake(request.mechanism)
            if shake.close:
                return sasl_pb2.SaslAuthenticateResponse(
                    error_code=int(str(shake.body["error_code"])),
                    error_message=(
                        f"Unsupported SASL mechanism {request.mechanism}: listener "
                        f"{self.listener_name} enables {', '.join(self.listener.mechanisms)}"
                    ),
                    mechanisms=list(self.listener.mechanisms),
                )
        answer = exchange.authenticate(bytes(request.auth_bytes))
        return self._answer(exchange, answer)

    def _answer(
        self, exchange: SaslConnection, answer: Answer
    ) -> sasl_pb2.SaslAuthenticateResponse:
        body = answer.body
        code = int(str(body["error_code"]))
        if code:
            return _failed(code, str(body.get("error_message") or ""))
        token = body.get("auth_bytes")
        response = sasl_pb2.SaslAuthenticateResponse(
            auth_bytes=token if isinstance(token, bytes) else b""
        )
        if exchange.principal is not None:
            response.session_token = self.tokens.issue(exchange.principal)
            return response
        exchange_id = secrets.token_bytes(16)
        self._pending[exchange_id] = (exchange, self._now())
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        response.exchange_id = exchange_id
        return response

    def _expire(self) -> None:
        deadline = self._now() - EXCHANGE_TIMEOUT_S
        while self._pending:
            exchange_id, (_, started) = next(iter(self._pending.items()))
            if started > deadline:
                return
            del self._pending[exchange_id]

    def principal(self, metadata: Iterable[tuple[str, Any]] | None) -> KafkaPrincipal | str:
        """The principal of a call's ``authorization`` metadata, or why there is none (the
        message of the UNAUTHENTICATED it is refused with)."""
        for key, value in metadata or ():
            if key != "authorization":
                continue
            text = value.decode() if isinstance(value, bytes) else str(value)
            if text[: len(_BEARER)].lower() != _BEARER:
                break
            principal = self.tokens.principal(text[len(_BEARER) :].strip())
            if principal is None:
                return (
                    f"SASL_AUTHENTICATION_FAILED: the session token is not one listener "
                    f"{self.listener_name} issued (it restarted since?): authenticate again "
                    "with SaslService.Authenticate"
                )
            return principal
        return (
            f"SASL_AUTHENTICATION_FAILED: listener {self.listener_name} is a SASL listener: "
            "authenticate with SaslService.Authenticate and send its session token as "
            "'authorization: Bearer <token>' metadata"
        )


def _failed(code: int, message: str) -> sasl_pb2.SaslAuthenticateResponse:
    return sasl_pb2.SaslAuthenticateResponse(error_code=code, error_message=message)


class SaslServicer(sasl_pb2_grpc.SaslServiceServicer):
    """SaslService over :class:`GrpcSasl`; a failed round is answered after
    ``failed_authentication_delay_ms`` (Kafka's ``connection.failed.authentication.delay.ms``),
    which slows down guessing passwords."""

    def __init__(self, sasl: GrpcSasl, failed_authentication_delay_ms: int = 100) -> None:
        self.sasl = sasl
        self._delay_s = failed_authentication_delay_ms / 1000

    async def Authenticate(
        self,
        request: sasl_pb2.SaslAuthenticateRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> sasl_pb2.SaslAuthenticateResponse:
        response = self.sasl.authenticate(request)
        if response.error_code == _SASL_AUTHENTICATION_FAILED and self._delay_s > 0:
            await asyncio.sleep(self._delay_s)
        return response
