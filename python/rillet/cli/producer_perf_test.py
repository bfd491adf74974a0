"""``rillet producer-perf-test``: Kafka's ``kafka-producer-perf-test.sh``.

Sends ``--num-records`` records of ``--record-size`` bytes (or lines of ``--payload-file``)
through the :class:`~rillet.client.producer.Producer`, optionally throttled to
``--throughput`` records per second, and prints Kafka's progress line every five seconds and
its summary line at the end::

    1000000 records sent, 350000.0 records/sec (341.80 MB/sec), 12.10 ms avg latency,
    80.00 ms max latency, 10 ms 50th, 30 ms 95th, 45 ms 99th, 70 ms 99.9th.

A record's latency is the time from its ``send()`` to the acknowledgement of its batch, as
Kafka measures it with a callback per record. Here one callback per batch stamps the
acknowledgement time, and each record's own send time is kept, so every record's latency is
exact without a Python callback per record. The callback only sums the batch's send times
(in C, over an array): the latencies themselves are listed once, for the percentiles at the
end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from rillet.cli.common import add_zookeeper, parse_key_values
from rillet.client.futures import ProduceRequestResult, RecordMetadata
from rillet.client.producer import Producer
from rillet.config import load_properties

HELP = "Measure producer throughput and latency (kafka-producer-perf-test.sh)"

REPORT_INTERVAL_S = 5.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument("--num-records", type=int, required=True, help="how many records to send")
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, help="the size of each record in bytes")
    size.add_argument("--payload-file", help="send lines of this file, picked at random")
    p.add_argument("--payload-delimiter", default="\\n", help="delimiter of --payload-file")
    p.add_argument(
        "--throughput",
        type=float,
        required=True,
        help="at most this many records/sec; -1 for no limit",
    )
    p.add_argument(
        "--producer-props", nargs="+", metavar="PROP=VALUE", help="producer configs (dotted)"
    )
    p.add_argument("--producer.config", dest="producer_config", help="producer config file")
    p.add_argument("--bootstrap-server", help="a broker (else bootstrap.servers in the props)")
    p.add_argument("--print-metrics", action="store_true", help="print producer figures at end")
    p.add_argument(
        "--transactional-id",
        default="performance-producer-default-transactional-id",
        help="the transactional id when --transaction-duration-ms is given",
    )
    p.add_argument(
        "--transaction-duration-ms",
        type=int,
        default=0,
        help="produce in transactions, committing one every this many ms (0: no transactions)",
    )
    p.add_argument("--json", help="also write the summary as JSON to this file")
    add_zookeeper(p)


@dataclass
class Stats:
    """Kafka's ``ProducerPerformance.Stats``: per-window and whole-run figures."""

    start: float
    count: int = 0
    bytes: int = 0
    max_latency_ms: float = 0.0
    total_latency_ms: float = 0.0
    window_start: float = 0.0
    window_count: int = 0
    window_bytes: int = 0
    window_max_ms: float = 0.0
    window_total_ms: float = 0.0
    # Each acknowledged batch: its acknowledgement time and its records' send times.
    acked: list[tuple[float, array[float]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, done: float, sent: array[float], nbytes: int) -> None:
        """Called by the producer's sender thread when a batch is acknowledged at ``done``;
        ``sent`` holds its records' send times, oldest first."""
        n = len(sent)
        if not n:
            return
        total = (done * n - sum(sent)) * 1000
        peak = (done - sent[0]) * 1000
        with self.lock:
            self.count += n
            self.bytes += nbytes
            self.total_latency_ms += total
            self.max_latency_ms = max(self.max_latency_ms, peak)
            self.window_count += n
            self.window_bytes += nbytes
            self.window_total_ms += total
            self.window_max_ms = max(self.window_max_ms, peak)
            self.acked.append((done, sent))

    def latencies_ms(self) -> list[float]:
        return [(done - t) * 1000 for done, sent in self.acked for t in sent]

    def maybe_print_window(self, now: float) -> None:
        if now - self.window_start < REPORT_INTERVAL_S:
            return
        with self.lock:
            self._print_window(now)

    def _print_window(self, now: float) -> None:
        elapsed = now - self.window_start
        n = self.window_count
        print(
            f"{n} records sent, {n / elapsed:.1f} records/sec "
            f"({self.window_bytes / elapsed / 1024 / 1024:.2f} MB/sec), "
            f"{self.window_total_ms / max(n, 1):.1f} ms avg latency, "
            f"{self.window_max_ms:.1f} ms max latency.",
            flush=True,
        )
        self.window_start = now
        self.window_count = self.window_bytes = 0
        self.window_total_ms = self.window_max_ms = 0.0

    def summary(self, end: float) -> dict[str, Any]:
        elapsed = max(end - self.start, 1e-9)
        ordered = sorted(self.latencies_ms())

        def pct(q: float) -> int:
            return int(ordered[min(int(len(ordered) * q), len(ordered) - 1)]) if ordered else 0

        return {
            "records": self.count,
            "records_per_sec": self.count / elapsed,
            "mb_per_sec": self.bytes / elapsed / 1024 / 1024,
            "avg_latency_ms": self.total_latency_ms / max(self.count, 1),
            "max_latency_ms": self.max_latency_ms,
            "p50_ms": pct(0.5),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "p999_ms": pct(0.999),
            "elapsed_s": elapsed,
        }


def summary_line(s: dict[str, Any]) -> str:
    return (
        f"{s['records']} records sent, {s['records_per_sec']:f} records/sec "
        f"({s['mb_per_sec']:.2f} MB/sec), {s['avg_latency_ms']:.2f} ms avg latency, "
        f"{s['max_latency_ms']:.2f} ms max latency, {s['p50_ms']} ms 50th, {s['p95_ms']} ms "
        f"95th, {s['p99_ms']} ms 99th, {s['p999_ms']} ms 99.9th."
    )


class Throttler:
    """Kafka's ``ThroughputThrottler``: sleep whenever the sender is ahead of the target."""

    def __init__(self, per_sec: float, start: float) -> None:
        self.per_sec = per_sec
        self.start = start

    def throttle(self, sent: int, now: float) -> None:
        if self.per_sec <= 0:
            return
        ahead = sent / self.per_sec - (now - self.start)
        if ahead > 0.001:
            time.sleep(ahead)


class _Batch:
    """Send times of the records of one producer batch, stamped when the batch is acked."""

    __slots__ = ("nbytes", "sent")

    def __init__(self) -> None:
        self.sent = array("d")
        self.nbytes = 0


def producer_configs(args: argparse.Namespace) -> dict[str, Any]:
    configs: dict[str, Any] = {}
    if args.producer_config:
        configs.update(load_properties(args.producer_config))
    configs.update(parse_key_values(args.producer_props, "--producer-props"))
    if args.bootstrap_server:
        configs["bootstrap.servers"] = args.bootstrap_server
    if "bootstrap.servers" not in configs:
        raise SystemExit(
            "Error: give --bootstrap-server or bootstrap.servers in --producer-props or "
            "--producer.config"
        )
    return configs


def payloads(args: argparse.Namespace) -> list[bytes]:
    if args.record_size is not None:
        if args.record_size < 0:
            raise SystemExit("Error: --record-size must not be negative")
        # Random bytes, as Kafka's tool uses random uppercase letters: not trivially
        # compressible, so compression figures mean something.
        rng = random.Random(0)
        return [bytes(rng.getrandbits(8) % 26 + 65 for _ in range(args.record_size))]
    delimiter = args.payload_delimiter.encode().decode("unicode_escape")
    with open(args.payload_file, encoding="utf-8") as f:
        items = [s.encode() for s in f.read().split(delimiter) if s]
    if not items:
        raise SystemExit(f"Error: File is empty: {args.payload_file}")
    return items


def run(args: argparse.Namespace) -> int:
    if args.num_records < 0:
        raise SystemExit("Error: --num-records must not be negative")
    configs = producer_configs(args)
    if args.transaction_duration_ms > 0:
        configs.setdefault("transactional.id", args.transactional_id)
    elif args.transaction_duration_ms < 0:
        raise SystemExit("Error: --transaction-duration-ms must not be negative")
    values = payloads(args)
    rng = random.Random(1)
    producer = Producer(configs)
    try:
        summary = _send_all(producer, args, values, rng)
    finally:
        producer.close()
    print(summary_line(summary), flush=True)
    if args.print_metrics:
        print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f)
    return 0 if summary["errors"] == 0 else 1


