#!/usr/bin/env python3
"""Storage-core benchmark: Rillet's Log (through the ``rillet._core`` bindings) against plain
file I/O doing the same work on the same machine, in the same run.

Measured (each ``--repeat`` times, Rillet and baseline interleaved, best kept):

* append of pre-built 16 KiB and 1 MiB uncompressed batches through ``Log.append_as_leader``
  vs ``os.write`` of the same bytes in the same chunk sizes (no fsync on either side);
* sequential read of the 16 KiB-batch log (``log.read(offset, 1 MiB)`` + ``read_all()``, and
  ``read_into`` a reused buffer) vs ``os.pread`` (and ``readinto``) in 1 MiB chunks of the
  very same segment files, so both sides read the same page-cache pages; a plain file
  written the same way is reported alongside (on these VMs two files of the same bytes read
  back at rates up to 2x apart from run to run, so a different file is no baseline);
* zero-copy send of that log (``log.read`` regions through ``rillet.transfer``) vs
  ``os.sendfile`` of the same segment files (the plain file is reported alongside), both
  to a loopback TCP socket drained by a reader in a separate process;
* offset lookups: ``log.read(random_offset, 1)`` latency percentiles;
* unclean-open recovery throughput (``Log.open(..., clean_shutdown=False, recovery_point=0)``);
* batch building: ``BatchBuilder.append`` one call per 100-byte record, and ``append_values``.

Progress goes to stderr; a human summary goes to stdout, and the last stdout line is one JSON
object with every figure (also written to ``bench/results/storage.json``).
Rates are in MB/s with 1 MB = 1e6 bytes.

    python bench/storage.py                 # 1 GiB per phase, 3 repeats
    python bench/storage.py --size-mb 64    # quick run
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rillet
from rillet import BatchBuilder, Log, LogConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pagecache import warm_page_cache

KIB = 1 << 10
MIB = 1 << 20
MB = 1e6

# The reader runs in its own interpreter so it never contends for the sender's GIL. It serves
# one connection at a time: drains it into a reused buffer until EOF, then answers with the
# byte count (8 bytes, big-endian). A connection that carries no bytes tells it to exit.
READER_SRC = r"""
import socket, sys
bufsize = int(sys.argv[1])
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(8)
print(srv.getsockname()[1], flush=True)
view = memoryview(bytearray(bufsize))
while True:
    conn, _ = srv.accept()
    total = 0
    recv_into = conn.recv_into
    while True:
        n = recv_into(view)
        if not n:
            break
        total += n
    conn.sendall(total.to_bytes(8, "big"))
    conn.close()
    if total == 0:
        break
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def rate(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / MB


# ---------------------------------------------------------------------------------------------
# Data


def make_batch(size: int, record_bytes: int, timestamp: int) -> tuple[bytes, int]:
    """An uncompressed batch of exactly ``size`` bytes (log overhead included): records with
    ``record_bytes``-byte values, the last one padded to fit. Returns (batch, record count)."""

    def build(values: list[bytes]) -> bytes:
        b = BatchBuilder("none")
        b.append_values(values, timestamp)
        return b.build()

    value = bytes(random.Random(7).randbytes(record_bytes))
    k = max(0, size // (record_bytes + 8))
    while k > 0 and len(build([value] * k)) > size - 64:
        k -= 1
    for kk in range(k, -1, -1):
        full = [value] * kk
        pad = max(0, size - len(build(full)) - 8)
        for _ in range(32):
            got = build([*full, b"x" * pad])
            if len(got) == size:
                return got, kk + 1
            pad += size - len(got)
            if pad < 0:
                break
    raise SystemExit(f"cannot build a batch of exactly {size} bytes")


def log_config() -> LogConfig:
    return LogConfig(max_message_bytes=2 << 20)


# ---------------------------------------------------------------------------------------------
# Append vs write


def bench_append(d: Path, batch: bytes, count: int, keep: bool) -> tuple[float, Log | None]:
    if d.exists():
        shutil.rmtree(d)
    lg = Log.open(d, log_config())
    append = lg.append_as_leader
    t0 = time.perf_counter()
    for _ in range(count):
        append(batch, 0)
    elapsed = time.perf_counter() - t0
    assert lg.log_end_offset > 0
    if keep:
        return elapsed, lg
    lg.delete()  # no fsync: the dirty pages are dropped
    return elapsed, None


def bench_write(p: Path, chunk: bytes, count: int, keep: bool) -> float:
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    write = os.write
    try:
        t0 = time.perf_counter()
        for _ in range(count):
            if write(fd, chunk) != len(chunk):
                raise OSError("short write")
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
    if not keep:
        p.unlink()
    return elapsed


# ---------------------------------------------------------------------------------------------
# Read


def bench_log_read(
    lg: Log, fetch_bytes: int, batch_size: int, recs_per_batch: int, into: bool = False
) -> float:
    """The whole log in ``fetch_bytes`` fetches, each read into a new ``bytes``
    (``read_all``) or, with ``into``, into one reused buffer (``read_into``). The log holds
    identical batches, so the next fetch offset is computed from the bytes returned (a
    consumer would read the last header)."""
    end = lg.log_end_offset
    read = lg.read
    buf = bytearray(fetch_bytes + batch_size)
    off = 0
    total = 0
    t0 = time.perf_counter()
    while off < end:
        fetched = read(off, fetch_bytes)
        n = fetched.read_into(buf) if into else len(fetched.read_all())
        total += n
        off += (n // batch_size) * recs_per_batch
    elapsed = time.perf_counter() - t0
    assert total == lg.size_in_bytes, (total, lg.size_in_bytes)
    return elapsed


def open_all(paths: list[Path]) -> list[tuple[int, int]]:
    return [(os.open(p, os.O_RDONLY), p.stat().st_size) for p in paths]


def close_all(files: list[tuple[int, int]]) -> None:
    for fd, _ in files:
        os.close(fd)


def bench_raw_pread(paths: list[Path], chunk: int) -> float:
    """``os.pread`` (a new ``bytes`` per call, like ``read_all``) over the files in order."""
    files = open_all(paths)
    pread = os.pread
    total = 0
    try:
        t0 = time.perf_counter()
        for fd, size in files:
            off = 0
            while off < size:
                off += len(pread(fd, chunk, off))
            total += off
        elapsed = time.perf_counter() - t0
    finally:
        close_all(files)
    assert total == sum(size for _, size in files)
    return elapsed


def bench_raw_readinto(paths: list[Path], chunk: int) -> float:
    """``readinto`` one reused buffer: the cheapest way Python can pull the bytes in."""
    buf = memoryview(bytearray(chunk))
    total = 0
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            readinto = f.readinto
            while n := readinto(buf):
                total += n
    elapsed = time.perf_counter() - t0
    assert total == sum(p.stat().st_size for p in paths)
    return elapsed


# ---------------------------------------------------------------------------------------------
# sendfile to a loopback socket


class Reader:
    """A reader process on 127.0.0.1 that drains each connection with ``recv_into``."""

    def __init__(self, bufsize: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", READER_SRC, str(bufsize)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def timed_send(self, expected: int, send: Callable[[int], None]) -> float:
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            t0 = time.perf_counter()
            send(s.fileno())
            s.shutdown(socket.SHUT_WR)
            got = b""
            while len(got) < 8:
                part = s.recv(8 - len(got))
                if not part:
                    raise OSError("reader closed early")
                got += part
            elapsed = time.perf_counter() - t0
        received = int.from_bytes(got, "big")
        if received != expected:
            raise AssertionError(f"reader got {received} bytes, expected {expected}")
        return elapsed

    def close(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port)) as s:
                s.shutdown(socket.SHUT_WR)
                s.recv(8)
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def bench_log_sendfile(
    reader: Reader, lg: Log, fetch_bytes: int, batch_size: int, recs_per_batch: int
) -> float:
    end = lg.log_end_offset
    read = lg.read
    transfer = rillet.transfer

    def send(fd: int) -> None:
        off = 0
        while off < end:
            fetch = read(off, fetch_bytes)
            n = fetch.size
            if transfer(fd, fetch.regions) != n:
                raise OSError("short transfer on a blocking socket")
            off += (n // batch_size) * recs_per_batch

    return reader.timed_send(lg.size_in_bytes, send)


def bench_raw_sendfile(reader: Reader, paths: list[Path], chunk: int) -> float:
    files = open_all(paths)
    sendfile = os.sendfile

    def send(fd: int) -> None:
        for ffd, size in files:
            off = 0
            while off < size:
                off += sendfile(fd, ffd, off, min(chunk, size - off))

    try:
        return reader.timed_send(sum(size for _, size in files), send)
    finally:
        close_all(files)


# ---------------------------------------------------------------------------------------------
# Lookups, recovery, building


def bench_lookups(lg: Log, n: int, seed: int) -> tuple[float, float, float]:
    """Per-call latency of ``log.read(offset, 1)`` at random offsets: (p50, p99, mean) in us."""
    end = lg.log_end_offset
    rnd = random.Random(seed)
    offsets = [rnd.randrange(end) for _ in range(n)]
    read = lg.read
    clock = time.perf_counter_ns
    samples = [0] * n
    for i, o in enumerate(offsets):
        t0 = clock()
        read(o, 1)
        samples[i] = clock() - t0
    samples.sort()
    return (
        percentile(samples, 0.50) / 1e3,
        percentile(samples, 0.99) / 1e3,
        sum(samples) / n / 1e3,
    )


def percentile(sorted_samples: list[int], q: float) -> float:
    # nearest-rank
    idx = min(len(sorted_samples) - 1, max(0, int(q * len(sorted_samples) + 0.5) - 1))
    return float(sorted_samples[idx])


def timer_overhead_ns(n: int = 20000) -> float:
    clock = time.perf_counter_ns
    s = []
    for _ in range(n):
        t0 = clock()
        s.append(clock() - t0)
    s.sort()
    return float(s[len(s) // 2])


def bench_recovery(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    lg = Log.open(path, log_config(), clean_shutdown=False, recovery_point=0)
    elapsed = time.perf_counter() - t0
    recovered = lg.recovery_info.recovered_bytes
    lg.close()
    return elapsed, recovered


def bench_build_append(n_records: int, value: bytes, per_batch: int = 1000) -> float:
    ts = now_ms()
    b = BatchBuilder("none")
    append = b.append
    build = b.build
    batches = n_records // per_batch
    inner = range(per_batch)
    t0 = time.perf_counter()
    for _ in range(batches):
        for _ in inner:
            append(ts, None, value)
        build()
    elapsed = time.perf_counter() - t0
    return batches * per_batch / elapsed


def bench_build_bulk(n_records: int, value: bytes, per_batch: int = 1000) -> float:
    ts = now_ms()
    values = [value] * per_batch
    b = BatchBuilder("none")
    append_values = b.append_values
    build = b.build
    batches = n_records // per_batch
    t0 = time.perf_counter()
    for _ in range(batches):
        append_values(values, ts)
        build()
    elapsed = time.perf_counter() - t0
    return batches * per_batch / elapsed


def bench_py_call_floor(n_records: int, value: bytes, per_batch: int = 1000) -> float:
    """The same loop shape calling a trivial builtin (``list.append``): the interpreter's floor
    for one call per record."""
    batches = n_records // per_batch
    inner = range(per_batch)
    t0 = time.perf_counter()
    for _ in range(batches):
        lst: list[bytes] = []
        append = lst.append
        for _ in inner:
            append(value)
    elapsed = time.perf_counter() - t0
    return batches * per_batch / elapsed


# ---------------------------------------------------------------------------------------------


def interleaved_one(r: int, a: Callable[[int], Any], b: Callable[[int], Any]) -> None:
    """Run ``a`` then ``b`` on even repeats, ``b`` then ``a`` on odd ones, so drift over the
    run (page-cache state, other load) hits Rillet and the baseline alike."""
    if r % 2 == 0:
        a(r)
        b(r)
    else:
        b(r)
        a(r)


READ_PASSES = 5
APPEND_KEYS = ["append_16k_mb_s", "raw_write_16k_mb_s", "append_1m_mb_s", "raw_write_mb_s"]
READ_KEYS = [
    "read_mb_s",
    "raw_read_mb_s",
    "read_into_mb_s",
    "raw_readinto_mb_s",
    "raw_read_plainfile_mb_s",
    "raw_read_1mw_mb_s",
]
SENDFILE_KEYS = ["sendfile_mb_s", "raw_sendfile_mb_s", "raw_sendfile_plainfile_mb_s"]
LOOKUP_KEYS = ["lookup_p50_us", "lookup_p99_us", "lookup_mean_us"]
BUILD_KEYS = ["build_records_per_s", "build_bulk_records_per_s", "py_call_floor_records_per_s"]


def fmt_last(samples: dict[str, list[float]], keys: list[str]) -> str:
    return "  ".join(f"{k}={samples[k][-1]:,.1f}" for k in keys if k in samples)


def print_summary(res: dict[str, Any]) -> None:
    p = res["params"]
    t = res["targets"]
    print(
        f"Rillet storage benchmark: {p['size_mb']} MiB per phase, best of {p['repeat']}, "
        f"{p['record_bytes']}-byte records, {p['fetch_bytes']}-byte fetches "
        f"(Python {p['python']}, {p['cpus']} CPUs, dir {p['dir']})"
    )
    print(f"{'':28}{'rillet':>12}{'baseline':>12}{'ratio':>8}  target")
    rows = [
        ("append 16 KiB batches MB/s", "append_16k_mb_s", "raw_write_16k_mb_s",
         "append_16k_vs_raw", "append_16k_ge_0.4x_raw", ">= 0.4x"),
        ("append 1 MiB batches MB/s", "append_1m_mb_s", "raw_write_mb_s",
         "append_1m_vs_raw", "append_1m_ge_0.8x_raw", ">= 0.8x"),
        ("read (read_all) MB/s", "read_mb_s", "raw_read_mb_s",
         "read_vs_raw", "read_ge_0.8x_raw", ">= 0.8x"),
        ("read (read_into) MB/s", "read_into_mb_s", "raw_readinto_mb_s",
         "read_into_vs_raw", "read_into_ge_0.8x_raw", ">= 0.8x"),
        ("sendfile loopback MB/s", "sendfile_mb_s", "raw_sendfile_mb_s",
         "sendfile_vs_raw", "sendfile_ge_0.9x_raw", ">= 0.9x"),
    ]  # fmt: skip
    for label, a, b, ratio, tk, tdesc in rows:
        ok = "ok" if t[tk] else "MISSED"
        print(f"{label:28}{res[a]:>12,.1f}{res[b]:>12,.1f}{res[ratio]:>8.3f}  {tdesc} {ok}")
    print(
        "  other baselines MB/s: "
        f"pread of a plain 16 KiB-written file {res['raw_read_plainfile_mb_s']:,.1f}, "
        f"pread of a 1 MiB-written file {res['raw_read_1mw_mb_s']:,.1f}, "
        f"sendfile of the plain file {res['raw_sendfile_plainfile_mb_s']:,.1f}"
    )
    ok = "ok" if t["lookup_p50_le_5us"] else "MISSED"
    print(
        f"lookup log.read(o, 1): p50 {res['lookup_p50_us']:.2f} us, p99 "
        f"{res['lookup_p99_us']:.2f} us, mean {res['lookup_mean_us']:.2f} us "
        f"(timer overhead {p['timer_overhead_ns']:.0f} ns)  target p50 <= 5 us {ok}"
    )
    ok = "ok" if t["recovery_ge_1000_mb_s"] else "MISSED"
    print(
        f"recovery (unclean open, {p['recovered_bytes'] / MB:,.0f} MB): "
        f"{res['recovery_mb_s']:,.1f} MB/s  target >= 1000 MB/s {ok}"
    )
    ok = "ok" if t["build_ge_1m_records_per_s"] else "MISSED"
    print(
        f"build 100-byte records: append {res['build_records_per_s']:,.0f}/s, "
        f"append_values {res['build_bulk_records_per_s']:,.0f}/s, python call floor "
        f"{res['py_call_floor_records_per_s']:,.0f}/s  target >= 1,000,000/s {ok}"
    )
    missed = [k for k, v in t.items() if not v]
    print("targets missed: " + (", ".join(missed) if missed else "none"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--size-mb", type=int, default=1024, help="MiB per phase (default 1024)")
    ap.add_argument("--dir", default="/tmp", help="parent of the temp work dir (default /tmp)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; best is kept")
    ap.add_argument("--record-bytes", type=int, default=1000, help="value size in append batches")
    ap.add_argument("--fetch-bytes", type=int, default=MIB, help="read/sendfile fetch size")
    ap.add_argument("--lookups", type=int, default=20000, help="random lookups per repeat")
    ap.add_argument("--build-records", type=int, default=1_000_000, help="records per build run")
    ap.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent / "results" / "storage.json"),
        help="results JSON path",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    args = ap.parse_args(argv)

    if args.size_mb < 1:
        ap.error("--size-mb must be >= 1")
    total = args.size_mb * MIB
    repeat = max(1, args.repeat)
    gc.disable()  # nothing here makes cycles; keep collector pauses out of the timings

    workdir = Path(tempfile.mkdtemp(prefix="rillet-bench-", dir=args.dir))
    log(f"work dir {workdir}; {args.size_mb} MiB per phase; {repeat} repeats")
    ts = now_ms()
    b16, r16 = make_batch(16 * KIB, args.record_bytes, ts)
    b1m, r1m = make_batch(MIB, args.record_bytes, ts)
    n16 = total // len(b16)
    n1m = total // len(b1m)

    best: dict[str, float] = {}
    samples: dict[str, list[float]] = {}

    def record(key: str, value: float, higher_is_better: bool = True) -> None:
        samples.setdefault(key, []).append(round(value, 3))
        if key not in best:
            best[key] = value
        else:
            best[key] = max(best[key], value) if higher_is_better else min(best[key], value)

    read_log: Log | None = None
    raw16_path = workdir / "raw-16k.bin"  # written in 16 KiB writes, like the 16 KiB log
    raw1m_path = workdir / "raw-1m.bin"  # written in 1 MiB writes
    reader: Reader | None = None
    try:
        log(f"warming the page cache ({4 * args.size_mb} MiB, untimed) ...")
        warm_page_cache(workdir, 4 * total)

        # ---- append vs write ---------------------------------------------------------------
        # The last repeat keeps the 16 KiB log and both raw files for the read phases;
        # everything else is deleted right away (dirty pages dropped, never fsynced).
        log("append/write ...")
        for r in range(repeat):
            keep = r == repeat - 1

            def rillet_16k(_r: int, keep: bool = keep) -> None:
                nonlocal read_log
                el, lg = bench_append(workdir / "log-16k", b16, n16, keep)
                record("append_16k_mb_s", rate(n16 * len(b16), el))
                if lg is not None:
                    read_log = lg

            def raw_16k(_r: int, keep: bool = keep) -> None:
                el = bench_write(raw16_path, b16, n16, keep)
                record("raw_write_16k_mb_s", rate(n16 * len(b16), el))

            def rillet_1m(_r: int) -> None:
                el, _ = bench_append(workdir / "log-1m", b1m, n1m, False)
                record("append_1m_mb_s", rate(n1m * len(b1m), el))

            def raw_1m(_r: int, keep: bool = keep) -> None:
                el = bench_write(raw1m_path, b1m, n1m, keep)
                record("raw_write_mb_s", rate(n1m * len(b1m), el))

            interleaved_one(r, rillet_16k, raw_16k)
            interleaved_one(r, rillet_1m, raw_1m)
            log(f"  repeat {r + 1}: " + fmt_last(samples, APPEND_KEYS))
        assert read_log is not None
        lg = read_log

        # Settle: write the kept files back now (untimed) so background writeback does not run
        # during the read phases, and so the unclean open below does not time an fsync.
        log("settling (fsync of the kept log and raw files, untimed) ...")
        lg.flush()
        for p in (raw16_path, raw1m_path):
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        log_bytes = lg.size_in_bytes
        log_dir = lg.dir
        seg_paths = [s.path for s in lg.segments()]
        assert sum(p.stat().st_size for p in seg_paths) == log_bytes
        raw_bytes = raw16_path.stat().st_size
        fetch = args.fetch_bytes

        # ---- read vs pread -----------------------------------------------------------------
        # Baseline: the same segment files read with pread/readinto, so both sides copy the
        # same page-cache pages. A plain file written in 16 KiB writes and one written in
        # 1 MiB writes are reported alongside.
        log("read ...")
        gc.collect()

        def log_read(_r: int) -> None:
            record("read_mb_s", rate(log_bytes, bench_log_read(lg, fetch, len(b16), r16)))

        def raw_read(_r: int) -> None:
            record("raw_read_mb_s", rate(log_bytes, bench_raw_pread(seg_paths, fetch)))

        def log_read_into(_r: int) -> None:
            el = bench_log_read(lg, fetch, len(b16), r16, into=True)
            record("read_into_mb_s", rate(log_bytes, el))

        def raw_readinto(_r: int) -> None:
            el = bench_raw_readinto(seg_paths, fetch)
            record("raw_readinto_mb_s", rate(log_bytes, el))

        # A pass over 1 GiB takes ~0.1 s, so each repeat runs several interleaved passes.
        for r in range(repeat):
            for _ in range(READ_PASSES):
                interleaved_one(r, log_read, raw_read)
                interleaved_one(r, log_read_into, raw_readinto)
            el = bench_raw_pread([raw16_path], fetch)
            record("raw_read_plainfile_mb_s", rate(raw_bytes, el))
            el = bench_raw_pread([raw1m_path], fetch)
            record("raw_read_1mw_mb_s", rate(raw1m_path.stat().st_size, el))
            log(f"  repeat {r + 1}: " + fmt_last(samples, READ_KEYS))

        # ---- sendfile ----------------------------------------------------------------------
        log("sendfile ...")
        reader = Reader(MIB)
        rd = reader

        def log_sendfile(_r: int) -> None:
            el = bench_log_sendfile(rd, lg, fetch, len(b16), r16)
            record("sendfile_mb_s", rate(log_bytes, el))

        def raw_sendfile(_r: int) -> None:
            el = bench_raw_sendfile(rd, seg_paths, fetch)
            record("raw_sendfile_mb_s", rate(log_bytes, el))

        for r in range(repeat):
            interleaved_one(r, log_sendfile, raw_sendfile)
            el = bench_raw_sendfile(rd, [raw16_path], fetch)
            record("raw_sendfile_plainfile_mb_s", rate(raw_bytes, el))
            log(f"  repeat {r + 1}: " + fmt_last(samples, SENDFILE_KEYS))
        reader.close()
        reader = None

        # ---- lookups -----------------------------------------------------------------------
        log("lookups ...")
        overhead = timer_overhead_ns()
        for r in range(repeat):
            p50, p99, mean = bench_lookups(lg, args.lookups, seed=r)
            record("lookup_p50_us", p50, higher_is_better=False)
            record("lookup_p99_us", p99, higher_is_better=False)
            record("lookup_mean_us", mean, higher_is_better=False)
            log(f"  repeat {r + 1}: " + fmt_last(samples, LOOKUP_KEYS))

        # ---- recovery ----------------------------------------------------------------------
        log("recovery ...")
        lg.close()
        read_log = None
        recovered_bytes = 0
        for r in range(repeat):
            el, recovered_bytes = bench_recovery(log_dir)
            record("recovery_mb_s", rate(recovered_bytes, el))
            log(f"  repeat {r + 1}: " + fmt_last(samples, ["recovery_mb_s"]))

        # ---- batch building ----------------------------------------------------------------
        log("build ...")
        value = random.Random(1).randbytes(100)
        for r in range(repeat):
            record("build_records_per_s", bench_build_append(args.build_records, value))
            record("build_bulk_records_per_s", bench_build_bulk(args.build_records, value))
            record("py_call_floor_records_per_s", bench_py_call_floor(args.build_records, value))
            log(f"  repeat {r + 1}: " + fmt_last(samples, BUILD_KEYS))
    finally:
        if reader is not None:
            reader.close()
        if read_log is not None:
            read_log.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    res: dict[str, Any] = {k: round(v, 2) for k, v in best.items()}
    res["append_1m_vs_raw"] = round(best["append_1m_mb_s"] / best["raw_write_mb_s"], 3)
    res["append_16k_vs_raw"] = round(best["append_16k_mb_s"] / best["raw_write_16k_mb_s"], 3)
    res["read_vs_raw"] = round(best["read_mb_s"] / best["raw_read_mb_s"], 3)
    res["read_into_vs_raw"] = round(best["read_into_mb_s"] / best["raw_readinto_mb_s"], 3)
    res["sendfile_vs_raw"] = round(best["sendfile_mb_s"] / best["raw_sendfile_mb_s"], 3)
    res["targets"] = {
        "append_1m_ge_0.8x_raw": best["append_1m_mb_s"] >= 0.8 * best["raw_write_mb_s"],
        "append_16k_ge_0.4x_raw": best["append_16k_mb_s"] >= 0.4 * best["raw_write_16k_mb_s"],
        "sendfile_ge_0.9x_raw": best["sendfile_mb_s"] >= 0.9 * best["raw_sendfile_mb_s"],
        "read_ge_0.8x_raw": best["read_mb_s"] >= 0.8 * best["raw_read_mb_s"],
        "read_into_ge_0.8x_raw": best["read_into_mb_s"] >= 0.8 * best["raw_readinto_mb_s"],
        "lookup_p50_le_5us": best["lookup_p50_us"] <= 5.0,
        "recovery_ge_1000_mb_s": best["recovery_mb_s"] >= 1000.0,
        "build_ge_1m_records_per_s": best["build_records_per_s"] >= 1_000_000,
    }
    res["params"] = {
        "size_mb": args.size_mb,
        "repeat": repeat,
        "record_bytes": args.record_bytes,
        "records_per_16k_batch": r16,
        "records_per_1m_batch": r1m,
        "fetch_bytes": args.fetch_bytes,
        "lookups": args.lookups,
        "build_records": args.build_records,
        "recovered_bytes": recovered_bytes,
        "timer_overhead_ns": overhead,
        "python": platform.python_version(),
        "rillet": rillet.__version__,
        "cpus": os.cpu_count(),
        "dir": args.dir,
    }
    res["samples"] = samples

    print_summary(res)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
