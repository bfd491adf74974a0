"""Serves Kafka's binary protocol on the broker listeners not named in
``grpc.listener.names`` (Kafka's ``SocketServer``, on the broker's one event loop).

A connection carries size-prefixed frames (a 4-byte big-endian size, then the request).
Requests of one connection are answered one at a time, in order, as Kafka does. A frame
whose size is below a request header's 8 bytes or above ``socket.request.max.bytes``
closes the connection before anything is read into memory (Kafka's InvalidReceiveException),
and so does a connection idle for ``connections.max.idle.ms``. A request the broker cannot
answer (:meth:`KafkaApis.handle` returns None) closes its connection; every other error is
answered with Kafka's error code.

Fetch responses are written around their record sets, which go from the segment files to
the socket with ``sendfile`` (:func:`rillet._core.transfer`, in Rust, the GIL released), never
through user space. What the socket takes at once is sent from the event loop; the rest of a
large record set by one of ``num.network.threads`` sender threads, which waits for the
client to make room, so a slow reader never holds up the loop. An SSL listener encrypts in
user space, so there the record sets are read (by a sender thread when large) and written
through the TLS transport, as Kafka does.

An SSL listener (:class:`~rillet.security.tls.ListenerTls`) takes the client's certificate
when it has one and names its principal with ``ssl.principal.mapping.rules``; a certificate
no rule applies to closes the connection. A SASL listener
(:class:`~rillet.security.sasl.ListenerSasl`) serves a connection only once it has
authenticated with SaslHandshake and SaslAuthenticate (:mod:`rillet.security.sasl`), and
relays gRPC only to a SASL gRPC listener, where each call authenticates itself.

A connection that opens with HTTP/2's preface (``PRI * HTTP/2.0``: a gRPC client, whose first
four bytes read as a frame of 1.3 GB, which no Kafka client sends) is relayed to the broker's
gRPC listener when it has one (over TLS when that listener is an SSL one): a SASL one first,
where each call authenticates itself. With an authorizer, a relay to a gRPC listener that
does not authenticate presents no certificate, so its calls are ``User:ANONYMOUS`` there,
and only connections that are ANONYMOUS here are relayed. So Rillet's own
client and tools can bootstrap from the Kafka port, as Kafka users type it; the metadata
they get back names the gRPC listener's endpoints, where their other connections go.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import select
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from rillet import _core
from rillet._core import FileRegion, transfer
from rillet.config.listeners import Endpoint
from rillet.errors import (
    IllegalSaslStateError,
    InvalidRequestError,
    KafkaStorageError,
    SslAuthenticationError,
    UnsupportedVersionError,
)
from rillet.security.principal import ANONYMOUS, KafkaPrincipal
from rillet.security.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, ListenerSasl, SaslConnection
from rillet.security.tls import ClientTls, ListenerTls
from rillet.server.kafka.apis import (
    API_VERSIONS,
    REQUEST_HEADER_MIN_BYTES,
    KafkaApis,
    SplicedResponse,
    peek_header,
)
from rillet.server.kafka.framing import BadFrameSize, FrameProtocol
from rillet.server.kafka.request import Throttle

__all__ = ["KafkaListener"]

_log = logging.getLogger(__name__)

# The first four bytes of HTTP/2's connection preface, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".
_HTTP2_PREFACE_START = b"PRI "
_RELAY_CHUNK = 64 * 1024
# Record sets up to this size are read on the event loop for a TLS connection.
_READ_ON_LOOP_BYTES = 1024 * 1024
# A TLS connection's record sets are encrypted and written in pieces of this size: big
# enough that asyncio's TLS layers are passed a few times per megabyte (at 64 KiB they took
# more of the event loop than the encryption), small enough that the client decrypts the
# first pieces while the last are encrypted.
_TLS_WRITE_BYTES = 256 * 1024


class KafkaListener:
    """See the module doc. :attr:`bound` maps listener names to the bound ports (an endpoint
    with port 0 gets a free one)."""

    def __init__(
        self,
        apis: KafkaApis,
        *,
        max_request_bytes: int,
        idle_ms: int,
        network_threads: int = 3,
        grpc_address: tuple[str, int] | None = None,
        grpc_tls: ClientTls | None = None,
        grpc_authenticates: bool = False,
        grpc_relay_anonymous_only: bool = False,
        failed_authentication_delay_ms: int = 100,
    ) -> None:
        self.apis = apis
        # Send what of a fetch's record sets a socket does not take at once (num.network.threads).
        self._senders = ThreadPoolExecutor(network_threads, thread_name_prefix="kafka-sendfile")
        # Where a gRPC client that connected here is relayed (the module doc).
        self.grpc_address = grpc_address
        # Whether that gRPC listener is a SASL one: calls relayed from a SASL listener must
        # authenticate there, with session tokens.
        self.grpc_authenticates = grpc_authenticates
        # With an authorizer and a gRPC listener that does not authenticate, relayed calls
        # are User:ANONYMOUS there: only connections that are ANONYMOUS here are relayed.
        self.grpc_relay_anonymous_only = grpc_relay_anonymous_only
        self._grpc_ssl = grpc_tls.ssl_context() if grpc_tls is not None else None
        if self._grpc_ssl is not None:
            self._grpc_ssl.set_alpn_protocols(["h2"])  # gRPC speaks HTTP/2 only
        self._tls: dict[str, ListenerTls] = {}
        self._sasl: dict[str, ListenerSasl] = {}
        # connection.failed.authentication.delay.ms
        self._failed_auth_delay_s = failed_authentication_delay_ms / 1000
        self.max_request_bytes = max_request_bytes
        self.idle_s = idle_ms / 1000 if idle_ms > 0 else None
        self.bound: dict[str, int] = {}
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()

    async def start(
        self,
        endpoints: Sequence[Endpoint],
        tls: Mapping[str, ListenerTls] | None = None,
        sasl: Mapping[str, ListenerSasl] | None = None,
    ) -> None:
        """Serve on ``endpoints``; those named in ``tls`` (SSL and SASL_SSL listeners) over
        TLS, those named in ``sasl`` (SASL listeners) to authenticated connections only."""
        loop = asyncio.get_running_loop()
        self._tls = dict(tls or {})
        self._sasl = dict(sasl or {})
        for ep in endpoints:
            listener_tls = self._tls.get(ep.listener_name)
            factory: Callable[[], asyncio.BaseProtocol]
            if listener_tls is None:
                factory = functools.partial(self._protocol, ep.listener_name)
            else:
                context = listener_tls.ssl_context()
                factory = functools.partial(_TlsGate, self, ep.listener_name, context)
            try:
                server = await loop.create_server(factory, host=ep.host or None, port=ep.port)
            except OSError as e:
                raise KafkaStorageError(f"cannot bind listener {ep}: {e}") from e
            self._servers.append(server)
            self.bound[ep.listener_name] = server.sockets[0].getsockname()[1]

    async def _authenticate(
        self,
        auth: SaslConnection,
        frame: bytes,
        writer: asyncio.StreamWriter,
        peer: object,
        listener_name: str,
    ) -> bool:
        """One request of the SASL exchange answered; False when the connection is to be
        closed (a failed authentication, logged as Kafka does, after
        ``connection.failed.authentication.delay.ms``)."""
        try:
            response, close = await _sasl_step(self.apis, auth, frame, listener_name)
        except (IllegalSaslStateError, InvalidRequestError, UnsupportedVersionError) as e:
            _log.info("Failed authentication with %s on %s (%s)", _host(peer), listener_name, e)
            return False
        if response is not None:
            writer.write(response)
            await writer.drain()
        if close or response is None:
            _log.info(
                "Failed authentication with %s on %s (SASL %s)",
                _host(peer),
                listener_name,
                "authentication failed" if auth.mechanism else "handshake refused",
            )
            await asyncio.sleep(self._failed_auth_delay_s)
            return False
        if auth.authenticated:
            _log.debug("connection from %s on %s is %s", peer, listener_name, auth.principal)
        return True

    def _principal(self, listener_name: str, writer: asyncio.StreamWriter) -> KafkaPrincipal:
        """Who the TLS connection ``writer`` is: its client certificate's principal, or
        ANONYMOUS without one; SslAuthenticationError when no mapping rule applies."""
        ssl_object: ssl.SSLObject = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        return self._tls[listener_name].principal_mapper.principal(der)

    def _protocol(self, listener_name: str) -> FrameProtocol:
        def serve(protocol: FrameProtocol) -> None:
            task = asyncio.get_running_loop().create_task(self._serve(listener_name, protocol))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

        return FrameProtocol(
            REQUEST_HEADER_MIN_BYTES,
            self.max_request_bytes,
            serve,
            # A SASL listener relays gRPC only to a SASL gRPC listener: elsewhere the calls
            # would bypass its authentication.
            _HTTP2_PREFACE_START
            if self.grpc_address is not None
            and (listener_name not in self._sasl or self.grpc_authenticates)
            else None,
        )

    async def stop(self, grace_s: float | None) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections, timeout=grace_s)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()
        self._senders.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, listener_name: str, protocol: FrameProtocol) -> None:
        writer = protocol.writer
        assert writer is not None
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        encrypted = writer.get_extra_info("ssl_object") is not None
        if not encrypted:
            # drain() waits until the socket took everything: a record set sent with
            # sendfile must not overtake bytes still in the transport's buffer. (A TLS
            # transport sends everything itself.)
            writer.transport.set_write_buffer_limits(high=0)
        sasl = self._sasl.get(listener_name)
        auth = sasl.connection() if sasl is not None else None
        principal = ANONYMOUS
        throttle = Throttle(time.monotonic)
        try:
            if encrypted:
                principal = self._principal(listener_name, writer)
                _log.debug("connection from %s on %s is %s", peer, listener_name, principal)
            while True:
                async with asyncio.timeout(self.idle_s):
                    frame = await protocol.next()
                if frame is None:
                    if protocol.relay is None or self.grpc_address is None:
                        return
                    if self.grpc_relay_anonymous_only and principal != ANONYMOUS:
                        _log.warning(
                            "not relaying gRPC from %s on %s: it is %s here, and the gRPC "
                            "listener would take its calls for User:ANONYMOUS (relaying to a "
                            "SASL gRPC listener keeps who a call is)",
                            peer,
                            listener_name,
                            principal,
                        )
                        return
                    await _relay(protocol.relay, writer, self.grpc_address, self._grpc_ssl)
                    return
                if isinstance(frame, BadFrameSize):
                    _log.warning(
                        "closing the connection from %s on %s: a frame of %d bytes (at least "
                        "%d and at most socket.request.max.bytes=%d)",
                        peer,
                        listener_name,
                        frame.size,
                        REQUEST_HEADER_MIN_BYTES,
                        self.max_request_bytes,
                    )
                    return
                if auth is not None and not auth.authenticated:
                    if not await self._authenticate(auth, frame, writer, peer, listener_name):
                        return
                    if auth.principal is not None:
                        principal = auth.principal
                    continue
                response = await self.apis.handle(frame, listener_name, host, principal, throttle)
                if response is None:
                    return
                if isinstance(response, SplicedResponse) and encrypted:
                    await _send_read(writer, response, self._senders)
                elif isinstance(response, SplicedResponse):
                    await _send_spliced(writer, response, self._senders, self.idle_s or 600.0)
                elif response:
                    writer.write(response)
                    await writer.drain()
                wait_s = throttle.remaining_s()
                if wait_s > 0:  # over its quota: the client's next request waits (muted)
                    await asyncio.sleep(wait_s)
        except (ConnectionError, TimeoutError):
            return  # the client went away, or was idle too long
        except SslAuthenticationError as e:
            _log.warning("closing the connection from %s on %s: %s", peer, listener_name, e)
        except KafkaStorageError as e:
            # sendfile failed (the client went away, or a segment shrank under the read):
            # part of a response is on the wire, so the connection cannot go on.
            _log.info("closing the connection from %s on %s: %s", peer, listener_name, e)
        except asyncio.CancelledError:
            return  # the listener is stopping
        except Exception:  # a bug: close this connection, keep serving the others
            _log.exception("serving a Kafka connection from %s failed", peer)
        finally:
            writer.close()


async def _sasl_step(
    apis: KafkaApis, auth: SaslConnection, frame: bytes, listener_name: str
) -> tuple[bytes | None, bool]:
    """A request of a connection not authenticated yet: ApiVersions, SaslHandshake or
    SaslAuthenticate. Its response frame (None: none, close), and whether to close after."""
    if auth.raw_tokens:
        # After SaslHandshake v0: the frame is the mechanism's bytes, and so is the answer
        # (PLAIN's is empty; SCRAM's are the server's messages).
        answer = auth.authenticate(frame)
        if answer.close:
            return None, True
        token = answer.body["auth_bytes"]
        assert isinstance(token, bytes)
        return len(token).to_bytes(4, "big") + token, False
    api_key, version, correlation_id = peek_header(frame)
    if api_key == API_VERSIONS:
        response = await apis.handle(frame, listener_name)
        return (response if isinstance(response, bytes) else None), False
    served = apis.supported.get(api_key)
    if api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE) or served is None:
        raise IllegalSaslStateError(
            f"Unexpected Kafka request of type {api_key} during SASL handshake"
        )
    if not served[0] <= version <= served[1]:
        raise IllegalSaslStateError(
            f"SASL request {api_key} v{version} is not supported (v{served[0]}-{served[1]})"
        )
    body = _core.kafka_decode_request(frame)[4]
    if api_key == SASL_HANDSHAKE:
        answer = auth.handshake(str(body["mechanism"]), version)
    else:
        answer = auth.authenticate(bytes(body["auth_bytes"]))
    encoded = _core.kafka_encode_response(api_key, version, correlation_id, answer.body)
    return encoded, answer.close


class _TlsGate(asyncio.Protocol):
    """A new connection to an SSL listener: its TLS handshake, then the connection handed to
    a :class:`FrameProtocol` over the TLS transport. A failed handshake (an untrusted or
    expired certificate, none where one is required, plaintext) is logged, as Kafka logs a
    failed authentication, and the connection closed."""

    def __init__(self, listener: KafkaListener, listener_name: str, context: ssl.SSLContext):
        self.listener = listener
        self.listener_name = listener_name
        self.context = context

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()  # the handshake reads the first bytes
        task = asyncio.get_running_loop().create_task(self._upgrade(transport))
        # Held (and cancelled when the listener stops) with the connections.
        self.listener._connections.add(task)
        task.add_done_callback(self.listener._connections.discard)

    async def _upgrade(self, transport: asyncio.Transport) -> None:
        protocol = self.listener._protocol(self.listener_name)
        peer = transport.get_extra_info("peername")
        try:
            encrypted = await asyncio.get_running_loop().start_tls(
                transport, protocol, self.context, server_side=True, ssl_handshake_timeout=10
            )
        except (ssl.SSLError, OSError, TimeoutError, ConnectionError) as e:
            _log.info(
                "Failed authentication with %s on %s (SSL handshake failed: %s)",
                _host(peer),
                self.listener_name,
                e,
            )
            transport.close()
            return
        if encrypted is None:
            transport.close()
            return
        protocol.connection_made(encrypted)


def _host(peer: object) -> object:
    """A peer address's host, as Kafka's authentication log names it."""
    return peer[0] if isinstance(peer, tuple) and peer else peer


async def _relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    address: tuple[str, int],
    tls: ssl.SSLContext | None,
) -> None:
    """Pipe the connection both ways to ``address`` (over TLS with ``tls``) until either side
    closes."""
    up_reader, up_writer = await asyncio.open_connection(*address, ssl=tls)

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while chunk := await src.read(_RELAY_CHUNK):
            dst.write(chunk)
            await dst.drain()

    tasks = [
        asyncio.ensure_future(pipe(reader, up_writer)),
        asyncio.ensure_future(pipe(up_reader, writer)),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # re-raise a broken pipe
    finally:
        for task in tasks:
            task.cancel()
        up_writer.close()
        with contextlib.suppress(Exception):
            await up_writer.wait_closed()


async def _send_read(
    writer: asyncio.StreamWriter, response: SplicedResponse, readers: ThreadPoolExecutor
) -> None:
    """The frame through a TLS transport, each record set read from its segment files in
    its place (by a reader thread when it is large), then encrypted and sent in pieces of
    ``_TLS_WRITE_BYTES``: each piece goes out as soon as it is encrypted, so the client
    decrypts the first while the last are encrypted."""
    frame = memoryview(response.frame)
    at = 0
    for offset, regions in response.splices:
        if sum(r.length for r in regions) > _READ_ON_LOOP_BYTES:
            data = await asyncio.get_running_loop().run_in_executor(readers, _read, regions)
        else:
            data = _read(regions)
        view = memoryview(data)
        # The frame's bytes before the record set go with its first piece: one pass
        # through the TLS layers and one send for both.
        writer.writelines([p for p in (frame[at:offset], view[:_TLS_WRITE_BYTES]) if p])
        for piece in range(_TLS_WRITE_BYTES, len(view), _TLS_WRITE_BYTES):
            writer.write(view[piece : piece + _TLS_WRITE_BYTES])
        await writer.drain()
        at = offset
    writer.write(frame[at:])
    await writer.drain()


def _read(regions: Sequence[FileRegion]) -> bytes:
    return b"".join(r.read() for r in regions)


async def _send_spliced(
    writer: asyncio.StreamWriter,
    response: SplicedResponse,
    senders: ThreadPoolExecutor,
    timeout_s: float,
) -> None:
    """The frame's bytes through the transport, each record set in its place with
    ``sendfile`` straight from the segment files (no copy through user space)."""
    frame = memoryview(response.frame)
    # A second descriptor of the socket: the event loop lets only the transport watch the
    # transport's own one, and a sender thread may use it after the transport closed it.
    sock = writer.transport.get_extra_info("socket")
    if writer.transport.is_closing() or sock is None or sock.fileno() < 0:
        raise ConnectionResetError("the client closed the connection")
    fd = os.dup(sock.fileno())
    try:
        at = 0
        for offset, regions in response.splices:
            writer.write(frame[at:offset])
            await writer.drain()
            await _sendfile(fd, regions, senders, timeout_s)
            at = offset
    finally:
        os.close(fd)
    writer.write(frame[at:])
    await writer.drain()


async def _sendfile(
    fd: int, regions: list[FileRegion], senders: ThreadPoolExecutor, timeout_s: float
) -> None:
    """``regions`` to the non-blocking socket ``fd``: what the socket takes at once is sent
    from the event loop; the rest by a sender thread, which waits for room off the loop."""
    total = sum(r.length for r in regions)
    sent = transfer(fd, regions, 0)
    if sent >= total:
        return
    rest = asyncio.get_running_loop().run_in_executor(
        senders, _send_rest, fd, regions, sent, total, timeout_s
    )
    try:
        await asyncio.shield(rest)
    except asyncio.CancelledError:
        # The connection is closing: wake the sender (its socket is shut down) and let it
        # finish before ``fd`` is closed, so it never writes to a reused descriptor.
        with contextlib.suppress(OSError):
            socket.socket(fileno=os.dup(fd)).shutdown(socket.SHUT_RDWR)
        await asyncio.wait([rest])
        raise


def _send_rest(fd: int, regions: list[FileRegion], sent: int, total: int, timeout_s: float) -> None:
    """Block (a sender thread, the GIL released) until ``regions`` went from ``sent`` on."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while sent < total:
        if not poller.poll(timeout_s * 1000):
            raise KafkaStorageError(f"the client took no bytes for {timeout_s:.0f} s")
        sent = transfer(fd, regions, sent)
