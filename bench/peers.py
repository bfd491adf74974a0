#!/usr/bin/env python3
"""Peer systems for the broker benchmark: Redis Streams and NATS JetStream on this machine.

Each peer runs the same workload as Rillet's producer/consumer benchmark: ``records`` records
whose value is one ``record_size``-byte string (generated once per run with ``os.urandom``
and base64, so printable and not compressible below 6 bits per byte; neither peer compresses
anyway), produced with acknowledgement, then read back in full in large batches.

Rates are records/s and MB/s of values (1 MB = 1e6 bytes; keys, ids, subjects and protocol
framing are not counted).

**Redis Streams** (Debian's ``redis-server``): a private ``redis-server`` on a free loopback
port, ``--appendonly yes`` (default ``appendfsync everysec``), ``--save ""``, data in a temp
dir. Produce is ``redis-benchmark -P <pipeline> -n N -c <clients> XADD stream '*' v <value>``;
its own requests/s figure is the produce rate, and ``XLEN`` must equal N afterwards. Consume
is a Python loop over ``XRANGE stream <last id, exclusive> + COUNT <batch>`` with ``redis``
(hiredis parser when installed, raw replies: no per-entry dict building), checking that N
values of ``record_size`` bytes came back.

**NATS JetStream** (Debian's ``nats-server``): a private ``nats-server -js`` on a free loopback
port with its store in a temp dir, driven by the Rust program ``bench/peers/nats-bench``
(``async-nats`` + tokio): file-backed stream, async publish with a window of in-flight acks
(all awaited), then a pull consumer (``AckPolicy::None``) reading all N in large batches.

Produce latency: each peer also reports an unloaded round trip (one record sent, its ack
awaited, repeated ``latency_samples`` times, on a scratch stream) and, where cheap, the
per-request latency under the throughput load.

    python bench/peers.py --records 200000            # both peers, JSON last line on stdout
    python bench/peers.py --records 500000 --only nats

Needs: ``redis`` (PyPI; ``hiredis`` optional but used when present), Debian's
``redis-server``, ``redis-tools`` and ``nats-server`` (``ensure_installed`` apt-installs them),
and cargo to build ``bench/peers/nats-bench``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import csv
import importlib.metadata
import io
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

MB = 1e6
HERE = Path(__file__).resolve().parent
NATS_BENCH_DIR = HERE / "peers" / "nats-bench"
NATS_BENCH_MANIFEST = NATS_BENCH_DIR / "Cargo.toml"
NATS_BENCH_BIN = NATS_BENCH_DIR / "target" / "release" / "nats-bench"

APT_PACKAGES = ("redis-server", "redis-tools", "nats-server")
REQUIRED_BINARIES = ("redis-server", "redis-benchmark", "nats-server")
STARTUP_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0

Result = dict[str, float | int | str]


class PeerError(RuntimeError):
    """A peer could not be installed, started, or did not hold or return the records sent."""


def log(msg: str) -> None:
    """Progress line on stderr."""
    print(f"[peers] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- setup helpers


def ensure_installed() -> None:
    """Make sure ``redis-server``, ``redis-benchmark`` and ``nats-server`` are on PATH.

    Missing ones are installed from Debian with ``apt-get update`` then ``apt-get install -y
    redis-server redis-tools nats-server``. Raises :class:`PeerError` when that fails or the
    binaries are still missing afterwards. The system services the packages ship are never
    used: every run starts its own private server.
    """
    missing = [b for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if not missing:
        return
    log(f"missing {', '.join(missing)}: installing {' '.join(APT_PACKAGES)} with apt-get")
    if shutil.which("apt-get") is None:
        raise PeerError(f"{', '.join(missing)} not found and apt-get is not available")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", *APT_PACKAGES]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-10:]
            raise PeerError(
                f"`{shlex.join(cmd)}` failed with exit code {proc.returncode} "
                f"(are you root?):\n" + "\n".join(tail)
            )
    still = [b for b in REQUIRED_BINARIES if shutil.which(b) is None]
    if still:
        raise PeerError(f"installed {' '.join(APT_PACKAGES)} but still missing {still}")


def make_value(record_size: int) -> bytes:
    """One ``record_size``-byte value: base64 of random bytes (no NUL, newline, quote or comma,
    so it passes through argv and redis-benchmark's CSV title unharmed)."""
    if record_size <= 0:
        raise ValueError("record_size must be positive")
    raw = os.urandom(math.ceil(record_size * 3 / 4) + 3)
    return base64.b64encode(raw)[:record_size]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], name: str, logfile: Path) -> None:
    """Wait until ``port`` accepts connections, failing early if ``proc`` exits."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PeerError(
                f"{name} exited with code {proc.returncode} during startup:\n"
                + logfile.read_text(errors="replace")[-2000:]
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise PeerError(f"{name} did not listen on port {port} within {STARTUP_TIMEOUT_S:.0f} s")


@contextlib.contextmanager
def server_process(
    argv: Sequence[str], port: int, name: str, logfile: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` until the block ends; it is stopped (SIGTERM, then SIGKILL) on any exit."""
    with logfile.open("wb") as out:
        proc = subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        wait_for_port(port, proc, name, logfile)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def tool_version(argv: Sequence[str]) -> str:
    """First line of a ``--version`` style command, or ``"unknown"``."""
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def package_version(name: str) -> str:
    """Installed version of a Python distribution, or ``"not installed"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def show_cmd(argv: Sequence[str], value: bytes) -> str:
    """Shell form of ``argv`` with the long record value replaced by a placeholder."""
    placeholder = f"<{len(value)}-byte value>"
    return shlex.join(placeholder if a == value.decode() else a for a in argv)


# --------------------------------------------------------------------------- Redis Streams


def pick_pipeline(records: int, limit: int = 1000) -> int:
    """Largest pipeline depth <= ``limit`` dividing ``records``.

    redis-benchmark rounds the request count up to a multiple of the pipeline depth (with
    ``-n 123457 -P 1000`` it sends 124000), so only a divisor gives exactly ``records``.
    """
    return max(d for d in range(1, min(limit, records) + 1) if records % d == 0)


def parse_benchmark_csv(text: str) -> dict[str, float]:
    """The figures of the single test in ``redis-benchmark --csv`` output."""
    rows = list(csv.reader(io.StringIO(text)))
    header = next((r for r in rows if r and r[0] == "test"), None)
    data = [r for r in rows if r and r[0] != "test" and len(r) == len(header or ())]
    if header is None or len(data) != 1:
        raise PeerError(f"cannot parse redis-benchmark --csv output:\n{text[-1000:]}")
    return {k: float(v) for k, v in zip(header[1:], data[0][1:], strict=True)}


def run_redis_benchmark(argv: list[str], timeout: float) -> tuple[dict[str, float], float]:
    """Run redis-benchmark; its CSV figures and the wall time of the whole process."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False, timeout=timeout)
    wall = time.perf_counter() - t0
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace")
        raise PeerError(f"redis-benchmark exited with {proc.returncode}:\n{out[-500:]}{err[-500:]}")
    return parse_benchmark_csv(out), wall


