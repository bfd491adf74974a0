"""``rillet consumer-perf-test``: Kafka's ``kafka-consumer-perf-test.sh``.

Reads ``--messages`` records from every partition of ``--topic`` (from the beginning, or
from the end with ``--from-latest``) with the :class:`~rillet.client.consumer.Consumer` and
prints Kafka's columns::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

MB is 1024 * 1024 bytes of keys and values, as in Kafka. With ``--group`` the consumer joins
that group (auto-commit on, as Kafka's default) and rebalance.time.ms is the time from
subscribing to the first assignment; without one it reads every partition without a group
and rebalance.time.ms is 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from typing import Any

from rillet.cli.common import add_bootstrap, parse_key_values
from rillet.client.consumer import Consumer
from rillet.config import load_properties

HELP = "Measure consumer throughput (kafka-consumer-perf-test.sh)"

HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--messages", type=int, required=True, help="how many records to read")
    p.add_argument(
        "--timeout",
        type=int,
        default=10_000,
        help="give up after this many ms without a record (default 10000)",
    )
    p.add_argument("--fetch-size", type=int, help="max.partition.fetch.bytes")
    p.add_argument("--from-latest", action="store_true", help="start at the end, not the start")
    p.add_argument("--consumer.config", dest="consumer_config", help="consumer config file")
    p.add_argument(
        "--consumer-property",
        action="append",
        metavar="PROP=VALUE",
        help="a consumer config (dotted name)",
    )
    p.add_argument("--hide-header", action="store_true", help="do not print the header")
    p.add_argument(
        "--date-format", default="%Y-%m-%d %H:%M:%S:%f", help="strftime format of the times"
    )
    p.add_argument("--print-metrics", action="store_true", help="also print the figures as JSON")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    p.add_argument("--group", help="consume as a member of this consumer group")


def _time(ts: float, fmt: str) -> str:
    text = datetime.fromtimestamp(ts).strftime(fmt)
    # Kafka prints milliseconds (SSS); strftime's %f is microseconds.
    return text[:-3] if fmt.endswith("%f") else text


def run(args: argparse.Namespace) -> int:
    if args.messages < 0:
        raise SystemExit("Error: --messages must not be negative")
    configs: dict[str, Any] = {}
    if args.consumer_config:
        configs.update(load_properties(args.consumer_config))
    configs.update(parse_key_values(args.consumer_property, "--consumer-property"))
    configs["bootstrap.servers"] = args.bootstrap_server
    configs.setdefault("auto.offset.reset", "latest" if args.from_latest else "earliest")
    if args.fetch_size is not None:
        configs["max.partition.fetch.bytes"] = args.fetch_size
    if args.group:
        configs["group.id"] = args.group
    consumer = Consumer(configs)
    try:
        if args.group and consumer.partitions_for_topic(args.topic) is None:
            raise SystemExit(f"Error: topic {args.topic} does not exist or has no partitions")
        joined = time.monotonic()
        consumer.subscribe([args.topic])
        rebalance_ms = 0
        if args.group:
            # Kafka's rebalance.time.ms: from subscribing to the first assignment. Nothing
            # is fetched before it; poll only drives the membership (max_records=0 is not
            # allowed, so a record read meanwhile is left buffered by seeking back to it).
            while not consumer.assignment() and time.monotonic() - joined < args.timeout / 1000:
                for tp, early in consumer.poll(timeout_ms=10, max_records=1).items():
                    consumer.seek(tp, early[0].offset)
            rebalance_ms = int((time.monotonic() - joined) * 1000)
        if not consumer.assignment():
            raise SystemExit(f"Error: topic {args.topic} does not exist or has no partitions")
        figures = _consume(consumer, args.messages, args.timeout)
    finally:
        consumer.close()
    if not args.hide_header:
        print(HEADER)
    mb = figures["bytes"] / 1024 / 1024
    elapsed = max(figures["elapsed_s"], 1e-9)
    print(
        f"{_time(figures['start'], args.date_format)}, {_time(figures['end'], args.date_format)}, "
        f"{mb:.4f}, {mb / elapsed:.4f}, {figures['records']}, {figures['records'] / elapsed:.4f}, "
        f"{rebalance_ms}, {int(elapsed * 1000)}, {mb / elapsed:.4f}, "
        f"{figures['records'] / elapsed:.4f}",
        flush=True,
    )
    if figures["records"] < args.messages:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout "
            f"({args.timeout} ms) exceeded. You can use the --timeout option to increase the "
            "timeout.",
            file=sys.stderr,
        )
    out = {
        "records": figures["records"],
        "bytes": figures["bytes"],
        "elapsed_s": elapsed,
        "records_per_sec": figures["records"] / elapsed,
        "mb_per_sec": mb / elapsed,
        "rebalance_time_ms": rebalance_ms,
    }
    if args.print_metrics:
        print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f)
    return 0


def _consume(consumer: Consumer, wanted: int, timeout_ms: int) -> dict[str, Any]:
    records = nbytes = 0
    start_wall = time.time()
    start = time.monotonic()
    last_record = start
    while records < wanted:
        polled = consumer.poll(
            timeout_ms=100, max_records=min(wanted - records, consumer.config["max_poll_records"])
        )
        now = time.monotonic()
        if not polled:
            if (now - last_record) * 1000 > timeout_ms:
                break
            continue
        last_record = now
        for batch in polled.values():
            records += len(batch)
            for r in batch:
                # Kafka counts key and value bytes; a null one (size -1) counts nothing.
                k = r.serialized_key_size
                v = r.serialized_value_size
                nbytes += (k if k > 0 else 0) + (v if v > 0 else 0)
    end = time.monotonic()
    return {
        "records": records,
        "bytes": nbytes,
        "start": start_wall,
        "end": start_wall + (end - start),
        "elapsed_s": end - start,
    }
