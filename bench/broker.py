#!/usr/bin/env python3
"""Broker benchmark: Rillet's producer-perf-test and consumer-perf-test against Redis Streams
and NATS JetStream on the same machine, in the same run, on the same workload.

Rillet (a real ``rillet server start`` process on free ports, data in a temp dir):

* ``rillet producer-perf-test`` with 1 KiB records, acks=1, on topics of 1 and 6 partitions,
  compression none and zstd (Kafka's payload: random uppercase letters);
* ``rillet consumer-perf-test`` reading each of those topics back from the beginning;
* p99 produce latency with the producer throttled (``--throughput``) to half of Rillet's
  peak uncompressed produce rate in this run (``--rounds`` runs; the median p99 is the
  headline).

Kafka's protocol, on the same broker's Kafka listener, in the same rounds:

* librdkafka's perf tool, ``rdkafka_performance`` (C; built from Debian's librdkafka source
  by ``bench/rdkafka_performance.py``), producing and consuming with librdkafka's defaults
  except acks, on topics of 1 partition (acks=1 and acks=all) and 6 partitions (acks=1);
* a zero-copy fetch of the 1-partition topic against a raw ``sendfile`` of the same segment
  files over loopback TCP (``bench/zero_copy.py``);
* ``rillet producer-perf-test`` with no --producer-props (Kafka's producer defaults) at the
  Kafka listener, where the client's default transport speaks Kafka's protocol, and at the
  gRPC listener;
* librdkafka's producer through Python (``bench/confluent_perf.py``, confluent-kafka) at
  full speed, and its p99 produce latency paced at half of that peak.

Peers (``bench/peers.py``; Debian's servers, installed with apt-get when missing):

* Redis Streams: ``redis-server --appendonly yes``, ``redis-benchmark -P 1000`` XADD, a
  batched XRANGE reader;
* NATS JetStream: ``nats-server -js`` with a file-backed stream, acknowledged async publish and
  batched pull consume by a Rust program (``bench/peers/nats-bench``, async-nats).

Method: ``--rounds`` rounds (3) each run every system once, interleaved, so a slow spell of
this shared machine hits them all; each system's best produce and best consume are compared.
Before every produce phase, Rillet's and the peers' alike, the page cache is warmed
(``bench/pagecache.py``).

Output: a human summary on stdout, then one JSON line with every figure (every round's rates
too) and each Rillet/peer ratio (also written to ``bench/results/broker.json``), and a bar
chart (``bench/results/broker.png``). Rates: records/s, and MB/s with 1 MB = 1e6 bytes.

    pip install -e '.[bench]'
    python bench/broker.py                                # 1,000,000 records per run, 3 rounds
    python bench/broker.py --records 200000 --rounds 1    # quick
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
import rdkafka_performance
import zero_copy
from pagecache import warm_page_cache
from perftools import log, rillet, run_tool

from tests.support.server_process import ServerProcess as Broker

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1e6

# Producer settings for the throughput runs (Kafka's perf-test takes them as --producer-props;
# these are the usual throughput settings: large batches, a short linger, and requests of up
# to 4 MiB, as one Python gRPC call costs about as much as moving half a megabyte).
PRODUCER_PROPS = [
    "acks=1",
    "batch.size=262144",
    "linger.ms=5",
    "buffer.memory=67108864",
    "max.request.size=4194304",
]

# Before each produce phase (Rillet's and each peer's), this many times the phase's payload
# is written and deleted, so the phase writes into recycled page-cache pages.
WARM_FACTOR = 1.5


def warm(records: int, size: int, work: Path) -> None:
    """Recycle page-cache pages for the next produce phase, for every system alike
    (bench/pagecache.py says why)."""
    warm_page_cache(work, int(records * size * WARM_FACTOR))


def produce(broker: Broker, topic: str, records: int, size: int, codec: str, work: Path,
            throughput: float = -1) -> dict[str, Any]:  # fmt: skip
    out = work / f"produce-{topic}-{int(throughput)}.json"
    warm(records, size, work)
    argv = rillet("producer-perf-test", "--topic", topic, "--num-records", str(records),
                  "--record-size", str(size), "--throughput", str(throughput),
                  "--bootstrap-server", broker.bootstrap, "--json", str(out),
                  "--producer-props", *PRODUCER_PROPS, f"compression.type={codec}")  # fmt: skip
    r = run_tool(argv, out)
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    r["command"] = " ".join(["rillet", *argv[3:]])
    return r


def consume(broker: Broker, topic: str, records: int, size: int, work: Path,
            transport: str = "grpc") -> dict[str, Any]:  # fmt: skip
    """``rillet consumer-perf-test`` from the beginning of ``topic``, bootstrapped from the
    broker's gRPC listener or (``transport="kafka"``) its Kafka listener: the consumer
    speaks what the listener serves."""
    out = work / f"consume-{topic}-{transport}.json"
    bootstrap = broker.kafka_bootstrap if transport == "kafka" else broker.bootstrap
    argv = rillet("consumer-perf-test", "--topic", topic, "--messages", str(records),
                  "--bootstrap-server", bootstrap, "--json", str(out),
                  "--timeout", "30000")  # fmt: skip
    r = run_tool(argv, out)
    if r["records"] != records:
        raise RuntimeError(f"consumer-perf-test read {r['records']} of {records} records")
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    r["command"] = " ".join(["rillet", *argv[3:]])
    return r


def kafka_produce(broker: Broker, topic: str, records: int, size: int, acks: str, work: Path,
                  throughput: float | None = None) -> dict[str, Any]:  # fmt: skip
    """librdkafka's ``rdkafka_performance -P`` (its defaults but acks) on the Kafka listener;
    with ``throughput``, throttled and with per-message latencies."""
    warm(records, size, work)
    r = rdkafka_performance.produce(broker.kafka_bootstrap, topic, records, size, acks,
                                    throughput)  # fmt: skip
    log(f"  $ {r['command']}")
    lat = f", p99 {r['p99_ms']} ms" if "p99_ms" in r else ""
    log(f"    {r['records_per_sec']:,.0f} records/s ({r['mb_per_sec']:.1f} MB/s){lat}")
    return r


def confluent_produce(broker: Broker, topic: str, records: int, size: int, work: Path,
                      throughput: float = -1) -> dict[str, Any]:  # fmt: skip
    """librdkafka's producer through Python (``bench/confluent_perf.py``), acks=1, its
    defaults otherwise; paced by time when ``throughput`` is set."""
    warm(records, size, work)
    argv = [sys.executable, str(Path(__file__).resolve().parent / "confluent_perf.py"),
            "--bootstrap-server", broker.kafka_bootstrap, "--topic", topic,
            "--num-records", str(records), "--record-size", str(size),
            "--throughput", str(throughput), "--producer-props", "acks=1"]  # fmt: skip
    log("  $ confluent_perf.py " + " ".join(argv[2:]))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"confluent_perf.py failed:\n{done.stdout}\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    log("    " + lines[0])
    figures: dict[str, Any] = json.loads(lines[-1])
    figures["command"] = "python bench/confluent_perf.py " + " ".join(argv[2:])
    return figures


def kafka_consume(broker: Broker, topic: str, partitions: int, records: int) -> dict[str, Any]:
    r = rdkafka_performance.consume(broker.kafka_bootstrap, topic, partitions, records)
    log(f"  $ {r['command']}")
    log(f"    {r['records_per_sec']:,.0f} records/s ({r['mb_per_sec']:.1f} MB/s)")
    return r


def default_props_produce(broker: Broker, topic: str, records: int, size: int, work: Path,
                          transport: str = "kafka") -> dict[str, Any]:  # fmt: skip
    """``rillet producer-perf-test`` with Kafka's producer defaults (acks=all, 16 KiB
    batches, linger.ms 5, 1 MiB requests) and no props at all: the client's default
    ``transport=auto`` speaks Kafka's protocol to the broker's Kafka listener (what
    ``rillet server start`` serves on localhost:9092) or, with ``transport="grpc"``, gRPC to
    its gRPC listener. The tool's JSON names the transport the client settled on."""
    out = work / f"produce-{topic}-defaults-{transport}.json"
    warm(records, size, work)
    bootstrap = broker.kafka_bootstrap if transport == "kafka" else broker.bootstrap
    argv = rillet("producer-perf-test", "--topic", topic, "--num-records", str(records),
                  "--record-size", str(size), "--throughput", "-1",
                  "--bootstrap-server", bootstrap, "--json", str(out))  # fmt: skip
    r = run_tool(argv, out)
    if r.get("transport") != transport:
        raise RuntimeError(f"the producer spoke {r.get('transport')}, not {transport}")
    r["mb_per_sec_1e6"] = r["records_per_sec"] * size / MB
    r["command"] = " ".join(["rillet", *argv[3:]])
    return r


