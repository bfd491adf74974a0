"""A TLS connection that one thread reads while others write, for the client's
Kafka-protocol transport.

An :class:`ssl.SSLSocket` must not be read and written from two threads at once (OpenSSL's
connection state is not thread safe), and the transport's reader thread blocks in a read
while requests are written. So TLS runs on memory buffers (:class:`ssl.SSLObject`): the
socket carries ciphertext, read and written by plain socket calls, and the TLS state is
touched only under a lock, never while blocking on the socket.
"""

from __future__ import annotations

import socket
import ssl
import threading

__all__ = ["TlsSocket"]

_CHUNK = 256 * 1024


class TlsSocket:
    """``raw`` (connected) wrapped in TLS by ``context``; the handshake is done when the
    constructor returns (ssl.SSLError when it fails). The methods the transport uses:
    :meth:`sendall` (writers, serialised among themselves), :meth:`recv_into` (one reader),
    :meth:`settimeout`, :meth:`shutdown`, :meth:`close`."""

    def __init__(self, raw: socket.socket, context: ssl.SSLContext, server_hostname: str) -> None:
        self._raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming, self._outgoing, server_hostname=server_hostname
        )
        self._state = threading.Lock()  # the TLS state
        self._send = threading.Lock()  # the socket's write side: ciphertext in order
        # Ciphertext is received into one buffer, allocated once (the reader's alone).
        self._ciphertext = bytearray(_CHUNK)
        self._ciphertext_view = memoryview(self._ciphertext)
        self._handshake()

    def _handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ssl.SSLEOFError(
                        "the broker closed the connection in the handshake"
                    ) from None
        self._flush()

    def _flush(self) -> None:
        """Send the ciphertext TLS has produced."""
        with self._send:
            with self._state:
                data = self._outgoing.read()
            if data:
                self._raw.sendall(data)

    def _fill(self) -> bool:
        """Read ciphertext from the socket into TLS; False at the end of the stream."""
        n = self._raw.recv_into(self._ciphertext)
        if not n:
            return False
        with self._state:
            self._incoming.write(self._ciphertext_view[:n])
        return True

    def sendall(self, data: bytes | memoryview) -> None:
        with self._send:
            with self._state:
                self._tls.write(data)
                ciphertext = self._outgoing.read()
            self._raw.sendall(ciphertext)

    def recv_into(self, buffer: memoryview) -> int:
        """Plaintext into ``buffer``: at least one byte, or 0 at the end of the stream.
        Raises TimeoutError as the socket's timeout says."""
        size = len(buffer)
        while True:
            got = 0
            with self._state:
                try:
                    # One read() answers at most one TLS record (16 KiB): read on while
                    # records are buffered and the buffer has room, so a large response
                    # takes one call here per socket read, not one per record.
                    while got < size:
                        # With a buffer, read() answers the number of bytes it wrote there.
                        got += int(self._tls.read(size - got, buffer[got:]))
                    return got
                except ssl.SSLWantReadError:
                    if got:
                        return got
                except ssl.SSLZeroReturnError:
                    return got
                pending = self._outgoing.pending
            if pending:
                self._flush()  # what reading produced (a key update's answer)
            if not self._fill():
                return 0

    def settimeout(self, timeout: float | None) -> None:
        self._raw.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        self._raw.shutdown(how)

    def close(self) -> None:
        self._raw.close()
