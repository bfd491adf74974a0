"""A fetch response on an SSL listener (``server/kafka/listener.py``'s ``_send_read``): the
frame's bytes and its record sets, read from their files, reach the client whole and in
order through asyncio's TLS transport; record sets go out in pieces of ``_TLS_WRITE_BYTES``
(the frame's bytes before one in the same write as its first piece), the large ones read
by a reader thread."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rillet.client.tls_socket import TlsSocket
from rillet.security.certs import CertFiles, make_ca, make_cert
from rillet.server.kafka import listener
from rillet.server.kafka.apis import SplicedResponse


class FakeRegion:
    """A file region's interface as ``_send_read`` uses it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.length = len(data)

    def read(self) -> bytes:
        return self.data


def _response() -> tuple[SplicedResponse, bytes]:
    """A frame with a record set at its start (no bytes before it), one of two regions in
    its middle, and one above ``_READ_ON_LOOP_BYTES`` near its end; and the bytes the
    client must read."""
    frame = b"H" * 37 + b"M" * 1000 + b"T" * 11
    small = [os.urandom(300_000), os.urandom(5)]
    large = [os.urandom(listener._READ_ON_LOOP_BYTES + 12_345)]
    first = [os.urandom(1000)]
    splices: Any = [(0, [FakeRegion(d) for d in first])]
    splices += [(37, [FakeRegion(d) for d in small]), (1037, [FakeRegion(d) for d in large])]
    expected = b"".join(first) + frame[:37] + b"".join(small) + frame[37:1037]
    expected += b"".join(large) + frame[1037:]
    return SplicedResponse(frame, splices), expected


class RecordingWriter:
    """A StreamWriter's write side that records what it is handed, call by call."""

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []

    def write(self, data: bytes | memoryview) -> None:
        self.calls.append([bytes(data)])

    def writelines(self, data: list[bytes | memoryview]) -> None:
        self.calls.append([bytes(d) for d in data])

    async def drain(self) -> None:
        return None


async def test_record_sets_go_in_pieces_the_bytes_before_each_with_its_first() -> None:
    response, expected = _response()
    writer = RecordingWriter()
    with ThreadPoolExecutor(1) as readers:
        await listener._send_read(writer, response, readers)  # type: ignore[arg-type]
    assert b"".join(b"".join(call) for call in writer.calls) == expected
    piece = listener._TLS_WRITE_BYTES
    for call in writer.calls:
        # At most the frame's bytes before a record set, and one piece of it.
        assert len(call) <= 2
        assert all(len(part) <= max(piece, 1037) for part in call)
    # The frame's 37 bytes before the second record set went with its first piece.
    assert [len(part) for part in writer.calls[1]] == [37, min(piece, 300_005)]
    # Each record set in ceil(size / piece) writes, then the frame's last bytes.
    sizes = [1000, 300_005, listener._READ_ON_LOOP_BYTES + 12_345]
    assert len(writer.calls) == sum(-(-size // piece) for size in sizes) + 1


@pytest.fixture
def certs(tmp_path: Path) -> CertFiles:
    return make_cert(make_ca(tmp_path), tmp_path, "server")


async def test_a_spliced_response_reaches_a_tls_client_whole(certs: CertFiles) -> None:
    response, expected = _response()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.keystore)
    readers = ThreadPoolExecutor(1)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await listener._send_read(writer, response, readers)
        await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    received = bytearray()

    def client() -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock = TlsSocket(raw, ssl.create_default_context(cafile=str(certs.ca)), "localhost")
        buffer = bytearray(len(expected))
        view = memoryview(buffer)
        while len(received) < len(expected):
            n = sock.recv_into(view[len(received) :])
            assert n, "the server closed early"
            received.extend(view[len(received) : len(received) + n])
        sock.close()

    thread = threading.Thread(target=client)
    thread.start()
    try:
        await asyncio.get_running_loop().run_in_executor(None, thread.join, 30)
    finally:
        server.close()
        await server.wait_closed()
        readers.shutdown()
    assert bytes(received) == expected
