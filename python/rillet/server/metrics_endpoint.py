"""The Prometheus endpoint of a node (``metrics.port``): ``GET /metrics`` answers the text
exposition format of the node's :class:`~rillet.broker.metrics.BrokerMetrics`, served on the
event loop (so a scrape reads the node's state between two of its steps, never during one).
Anything else is 404; a request that is not HTTP is closed."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from rillet.broker.metrics import BrokerMetrics

__all__ = ["MetricsEndpoint"]

_log = logging.getLogger(__name__)
_MAX_REQUEST_BYTES = 16 * 1024


class MetricsEndpoint:
    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Serve; returns the bound port (a port of 0 gets a free one)."""
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port)
        port: int = self._server.sockets[0].getsockname()[1]
        _log.info("metrics: serving Prometheus at http://%s:%d/metrics", self.host or "*", port)
        return port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > _MAX_REQUEST_BYTES:
                return
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.partition(" ")[0].partition("?")[0]
            if method == "GET" and path in ("/metrics", "/"):
                body = generate_latest(self.metrics.registry)
                status, content_type = "200 OK", CONTENT_TYPE_LATEST
            else:
                body, status, content_type = b"not found\n", "404 Not Found", "text/plain"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (
            TimeoutError,
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass  # a client that went away or sent no HTTP request head
        finally:
            writer.close()
