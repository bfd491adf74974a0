"""Serves Kafka's binary protocol on the broker listeners not named in
``grpc.listener.names`` (Kafka's ``SocketServer``, on the broker's one event loop).

A connection carries size-prefixed frames (a 4-byte big-endian size, then the request).
Requests of one connection are answered one at a time, in order, as Kafka does. A frame
whose size is below a request header's 8 bytes or above ``socket.request.max.bytes``
closes the connection before anything is read into memory (Kafka's InvalidReceiveException),
and so does a connection idle for ``connections.max.idle.ms``. A request the broker cannot
answer (:meth:`KafkaApis.handle` returns None) closes its connection; every other error is
answered with Kafka's error code.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence

from rillet.config.listeners import Endpoint
from rillet.errors import KafkaStorageError
from rillet.server.kafka.apis import REQUEST_HEADER_MIN_BYTES, KafkaApis

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
                if response:
                    writer.write(response)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            return  # the client went away mid-frame, or was idle too long
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: close this connection, keep serving the others
            _log.exception("serving a Kafka connection from %s failed", peer)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