def run_redis(
    records: int,
    record_size: int,
    workdir: Path,
    *,
    clients: int = 4,
    pipeline: int | None = None,
    batch: int = 10_000,
    latency_samples: int = 2000,
) -> Result:
    """Benchmark Redis Streams: produce with redis-benchmark, consume with batched XRANGE.

    A private ``redis-server`` (AOF on, ``appendfsync everysec``, no RDB snapshots) runs on a
    free loopback port in a temp dir under ``workdir`` and is stopped and removed at the end,
    also on error.

    Args:
        records: records to produce and consume.
        record_size: bytes per value.
        workdir: parent directory of the server's temp dir.
        clients: redis-benchmark ``-c`` connections for the produce run.
        pipeline: redis-benchmark ``-P``; default: the largest divisor of ``records`` <= 1000.
        batch: ``COUNT`` per XRANGE call.
        latency_samples: unloaded round trips (``-c 1 -P 1``) on a scratch stream; 0 skips.

    Returns:
        Flat dict: ``produce_records_per_sec``, ``produce_mb_per_sec``,
        ``consume_records_per_sec``, ``consume_mb_per_sec``, ``records``, ``record_size``,
        latency figures, versions and the commands used.

    Raises:
        PeerError: the server did not start, a tool failed, or the counts are wrong.
    """
    import redis  # the only non-stdlib import; kept local so NATS runs without it

    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            raise PeerError(f"{tool} not found: call ensure_installed() first")
    pipeline = pipeline or pick_pipeline(records)
    if records % pipeline:
        raise PeerError(f"pipeline {pipeline} does not divide records {records}")
    value = make_value(record_size)
    stream_key = "bench"
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="redis-peer-", dir=workdir))
    server_argv = [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(tmp),
        "--appendonly",
        "yes",
        "--save",
        "",
        "--daemonize",
        "no",
    ]
    bench_base = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "--csv"]
    produce_argv = [
        *bench_base,
        "-P",
        str(pipeline),
        "-n",
        str(records),
        "-c",
        str(clients),
        "XADD",
        stream_key,
        "*",
        "v",
        value.decode(),
    ]
    latency_argv = [
        *bench_base,
        "-P",
        "1",
        "-n",
        str(latency_samples),
        "-c",
        "1",
        "XADD",
        "latency",
        "*",
        "v",
        value.decode(),
    ]
    result: Result = {"system": "redis-streams"}
    try:
        with server_process(server_argv, port, "redis-server", tmp / "redis.log"):
            r = redis.Redis(host="127.0.0.1", port=port)
            r.ping()
            fsync_policy = str(r.config_get("appendfsync").get("appendfsync"))
            server_info = r.info("server")

            if latency_samples > 0:
                log(f"redis: {latency_samples} unloaded XADD round trips")
                lat, _ = run_redis_benchmark(latency_argv, timeout=600)
                r.delete("latency")
                result |= {
                    "produce_latency_unloaded_p50_ms": lat["p50_latency_ms"],
                    "produce_latency_unloaded_p99_ms": lat["p99_latency_ms"],
                    "produce_latency_unloaded_mean_ms": lat["avg_latency_ms"],
                }

            log(f"redis: producing {records} x {record_size} B (-c {clients} -P {pipeline})")
            prod, wall = run_redis_benchmark(produce_argv, timeout=max(600.0, records / 500))
            stored = int(r.xlen(stream_key))
            if stored != records:
                raise PeerError(f"XLEN {stream_key} is {stored} after producing {records}")
            persistence = r.info("persistence")

            log(f"redis: consuming with XRANGE COUNT {batch}")
            r.set_response_callback("XRANGE", lambda resp, **_: resp)
            count = 0
            nbytes = 0
            bad = 0
            start: bytes = b"-"
            t0 = time.perf_counter()
            while True:
                entries = r.execute_command("XRANGE", stream_key, start, "+", "COUNT", batch)
                if not entries:
                    break
                for _id, fields in entries:
                    n = len(fields[1])
                    nbytes += n
                    bad += n != record_size
                count += len(entries)
                start = b"(" + entries[-1][0]
            consume_s = time.perf_counter() - t0
            r.close()
            if count != records or bad:
                raise PeerError(
                    f"XRANGE read {count} entries ({bad} of wrong size), want {records}"
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rps = prod["rps"]
    result |= {
        "records": records,
        "record_size": record_size,
        "produce_records_per_sec": rps,
        "produce_mb_per_sec": rps * record_size / MB,
        "produce_elapsed_s": records / rps,
        "produce_wall_s": wall,
        "produce_latency_under_load_p50_ms": prod["p50_latency_ms"],
        "produce_latency_under_load_p99_ms": prod["p99_latency_ms"],
        "consume_records_per_sec": count / consume_s,
        "consume_mb_per_sec": nbytes / consume_s / MB,
        "consume_elapsed_s": consume_s,
        "consume_bytes": nbytes,
        "stream_length": stored,
        "clients": clients,
        "pipeline": pipeline,
        "xrange_count": batch,
        "appendonly": "yes",
        "appendfsync": fsync_policy,
        "aof_rewrites_during_run": int(persistence.get("aof_rewrites", 0)),
        "redis_server_version": str(server_info.get("redis_version", "unknown")),
        "redis_benchmark_version": tool_version(["redis-benchmark", "--version"]),
        "redis_py_version": package_version("redis"),
        "hiredis_version": package_version("hiredis"),
        "server_command": shlex.join(server_argv),
        "produce_command": show_cmd(produce_argv, value),
        "latency_command": show_cmd(latency_argv, value) if latency_samples > 0 else "",
        "consume_command": (
            f"redis-py: XRANGE {stream_key} <last id, exclusive> + COUNT {batch}, until empty"
        ),
    }
    return result


# --------------------------------------------------------------------------- NATS JetStream


def build_nats_bench() -> Path:
    """``cargo build --release`` the nats-bench program (a no-op when up to date)."""
    if shutil.which("cargo") is None:
        raise PeerError("cargo not found: needed to build bench/peers/nats-bench")
    cmd = ["cargo", "build", "--release", "--quiet", "--manifest-path", str(NATS_BENCH_MANIFEST)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not NATS_BENCH_BIN.exists():
        raise PeerError(f"`{shlex.join(cmd)}` failed:\n{proc.stderr[-3000:]}")
    return NATS_BENCH_BIN


def async_nats_version() -> str:
    """The async-nats version locked in nats-bench's Cargo.lock."""
    lock = NATS_BENCH_DIR / "Cargo.lock"
    m = (
        re.search(r'name = "async-nats"\nversion = "([^"]+)"', lock.read_text())
        if lock.exists()
        else None
    )
    return m.group(1) if m else "unknown"


def run_nats(
    records: int,
    record_size: int,
    workdir: Path,
    *,
    window: int = 1024,
    batch: int = 10_000,
    consume_mode: str = "stream",
    threads: int = 0,
    latency_samples: int = 2000,
) -> Result:
    """Benchmark NATS JetStream with the Rust ``nats-bench`` program.

    A private ``nats-server -js`` runs on a free loopback port with its store in a temp dir
    under ``workdir`` and is stopped and removed at the end, also on error.

    Args:
        records: records to produce and consume.
        record_size: bytes per value.
        workdir: parent directory of the server's temp dir.
        window: publishes whose acks may be outstanding at once.
        batch: messages per pull request.
        consume_mode: ``stream`` (continuous pull, re-pulls ahead) or ``fetch`` (one fetch
            after another).
        threads: tokio worker threads; 0 = current-thread runtime.
        latency_samples: unloaded publish/ack round trips on a scratch stream; 0 skips.

    Returns:
        Flat dict with the same keys as :func:`run_redis` where they apply.

    Raises:
        PeerError: the build, the server or the benchmark failed, or the counts are wrong.
    """
    if shutil.which("nats-server") is None:
        raise PeerError("nats-server not found: call ensure_installed() first")
    binary = build_nats_bench()
    value = make_value(record_size)
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="nats-peer-", dir=workdir))
    payload_file = tmp / "value.bin"
    payload_file.write_bytes(value)
    store = tmp / "store"
    server_argv = ["nats-server", "-js", "-sd", str(store), "-a", "127.0.0.1", "-p", str(port)]
    bench_argv = [
        str(binary),
        "--server",
        f"127.0.0.1:{port}",
        "--records",
        str(records),
        "--record-size",
        str(record_size),
        "--window",
        str(window),
        "--batch",
        str(batch),
        "--consume-mode",
        consume_mode,
        "--threads",
        str(threads),
        "--latency-samples",
        str(latency_samples),
        "--payload-file",
        str(payload_file),
    ]
    try:
        with server_process(server_argv, port, "nats-server", tmp / "nats.log"):
            log(f"nats: {records} x {record_size} B (window {window}, batch {batch})")
            proc = subprocess.run(
                bench_argv,
                capture_output=True,
                text=True,
                check=False,
                timeout=max(600.0, records / 500),
            )
        if proc.returncode != 0:
            raise PeerError(f"nats-bench exited with {proc.returncode}:\n{proc.stderr[-2000:]}")
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if report["consume_records"] != records or report["stream_messages"] != records:
        raise PeerError(f"nats-bench counts are off: {report}")
    unloaded = report.get("produce_latency_unloaded") or {}
    loaded = report["produce_ack_latency_under_load"]
    result: Result = {
        "system": "nats-jetstream",
        "records": records,
        "record_size": record_size,
        "produce_records_per_sec": report["produce_records_per_sec"],
        "produce_mb_per_sec": report["produce_mb_per_sec"],
        "produce_elapsed_s": report["produce_elapsed_s"],
        "produce_latency_under_load_p50_ms": loaded["p50_ms"],
        "produce_latency_under_load_p99_ms": loaded["p99_ms"],
        "consume_records_per_sec": report["consume_records_per_sec"],
        "consume_mb_per_sec": report["consume_mb_per_sec"],
        "consume_elapsed_s": report["consume_elapsed_s"],
        "consume_bytes": report["consume_bytes"],
        "stream_length": report["stream_messages"],
        "stream_bytes": report["stream_bytes"],
        "window": window,
        "batch": batch,
        "consume_mode": consume_mode,
        "threads": threads,
        "storage": report["storage"],
        "nats_server_version": str(report["server_version"]),
        "async_nats_version": async_nats_version(),
        "rustc_version": tool_version(["rustc", "--version"]),
        "server_command": shlex.join(server_argv),
        "bench_command": shlex.join(
            "bench/peers/nats-bench/target/release/nats-bench" if a == str(binary) else a
            for a in bench_argv
        ),
        "build_command": f"cargo build --release --manifest-path {NATS_BENCH_MANIFEST}",
    }
    if unloaded:
        result |= {
            "produce_latency_unloaded_p50_ms": unloaded["p50_ms"],
            "produce_latency_unloaded_p99_ms": unloaded["p99_ms"],
            "produce_latency_unloaded_mean_ms": unloaded["mean_ms"],
        }
    return result


