#!/usr/bin/env python3
"""Broker benchmark: Rillet's producer-perf-test and consumer-perf-test against Redis Streams
and NATS JetStream on the same machine, in the same run, on the same workload.

Rillet (a real ``rillet server start`` process on free ports, data in a temp dir):

* ``rillet producer-perf-test`` with 1 KiB records, acks=1, on topics of 1 and 6 partitions,
  compression none and zstd (Kafka's payload: random uppercase letters);
* ``rillet consumer-perf-test`` reading each of those topics back from the beginning;
* p99 produce latency with the producer throttled (``--throughput``) to half of Rillet's
  peak uncompressed produce rate in this run.

Peers (``bench/peers.py``; Debian's servers, installed with apt-get when missing):

* Redis Streams: ``redis-server --appendonly yes``, ``redis-benchmark -P 1000`` XADD, a
  batched XRANGE reader;
* NATS JetStream: ``nats-server -js`` with a file-backed stream, acknowledged async publish and
  batched pull consume by a Rust program (``bench/peers/nats-bench``, async-nats).

Output: a human summary on stdout, then one JSON line with every figure and each
Rillet/peer ratio (also written to ``bench/results/broker.json``), and a bar chart
(``bench/results/broker.png``). Rates: records/s, and MB/s with 1 MB = 1e6 bytes.

    pip install -e '.[bench]'
    python bench/broker.py                      # 1,000,000 records per run
    python bench/broker.py --records 200000     # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import peers

from tests.support.server_process import ServerProcess as Broker

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1e6

# Producer settings for the throughput runs (Kafka's perf-test takes them as --producer-props;
# these are the usual throughput settings: large batches, a short linger).
PRODUCER_PROPS = ["acks=1", "batch.size=262144", "linger.ms=5", "buffer.memory=67108864"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rillet(*args: str) -> list[str]:
    return [sys.executable, "-m", "rillet.cli.main", *args]


def run_tool(argv: list[str], json_path: Path) -> dict[str, Any]:
    log("  $ " + " ".join(argv[2:]))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[3]} failed:\n{done.stdout}\n{done.stderr}")
    log("    " + done.stdout.strip().splitlines()[-1])
    figures: dict[str, Any] = json.loads(json_path.read_text())
    figures["output"] = done.stdout.strip().splitlines()[-1]
    return figures


def produce(broker: Broker, topic: str, records: int, size: int, codec: str, work: Path,
            throughput: float = -1) -> dict[str, Any]:  # fmt: skip
    out = work / f"produce-{topic}-{int(throughput)}.json"
    argv = rillet("producer-perf-test", "--topic", topic, "--num-records", str(records),
                  "--record-size", str(size), "--throughput", str(throughput),
                  "--bootstrap-server", broker.bootstrap, "--json", str(out),
                  "--producer-props", *PRODUCER_PROPS, f"compression.type={codec}")  # fmt: skip
    r = run_tool(argv, out)
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    r["command"] = " ".join(["rillet", *argv[3:]])
    return r


def consume(broker: Broker, topic: str, records: int, size: int, work: Path) -> dict[str, Any]:
    out = work / f"consume-{topic}.json"
    argv = rillet("consumer-perf-test", "--topic", topic, "--messages", str(records),
                  "--bootstrap-server", broker.bootstrap, "--json", str(out),
                  "--timeout", "30000")  # fmt: skip
    r = run_tool(argv, out)
    if r["records"] != records:
        raise RuntimeError(f"consumer-perf-test read {r['records']} of {records} records")
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    r["command"] = " ".join(["rillet", *argv[3:]])
    return r


def run_rillet(records: int, size: int, work: Path) -> dict[str, Any]:
    (work / "rillet").mkdir()
    broker = Broker(work / "rillet" / "data")
    broker.start()
    out: dict[str, Any] = {"runs": []}
    try:
        for partitions in (1, 6):
            for codec in ("none", "zstd"):
                topic = f"bench-p{partitions}-{codec}"
                broker.create_topic(topic, partitions)
                log(f"rillet: {partitions} partition(s), compression {codec}")
                p = produce(broker, topic, records, size, codec, work)
                c = consume(broker, topic, records, size, work)
                out["runs"].append(
                    {"partitions": partitions, "compression": codec, "produce": p, "consume": c}
                )
        # The uncompressed peak: the rate the comparison with the peers is about.
        peak = max(
            (r for r in out["runs"] if r["compression"] == "none"),
            key=lambda r: r["produce"]["records_per_sec"],
        )
        half = peak["produce"]["records_per_sec"] / 2
        topic = f"bench-p{peak['partitions']}-{peak['compression']}"
        log(f"rillet: latency at half of the peak rate ({half:.0f} records/s) on {topic}")
        latency = produce(broker, topic, records // 2, size, peak["compression"], work, half)
        out["latency_at_half_peak"] = {
            "partitions": peak["partitions"],
            "compression": peak["compression"],
            "target_records_per_sec": half,
            **latency,
        }
    finally:
        broker.stop()
    return out


def chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels: list[str] = []
    produce: list[float] = []
    consume: list[float] = []
    for r in result["rillet"]["runs"]:
        labels.append(f"Rillet\n{r['partitions']}p {r['compression']}")
        produce.append(r["produce"]["mb_per_sec_1e6"])
        consume.append(r["consume"]["mb_per_sec_1e6"])
    for name, figures in result["peers"].items():
        if "error" in figures:
            continue
        labels.append(name.replace("_", "\n"))
        produce.append(figures["produce_mb_per_sec"])
        consume.append(figures["consume_mb_per_sec"])
    fig, ax = plt.subplots(figsize=(max(8, len(labels) * 1.4), 5))
    xs = range(len(labels))
    w = 0.4
    ax.bar([x - w / 2 for x in xs], produce, w, label="produce")
    ax.bar([x + w / 2 for x in xs], consume, w, label="consume")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("MB/s (1 MB = 1e6 B), 1 KiB records")
    ax.set_title(f"Rillet vs peers, {result['records']:,} records, same machine, same run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--skip-peers", action="store_true", help="measure Rillet only")
    ap.add_argument("--out", type=Path, default=RESULTS / "broker.json")
    ap.add_argument("--chart", type=Path, default=RESULTS / "broker.png")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rillet-bench-"))
    result: dict[str, Any] = {
        "records": args.records,
        "record_size": args.record_size,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "producer_props": PRODUCER_PROPS,
    }
    try:
        result["rillet"] = run_rillet(args.records, args.record_size, work)
        result["peers"] = {}
        if not args.skip_peers:
            peers.ensure_installed()
            for name, fn in (
                ("redis_streams", peers.run_redis),
                ("nats_jetstream", peers.run_nats),
            ):
                log(f"peer: {name}")
                peer_dir = work / name
                peer_dir.mkdir()
                try:
                    result["peers"][name] = fn(args.records, args.record_size, peer_dir)
                except Exception as e:  # report a peer that failed rather than lose the run
                    log(f"  {name} failed: {e}")
                    result["peers"][name] = {"error": str(e)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["comparison"] = compare(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    try:
        chart(result, args.chart)
        result["chart"] = str(args.chart)
    except ImportError:
        log("matplotlib is not installed (pip install -e '.[bench]'): no chart")
    summary(result)
    print(json.dumps(result))
    return 0


def compare(result: dict[str, Any]) -> dict[str, Any]:
    """Ratios against the better peer. The headline uses Rillet's uncompressed runs: the
    peers store the same payload uncompressed, and Kafka's perf-test payload (one value for
    every record) compresses almost to nothing, so zstd runs are reported on their own."""
    runs = result["rillet"]["runs"]

    def best(kind: str, codec: str) -> float:
        return max(r[kind]["records_per_sec"] for r in runs if r["compression"] == codec)

    out: dict[str, Any] = {
        "rillet_best_produce_records_per_sec": best("produce", "none"),
        "rillet_best_consume_records_per_sec": best("consume", "none"),
        "rillet_best_produce_zstd_records_per_sec": best("produce", "zstd"),
        "rillet_best_consume_zstd_records_per_sec": best("consume", "zstd"),
    }
    ok_peers = {k: v for k, v in result["peers"].items() if "error" not in v}
    if not ok_peers:
        return out
    peer_produce = max(v["produce_records_per_sec"] for v in ok_peers.values())
    peer_consume = max(v["consume_records_per_sec"] for v in ok_peers.values())
    produce_ratio = out["rillet_best_produce_records_per_sec"] / peer_produce
    consume_ratio = out["rillet_best_consume_records_per_sec"] / peer_consume
    out.update(
        {
            "better_peer_produce_records_per_sec": peer_produce,
            "better_peer_consume_records_per_sec": peer_consume,
            "produce_ratio": produce_ratio,
            "consume_ratio": consume_ratio,
            "produce_ratio_zstd": out["rillet_best_produce_zstd_records_per_sec"] / peer_produce,
            "consume_ratio_zstd": out["rillet_best_consume_zstd_records_per_sec"] / peer_consume,
            "produce_target": 2.0,
            "consume_target": 1.5,
            "produce_target_met": produce_ratio >= 2.0,
            "consume_target_met": consume_ratio >= 1.5,
            "per_run": [
                {
                    "partitions": r["partitions"],
                    "compression": r["compression"],
                    "produce_ratio": r["produce"]["records_per_sec"] / peer_produce,
                    "consume_ratio": r["consume"]["records_per_sec"] / peer_consume,
                }
                for r in runs
            ],
        }
    )
    return out


def summary(result: dict[str, Any]) -> None:
    print(f"\n{result['records']:,} records of {result['record_size']} B, acks=1")
    print(f"{'system':<28}{'produce rec/s':>15}{'MB/s':>9}{'consume rec/s':>16}{'MB/s':>9}")
    for r in result["rillet"]["runs"]:
        name = f"rillet {r['partitions']}p {r['compression']}"
        p, c = r["produce"], r["consume"]
        print(f"{name:<28}{p['records_per_sec']:>15,.0f}{p['mb_per_sec_1e6']:>9.1f}"
              f"{c['records_per_sec']:>16,.0f}{c['mb_per_sec_1e6']:>9.1f}")  # fmt: skip
    for name, v in result["peers"].items():
        if "error" in v:
            print(f"{name:<28} failed: {v['error']}")
            continue
        print(f"{name:<28}{v['produce_records_per_sec']:>15,.0f}{v['produce_mb_per_sec']:>9.1f}"
              f"{v['consume_records_per_sec']:>16,.0f}{v['consume_mb_per_sec']:>9.1f}")  # fmt: skip
    lat = result["rillet"]["latency_at_half_peak"]
    print(f"\nrillet produce latency at {lat['target_records_per_sec']:,.0f} records/s (half of "
          f"peak), {lat['partitions']}p {lat['compression']}: p50 {lat['p50_ms']} ms, "
          f"p99 {lat['p99_ms']} ms, p99.9 {lat['p999_ms']} ms")  # fmt: skip
    cmp = result["comparison"]
    if "produce_ratio" in cmp:
        print(f"produce: best uncompressed rillet / better peer = {cmp['produce_ratio']:.2f} "
              f"(target 2.0, {'met' if cmp['produce_target_met'] else 'NOT met'}); "
              f"zstd: {cmp['produce_ratio_zstd']:.2f}")  # fmt: skip
        print(f"consume: best uncompressed rillet / better peer = {cmp['consume_ratio']:.2f} "
              f"(target 1.5, {'met' if cmp['consume_target_met'] else 'NOT met'}); "
              f"zstd: {cmp['consume_ratio_zstd']:.2f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
