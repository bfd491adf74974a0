#!/usr/bin/env python3
"""librdkafka's producer and consumer at full speed, shaped like Kafka's perf-test tools: the
Kafka-protocol client for ``bench/broker.py`` (confluent-kafka, Python over librdkafka).

``produce`` sends ``--num-records`` records of ``--record-size`` bytes (Kafka's perf-test
payload: random uppercase letters) round robin over the topic's partitions, at most
``--throughput`` records/s (-1: unthrottled, Kafka's ThroughputThrottler otherwise), with
librdkafka's defaults except the ``--producer-props`` given. Latency is librdkafka's own per
record (``Message.latency()``: from ``produce()`` to the delivery report), so p50/p99/p99.9
cover the time a record waited in the client's queue too, as Kafka's perf-test's do.

``consume`` reads every partition from offset 0 until ``--messages`` records came, with
librdkafka's defaults, touching each record's value.

``kcat-consume`` is the same read by librdkafka's C command-line consumer, kcat (Debian's),
with no Python in the loop: ``kcat -C -o beginning -c N -f '%p\\n'`` on every partition,
timed from start to exit (process start and metadata included), checked by counting the
lines it printed (one per record).

The last stdout line is JSON: records, records_per_sec, mb_per_sec (1 MB = 1e6 B of record
values), elapsed_s, and for produce p50_ms, p99_ms, p999_ms, max_ms.

    python bench/rdkafka_perf.py produce --bootstrap-server localhost:9092 --topic t \\
        --num-records 1000000 --record-size 1024 --producer-props acks=1
    python bench/rdkafka_perf.py consume --bootstrap-server localhost:9092 --topic t \\
        --messages 1000000
"""

from __future__ import annotations

import argparse
import json
import random
import string
import subprocess
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

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


def consume(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap_server,
        "group.id": f"rdkafka-perf-{time.time_ns()}",
        "enable.auto.commit": False,
        **props(args.consumer_props),
    }
    parts = partitions_of({"bootstrap.servers": args.bootstrap_server}, args.topic)
    c = Consumer(conf)
    c.assign([TopicPartition(args.topic, p, 0) for p in parts])
    n = args.messages
    got = 0
    size = 0
    start = time.perf_counter()
    deadline = start + args.timeout / 1000
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10_000, 0.5):
            if m.error() is not None:
                raise SystemExit(f"consume: {m.error()}")
            size += len(m.value() or b"")
            got += 1
    elapsed = time.perf_counter() - start
    c.close()
    if got < n:
        raise SystemExit(f"read {got} of {n} records before the timeout")
    return {
        "records": got,
        "records_per_sec": got / elapsed,
        "mb_per_sec": size / elapsed / MB,
        "elapsed_s": elapsed,
    }


def kcat_consume(args: argparse.Namespace) -> dict[str, Any]:
    argv = ["kcat", "-b", args.bootstrap_server, "-C", "-t", args.topic, "-o", "beginning",
            "-c", str(args.messages), "-f", "%p\\n",
            *[x for p in args.consumer_props for x in ("-X", p)]]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=args.timeout / 1000)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"kcat failed: {done.stderr.decode(errors='replace')[-2000:]}")
    got = done.stdout.count(b"\n")
    if got != args.messages:
        raise SystemExit(f"kcat read {got} records, not {args.messages}")
    return {
        "records": got,
        "records_per_sec": got / elapsed,
        "mb_per_sec": got * args.record_size / elapsed / MB,
        "elapsed_s": elapsed,
        "command": " ".join(argv),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    pr = sub.add_parser("produce")
    pr.add_argument("--bootstrap-server", required=True)
    pr.add_argument("--topic", required=True)
    pr.add_argument("--num-records", type=int, required=True)
    pr.add_argument("--record-size", type=int, default=1024)
    pr.add_argument("--throughput", type=float, default=-1)
    pr.add_argument("--producer-props", nargs="*", default=[])
    co = sub.add_parser("consume")
    co.add_argument("--bootstrap-server", required=True)
    co.add_argument("--topic", required=True)
    co.add_argument("--messages", type=int, required=True)
    co.add_argument("--timeout", type=int, default=60_000, help="ms")
    co.add_argument("--consumer-props", nargs="*", default=[])
    kc = sub.add_parser("kcat-consume")
    kc.add_argument("--bootstrap-server", required=True)
    kc.add_argument("--topic", required=True)
    kc.add_argument("--messages", type=int, required=True)
    kc.add_argument("--record-size", type=int, default=1024, help="for MB/s")
    kc.add_argument("--timeout", type=int, default=120_000, help="ms")
    kc.add_argument("--consumer-props", nargs="*", default=[])
    args = ap.parse_args()
    modes = {"produce": produce, "consume": consume, "kcat-consume": kcat_consume}
    result = modes[args.mode](args)
    rate = f"{result['records_per_sec']:,.0f} records/sec ({result['mb_per_sec']:.1f} MB/sec)"
    if args.mode == "produce":
        print(f"{result['records']} records sent, {rate}, {result['p50_ms']} ms p50, "
              f"{result['p99_ms']} ms p99, {result['p999_ms']} ms p99.9.")  # fmt: skip
    else:
        print(f"{result['records']} records read, {rate}.")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
