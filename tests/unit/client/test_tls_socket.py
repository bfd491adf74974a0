"""TlsSocket: TLS on memory buffers, read by one thread while others write."""

from __future__ import annotations

import fcntl
import os
import socket
import ssl
import struct
import termios
import threading
import time
from pathlib import Path

import pytest

from rillet.client.tls_socket import TlsSocket
from rillet.security.certs import CertFiles, make_ca, make_cert


@pytest.fixture
def certs(tmp_path: Path) -> CertFiles:
    return make_cert(make_ca(tmp_path), tmp_path, "server")


def _echo_server(files: CertFiles) -> tuple[int, threading.Thread]:
    """A TLS server on localhost that echoes one connection's bytes until it closes or
    they end with ``bye``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(files.keystore)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        listener.close()
        try:
            with ctx.wrap_socket(conn, server_side=True) as tls:
                while data := tls.recv(65536):
                    tls.sendall(data)
                    if data.endswith(b"bye"):
                        break
        except (ssl.SSLError, OSError):
            conn.close()  # the client gave up (a refused handshake), or went away

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def _client(port: int, files: CertFiles, hostname: str = "localhost") -> TlsSocket:
    ctx = ssl.create_default_context(cafile=str(files.ca))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        return TlsSocket(raw, ctx, hostname)
    except ssl.SSLError:
        raw.close()
        raise


def _read(sock: TlsSocket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        assert k, "closed early"
        got += k
    return bytes(buf)


def test_writers_on_several_threads_and_a_reader_on_another_share_one_connection(
    certs: CertFiles,
) -> None:
    port, server = _echo_server(certs)
    sock = _client(port, certs)
    writers, messages, size = 4, 200, 3000
    chunks = {w: [bytes([w]) * size for _ in range(messages)] for w in range(writers)}
    expected = writers * messages * size
    received = bytearray()

    def read() -> None:
        received.extend(_read(sock, expected))

    reader = threading.Thread(target=read)
    reader.start()

    def write(w: int) -> None:
        for chunk in chunks[w]:
            sock.sendall(chunk)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    reader.join(30)
    # Each sendall is whole and in order: the stream is the writers' chunks interleaved.
    assert len(received) == expected
    for at in range(0, expected, size):
        assert len(set(received[at : at + size])) == 1
    assert sorted(received[::size]) == sorted(w for w in range(writers) for _ in range(messages))
    sock.close()
    server.join(10)


def test_a_server_of_another_name_fails_the_handshake(certs: CertFiles) -> None:
    port, _ = _echo_server(certs)
    with pytest.raises(ssl.SSLCertVerificationError):
        _client(port, certs, hostname="elsewhere.example")


def test_the_end_of_the_stream_reads_as_zero(certs: CertFiles) -> None:
    port, server = _echo_server(certs)
    sock = _client(port, certs)
    sock.sendall(b"ping, bye")
    assert _read(sock, 9) == b"ping, bye"
    server.join(10)  # the server closed its end
    assert sock.recv_into(memoryview(bytearray(10))) == 0
    sock.close()


def _sending_server(files: CertFiles, payload: bytes) -> tuple[int, threading.Thread]:
    """A TLS server on localhost that sends ``payload`` in one write and closes."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(files.keystore)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        listener.close()
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.sendall(payload)
            tls.recv(1)  # until the client closes

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def test_a_large_buffer_takes_every_buffered_tls_record_in_one_read(certs: CertFiles) -> None:
    payload = os.urandom(64 * 1024)  # four TLS records of 16 KiB
    port, server = _sending_server(certs, payload)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock = TlsSocket(raw, ssl.create_default_context(cafile=str(certs.ca)), "localhost")
    # Wait until all four records' ciphertext is in the socket's receive buffer.
    deadline = time.monotonic() + 10
    while _readable(raw) < len(payload) and time.monotonic() < deadline:
        time.sleep(0.01)
    buffer = bytearray(1 << 20)
    assert sock.recv_into(memoryview(buffer)) == len(payload)
    assert bytes(buffer[: len(payload)]) == payload
    sock.close()
    server.join(10)


def _readable(raw: socket.socket) -> int:
    """The bytes waiting in ``raw``'s receive buffer."""
    return int(struct.unpack("i", fcntl.ioctl(raw, termios.FIONREAD, b"\0\0\0\0"))[0])


def test_buffers_smaller_than_a_record_read_it_in_parts(certs: CertFiles) -> None:
    payload = os.urandom(100_000)
    port, server = _sending_server(certs, payload)
    sock = _client(port, certs)
    got = bytearray()
    while len(got) < len(payload):
        buffer = bytearray(777)
        n = sock.recv_into(memoryview(buffer))
        assert 0 < n <= 777
        got += buffer[:n]
    assert bytes(got) == payload
    sock.close()
    server.join(10)
