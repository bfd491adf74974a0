#!/usr/bin/env python3
"""librdkafka's own perf tool, ``rdkafka_performance``, as the Kafka-protocol client of
``bench/broker.py``: C, no Python in the loop.

Debian ships librdkafka but not this tool, so it is built from Debian's librdkafka source
(``apt-get source librdkafka``, the version the installed ``librdkafka-dev`` is) against that
library: ``./configure`` only for the tool's internal headers, then one ``gcc`` of
``examples/rdkafka_performance.c``. The binary is cached in ``bench/peers/rdkafka/``.
``ensure_built`` apt-installs ``librdkafka-dev`` and ``dpkg-dev``, and adds a ``deb-src``
entry for Debian's main archive (``/etc/apt/sources.list.d/rillet-bench-src.sources``)
when apt has none.

Settings: librdkafka's defaults, except what the tool changes and this script puts back:
the tool lingers 1000 ms (``linger.ms``, librdkafka's default is 5) and prefetches a
million messages (``queued.min.messages``, default 100000); both are set back to the
defaults. Rates are the tool's own final figures (delivered or received messages over the
time from the first produce or fetch to the last). With ``--throughput`` p50/p99/p99.9 come
from its per-message latency file (``-l -A``: from ``produce()`` to the delivery report);
its pacing (``-r``) waits whole microseconds per message, so it cannot hold rates of
hundreds of thousands a second, and ``bench/broker.py`` measures latency with
``bench/confluent_perf.py`` instead.

    python bench/rdkafka_performance.py produce --bootstrap-server localhost:9092 \\
        --topic t --num-records 1000000 --acks 1
    python bench/rdkafka_performance.py consume --bootstrap-server localhost:9092 \\
        --topic t --partitions 6 --messages 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / "peers" / "rdkafka"
BINARY = CACHE / "rdkafka_performance"
SOURCES = Path("/etc/apt/sources.list.d/rillet-bench-src.sources")
DEB_SRC = """Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
DEFAULTS = ["-X", "linger.ms=5"]  # the tool's 1000 ms back to librdkafka's default
CONSUMER_DEFAULTS = ["-X", "queued.min.messages=100000"]
MB = 1e6


def log(msg: str) -> None:
    print(f"[rdkafka] {msg}", file=sys.stderr, flush=True)


def _run(argv: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _has_deb_src() -> bool:
    listed = subprocess.run(
        ["apt-get", "indextargets", "--format", "$(CREATED_BY)"],
        capture_output=True,
        text=True,
    ).stdout
    return "Sources" in listed


def ensure_built() -> Path:
    """The cached binary, built first if needed (see the module doc)."""
    if BINARY.exists():
        return BINARY
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if shutil.which("dpkg-source") is None or not Path("/usr/include/librdkafka").exists():
        log("apt-get install librdkafka-dev dpkg-dev")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "librdkafka-dev", "dpkg-dev"],
            check=True,
            env=env,
            capture_output=True,
        )
    if not _has_deb_src():
        log(f"adding Debian's deb-src archive ({SOURCES})")
        SOURCES.write_text(DEB_SRC)
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="rdkafka-src-") as tmp:
        log("apt-get source librdkafka")
        _run(["apt-get", "source", "-qq", "librdkafka"], cwd=Path(tmp))
        (src,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        log(f"building examples/rdkafka_performance.c of {src.name}")
        _run(["bash", "./configure", "--disable-ssl", "--disable-gssapi", "--disable-sasl",
              "--disable-zstd", "--disable-lz4-ext", "--disable-curl"], cwd=src)  # fmt: skip
        CACHE.mkdir(parents=True, exist_ok=True)
        libs = subprocess.run(
            ["pkg-config", "--libs", "rdkafka"], capture_output=True, text=True, check=True
        ).stdout.split()
        _run(["gcc", "-O2", "-o", str(BINARY), "examples/rdkafka_performance.c", "-I", "src",
              "-I", ".", *libs, "-lpthread", "-lm"], cwd=src)  # fmt: skip
    return BINARY


def _last_row(output: str) -> dict[str, str]:
    """The tool's final table row (``-u``), by column name."""
    header: list[str] = []
    row: list[str] = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0] == "elapsed":
            header = cells
        elif line.startswith("|") and header and len(cells) == len(header):
            row = cells
    if not row:
        raise RuntimeError(f"no figures in rdkafka_performance's output:\n{output[-2000:]}")
    return dict(zip(header, row, strict=True))