# Kafka-protocol runs of each round: (partitions, acks) for librdkafka's producer and consumer.
KAFKA_CONFIGS = [(1, "1"), (6, "1"), (1, "all")]


def run_kafka_round(broker: Broker, records: int, size: int, work: Path, round_no: int
                    ) -> dict[str, Any]:  # fmt: skip
    """librdkafka's clients on the Kafka listener, the zero-copy fetch against raw sendfile
    on the first topic's segments, and Rillet's producer with Kafka's defaults."""
    runs: list[dict[str, Any]] = []
    for partitions, acks in KAFKA_CONFIGS:
        topic = f"kafka-p{partitions}-acks{acks}"
        broker.create_topic(topic, partitions)
        log(f"librdkafka (round {round_no}): {partitions} partition(s), acks={acks}")
        p = kafka_produce(broker, topic, records, size, acks, work)
        c = kafka_consume(broker, topic, partitions, records)
        runs.append({"partitions": partitions, "acks": acks, "produce": p, "consume": c})
    broker.create_topic("kafka-python-p1", 1)
    log(f"librdkafka through Python (round {round_no}): 1 partition, acks=1")
    python = confluent_produce(broker, "kafka-python-p1", records, size, work)
    log(f"zero-copy fetch against raw loopback sendfile (round {round_no})")
    zc = zero_copy.measure(
        broker.kafka_bootstrap, "kafka-p1-acks1", 0, broker.data_dir / "kraft-combined-logs"
    )
    log(f"    fetch {zc['fetch_vs_loopback']:.2f}x loopback (1 MiB requests "
        f"{zc['fetch_default_vs_loopback']:.2f}x)")  # fmt: skip
    broker.create_topic("defaults-p1", 1)
    broker.create_topic("defaults-grpc-p1", 1)
    log(f"rillet producer-perf-test with Kafka's default producer settings (round {round_no})")
    defaults = default_props_produce(broker, "defaults-p1", records, size, work)
    defaults_grpc = default_props_produce(
        broker, "defaults-grpc-p1", records, size, work, transport="grpc"
    )
    log(f"rillet consumer-perf-test over gRPC and over Kafka's protocol (round {round_no})")
    consume_grpc = consume(broker, "defaults-p1", records, size, work)
    consume_kafka = consume(broker, "defaults-p1", records, size, work, transport="kafka")
    for transport, c in (("gRPC", consume_grpc), ("Kafka", consume_kafka)):
        log(f"    {transport}: {c['records_per_sec']:,.0f} records/s")
    return {
        "rillet_consume_grpc": consume_grpc,
        "rillet_consume_kafka": consume_kafka,
        "runs": runs,
        "python_produce": python,
        "zero_copy": zc,
        "default_props_produce": defaults,
        "default_props_produce_grpc": defaults_grpc,
    }