# --------------------------------------------------------------------------- CLI


def summary(results: dict[str, Result]) -> str:
    """Human-readable table of the produce/consume figures."""
    lines = [
        f"{'peer':<16}{'produce rec/s':>15}{'MB/s':>9}{'consume rec/s':>15}{'MB/s':>9}"
        f"{'lat p50/p99 ms (unloaded)':>28}"
    ]
    for name, r in results.items():
        lat = "-"
        if "produce_latency_unloaded_p50_ms" in r:
            p50 = float(r["produce_latency_unloaded_p50_ms"])
            p99 = float(r["produce_latency_unloaded_p99_ms"])
            lat = f"{p50:.3f} / {p99:.3f}"
        lines.append(
            f"{name:<16}{float(r['produce_records_per_sec']):>15,.0f}"
            f"{float(r['produce_mb_per_sec']):>9.1f}"
            f"{float(r['consume_records_per_sec']):>15,.0f}"
            f"{float(r['consume_mb_per_sec']):>9.1f}{lat:>28}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the peers and print a summary, then one JSON object as the last stdout line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--only", choices=("redis", "nats"), help="run one peer only")
    ap.add_argument("--redis-clients", type=int, default=4, help="redis-benchmark -c")
    ap.add_argument("--nats-window", type=int, default=1024, help="in-flight publish acks")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)

    ensure_installed()
    results: dict[str, Result] = {}
    if args.only in (None, "redis"):
        results["redis"] = run_redis(
            args.records, args.record_size, args.workdir, clients=args.redis_clients
        )
    if args.only in (None, "nats"):
        results["nats"] = run_nats(
            args.records, args.record_size, args.workdir, window=args.nats_window
        )
    print(summary(results))
    blob = json.dumps(results, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(blob + "\n")
    print(blob)
    return 0


if __name__ == "__main__":
    sys.exit(main())
