#!/usr/bin/env python3
"""How close a Kafka-protocol fetch comes to the wire: the broker's Fetch path (record sets
sent from the segment files with ``sendfile``) against a raw ``sendfile`` of the same segment
files over loopback TCP, measured in the same run by the same kind of reader.

* ``loopback``: a server thread sends each segment file whole with ``os.sendfile`` to one
  loopback TCP connection; the reader drains it with ``recv_into`` a 1 MiB buffer (which
  stays in the CPU's cache: the fastest reader). Bytes/s of the files.
* ``fetch``: one connection to the broker's Kafka listener sends Fetch v12 requests for one
  partition, asking for 1 MiB (Kafka's consumer default ``max.partition.fetch.bytes``) or
  64 MiB (tuned) a request, from offset 0 until the high watermark; each response is read whole
  with ``recv_into`` and its record sets walked by batch header to the next offset (nothing
  decoded). Bytes/s of the record sets.

Both readers are single Python threads doing the same work per byte (the kernel's copy
into user space), so the ratio is the broker's cost per byte against the kernel's.

    python bench/zero_copy.py --bootstrap-server localhost:9092 --topic t --log-dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rillet import _core

FETCH = 1
BUF = 4 << 20  # the fetch reader's first buffer (grown to a response's size)
LOOPBACK_BUF = 1 << 20
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (bytes after this field)


def loopback(files: list[Path], chunk: int | None = None) -> dict[str, Any]:
    """Raw ``sendfile`` of ``files`` over one loopback connection: as one stream, or with
    ``chunk``, ``chunk`` bytes per round trip (the reader asks with one byte, as a fetch
    asks with a request)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    total = sum(f.stat().st_size for f in files)

    def send() -> None:
        conn, _ = server.accept()
        with conn:
            for f in files:
                with open(f, "rb") as fh:
                    size, at = f.stat().st_size, 0
                    while at < size:
                        n = size - at if chunk is None else min(chunk, size - at)
                        if chunk is not None and not conn.recv(1):
                            return
                        end = at + n
                        while at < end:
                            at += os.sendfile(conn.fileno(), fh.fileno(), at, end - at)

    sender = threading.Thread(target=send)
    sender.start()
    buf = bytearray(LOOPBACK_BUF if chunk is None else max(chunk, LOOPBACK_BUF))
    view = memoryview(buf)
    got = 0
    with socket.create_connection(("127.0.0.1", port)) as s:
        start = time.perf_counter()
        while got < total:
            if chunk is None:
                n = s.recv_into(view)
                if not n:
                    break
                got += n
            else:
                s.sendall(b"?")
                want = min(chunk, total - got)
                _recv_exactly(s, view, want)
                got += want
        elapsed = time.perf_counter() - start
    sender.join()
    server.close()
    return {"bytes": got, "elapsed_s": elapsed, "bytes_per_sec": got / elapsed, "chunk": chunk}


def _recv_exactly(s: socket.socket, view: memoryview, n: int) -> None:
    at = 0
    while at < n:
        got = s.recv_into(view[at:n])
        if not got:
            raise ConnectionError("the broker closed the connection")
        at += got


