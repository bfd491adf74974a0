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
the socket with ``sendfile`` (:func:`rillet._core.transfer`), never through user space.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Sequence

from rillet._core import FileRegion, transfer
from rillet.config.listeners import Endpoint
from rillet.errors import KafkaStorageError
from rillet.server.kafka.apis import REQUEST_HEADER_MIN_BYTES, KafkaApis, SplicedResponse

__all__ = ["KafkaListener"]

_log = logging.getLogger(__name__)


class KafkaListener:
    """See the module doc. :attr:`bound` maps listener names to the bound ports (an endpoint
    with port 0 gets a free one)."""

    def __init__(self, apis: KafkaApis, *, max_request_bytes: int, idle_ms: int) -> None:
        self.apis = apis
        self.max_request_bytes = max_request_bytes
        self.idle_s = idle_ms / 1000 if idle_ms > 0 else None
        self.bound: dict[str, int] = {}
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, endpoints: Sequence[Endpoint]) -> None:
        for ep in endpoints:
            try:
                server = await asyncio.start_server(
                    functools.partial(self._serve, ep.listener_name),
                    host=ep.host or None,
                    port=ep.port,
                )
            except OSError as e:
                raise KafkaStorageError(f"cannot bind listener {ep}: {e}") from e
            self._servers.append(server)
            self.bound[ep.listener_name] = server.sockets[0].getsockname()[1]

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

    async def _serve(
        self, listener_name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        # drain() waits until the socket took everything: a record set sent with sendfile
        # must not overtake bytes still in the transport's buffer.
        writer.transport.set_write_buffer_limits(high=0)
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        try:
            while True:
                async with asyncio.timeout(self.idle_s):
                    prefix = await reader.readexactly(4)
                size = int.from_bytes(prefix, "big", signed=True)
                if not REQUEST_HEADER_MIN_BYTES <= size <= self.max_request_bytes:
                    _log.warning(
                        "closing the connection from %s on %s: a frame of %d bytes (at least "
                        "%d and at most socket.request.max.bytes=%d)",
                        peer,
                        listener_name,
                        size,
                        REQUEST_HEADER_MIN_BYTES,
                        self.max_request_bytes,
                    )
                    return
                frame = await reader.readexactly(size)
                response = await self.apis.handle(frame, listener_name, host)
                if response is None:
                    return
                if isinstance(response, SplicedResponse):
                    await _send_spliced(writer, response)
                elif response:
                    writer.write(response)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            return  # the client went away mid-frame, or was idle too long
        except KafkaStorageError as e:
            # sendfile failed (the client went away, or a segment shrank under the read):
            # part of a response is on the wire, so the connection cannot go on.
            _log.info("closing the connection from %s on %s: %s", peer, listener_name, e)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: close this connection, keep serving the others
            _log.exception("serving a Kafka connection from %s failed", peer)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _send_spliced(writer: asyncio.StreamWriter, response: SplicedResponse) -> None:
    """The frame's bytes through the transport, each record set in its place with
    ``sendfile`` straight from the segment files (no copy through user space)."""
    frame = memoryview(response.frame)
    # A second descriptor of the socket: the event loop lets only the transport watch the
    # transport's own one.
    fd = os.dup(writer.transport.get_extra_info("socket").fileno())
    try:
        at = 0
        for offset, regions in response.splices:
            writer.write(frame[at:offset])
            await writer.drain()
            await _sendfile(fd, regions)
            at = offset
    finally:
        os.close(fd)
    writer.write(frame[at:])
    await writer.drain()


async def _sendfile(fd: int, regions: list[FileRegion]) -> None:
    """``regions`` to the non-blocking socket ``fd``, waiting for room when it is full."""
    total = sum(r.length for r in regions)
    loop = asyncio.get_running_loop()
    sent = 0
    while True:
        sent = transfer(fd, regions, sent)
        if sent >= total:
            return
        writable: asyncio.Future[None] = loop.create_future()
        loop.add_writer(fd, _settle, writable)
        try:
            await writable
        finally:
            loop.remove_writer(fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
