"""Kafka's size-prefixed frames read straight into one buffer each.

:class:`FrameProtocol` is an asyncio buffered protocol: the event loop's ``recv_into`` writes
a request's bytes directly into the buffer the request is handled from (the frame's size,
allocated once its 4-byte size prefix has arrived), so the only copy of a
produced record set between the socket and the log is the kernel's. The buffer is a ``bytes``
received into through a writable view of its memory (:func:`rillet._core.kafka_frame_buffer`),
so the decoder hands a produced record set on as a ``memoryview`` of it, and the log
appends it from there. A stream reader would copy it twice more (into its buffer, then out
of it), and ``bytearray`` frames once more (a mutable buffer is copied before it is read
with the GIL released).

Requests are handed over one at a time through :meth:`FrameProtocol.next`, and at most one
frame is read ahead of the handler: reading pauses once a frame is complete and resumes
when the handler takes it, as Kafka mutes a channel with a request in progress. The size is
checked before anything is allocated. Replies go through an ordinary
:class:`asyncio.StreamWriter` over the same transport (its ``drain()`` is this protocol's
flow control).

A connection whose first four bytes are HTTP/2's preface (a gRPC client) can be switched to
relaying: every byte after them is fed to :attr:`FrameProtocol.relay` instead.
"""

from __future__ import annotations

import asyncio
import collections
from asyncio import streams
from collections.abc import Callable
from typing import Any

from rillet import _core

__all__ = ["BadFrameSize", "FrameProtocol"]

_RELAY_CHUNK = 64 * 1024


class BadFrameSize(Exception):
    """A size prefix outside the allowed range (the connection is to be closed unread)."""

    def __init__(self, size: int, prefix: bytes) -> None:
        super().__init__(size)
        self.size = size
        self.prefix = prefix


class FrameProtocol(streams.FlowControlMixin, asyncio.BufferedProtocol):
    """See the module doc. ``min_size``/``max_size`` bound a frame's size prefix;
    ``relay_prefix`` is the first four bytes that switch the connection to relaying;
    ``on_connect`` is called with the protocol once it has its transport."""

    def __init__(
        self,
        min_size: int,
        max_size: int,
        on_connect: Callable[[FrameProtocol], None],
        relay_prefix: bytes | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(loop)
        self._event_loop = loop
        self._on_connect = on_connect
        self.min_size = min_size
        self.max_size = max_size
        self.relay_prefix = relay_prefix
        self.transport: asyncio.Transport | None = None
        self.writer: asyncio.StreamWriter | None = None
        # What the handler reads next: frames, then None at the end of the stream.
        self._ready: collections.deque[bytes | BadFrameSize | None] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._head = bytearray(4)
        # The frame being received, and the writable view of it it is received through.
        self._body: bytes | None = None
        self._into: memoryview | None = None
        self._at = 0
        self._first = True
        self.relay: asyncio.StreamReader | None = None
        self._scratch: bytearray | None = None
        self._closed: asyncio.Future[None] = self._event_loop.create_future()

    # -- the transport's side -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.writer = asyncio.StreamWriter(transport, self, None, self._event_loop)
        self._on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.relay is not None:
            assert self._scratch is not None
            return memoryview(self._scratch)
        if self._into is None:
            return memoryview(self._head)[self._at :]
        return self._into[self._at :]

    def buffer_updated(self, nbytes: int) -> None:
        if self.relay is not None:
            assert self._scratch is not None
            self.relay.feed_data(bytes(self._scratch[:nbytes]))
            return
        self._at += nbytes
        if self._body is None:
            if self._at < 4:
                return
            prefix = bytes(self._head)
            if self._first and prefix == self.relay_prefix:
                self._start_relay(prefix)
                return
            self._first = False
            size = int.from_bytes(prefix, "big", signed=True)
            if not self.min_size <= size <= self.max_size:
                self._push(BadFrameSize(size, prefix))
                return
            self._body, self._into = _core.kafka_frame_buffer(size)
            self._at = 0
            return
        if self._at == len(self._body):
            self._complete()

    def _complete(self) -> None:
        assert self._body is not None and self._into is not None
        self._into.release()  # every byte is written: the bytes may be read now
        frame, self._body, self._into, self._at = self._body, None, None, 0
        self._push(frame)

    def eof_received(self) -> bool:
        if self.relay is not None:
            self.relay.feed_eof()
        self._push(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.relay is not None:
            self.relay.feed_eof()
        self._push(None)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:
        return self._closed

    # -- the handler's side ---------------------------------------------------------------------

    async def next(self) -> bytes | BadFrameSize | None:
        """The next frame, a bad size prefix, or None once the stream ended."""
        while not self._ready:
            self._waiter = self._event_loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._ready.popleft()
        if item is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()  # read the next frame while this one is handled
        return item

    @property
    def relaying(self) -> bool:
        return self.relay is not None

    def _push(self, item: bytes | BadFrameSize | None) -> None:
        if item is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        if item is None and self._ready and self._ready[-1] is None:
            return
        self._ready.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _start_relay(self, prefix: bytes) -> None:
        self.relay = asyncio.StreamReader(limit=_RELAY_CHUNK, loop=self._event_loop)
        self.relay.feed_data(prefix)
        self._scratch = bytearray(_RELAY_CHUNK)
        self._push(None)  # no frames: the handler sees the relay and pipes it