def _percentiles(path: Path) -> dict[str, float]:
    """p50/p99/p99.9 (ms) of the tool's per-message latency file (one figure per line, µs)."""
    values: list[float] = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields:
            try:
                values.append(float(fields[-1]) / 1000)
            except ValueError:
                continue
    values.sort()
    if not values:
        raise RuntimeError("rdkafka_performance wrote no latencies")

    def at(q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))], 2)

    return {"p50_ms": at(0.50), "p99_ms": at(0.99), "p999_ms": at(0.999), "max_ms": values[-1]}


def produce(
    bootstrap: str,
    topic: str,
    records: int,
    size: int,
    acks: str,
    rate: float | None = None,
) -> dict[str, Any]:
    """Produce ``records`` of ``size`` bytes round robin over the partitions; with
    ``rate``, throttled (``-r``) and with per-message latencies."""
    argv = [str(ensure_built()), "-P", "-t", topic, "-b", bootstrap, "-s", str(size),
            "-c", str(records), "-a", "-1" if acks == "all" else acks, "-u", *DEFAULTS]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rdkafka-lat-") as tmp:
        latencies = Path(tmp) / "latency.txt"
        if rate is not None:
            argv += ["-r", str(int(rate)), "-l", "-A", str(latencies)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"rdkafka_performance -P failed:\n{done.stderr[-2000:]}")
        row = _last_row(done.stdout)
        out: dict[str, Any] = {
            "records": int(row["dr"]),
            "records_per_sec": float(row["dr_m/s"]),
            "mb_per_sec": float(row["dr_m/s"]) * size / MB,
            "elapsed_ms": int(row["elapsed"]),
            "errors": int(row["dr_err"]),
            "command": " ".join(["rdkafka_performance", *argv[1:]]),
        }
        if rate is not None:
            out.update(_percentiles(latencies))
    if out["records"] != records or out["errors"]:
        raise RuntimeError(f"rdkafka_performance delivered {out['records']} of {records}: {row}")
    return out


def consume(bootstrap: str, topic: str, partitions: int, records: int) -> dict[str, Any]:
    """Read ``records`` from the beginning of every partition (``-C``, callback mode)."""
    argv = [str(ensure_built()), "-C", "-t", topic, "-b", bootstrap, "-o", "beginning",
            "-c", str(records), "-u", *CONSUMER_DEFAULTS,
            *[x for p in range(partitions) for x in ("-p", str(p))]]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"rdkafka_performance -C failed:\n{done.stderr[-2000:]}")
    row = _last_row(done.stdout)
    got = int(row["msgs"])
    if got != records or int(row["rx_err"]):
        raise RuntimeError(f"rdkafka_performance read {got} of {records}: {row}")
    return {
        "records": got,
        "records_per_sec": float(row["m/s"]),
        "mb_per_sec": float(row["MB/s"]),
        "elapsed_ms": int(row["elapsed"]),
        "command": " ".join(["rdkafka_performance", *argv[1:]]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    pr = sub.add_parser("produce")
    pr.add_argument("--bootstrap-server", required=True)
    pr.add_argument("--topic", required=True)
    pr.add_argument("--num-records", type=int, required=True)
    pr.add_argument("--record-size", type=int, default=1024)
    pr.add_argument("--acks", default="1")
    pr.add_argument("--throughput", type=float, default=None)
    co = sub.add_parser("consume")
    co.add_argument("--bootstrap-server", required=True)
    co.add_argument("--topic", required=True)
    co.add_argument("--partitions", type=int, default=1)
    co.add_argument("--messages", type=int, required=True)
    sub.add_parser("build")
    args = ap.parse_args()
    if args.mode == "build":
        print(ensure_built())
        return 0
    if args.mode == "produce":
        result = produce(args.bootstrap_server, args.topic, args.num_records,
                         args.record_size, args.acks, args.throughput)  # fmt: skip
    else:
        result = consume(args.bootstrap_server, args.topic, args.partitions, args.messages)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