def _uvarint(view: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = view[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _partition_fields(view: memoryview) -> tuple[int, int, int, int]:
    """A Fetch v12 response of one topic and one partition: its error code, high
    watermark, and where its record set starts and ends in ``view``."""
    at = 4  # correlation id
    tags, at = _uvarint(view, at)
    assert tags == 0
    at += 4 + 2 + 4  # throttle_time_ms, error_code, session_id
    topics, at = _uvarint(view, at)
    assert topics == 2  # one topic (compact arrays count n + 1)
    name_len, at = _uvarint(view, at)
    at += name_len - 1
    partitions, at = _uvarint(view, at)
    assert partitions == 2
    at += 4  # partition_index
    (error,) = struct.unpack_from(">h", view, at)
    (high_watermark,) = struct.unpack_from(">q", view, at + 2)
    at += 2 + 8 + 8 + 8  # error, high watermark, last stable offset, log start offset
    aborted, at = _uvarint(view, at)
    assert aborted <= 1  # null or empty: read_uncommitted
    at += 4  # preferred_read_replica
    size, at = _uvarint(view, at)
    size = max(size - 1, 0)
    return error, high_watermark, at, at + size


def fetch(
    bootstrap: str, topic: str, partition: int = 0, max_bytes: int = 64 << 20
) -> dict[str, Any]:
    """Fetch one partition from offset 0 to its high watermark over Kafka's protocol,
    asking for up to ``max_bytes`` per request (the partition's and the response's limit)."""
    host, _, port = bootstrap.rpartition(":")
    buf = bytearray(BUF)
    records_bytes = 0
    offset = 0
    requests = 0
    with socket.create_connection((host, int(port))) as s:
        start = time.perf_counter()
        while True:
            request = _core.kafka_encode_request(
                FETCH,
                12,
                requests,
                "zero-copy-bench",
                {
                    "replica_id": -1,
                    "max_wait_ms": 0,
                    "min_bytes": 1,
                    "max_bytes": max_bytes,
                    "isolation_level": 0,
                    "session_id": 0,
                    "session_epoch": -1,
                    "topics": [
                        {
                            "topic": topic,
                            "partitions": [
                                {
                                    "partition": partition,
                                    "fetch_offset": offset,
                                    "partition_max_bytes": max_bytes,
                                }
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                    "rack_id": "",
                },
            )
            s.sendall(request)
            requests += 1
            head = memoryview(buf)[:4]
            _recv_exactly(s, head, 4)
            (size,) = struct.unpack(">i", head)
            if size > len(buf):
                buf = bytearray(size)
            view = memoryview(buf)
            _recv_exactly(s, view, size)
            # Read the fields before the record set in place (nothing copied), then walk
            # the record set's batch headers to the next offset.
            error, high_watermark, at, end = _partition_fields(view)
            if error:
                raise RuntimeError(f"fetch error {error}")
            first = at
            while at + 12 <= end:
                base, length = _BATCH_HEAD.unpack_from(view, at)
                if at + 12 + length > end:
                    break
                offset = base + struct.unpack_from(">i", view, at + 23)[0] + 1
                at += 12 + length
            at -= first
            records_bytes += at
            if offset >= high_watermark:
                break
        elapsed = time.perf_counter() - start
    return {
        "bytes": records_bytes,
        "elapsed_s": elapsed,
        "bytes_per_sec": records_bytes / elapsed,
        "requests": requests,
    }


def measure(bootstrap: str, topic: str, partition: int, log_dir: Path) -> dict[str, Any]:
    """Kafka fetches of 1 MiB (Kafka's consumer default) and 64 MiB (tuned) per request,
    each against raw sendfile of the same files in the same shape: 1 MiB per round trip,
    and one stream. Each baseline is the better of a run before and a run after, so the
    machine's noise does not favour the broker."""
    files = sorted((log_dir / f"{topic}-{partition}").glob("*.log"))
    raw_chunked = [loopback(files, 1 << 20)]
    raw_stream = [loopback(files)]
    default = fetch(bootstrap, topic, partition, 1 << 20)
    tuned = fetch(bootstrap, topic, partition, 64 << 20)
    raw_chunked.append(loopback(files, 1 << 20))
    raw_stream.append(loopback(files))
    best_chunked = max(raw_chunked, key=lambda r: r["bytes_per_sec"])
    best_stream = max(raw_stream, key=lambda r: r["bytes_per_sec"])
    return {
        "fetch_default": default,
        "fetch": tuned,
        "loopback_sendfile_1mib_round_trips": best_chunked,
        "loopback_sendfile": best_stream,
        "loopback_runs": {
            "1mib_round_trips": [r["bytes_per_sec"] for r in raw_chunked],
            "stream": [r["bytes_per_sec"] for r in raw_stream],
        },
        "fetch_default_vs_loopback": default["bytes_per_sec"] / best_chunked["bytes_per_sec"],
        "fetch_vs_loopback": tuned["bytes_per_sec"] / best_stream["bytes_per_sec"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap-server", required=True, help="the broker's Kafka listener")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partition", type=int, default=0)
    ap.add_argument("--log-dir", type=Path, required=True, help="the broker's log dir")
    args = ap.parse_args()
    result = measure(args.bootstrap_server, args.topic, args.partition, args.log_dir)
    print(
        f"Kafka fetch, 1 MiB requests: {result['fetch_default']['bytes_per_sec'] / 1e6:,.0f} "
        f"MB/s, {result['fetch_default_vs_loopback']:.2f}x raw sendfile in 1 MiB round trips; "
        f"64 MiB requests: {result['fetch']['bytes_per_sec'] / 1e6:,.0f} MB/s, "
        f"{result['fetch_vs_loopback']:.2f}x a raw sendfile stream"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