CONFIGS = [(partitions, codec) for partitions in (1, 6) for codec in ("none", "zstd")]


def run_rillet_round(records: int, size: int, work: Path, round_no: int
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """One round: a fresh broker (gRPC and Kafka listeners), then produce and consume on
    each topic configuration through gRPC, then the Kafka-protocol runs."""
    (work / f"rillet-{round_no}").mkdir()
    broker = Broker(work / f"rillet-{round_no}" / "data", kafka=True)
    broker.start()
    runs: list[dict[str, Any]] = []
    try:
        for partitions, codec in CONFIGS:
            topic = f"bench-p{partitions}-{codec}"
            broker.create_topic(topic, partitions)
            log(f"rillet (round {round_no}): {partitions} partition(s), compression {codec}")
            p = produce(broker, topic, records, size, codec, work)
            c = consume(broker, topic, records, size, work)
            runs.append(
                {"partitions": partitions, "compression": codec, "produce": p, "consume": c}
            )
        kafka = run_kafka_round(broker, records, size, work, round_no)
    finally:
        broker.stop()
        shutil.rmtree(work / f"rillet-{round_no}", ignore_errors=True)
    return runs, kafka


def run_latency(
    peak: dict[str, Any], records: int, size: int, work: Path, runs: int
) -> dict[str, Any]:
    """Produce latency with the producer throttled to half of the peak uncompressed rate,
    ``runs`` times (each a fresh topic); the run with the median p99 is reported, every run
    is kept."""
    (work / "rillet-latency").mkdir()
    broker = Broker(work / "rillet-latency" / "data")
    broker.start()
    half = peak["produce"]["records_per_sec"] / 2
    samples = []
    try:
        for i in range(runs):
            topic = f"latency-{i}-p{peak['partitions']}-{peak['compression']}"
            broker.create_topic(topic, peak["partitions"])
            log(f"rillet: latency at half of the peak rate ({half:.0f} records/s) on {topic}")
            samples.append(
                produce(broker, topic, records // 2, size, peak["compression"], work, half)
            )
    finally:
        broker.stop()
    median = sorted(samples, key=lambda s: s["p99_ms"])[len(samples) // 2]
    return {
        "partitions": peak["partitions"],
        "compression": peak["compression"],
        "target_records_per_sec": half,
        **median,
        "p99_ms_by_run": [s["p99_ms"] for s in samples],
        "records_per_sec_by_run": [s["records_per_sec"] for s in samples],
    }


def best_of(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per configuration, the best produce and the best consume over the rounds (each with
    its own figures), and every round's rates."""
    out = []
    for i, (partitions, codec) in enumerate(CONFIGS):
        samples = [r[i] for r in rounds]
        out.append({"partitions": partitions, "compression": codec, **_best_of_samples(samples)})
    return out


def _best_of_samples(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration's rounds: the best produce and the best consume (each with its own
    figures), and every round's rates."""
    return {
        "produce": max((s["produce"] for s in samples), key=lambda f: f["records_per_sec"]),
        "consume": max((s["consume"] for s in samples), key=lambda f: f["records_per_sec"]),
        "produce_records_per_sec_by_round": [s["produce"]["records_per_sec"] for s in samples],
        "consume_records_per_sec_by_round": [s["consume"]["records_per_sec"] for s in samples],
    }


def best_kafka(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per librdkafka configuration the best produce and consume over the rounds; the best
    zero-copy ratio and the best default-settings produce; every round's figures kept."""
    runs = []
    for i, (partitions, acks) in enumerate(KAFKA_CONFIGS):
        samples = [r["runs"][i] for r in rounds]
        runs.append({"partitions": partitions, "acks": acks, **_best_of_samples(samples)})
    zc = [r["zero_copy"] for r in rounds]
    defaults = [r["default_props_produce"] for r in rounds]
    defaults_grpc = [r["default_props_produce_grpc"] for r in rounds]
    python = [r["python_produce"] for r in rounds]
    return {
        "runs": runs,
        "python_produce": {
            **max(python, key=lambda d: d["records_per_sec"]),
            "records_per_sec_by_round": [d["records_per_sec"] for d in python],
        },
        "zero_copy": {
            **max(zc, key=lambda z: z["fetch_default_vs_loopback"]),
            "fetch_vs_loopback_by_round": [z["fetch_vs_loopback"] for z in zc],
            "fetch_default_vs_loopback_by_round": [z["fetch_default_vs_loopback"] for z in zc],
        },
        "default_props_produce": {
            **max(defaults, key=lambda d: d["records_per_sec"]),
            "records_per_sec_by_round": [d["records_per_sec"] for d in defaults],
        },
        "default_props_produce_grpc": {
            **max(defaults_grpc, key=lambda d: d["records_per_sec"]),
            "records_per_sec_by_round": [d["records_per_sec"] for d in defaults_grpc],
        },
        **{
            key: {
                **max((r[key] for r in rounds), key=lambda d: d["records_per_sec"]),
                "records_per_sec_by_round": [r[key]["records_per_sec"] for r in rounds],
            }
            for key in ("rillet_consume_grpc", "rillet_consume_kafka")
        },
    }


def run_kafka_latency(
    kafka: dict[str, Any], records: int, size: int, work: Path, runs: int
) -> dict[str, Any]:
    """librdkafka's producer through Python (acks=1, its defaults otherwise) paced at half
    of its best rate in the rounds, ``runs`` times on fresh topics; the median p99 is
    reported. (rdkafka_performance cannot pace at these rates: see confluent_perf.py.)"""
    half = kafka["python_produce"]["records_per_sec"] / 2
    (work / "kafka-latency").mkdir()
    broker = Broker(work / "kafka-latency" / "data", kafka=True)
    broker.start()
    samples = []
    try:
        for i in range(runs):
            topic = f"kafka-latency-{i}"
            broker.create_topic(topic, 1)
            log(f"librdkafka: latency at half of the peak rate ({half:.0f} records/s)")
            samples.append(confluent_produce(broker, topic, records // 2, size, work, half))
    finally:
        broker.stop()
    median = sorted(samples, key=lambda s: s["p99_ms"])[len(samples) // 2]
    return {
        "partitions": 1,
        "acks": "1",
        "target_records_per_sec": half,
        **median,
        "p99_ms_by_run": [s["p99_ms"] for s in samples],
        "records_per_sec_by_run": [s["records_per_sec"] for s in samples],
    }


def best_peer(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """A peer's best produce and best consume over the rounds, with every round kept."""
    ok = [s for s in samples if "error" not in s]
    if not ok:
        return samples[-1]
    out = dict(max(ok, key=lambda s: s["produce_records_per_sec"]))
    fastest_read = max(ok, key=lambda s: s["consume_records_per_sec"])
    for k in ("consume_records_per_sec", "consume_mb_per_sec", "consume_elapsed_s"):
        out[k] = fastest_read[k]
    out["produce_records_per_sec_by_round"] = [s.get("produce_records_per_sec") for s in samples]
    out["consume_records_per_sec_by_round"] = [s.get("consume_records_per_sec") for s in samples]
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
    ap.add_argument(
        "--rounds", type=int, default=3, help="rounds over every system; the best is kept"
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "broker.json")
    ap.add_argument("--chart", type=Path, default=RESULTS / "broker.png")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rillet-bench-"))
    result: dict[str, Any] = {
        "records": args.records,
        "record_size": args.record_size,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "producer_props": PRODUCER_PROPS,
        "rounds": args.rounds,
        "page_cache_warmup_bytes_per_produce_phase": int(
            args.records * args.record_size * WARM_FACTOR
        ),
    }
    peer_fns = {} if args.skip_peers else {"redis_streams": peers.run_redis,
                                           "nats_jetstream": peers.run_nats}  # fmt: skip
    rillet_rounds: list[list[dict[str, Any]]] = []
    kafka_rounds: list[dict[str, Any]] = []
    peer_rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in peer_fns}
    try:
        rdkafka_performance.ensure_built()  # before any timed phase
        if peer_fns:
            peers.ensure_installed()
        # Rounds interleave the systems, so a slow spell of the machine hits all of them.
        for round_no in range(1, args.rounds + 1):
            grpc_runs, kafka = run_rillet_round(args.records, args.record_size, work, round_no)
            rillet_rounds.append(grpc_runs)
            kafka_rounds.append(kafka)
            for name, fn in peer_fns.items():
                log(f"peer (round {round_no}): {name}")
                peer_dir = work / f"{name}-{round_no}"
                peer_dir.mkdir()
                warm(args.records, args.record_size, work)
                try:
                    peer_rounds[name].append(fn(args.records, args.record_size, peer_dir))
                except Exception as e:  # report a peer that failed rather than lose the run
                    log(f"  {name} failed: {e}")
                    peer_rounds[name].append({"error": str(e)})
                finally:
                    shutil.rmtree(peer_dir, ignore_errors=True)
        runs = best_of(rillet_rounds)
        peak = max(
            (r for r in runs if r["compression"] == "none"),
            key=lambda r: r["produce"]["records_per_sec"],
        )
        result["rillet"] = {
            "runs": runs,
            "latency_at_half_peak": run_latency(
                peak, args.records, args.record_size, work, args.rounds
            ),
        }
        result["kafka"] = best_kafka(kafka_rounds)
        result["kafka"]["latency_at_half_peak"] = run_kafka_latency(
            result["kafka"], args.records, args.record_size, work, args.rounds
        )
        result["peers"] = {name: best_peer(samples) for name, samples in peer_rounds.items()}
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
    kafka = result["kafka"]

    def best_kafka_rate(kind: str, acks: str) -> float:
        return max(r[kind]["records_per_sec"] for r in kafka["runs"] if r["acks"] == acks)

    out.update(
        {
            "kafka_best_produce_records_per_sec": best_kafka_rate("produce", "1"),
            "kafka_best_produce_acks_all_records_per_sec": best_kafka_rate("produce", "all"),
            "kafka_best_consume_records_per_sec": max(
                r["consume"]["records_per_sec"] for r in kafka["runs"]
            ),
            "kafka_consume_vs_loopback": kafka["zero_copy"]["fetch_default_vs_loopback"],
            "kafka_consume_vs_loopback_64mib_fetches": kafka["zero_copy"]["fetch_vs_loopback"],
            "kafka_consume_vs_loopback_target": 0.5,
            "default_props_produce_records_per_sec": kafka["default_props_produce"][
                "records_per_sec"
            ],
            "default_props_produce_grpc_records_per_sec": kafka["default_props_produce_grpc"][
                "records_per_sec"
            ],
            # Rillet's own client over each transport, same broker, same round.
            "rillet_produce_kafka_vs_grpc": kafka["default_props_produce"]["records_per_sec"]
            / kafka["default_props_produce_grpc"]["records_per_sec"],
            "rillet_consume_kafka_vs_grpc": kafka["rillet_consume_kafka"]["records_per_sec"]
            / kafka["rillet_consume_grpc"]["records_per_sec"],
            "p99_half_peak_ms": kafka["latency_at_half_peak"]["p99_ms"],
            "p99_half_peak_ms_grpc": result["rillet"]["latency_at_half_peak"]["p99_ms"],
            "p99_half_peak_ms_target": 10,
        }
    )
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
            "kafka_produce_vs_peer": out["kafka_best_produce_records_per_sec"] / peer_produce,
            "kafka_produce_acks_all_vs_peer": out["kafka_best_produce_acks_all_records_per_sec"]
            / peer_produce,
            "kafka_consume_vs_peer": out["kafka_best_consume_records_per_sec"] / peer_consume,
            "kafka_vs_peer_target": 3.0,
            "default_props_produce_vs_peer": out["default_props_produce_records_per_sec"]
            / peer_produce,
            "default_props_produce_grpc_vs_peer": out["default_props_produce_grpc_records_per_sec"]
            / peer_produce,
            "default_props_produce_vs_peer_target": 2.0,
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
          f"peak), {lat['partitions']}p {lat['compression']}, the run with the median p99: "
          f"p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, p99.9 {lat['p999_ms']} ms "
          f"(p99 of each run: {lat['p99_ms_by_run']} ms)")  # fmt: skip
    print("\nKafka's protocol (librdkafka's rdkafka_performance, its defaults but acks):")
    for r in result["kafka"]["runs"]:
        name = f"librdkafka {r['partitions']}p acks={r['acks']}"
        p, c = r["produce"], r["consume"]
        print(f"{name:<28}{p['records_per_sec']:>15,.0f}{p['mb_per_sec']:>9.1f}"
              f"{c['records_per_sec']:>16,.0f}{c['mb_per_sec']:>9.1f}")  # fmt: skip
    for key, how in (("default_props_produce", "Kafka listener"),
                     ("default_props_produce_grpc", "gRPC listener")):  # fmt: skip
        d = result["kafka"][key]
        print(f"{'rillet perf-test, defaults':<28}{d['records_per_sec']:>15,.0f}"
              f"{d['records_per_sec'] * result['record_size'] / MB:>9.1f}   (no props, {how}: "
              "acks=all, 16 KiB batches)")  # fmt: skip
    for key, how in (("rillet_consume_grpc", "gRPC"), ("rillet_consume_kafka", "Kafka protocol")):
        d = result["kafka"][key]
        print(f"{'rillet consumer-perf-test':<28}{'':>24}{d['records_per_sec']:>16,.0f}"
              f"{d['mb_per_sec_1e6']:>9.1f}   ({how})")  # fmt: skip
    zc = result["kafka"]["zero_copy"]
    print(f"zero-copy fetch, 1 MiB requests: {zc['fetch_default']['bytes_per_sec'] / MB:,.0f} "
          f"MB/s = {zc['fetch_default_vs_loopback']:.2f}x raw loopback sendfile in 1 MiB round "
          f"trips ({zc['loopback_sendfile_1mib_round_trips']['bytes_per_sec'] / MB:,.0f} MB/s); "
          f"64 MiB requests {zc['fetch']['bytes_per_sec'] / MB:,.0f} MB/s = "
          f"{zc['fetch_vs_loopback']:.2f}x a raw stream")  # fmt: skip
    klat = result["kafka"]["latency_at_half_peak"]
    py = result["kafka"]["python_produce"]
    print(f"{'librdkafka via Python 1p':<28}{py['records_per_sec']:>15,.0f}{py['mb_per_sec']:>9.1f}"
          "   (confluent-kafka, acks=1)")  # fmt: skip
    print(f"librdkafka (Python) produce latency at {klat['target_records_per_sec']:,.0f} records/s "
          f"(half of its peak), acks=1: p50 {klat['p50_ms']} ms, p99 {klat['p99_ms']} ms, p99.9 "
          f"{klat['p999_ms']} ms (p99 of each run: {klat['p99_ms_by_run']} ms)")  # fmt: skip
    cmp = result["comparison"]
    if "kafka_produce_vs_peer" in cmp:
        print(f"Kafka protocol vs better peer: produce {cmp['kafka_produce_vs_peer']:.2f}x "
              f"(acks=all {cmp['kafka_produce_acks_all_vs_peer']:.2f}x), consume "
              f"{cmp['kafka_consume_vs_peer']:.2f}x (target 3x); Rillet perf-test with "
              f"Kafka's defaults {cmp['default_props_produce_vs_peer']:.2f}x at the Kafka "
              f"listener (target 2x), {cmp['default_props_produce_grpc_vs_peer']:.2f}x at the "
              "gRPC listener")  # fmt: skip
    if "produce_ratio" in cmp:
        print(f"produce: best uncompressed rillet / better peer = {cmp['produce_ratio']:.2f} "
              f"(target 2.0, {'met' if cmp['produce_target_met'] else 'NOT met'}); "
              f"zstd: {cmp['produce_ratio_zstd']:.2f}")  # fmt: skip
        print(f"consume: best uncompressed rillet / better peer = {cmp['consume_ratio']:.2f} "
              f"(target 1.5, {'met' if cmp['consume_target_met'] else 'NOT met'}); "
              f"zstd: {cmp['consume_ratio_zstd']:.2f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