def _send_all(
    producer: Producer, args: argparse.Namespace, values: list[bytes], rng: random.Random
) -> dict[str, Any]:
    # Kafka's ProducerPerformance: InitProducerId (which may first create
    # __transaction_state) happens before the clock starts; it is not produce throughput.
    txn_s = args.transaction_duration_ms / 1000
    if txn_s > 0:
        producer.init_transactions()
    start = time.monotonic()
    stats = Stats(start=start, window_start=start)
    throttler = Throttler(args.throughput, start)
    errors: list[BaseException] = []
    clock = time.monotonic
    topic = args.topic
    send = producer.send
    single = values[0] if len(values) == 1 else None

    def acked(batch: _Batch, _meta: RecordMetadata) -> None:
        done = clock()
        # With one payload, a batch's bytes are its record count times the payload's size.
        nbytes = batch.nbytes if single is None else len(batch.sent) * len(single)
        stats.record(done, batch.sent, nbytes)

    def failed(exc: BaseException) -> None:
        if not errors:
            print(f"Error when sending message to topic {topic}: {exc}", file=sys.stderr)
        errors.append(exc)

    last: ProduceRequestResult | None = None
    batch = _Batch()
    throttle = throttler.throttle if args.throughput > 0 else None
    # Kafka's ProducerPerformance: with --transaction-duration-ms, one transaction at a time,
    # committed once it has been open that long (and at the end).
    txn_started = 0.0
    if txn_s > 0:
        producer.begin_transaction()
        txn_started = clock()
    for i in range(args.num_records):
        value = single if single is not None else values[rng.randrange(len(values))]
        now = clock()
        future = send(topic, value)
        result = future.produce_result
        if result is not last:
            batch = _Batch()
            future.add_callback(acked, batch)
            future.add_errback(failed)
            last = result
        batch.sent.append(now)
        if single is None:
            batch.nbytes += len(value)
        if not i & 1023:
            stats.maybe_print_window(now)
        if throttle is not None:
            throttle(i + 1, now)
        if txn_s > 0 and now - txn_started >= txn_s:
            producer.commit_transaction()
            producer.begin_transaction()
            txn_started = clock()
            last = None
    if txn_s > 0:
        producer.commit_transaction()
    producer.flush()
    out = stats.summary(clock())
    out["errors"] = len(errors)
    out["record_size"] = args.record_size
    out["pid"] = os.getpid()
    out["transport"] = producer.transport
    return out
