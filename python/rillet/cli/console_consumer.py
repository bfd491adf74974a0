"""``rillet console-consumer``: Kafka's ``kafka-console-consumer.sh``.

Prints records as Kafka's ``DefaultMessageFormatter`` does: the value, preceded (when asked
with ``--property print.X=true``) by ``CreateTime:<ms>``, ``Partition:<n>``, ``Offset:<n>``,
the headers and the key, separated by ``key.separator`` (a tab by default); null keys and
values print as ``null``. Without ``--partition`` it reads every partition of the topic, as a
member of ``--group`` when one is given (committing what it read); with ``--partition``, from
``--offset`` (``earliest``, ``latest`` or a number). It stops after
``--max-messages`` records or ``--timeout-ms`` without one, and then prints
``Processed a total of N messages`` on stderr, as Kafka does.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from rillet._core import ConsumerRecord
from rillet.cli.common import add_bootstrap, parse_key_values
from rillet.client.consumer import Consumer
from rillet.config import load_properties
from rillet.types import TopicPartition

HELP = "Print records of a topic (kafka-console-consumer.sh)"

_TRUE = ("true", "1", "yes")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest record")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument(
        "--offset",
        default=None,
        help="with --partition: earliest, latest (default) or an offset number",
    )
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int, help="stop after this many ms without a record")
    p.add_argument(
        "--property",
        action="append",
        metavar="PROP=VALUE",
        help="formatter properties: print.timestamp, print.key, print.offset, print.partition, "
        "print.headers, print.value, key.separator, line.separator, headers.separator, "
        "null.literal",
    )
    p.add_argument(
        "--consumer-property",
        action="append",
        metavar="PROP=VALUE",
        help="a consumer config (dotted name)",
    )
    p.add_argument("--consumer.config", dest="consumer_config", help="consumer config file")
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
    )
    p.add_argument("--group", help="consume as a member of this consumer group (commits)")


class MessageFormatter:
    """Kafka's ``DefaultMessageFormatter`` and its properties."""

    def __init__(self, props: dict[str, str]) -> None:
        known = {
            "print.timestamp",
            "print.key",
            "print.offset",
            "print.partition",
            "print.headers",
            "print.value",
            "key.separator",
            "line.separator",
            "headers.separator",
            "null.literal",
        }
        unknown = sorted(set(props) - known)
        if unknown:
            raise SystemExit(f"Error: unknown formatter property: {', '.join(unknown)}")

        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).strip().lower() in _TRUE

        self.timestamp = flag("print.timestamp")
        self.key = flag("print.key")
        self.offset = flag("print.offset")
        self.partition = flag("print.partition")
        self.headers = flag("print.headers")
        self.value = flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t"))
        self.line_separator = _unescape(props.get("line.separator", "\n"))
        self.headers_separator = _unescape(props.get("headers.separator", ","))
        self.null = props.get("null.literal", "null")

    def format(self, r: ConsumerRecord) -> str:
        parts: list[str] = []
        if self.timestamp:
            kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
            parts.append(f"{kind}:{r.timestamp}")
        if self.partition:
            parts.append(f"Partition:{r.partition}")
        if self.offset:
            parts.append(f"Offset:{r.offset}")
        if self.headers:
            hs = r.headers
            parts.append(
                self.headers_separator.join(f"{k}:{self._text(v)}" for k, v in hs)
                if hs
                else "NO_HEADERS"
            )
        if self.key:
            parts.append(self._text(r.key))
        if self.value:
            parts.append(self._text(r.value))
        return self.key_separator.join(parts) + self.line_separator

    def _text(self, b: bytes | None) -> str:
        return self.null if b is None else b.decode("utf-8", errors="replace")


def _unescape(s: str) -> str:
    return s.encode("utf-8").decode("unicode_escape")


def consumer_configs(args: argparse.Namespace) -> dict[str, Any]:
    configs: dict[str, Any] = {}
    if args.consumer_config:
        configs.update(load_properties(args.consumer_config))
    configs.update(parse_key_values(args.consumer_property, "--consumer-property"))
    configs["bootstrap.servers"] = args.bootstrap_server
    configs["isolation.level"] = args.isolation_level
    configs["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    if args.group:
        configs["group.id"] = args.group
    return configs


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    if args.group and args.partition is not None:
        raise SystemExit("Error: Options --group and --partition cannot be given together")
    if args.offset is not None and args.partition is None:
        raise SystemExit("Error: The partition is required when offset is specified.")
    if args.from_beginning and args.offset is not None:
        raise SystemExit("Error: Options --from-beginning and --offset cannot be given together")
    if args.max_messages is not None and args.max_messages < 0:
        raise SystemExit("Error: --max-messages must not be negative")
    formatter = MessageFormatter(parse_key_values(args.property, "--property"))
    consumer = Consumer(consumer_configs(args))
    count = 0
    try:
        _start(consumer, args)
        count = _print_records(consumer, formatter, args, stream)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
    return 0


def _start(consumer: Consumer, args: argparse.Namespace) -> None:
    if args.partition is None:
        if args.group and consumer.partitions_for_topic(args.topic) is None:
            raise SystemExit(f"Error: topic {args.topic} does not exist")
        consumer.subscribe([args.topic])
        if not args.group and not consumer.assignment():
            raise SystemExit(f"Error: topic {args.topic} does not exist")
        return
    parts = consumer.partitions_for_topic(args.topic)
    if parts is None or args.partition not in parts:
        raise SystemExit(f"Error: partition {args.partition} of topic {args.topic} does not exist")
    tp = TopicPartition(args.topic, args.partition)
    consumer.assign([tp])
    offset = "earliest" if args.from_beginning else (args.offset or "latest")
    if offset == "earliest":
        consumer.seek_to_beginning(tp)
    elif offset == "latest":
        consumer.seek_to_end(tp)
    else:
        try:
            number = int(offset)
        except ValueError:
            raise SystemExit(
                f"Error: The provided offset value '{offset}' is incorrect. Valid values are "
                "'earliest', 'latest', or a non-negative long."
            ) from None
        if number < 0:
            raise SystemExit(f"Error: offset must not be negative, got {number}")
        consumer.seek(tp, number)


def _print_records(
    consumer: Consumer, formatter: MessageFormatter, args: argparse.Namespace, out: TextIO
) -> int:
    count = 0
    limit = args.max_messages
    last = time.monotonic()
    while limit is None or count < limit:
        polled = consumer.poll(
            timeout_ms=200, max_records=None if limit is None else min(limit - count, 500)
        )
        now = time.monotonic()
        if not polled:
            if args.timeout_ms is not None and (now - last) * 1000 >= args.timeout_ms:
                print(
                    "[ERROR] Error processing message, terminating consumer process: "
                    "TimeoutException",
                    file=sys.stderr,
                )
                break
            continue
        last = now
        for records in polled.values():
            for r in records:
                out.write(formatter.format(r))
                count += 1
        out.flush()
    return count
