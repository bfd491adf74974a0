"""Kafka's frames read straight into one buffer each (``server/kafka/framing.py``): frames
split anywhere across reads and several in one read come out whole and in order, one at a
time (reading pauses while a frame waits for its handler); a bad size prefix is reported
before anything is allocated; HTTP/2's preface switches the connection to relaying."""

from __future__ import annotations

import asyncio
import random
import struct
from typing import Any

import pytest

from rillet.server.kafka.framing import BadFrameSize, FrameProtocol


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.closing = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: Any) -> None:
        pass

    def close(self) -> None:
        self.closing = True


class Feeder:
    """Bytes delivered as the event loop delivers them: into get_buffer's view, in random
    cuts, only while the protocol has not paused reading."""

    def __init__(self, protocol: FrameProtocol, data: bytes, seed: int) -> None:
        self.protocol = protocol
        self.data = data
        self.at = 0
        self.rng = random.Random(seed)

    def pump(self) -> None:
        transport = self.protocol.transport
        assert isinstance(transport, FakeTransport)
        while self.at < len(self.data) and not transport.paused:
            view = self.protocol.get_buffer(-1)
            n = min(len(view), len(self.data) - self.at, self.rng.randint(1, 40))
            view[:n] = self.data[self.at : self.at + n]
            self.protocol.buffer_updated(n)
            self.at += n


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("seed", range(20))
def test_frames_come_out_whole_and_in_order_one_at_a_time(seed: int) -> None:
    async def run() -> None:
        rng = random.Random(seed)
        payloads = [rng.randbytes(rng.randint(8, 300)) for _ in range(12)]
        protocol = FrameProtocol(8, 1000, lambda p: None)
        transport = FakeTransport()
        protocol.connection_made(transport)
        feeder = Feeder(protocol, b"".join(frame(p) for p in payloads), seed)
        feeder.pump()
        got = []
        for _ in payloads:
            assert transport.paused  # a whole frame waits: nothing more is read
            item = await protocol.next()
            assert isinstance(item, bytes)
            got.append(item)
            feeder.pump()
        assert got == payloads and feeder.at == len(feeder.data)
        protocol.eof_received()
        assert await protocol.next() is None
        transport.close()

    asyncio.run(run())


@pytest.mark.parametrize("size", [-1, 0, 7, 1001, 2**31 - 1])
def test_a_bad_size_is_reported_before_anything_is_allocated(size: int) -> None:
    async def run() -> None:
        protocol = FrameProtocol(8, 1000, lambda p: None)
        transport = FakeTransport()
        protocol.connection_made(transport)
        Feeder(protocol, struct.pack(">i", size), 0).pump()
        item = await protocol.next()
        assert isinstance(item, BadFrameSize) and item.size == size
        transport.close()

    asyncio.run(run())


def test_http2s_preface_switches_to_relaying() -> None:
    async def run() -> None:
        protocol = FrameProtocol(8, 1000, lambda p: None, relay_prefix=b"PRI ")
        transport = FakeTransport()
        protocol.connection_made(transport)
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        Feeder(protocol, preface + b"more", 1).pump()
        assert await protocol.next() is None and protocol.relay is not None
        protocol.eof_received()
        assert await protocol.relay.read() == preface + b"more"
        transport.close()

    asyncio.run(run())
