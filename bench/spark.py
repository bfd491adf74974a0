#!/usr/bin/env python3
"""Spark benchmark: a full scan of a Rillet topic through the ``rillet`` data source against
the same rows in a Parquet file on local disk, in one run, on one local Spark.

Setup (untimed): a broker process, a topic of ``--partitions`` partitions filled with
``--records`` JSON values of about 1 KiB (``{"id": n, "kind": "k<n % 10>", "pad": "..."}``),
then the topic read once by Spark and written to Parquet (key, value, topic, partition,
offset, timestamp, timestampType: the same rows and columns).

Timed, ``--repeat`` times each, interleaved, best kept: the same query on both sources,
``sum(length(value))`` and the count of rows whose parsed ``kind`` is ``k3``
(``get_json_object``), with ``spark.read`` planning included.

Output: a human summary, then one JSON line (also ``bench/results/spark.json``): rows/s and
MB/s (1 MB = 1e6 bytes of values) for both, and the Rillet/Parquet ratio (target >= 0.5).

    pip install -e '.[spark]'
    python bench/spark.py                      # 2,000,000 records on 6 partitions
    python bench/spark.py --records 200000     # quick
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker import Broker, log
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rillet import Producer

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "spark-bench"


def fill(broker: Broker, records: int, partitions: int) -> int:
    broker.create_topic(TOPIC, partitions)
    pad = "x" * 960
    total = 0
    with Producer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5, batch_size=262144) as p:
        for i in range(records):
            value = json.dumps({"id": i, "kind": f"k{i % 10}", "pad": pad}).encode()
            total += len(value)
            p.send(TOPIC, value, partition=i % partitions)
    return total


def query(df: DataFrame) -> tuple[int, int]:
    row = df.agg(
        F.sum(F.length("value")).alias("bytes"),
        F.count(
            F.when(F.get_json_object(F.col("value").cast("string"), "$.kind") == "k3", 1)
        ).alias("k3"),
    ).collect()[0]
    return int(row["bytes"]), int(row["k3"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", type=Path, default=RESULTS / "spark.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rillet-spark-bench-"))
    broker = Broker(work / "data")
    broker.start()
    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        log(f"filling {TOPIC}: {args.records:,} records on {args.partitions} partitions")
        value_bytes = fill(broker, args.records, args.partitions)

        def rillet_df() -> DataFrame:
            return (
                spark.read.format("rillet")
                .option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", TOPIC)
                .load()
            )

        parquet = work / "topic.parquet"
        log(f"writing the same rows to {parquet}")
        rillet_df().write.parquet(str(parquet))
        samples: dict[str, list[float]] = {"rillet": [], "parquet": []}
        answers: dict[str, tuple[int, int]] = {}
        for i in range(args.repeat):
            order = ("rillet", "parquet") if i % 2 == 0 else ("parquet", "rillet")
            for name in order:
                t = time.perf_counter()
                df = rillet_df() if name == "rillet" else spark.read.parquet(str(parquet))
                answers[name] = query(df)
                samples[name].append(time.perf_counter() - t)
                log(f"  {name}: {samples[name][-1]:.2f} s")
        if answers["rillet"] != answers["parquet"] or answers["rillet"][0] != value_bytes:
            raise RuntimeError(f"the sources disagree: {answers}, {value_bytes} value bytes")
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    out: dict[str, Any] = {
        "records": args.records,
        "partitions": args.partitions,
        "value_bytes": value_bytes,
        "master": args.master,
        "samples": samples,
    }
    for name, times in samples.items():
        best = min(times)
        out[name] = {
            "seconds": best,
            "rows_per_sec": args.records / best,
            "mb_per_sec": value_bytes / best / 1e6,
        }
    out["ratio"] = out["rillet"]["rows_per_sec"] / out["parquet"]["rows_per_sec"]
    out["target"] = 0.5
    out["target_met"] = out["ratio"] >= 0.5
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"\n{args.records:,} records (~1 KiB JSON values) on {args.partitions} partitions, "
        f"{args.master}, sum(length(value)) + count of a parsed field, best of {args.repeat}"
    )
    for name in ("rillet", "parquet"):
        r = out[name]
        print(f"{name:<8} {r['rows_per_sec']:>12,.0f} rows/s {r['mb_per_sec']:>9.1f} MB/s")
    print(
        f"rillet / parquet = {out['ratio']:.2f} (target 0.5, "
        f"{'met' if out['target_met'] else 'NOT met'})"
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
