#!/usr/bin/env python3
"""Exactly-once benchmark: what idempotence costs a producer, on a 3-node Rillet cluster
(three combined broker+controller processes on loopback), topics with replication factor 3
and ``min.insync.replicas=2``.

* Throughput: ``rillet producer-perf-test`` with 1 KiB records on a 6-partition topic, the
  idempotent producer (Kafka's default since 3.0: ``enable.idempotence=true``,
  ``acks=all``) against the same producer with ``enable.idempotence=false`` (and still
  ``acks=all``: the baseline, measured on the same cluster in the same run, interleaved per
  round). With the producer's defaults (Kafka's: 16 KiB batches, no linger) and with
  throughput settings beside them; each run on a fresh topic, the best of ``--rounds`` kept,
  every round reported. Target: idempotent / plain >= 0.9.
* Latency: p99 of both, throttled (``--throughput``) to half the plain producer's peak with
  the tuned settings.
* Transactional produce: the same tool with ``--transaction-duration-ms 100`` (a transaction
  committed every 100 ms, Kafka's ProducerPerformance flag), against the plain producer.
  Target: transactional / plain >= 0.7.

Output: a human summary, ``bench/results/exactly_once.json``, and one JSON line last with
``idempotent_vs_plain`` and ``transactional_vs_plain`` (producer defaults) and their
``_tuned`` twins.

    python bench/exactly_once.py                                 # the reported run
    python bench/exactly_once.py --records 50000 --rounds 1      # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster import DEFAULT_PROPS, TUNED_PROPS, create_topic, log, perf_test, start_cluster

from tests.support.cluster import Cluster

RESULTS = Path(__file__).resolve().parent / "results"

PRODUCERS = {
    "plain": ["acks=all", "enable.idempotence=false"],
    "idempotent": ["acks=all", "enable.idempotence=true"],
    "transactional": ["acks=all"],
}
# Extra producer-perf-test flags per producer.
FLAGS = {"transactional": ["--transaction-duration-ms", "100"]}


def throughput_runs(c: Cluster, records: int, size: int, rounds: int, work: Path) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {}
    n = 0
    for round_no in range(1, rounds + 1):
        for settings, props in (("default", DEFAULT_PROPS), ("tuned", TUNED_PROPS)):
            for producer, producer_props in PRODUCERS.items():
                n += 1
                topic = f"eos-{n}-{settings}-{producer}"
                create_topic(c, topic, 6)
                log(f"round {round_no}: {settings} producer settings, {producer}")
                runs.setdefault(f"{settings}_{producer}", []).append(
                    perf_test(
                        c, topic, records, size, [*producer_props, *props], work,
                        extra=FLAGS.get(producer),
                    )
                )  # fmt: skip
    return {
        k: {
            **max(v, key=lambda r: r["records_per_sec"]),
            "records_per_sec_by_round": [r["records_per_sec"] for r in v],
        }
        for k, v in runs.items()
    }


def latency_at_half(c: Cluster, peak: float, records: int, size: int, work: Path) -> dict[str, Any]:
    out = {}
    for producer, producer_props in PRODUCERS.items():
        topic = f"eos-latency-{producer}"
        create_topic(c, topic, 6)
        log(f"latency: {producer} at half the plain peak ({peak / 2:.0f} records/s)")
        out[producer] = perf_test(
            c, topic, records // 2, size, [*producer_props, *TUNED_PROPS], work, peak / 2,
            extra=FLAGS.get(producer),
        )  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS / "exactly_once.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rillet-bench-eos-"))
    result: dict[str, Any] = {
        "records": args.records,
        "record_size": args.record_size,
        "nodes": 3,
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "producer_props": {"default": DEFAULT_PROPS, "tuned": TUNED_PROPS},
        "producers": PRODUCERS,
    }
    try:
        c = start_cluster(work / "cluster", {})
        try:
            t = result["throughput"] = throughput_runs(
                c, args.records, args.record_size, args.rounds, work
            )
            peak = t["tuned_plain"]["records_per_sec"]
            result["latency_at_half_plain_peak"] = latency_at_half(
                c, peak, args.records, args.record_size, work
            )
        finally:
            c.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    t = result["throughput"]
    for settings, suffix in (("default", ""), ("tuned", "_tuned")):
        plain = t[f"{settings}_plain"]["records_per_sec"]
        for producer in ("idempotent", "transactional"):
            result[f"{producer}_vs_plain{suffix}"] = (
                t[f"{settings}_{producer}"]["records_per_sec"] / plain
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    summary(result)
    print(json.dumps(result))
    return 0


def summary(r: dict[str, Any]) -> None:
    t = r["throughput"]
    print(f"Rillet 3-node cluster, RF=3, min.insync.replicas=2, acks=all, {r['records']:,} x "
          f"{r['record_size']} B records")  # fmt: skip
    for k in sorted(t):
        x = t[k]
        rounds = [round(v) for v in x["records_per_sec_by_round"]]
        print(f"  {k:20} {x['records_per_sec']:>10,.0f} records/s {x['mb_per_sec_1e6']:>7.1f} MB/s"
              f"  p99 {x['p99_ms']:.0f} ms  (rounds {rounds})")  # fmt: skip
    for producer in ("idempotent", "transactional"):
        print(f"  {producer} / plain: {r[f'{producer}_vs_plain']:.2f} (producer defaults), "
              f"{r[f'{producer}_vs_plain_tuned']:.2f} (tuned)")  # fmt: skip
    for producer, x in r["latency_at_half_plain_peak"].items():
        print(f"  {producer} at half the plain peak: p99 {x['p99_ms']:.0f} ms, "
              f"{x['records_per_sec']:,.0f} records/s")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
