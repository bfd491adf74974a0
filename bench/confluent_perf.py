#!/usr/bin/env python3
"""librdkafka's producer through Python (confluent-kafka), shaped like Kafka's
producer-perf-test: the Kafka-protocol latency client of ``bench/broker.py``.

It sends ``--num-records`` records of ``--record-size`` bytes (Kafka's perf-test payload:
random uppercase letters) round robin over the topic's partitions, at most ``--throughput``
records/s (-1: unthrottled; otherwise Kafka's ThroughputThrottler, which paces by time, as
librdkafka's own ``rdkafka_performance`` cannot at these rates: its ``-r`` sleeps whole
microseconds per message), with librdkafka's defaults except the ``--producer-props`` given.
Latency is librdkafka's own per record (``Message.latency()``: from ``produce()`` to the
delivery report), so p50/p99/p99.9 include the time a record waited in the client's queue,
as Kafka's perf-test's do.

The last stdout line is JSON: records, records_per_sec, mb_per_sec (1 MB = 1e6 B of record
values), elapsed_s, p50_ms, p99_ms, p999_ms, max_ms.

    python bench/confluent_perf.py --bootstrap-server localhost:9092 --topic t \\
        --num-records 1000000 --record-size 1024 --producer-props acks=1
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import time
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

MB = 1e6


def payload(size: int) -> bytes:
    rng = random.Random(0)
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(size)).encode()


def props(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--producer-props needs key=value, got {item!r}")
        out[key] = value
    return out


def partitions_of(conf: dict[str, Any], topic: str) -> list[int]:
    probe = Producer(conf)
    meta = probe.list_topics(topic, timeout=30).topics[topic]
    if meta.error is not None:
        raise SystemExit(f"topic {topic}: {meta.error}")
    return sorted(meta.partitions)


def percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))] if sorted_ms else 0.0


def produce(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap_server,
        **props(args.producer_props),
    }
    parts = partitions_of(conf, args.topic)
    p = Producer(conf)
    value = payload(args.record_size)
    latencies: list[float] = []
    errors: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            latencies.append(msg.latency() or 0.0)

    n, topic, throughput = args.num_records, args.topic, args.throughput
    start = time.perf_counter()
    for i in range(n):
        if throughput > 0:
            # Kafka's ThroughputThrottler: sleep until this record is due.
            due = start + i / throughput
            ahead = due - time.perf_counter()
            if ahead > 0.001:
                p.poll(0)
                time.sleep(ahead)
        while True:
            try:
                p.produce(topic, value, partition=parts[i % len(parts)], on_delivery=delivered)
                break
            except BufferError:  # the client's queue is full: serve delivery reports
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(300)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise SystemExit(f"{left} records undelivered, {len(errors)} failed: {errors[:3]}")
    ms = sorted(x * 1000 for x in latencies)
    return {
        "records": n,
        "records_per_sec": n / elapsed,
        "mb_per_sec": n * args.record_size / elapsed / MB,
        "elapsed_s": elapsed,
        "p50_ms": round(percentile(ms, 0.50), 2),
        "p99_ms": round(percentile(ms, 0.99), 2),
        "p999_ms": round(percentile(ms, 0.999), 2),
        "max_ms": round(ms[-1], 2) if ms else 0.0,
        "producer_props": props(args.producer_props),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--num-records", type=int, required=True)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--throughput", type=float, default=-1)
    ap.add_argument("--producer-props", nargs="*", default=[])
    args = ap.parse_args()
    result = produce(args)
    rate = f"{result['records_per_sec']:,.0f} records/sec ({result['mb_per_sec']:.1f} MB/sec)"
    print(f"{result['records']} records sent, {rate}, {result['p50_ms']} ms p50, "
          f"{result['p99_ms']} ms p99, {result['p999_ms']} ms p99.9.")  # fmt: skip
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
