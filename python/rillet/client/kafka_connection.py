"""A client connection to a broker's Kafka listener, for the client's Kafka-protocol
transport (``transport="kafka"``).

Requests are framed by the caller's thread, which writes them; one reader thread per
connection reads the responses, matches each to its request by correlation id and hands
the decoded body to the request's callback. The first request of a connection is
ApiVersions, and every request goes out at the highest version both sides know
(:meth:`KafkaConnection.request` takes the range the caller can encode). On a SASL listener
(``sasl`` given) the connection then authenticates (:mod:`rillet.client.sasl`) before any
request goes out.

A request unanswered after ``request_timeout_ms`` closes the connection, as Kafka's
clients do: its responses could no longer be trusted to follow. Whatever is outstanding
when a connection closes fails with a retriable error (``NetworkError``, or
``KafkaTimeoutError`` for the timeout), and the next request opens a new connection.

A failed authentication (SASL_AUTHENTICATION_FAILED with the broker's reason, or a mechanism
the broker does not enable) is not retried: credentials do not mend by reconnecting, so
every later request of the connection fails at once with the same error, without
connecting again, as Kafka's clients treat an AuthenticationException as fatal.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any

from rillet._core import kafka_decode_response, kafka_encode_request, kafka_frame_buffer
from rillet.client.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, ClientSasl
from rillet.client.tls_socket import TlsSocket
from rillet.errors import (
    IllegalSaslStateError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from rillet.security.tls import ClientTls

__all__ = ["API_VERSIONS", "AUTHENTICATION_FAILURES", "KafkaConnection", "Response"]

_log = logging.getLogger(__name__)

API_VERSIONS = 18
_API_VERSIONS_VERSION = 3
# SaslHandshake v1 (v0 would send the tokens without SaslAuthenticate's framing), then
# SaslAuthenticate at the highest version both sides know.
_SASL_HANDSHAKE_VERSIONS = (1, 1)
_SASL_AUTHENTICATE_VERSIONS = (0, 2)
# The failures of a SASL exchange that reconnecting would not mend.
AUTHENTICATION_FAILURES = (
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
)
# Responses bigger than this are refused (and the connection closed): the client's own
# requests never ask for more.
_MAX_RESPONSE_BYTES = 256 << 20
_SIZE = struct.Struct(">i")
# A connection's byte stream: a socket, or TLS over one.
_Stream = socket.socket | TlsSocket

# A request's outcome: the decoded response (None when none is expected), or why there is
# none.
Response = Callable[[Any, KafkaError | None], None]
# How a response frame (after its size prefix) is read, given its version; by default
# into a dict by Kafka's schemas.
Decode = Callable[[int, bytes], Any]


@dataclass(slots=True)
class _Pending:
    api_key: int
    version: int
    on_done: Response
    deadline: float
    decode: Decode | None


class KafkaConnection:
    """One broker's connection, opened on the first request. Thread safe."""

    def __init__(
        self,
        address: str,
        client_id: str,
        request_timeout_ms: int,
        tls: ClientTls | None = None,
        sasl: ClientSasl | None = None,
    ) -> None:
        host, _, port = address.rpartition(":")
        self.address = address
        self._host, self._port = host.strip("[]"), int(port)
        self._client_id = client_id
        self._tls = tls.ssl_context() if tls is not None else None
        self._sasl = sasl
        self._timeout_s = request_timeout_ms / 1000
        self._lock = threading.Lock()  # guards the fields below and orders writes
        self._sock: _Stream | None = None
        self._versions: dict[int, tuple[int, int]] = {}
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._closed = False
        # Why authentication failed, once it has: every later request fails so too.
        self._auth_failure: KafkaError | None = None

    # -- requests --------------------------------------------------------------------------

    def request(
        self,
        api_key: int,
        versions: tuple[int, int],
        encode: Callable[[int, int], bytes],
        on_done: Response,
        expect_response: bool = True,
        decode: Decode | None = None,
    ) -> None:
        """Send one request: ``encode(version, correlation_id)`` frames it, at the highest
        version in ``versions`` the broker has too, and ``decode`` reads its response (by
        default a dict by Kafka's schemas). ``on_done`` runs once, on the reader thread (or
        on this one, when the request could not be sent or expects no response)."""
        try:
            with self._lock:
                sock = self._connected()
                version = self._pick(api_key, versions)
                correlation_id = self._correlation_id()
                frame = encode(version, correlation_id)
                if expect_response:
                    self._pending[correlation_id] = _Pending(
                        api_key, version, on_done, time.monotonic() + self._timeout_s, decode
                    )
                try:
                    sock.sendall(frame)
                except OSError as e:
                    self._pending.pop(correlation_id, None)
                    self._shut(sock)
                    raise NetworkError(f"sending to {self.address} failed: {e}") from e
        except KafkaError as e:
            on_done(None, e)
            return
        if not expect_response:
            on_done(None, None)

    def submit(
        self,
        api_key: int,
        versions: tuple[int, int],
        body: dict[str, Any],
        decode: Decode | None = None,
    ) -> Future[Any]:
        """A request from a dict body; the future completes with its decoded response, or
        fails with why there is none (a future the caller cancelled stays cancelled)."""
        future: Future[Any] = Future()

        def on_done(response: Any, error: KafkaError | None) -> None:
            with contextlib.suppress(InvalidStateError):
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(response)

        self.request(
            api_key,
            versions,
            lambda v, cid: kafka_encode_request(api_key, v, cid, self._client_id, body),
            on_done,
            decode=decode,
        )
        return future

    def call(self, api_key: int, versions: tuple[int, int], body: dict[str, Any]) -> dict[str, Any]:
        """A request from a dict body, waiting for its response (metadata and the like)."""
        try:
            response: dict[str, Any] = self.submit(api_key, versions, body).result(
                self._timeout_s + 1
            )
        except FutureTimeoutError:
            raise KafkaTimeoutError(
                f"no response from {self.address} in {self._timeout_s} s"
            ) from None
        return response

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sock = self._sock
        if sock is not None:
            self._fail_all(sock, NetworkError(f"connection to {self.address} closed"))

    # -- the connection --------------------------------------------------------------------

    def _correlation_id(self) -> int:
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        return self._next_id

    def _pick(self, api_key: int, versions: tuple[int, int]) -> int:
        known = self._versions.get(api_key)
        lo, hi = versions
        if known is None or known[1] < lo or known[0] > hi:
            raise UnsupportedVersionError(
                f"{self.address} does not serve api key {api_key} at versions {lo}-{hi}"
            )
        return min(hi, known[1])

    def _connected(self) -> _Stream:
        """The open socket, connecting (and asking ApiVersions) first if there is none
        (call under the lock)."""
        if self._closed:
            raise NetworkError(f"connection to {self.address} closed")
        if self._sock is not None:
            return self._sock
        if self._auth_failure is not None:
            failure = self._auth_failure
            raise type(failure)(failure.message)
        try:
            raw = socket.create_connection((self._host, self._port), timeout=self._timeout_s)
        except OSError as e:
            raise NetworkError(f"connecting to {self.address} failed: {e}") from e
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock = raw if self._tls is None else TlsSocket(raw, self._tls, self._host)
        except ssl.SSLError as e:
            raw.close()
            raise SslAuthenticationError(f"TLS handshake with {self.address} failed: {e}") from e
        except OSError as e:
            raw.close()
            raise NetworkError(f"connecting to {self.address} failed: {e}") from e
        try:
            self._versions = self._api_versions(sock)
        except ssl.SSLError as e:
            sock.close()
            raise SslAuthenticationError(f"{self.address} refused the TLS connection: {e}") from e
        except (ConnectionError, EOFError) as e:
            sock.close()
            if self._tls is None:
                raise NetworkError(f"connecting to {self.address} failed: {e}") from e
            # A TLS 1.3 server checks the client's certificate after the client's side of the
            # handshake is done: a refusal shows as the connection closing.
            raise SslAuthenticationError(
                f"{self.address} closed the TLS connection after the handshake: it does not "
                f"accept this client's certificate, or is not a Kafka listener ({e})"
            ) from e
        except (OSError, KafkaError) as e:
            # EOF: the listener closed on ApiVersions (one that does not speak Kafka's protocol).
            sock.close()
            raise NetworkError(f"connecting to {self.address} failed: {e}") from e
        if self._sasl is not None:
            self._authenticate(sock, self._sasl)
        # Reads block for at most a second, so the reader notices requests timing out.
        sock.settimeout(1.0)
        self._sock = sock
        threading.Thread(
            target=self._read, args=(sock,), name=f"rillet-kafka-{self.address}", daemon=True
        ).start()
        return sock

    def _api_versions(self, sock: _Stream) -> dict[int, tuple[int, int]]:
        correlation_id = self._correlation_id()
        body = {"client_software_name": "rillet", "client_software_version": "0"}
        sock.sendall(
            kafka_encode_request(
                API_VERSIONS, _API_VERSIONS_VERSION, correlation_id, self._client_id, body
            )
        )
        _, response = kafka_decode_response(API_VERSIONS, _API_VERSIONS_VERSION, _read_frame(sock))
        if response["error_code"]:
            raise error_for_code(response["error_code"])(
                f"ApiVersions v{_API_VERSIONS_VERSION} refused by {self.address}"
            )
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}

    def _authenticate(self, sock: _Stream, sasl: ClientSasl) -> None:
        """SaslHandshake, then SaslAuthenticate rounds until the mechanism is done (call
        under the lock, before the reader starts); closes ``sock`` when it fails."""
        try:
            handshake = self._exchange(
                sock, SASL_HANDSHAKE, _SASL_HANDSHAKE_VERSIONS, {"mechanism": sasl.mechanism}
            )
            code = handshake["error_code"]
            if code == UnsupportedSaslMechanismError.code:
                raise UnsupportedSaslMechanismError(
                    f"{self.address} does not enable SASL mechanism {sasl.mechanism}: it "
                    f"enables {', '.join(handshake['mechanisms']) or 'none'}"
                )
            if code == IllegalSaslStateError.code:
                raise IllegalSaslStateError(
                    f"{self.address} refused SaslHandshake: it is not a SASL listener "
                    "(security.protocol PLAINTEXT or SSL)"
                )
            if code:
                raise error_for_code(code)(f"SaslHandshake refused by {self.address}")
            exchange = sasl.exchange()
            token = next(exchange)
            while True:
                answer = self._exchange(
                    sock, SASL_AUTHENTICATE, _SASL_AUTHENTICATE_VERSIONS, {"auth_bytes": token}
                )
                code = answer["error_code"]
                if code:
                    reason = answer.get("error_message") or "no reason given"
                    raise error_for_code(code)(
                        f"SASL {sasl.mechanism} authentication of {sasl.username} with "
                        f"{self.address} failed: {reason}"
                    )
                try:
                    token = exchange.send(bytes(answer["auth_bytes"]))
                except StopIteration:
                    return
        except AUTHENTICATION_FAILURES as e:
            sock.close()
            self._auth_failure = e
            raise
        except KafkaError:
            sock.close()
            raise
        except TimeoutError as e:
            sock.close()
            raise KafkaTimeoutError(
                f"{self.address} did not answer SASL authentication in {self._timeout_s} s"
            ) from e
        except (OSError, EOFError) as e:
            sock.close()
            raise NetworkError(
                f"{self.address} closed the connection during SASL authentication: {e}"
            ) from e

    def _exchange(
        self, sock: _Stream, api_key: int, versions: tuple[int, int], body: dict[str, Any]
    ) -> dict[str, Any]:
        """One request of the connection's opening, answered before the reader starts."""
        version = self._pick(api_key, versions)
        correlation_id = self._correlation_id()
        sock.sendall(kafka_encode_request(api_key, version, correlation_id, self._client_id, body))
        answered, response = kafka_decode_response(api_key, version, _read_frame(sock))
        if answered != correlation_id:
            raise NetworkError(
                f"{self.address} answered correlation id {answered}, not {correlation_id}"
            )
        result: dict[str, Any] = response
        return result

    def _read(self, sock: _Stream) -> None:
        """The reader thread: completes requests as their responses come, until the
        connection closes or a request times out."""
        try:
            while True:
                try:
                    frame = _read_frame(sock)
                except TimeoutError:
                    self._check_deadlines(sock)
                    continue
                correlation_id = _SIZE.unpack_from(frame)[0]
                with self._lock:
                    pending = self._pending.pop(correlation_id, None)
                if pending is None:
                    raise NetworkError(
                        f"{self.address} answered correlation id {correlation_id}, "
                        "which no request has"
                    )
                try:
                    if pending.decode is not None:
                        body = pending.decode(pending.version, frame)
                    else:
                        _, body = kafka_decode_response(pending.api_key, pending.version, frame)
                except KafkaError as e:
                    pending.on_done(None, e)
                    raise
                pending.on_done(body, None)
        except KafkaTimeoutError as e:
            self._fail_all(sock, e)
        except (OSError, EOFError, KafkaError) as e:
            self._fail_all(sock, NetworkError(f"connection to {self.address}: {e}"))
        except Exception as e:  # a callback's bug must not leave requests waiting forever
            _log.exception("reading from %s failed", self.address)
            self._fail_all(sock, NetworkError(f"connection to {self.address}: {e}"))

    def _check_deadlines(self, sock: _Stream) -> None:
        now = time.monotonic()
        with self._lock:
            late = any(p.deadline < now for p in self._pending.values())
        if late:
            raise KafkaTimeoutError(
                f"a request to {self.address} had no response in {self._timeout_s} s"
            )

    def _shut(self, sock: _Stream) -> None:
        """Close ``sock`` and forget it (call under the lock); its reader fails what is
        outstanding on it."""
        if self._sock is sock:
            self._sock = None
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def _fail_all(self, sock: _Stream, error: KafkaError) -> None:
        with self._lock:
            self._shut(sock)
            pending, self._pending = list(self._pending.values()), {}
        for p in pending:
            try:
                p.on_done(None, error)
            except Exception:
                _log.exception("a request's callback failed")


def _read_frame(sock: _Stream) -> bytes:
    """One response frame, without its size prefix."""
    size = _SIZE.unpack(_read_exactly(sock, 4))[0]
    if not 4 <= size <= _MAX_RESPONSE_BYTES:
        raise NetworkError(f"a response of {size} bytes")
    return _read_exactly(sock, size)


def _read_exactly(sock: _Stream, n: int) -> bytes:
    """``n`` bytes from ``sock``, received straight into the bytes returned (no copy: a
    fetch response is a megabyte or more)."""
    body, into = kafka_frame_buffer(n)
    try:
        got = 0
        while got < n:
            k = sock.recv_into(into[got:])
            if k == 0:
                raise EOFError("the broker closed the connection")
            got += k
    finally:
        into.release()  # written (or abandoned): the bytes may be read now
    return body
