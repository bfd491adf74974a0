"""Zero-copy reads: ``rillet.transfer`` sends a fetch's file regions to a socket with
sendfile(2), resumably on a non-blocking socket."""

from __future__ import annotations

import random
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import BatchBuilder, FetchDataInfo, Log, LogConfig, decode_batches, transfer
from rillet.errors import InvalidRequestError, KafkaStorageError

T0 = 1_700_000_000_000


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    """About 1.5 MB of batches over many 64 KiB segments."""
    config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=4096, retention_ms=-1)
    lg = Log.open(tmp_path / "t-0", config)
    rng = random.Random(3)
    for i in range(250):
        b = BatchBuilder("none" if i % 3 else "lz4")
        for j in range(rng.randint(1, 10)):
            b.append(T0 + i, b"k%d" % j, rng.randbytes(rng.randint(0, 1200)))
        lg.append_as_leader(b.build(), 1, now_ms=T0)
    try:
        yield lg
    finally:
        lg.close()


def whole_log(log: Log) -> FetchDataInfo:
    fetch = log.read(log.log_start_offset, 1 << 30)
    assert len(fetch.regions) > 10, "the read spans many segments"
    return fetch


class Receiver:
    """Reads from ``sock`` in a thread until ``total`` bytes arrived (or EOF); ``chunk`` and
    ``pause`` make it a slow reader; it starts once ``go`` is set."""

    def __init__(
        self, sock: socket.socket, total: int, *, chunk: int = 1 << 16, pause: float = 0.0
    ) -> None:
        self.sock, self.total, self.chunk, self.pause = sock, total, chunk, pause
        self.data = bytearray()
        self.go = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.go.wait()
            while len(self.data) < self.total:
                got = self.sock.recv(self.chunk)
                if not got:
                    return
                self.data += got
                if self.pause:
                    time.sleep(self.pause)
        except BaseException as e:  # reported by join()
            self.error = e

    def join(self) -> bytes:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the receiver is stuck"
        if self.error is not None:
            raise self.error
        return bytes(self.data)


def test_regions_hold_the_fetch_bytes(log: Log) -> None:
    fetch = whole_log(log)
    data = fetch.read_all()
    assert len(data) == fetch.size == sum(len(r) for r in fetch.regions)
    assert b"".join(r.read() for r in fetch.regions) == data
    for r in fetch.regions:
        assert r.length == len(r) > 0
    batches = decode_batches(data)
    assert batches[0].base_offset == 0
    assert batches[-1].last_offset == log.log_end_offset - 1


def test_transfer_blocking_delivers_exactly_the_fetch(log: Log) -> None:
    fetch = whole_log(log)
    expected = fetch.read_all()
    a, b = socket.socketpair()
    with a, b:
        rx = Receiver(b, len(expected))
        rx.go.set()
        sent = transfer(a.fileno(), fetch.regions)
        assert sent == len(expected)
        assert rx.join() == expected


@pytest.mark.parametrize("where", ["start", "inside-first", "region-boundary", "near-end", "end"])
def test_transfer_blocking_with_skip_sends_the_rest(log: Log, where: str) -> None:
    fetch = whole_log(log)
    expected = fetch.read_all()
    first = len(fetch.regions[0])
    skip = {
        "start": 0,
        "inside-first": first // 2,
        "region-boundary": first,
        "near-end": len(expected) - 7,
        "end": len(expected),
    }[where]
    a, b = socket.socketpair()
    with a, b:
        rx = Receiver(b, len(expected) - skip)
        rx.go.set()
        assert transfer(a.fileno(), fetch.regions, skip=skip) == len(expected)
        assert rx.join() == expected[skip:]


def test_transfer_refuses_to_skip_past_the_end(log: Log) -> None:
    fetch = log.read(0, 10_000)
    a, b = socket.socketpair()
    with a, b, pytest.raises(InvalidRequestError):
        transfer(a.fileno(), fetch.regions, skip=fetch.size + 1)


def test_transfer_of_nothing(log: Log) -> None:
    fetch = log.read(log.log_end_offset, 1 << 20)
    assert fetch.regions == [] and fetch.size == 0
    a, b = socket.socketpair()
    with a, b:
        assert transfer(a.fileno(), fetch.regions) == 0


def test_transfer_non_blocking_resumes_until_everything_is_sent(log: Log) -> None:
    fetch = whole_log(log)
    expected = fetch.read_all()
    total = len(expected)
    a, b = socket.socketpair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        a.setblocking(False)
        rx = Receiver(b, total, chunk=4096, pause=0.0002)
        # Nobody reads yet, and the socket cannot buffer 1.5 MB: the first call stops early
        # and says how far it got instead of blocking.
        sent = transfer(a.fileno(), fetch.regions)
        assert 0 < sent < total
        rx.go.set()
        calls = 1
        while sent < total:
            _, writable, _ = select.select([], [a], [], 30)
            assert writable, "the reader stopped reading"
            before = sent
            sent = transfer(a.fileno(), fetch.regions, skip=sent)
            assert before <= sent <= total
            calls += 1
        assert sent == total
        assert calls >= 2
        assert rx.join() == expected


def test_regions_outlive_segment_deletion(log: Log) -> None:
    fetch = whole_log(log)
    expected = fetch.read_all()
    log.update_config(LogConfig(segment_bytes=64 * 1024, retention_bytes=0, retention_ms=-1))
    assert log.delete_old_segments(now_ms=T0) > 0
    assert log.log_start_offset == log.log_end_offset
    # The files are unlinked but the regions hold them open: still the same bytes.
    a, b = socket.socketpair()
    with a, b:
        rx = Receiver(b, len(expected))
        rx.go.set()
        assert transfer(a.fileno(), fetch.regions) == len(expected)
        assert rx.join() == expected
    assert fetch.read_all() == expected


def test_a_region_cut_short_by_truncation_is_an_error_not_garbage(log: Log) -> None:
    active = log.active_segment_base_offset
    fetch = log.read(active, 1 << 20)
    assert len(fetch.regions) == 1 and fetch.size > 0
    original = fetch.read_all()
    last = decode_batches(original)[-1]
    assert log.truncate_to(last.base_offset)  # the segment file gets shorter
    with pytest.raises(KafkaStorageError):
        fetch.read_all()
    a, b = socket.socketpair()
    with a, b:
        rx = Receiver(b, fetch.size)
        rx.go.set()
        with pytest.raises(KafkaStorageError):
            transfer(a.fileno(), fetch.regions)
        a.shutdown(socket.SHUT_WR)
        got = rx.join()
    # What was sent before the error is the start of the region, nothing invented.
    assert len(got) < fetch.size
    assert got == original[: len(got)]
