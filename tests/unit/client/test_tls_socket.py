"""TlsSocket: TLS on memory buffers, read by one thread while others write."""

from __future__ import annotations

import socket
import ssl
import threading
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
