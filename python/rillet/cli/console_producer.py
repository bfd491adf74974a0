"""``rillet console-producer``: Kafka's ``kafka-console-producer.sh``.

Reads standard input one line at a time and sends each line as one record, the way Kafka's
``LineMessageReader`` does: the value is the line without its line ending; with
``--property parse.key=true`` the key is the text before the first ``key.separator`` (a tab
by default), with ``parse.headers=true`` the headers come first (``h1:v1,h2:v2`` then
``headers.delimiter``), and any field equal to ``null.marker`` is sent as null.

Differences from Kafka, on purpose:

* The ``>`` prompt is printed only when standard input and output are a terminal (as Kafka
  does since 3.5; older versions printed it into pipes too).
* A record the broker refuses is printed to stderr as
  ``ERROR Error when sending message to topic T with key: ..., value: N bytes with error:
  [NAME] message`` (Kafka's ``ErrorLoggingCallback`` line) and the command exits 1 at the
  end, unless ``--property ignore.error=true``. Kafka only logs such failures and exits 0.
* ``--producer-property``/``--producer.config`` take the Rillet producer's configs by Kafka's
  dotted names; values are checked here, and an unknown name or a bad value is refused with
  INVALID_CONFIG naming the key (Kafka warns about unknown names and goes on).
* A ``--compression-codec`` given on the command line wins over a ``compression.type``
  producer property; without the flag the property is used (Kafka always overwrites it).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TextIO

from rillet.cli.common import add_bootstrap
from rillet.client.producer import Producer
from rillet.client.security import SECURITY_CONFIG_TYPES
from rillet.config import ConfigKey, at_least, load_properties, one_of, parse_value
from rillet.errors import InvalidConfigurationError, KafkaError

HELP = "Read lines from standard input and send them as records (kafka-console-producer.sh)"

COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

_READER_HELP = (
    "a LineMessageReader property KEY=VALUE (repeatable): parse.key=false, key.separator=\\t, "
    "parse.headers=false, headers.delimiter=\\t, headers.separator=',', "
    "headers.key.separator=':', ignore.error=false (true: a line without a separator is sent "
    "whole as the value, and send failures do not make the exit code 1), null.marker (a key, "
    "value or header value equal to it is sent as null)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = (
        "One record per line of standard input; at end of input everything is flushed and the "
        "command exits 0, or 1 if a line could not be parsed or a record failed (unless "
        "ignore.error=true). The '>' prompt is printed only when stdin and stdout are a "
        "terminal, so piped output stays clean."
    )
    add_bootstrap(p, required=False)
    p.add_argument(
        "--broker-list", metavar="HOST:PORT", help="deprecated alias of --bootstrap-server"
    )
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument(
        "--property", action="append", metavar="KEY=VALUE", default=[], help=_READER_HELP
    )
    p.add_argument("--reader-config", metavar="FILE", help="a properties file of reader properties")
    p.add_argument(
        "--producer-property",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="a producer config by Kafka's name, e.g. acks=all or linger.ms=5 (repeatable)",
    )
    p.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        help="a properties file of producer configs (--producer-property wins over it)",
    )
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        choices=COMPRESSION_CODECS,
        help="none (the default), gzip, snappy, lz4 or zstd; the flag alone means gzip",
    )
    p.add_argument(
        "--request-required-acks",
        metavar="ACKS",
        help="acks of the produce requests: -1/all (the default), 0 or 1",
    )
    p.add_argument("--batch-size", type=int, metavar="BYTES", help="batch.size (default 16384)")
    p.add_argument(
        "--max-partition-memory-bytes",
        type=int,
        metavar="BYTES",
        help="batch.size as well; wins over --batch-size",
    )
    p.add_argument(
        "--timeout",
        "--linger-ms",
        dest="timeout",
        type=int,
        metavar="MS",
        help="linger.ms: how long a record waits for its batch to fill (default 1000)",
    )
    p.add_argument(
        "--sync", action="store_true", help="send each record and wait for it before the next"
    )
    p.add_argument("--message-send-max-retries", type=int, metavar="N", help="retries (default 3)")
    p.add_argument(
        "--retry-backoff-ms", type=int, metavar="MS", help="retry.backoff.ms (default 100)"
    )
    p.add_argument(
        "--request-timeout-ms",
        type=int,
        metavar="MS",
        help="request.timeout.ms (default 1500)",
    )
    p.add_argument(
        "--metadata-expiry-ms",
        type=int,
        metavar="MS",
        help="metadata.max.age.ms (default 300000)",
    )
    p.add_argument("--max-block-ms", type=int, metavar="MS", help="max.block.ms (default 60000)")
    p.add_argument(
        "--max-memory-bytes",
        type=int,
        metavar="BYTES",
        help="buffer.memory (default 33554432)",
    )
    p.add_argument(
        "--socket-buffer-size",
        type=int,
        metavar="BYTES",
        help="accepted for compatibility; gRPC sizes its own socket buffers",
    )


# -- producer configs --------------------------------------------------------------------------

# The Rillet producer's configs by Kafka's name, with Kafka's types and bounds, so values from
# the command line or a properties file (always strings) reach the producer typed and checked.
_PRODUCER_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey("bootstrap.servers", "string", None, ""),
        ConfigKey("client.id", "string", None, ""),
        ConfigKey("acks", "string", None, "", one_of("all", "-1", "0", "1")),
        ConfigKey("compression.type", "string", None, "", one_of(*COMPRESSION_CODECS)),
        ConfigKey("retries", "int", None, "", at_least(0)),
        ConfigKey("batch.size", "int", None, "", at_least(0)),
        ConfigKey("linger.ms", "long", None, "", at_least(0)),
        ConfigKey("partitioner", "string", None, ""),
        ConfigKey("buffer.memory", "long", None, "", at_least(0)),
        ConfigKey("max.block.ms", "long", None, "", at_least(0)),
        ConfigKey("max.request.size", "int", None, "", at_least(0)),
        ConfigKey("request.timeout.ms", "int", None, "", at_least(0)),
        ConfigKey("delivery.timeout.ms", "int", None, "", at_least(0)),
        ConfigKey("retry.backoff.ms", "long", None, "", at_least(0)),
        ConfigKey("metadata.max.age.ms", "long", None, "", at_least(0)),
        ConfigKey("allow.auto.create.topics", "boolean", None, ""),
        ConfigKey("enable.idempotence", "boolean", None, ""),
        *[ConfigKey(name, type_, None, "") for name, type_ in SECURITY_CONFIG_TYPES.items()],
    ]
}
# Set by the tool itself (records are bytes), as Kafka's console producer does.
_FIXED = frozenset({"key.serializer", "value.serializer"})


def parse_key_value_args(items: Sequence[str]) -> dict[str, str]:
    """Kafka's ``parseKeyValueArgs``: split each item at its first ``=``; nothing is trimmed
    (``key.separator= `` is a space) and a missing value is the empty string."""
    out: dict[str, str] = {}
    for item in items:
        key, _, value = item.partition("=")
        out[key] = value
    return out


def producer_configs(
    file_props: Mapping[str, str], props: Mapping[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    """The producer's configs: the properties file, then ``--producer-property``, then the
    flags (Kafka's ``maybeMergeOptions``: a flag given on the command line wins; a flag's
    default applies only when no property set the key). Every value is typed and checked; an
    unknown name or a bad value raises INVALID_CONFIG naming the key."""
    raw: dict[str, object] = {}
    for given_name, value in {**file_props, **props}.items():
        name = given_name.replace("_", ".")
        if name in _FIXED:
            continue
        if name not in _PRODUCER_KEYS:
            raise InvalidConfigurationError(f"Unknown producer config: {given_name}")
        raw[name] = value

    def merge(name: str, given: object, default: object) -> None:
        if given is not None:
            raw[name] = given
        elif name not in raw:
            raw[name] = default

    merge("linger.ms", args.timeout, 1000)
    merge("acks", args.request_required_acks, "-1")
    merge("request.timeout.ms", args.request_timeout_ms, 1500)
    merge("retries", args.message_send_max_retries, 3)
    merge("retry.backoff.ms", args.retry_backoff_ms, 100)
    merge("buffer.memory", args.max_memory_bytes, 32 * 1024 * 1024)
    # Two flags set batch.size; --max-partition-memory-bytes is applied last, as in Kafka.
    merge("batch.size", args.batch_size, 16 * 1024)
    merge("batch.size", args.max_partition_memory_bytes, 16 * 1024)
    merge("metadata.max.age.ms", args.metadata_expiry_ms, 5 * 60 * 1000)
    merge("max.block.ms", args.max_block_ms, 60 * 1000)
    merge("compression.type", args.compression_codec, "none")
    raw.setdefault("client.id", "console-producer")
    raw["bootstrap.servers"] = args.bootstrap_server or args.broker_list
    return {name: parse_value(_PRODUCER_KEYS[name], value) for name, value in raw.items()}


# -- reading lines ------------------------------------------------------------------------------


class LineParseError(ValueError):
    """A line the reader cannot split (Kafka's KafkaException from LineMessageReader)."""


@dataclass(frozen=True)
class ParsedRecord:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _is_true(props: Mapping[str, str], name: str) -> bool:
    return props.get(name, "").strip().lower() == "true"


class LineReader:
    """Kafka's ``LineMessageReader``: turns one line (without its line ending) into a record."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.parse_key = _is_true(props, "parse.key")
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = _is_true(props, "parse.headers")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = _is_true(props, "ignore.error")
        self.null_marker: str | None = props.get("null.marker")
        named = {
            "key.separator": self.key_separator,
            "headers.delimiter": self.headers_delimiter,
            "headers.separator": self.headers_separator,
            "headers.key.separator": self.headers_key_separator,
        }
        pairs = [
            ("headers.delimiter", "headers.separator"),
            ("headers.delimiter", "headers.key.separator"),
            ("headers.separator", "headers.key.separator"),
        ]
        if self.null_marker is not None:
            named["null.marker"] = self.null_marker
            pairs += [
                ("null.marker", k)
                for k in (
                    "key.separator",
                    "headers.separator",
                    "headers.delimiter",
                    "headers.key.separator",
                )
            ]
        for first, second in pairs:
            if named[first] == named[second]:
                raise InvalidConfigurationError(f"{first} and {second} may not be equal")
        if self.parse_key and not self.key_separator:
            raise InvalidConfigurationError("key.separator may not be empty")
        try:
            self._headers_split = re.compile(self.headers_separator)
        except re.error as e:
            raise InvalidConfigurationError(
                f"headers.separator is not a valid pattern: {e}"
            ) from None

    def _split(
        self, enabled: bool, line: str, start: int, sep: str, what: str, number: int
    ) -> str | None:
        if not enabled:
            return None
        index = line.find(sep, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise LineParseError(f"No {what} found on line number {number}: '{line}'")
        return line[start:index]

    def _bytes(self, field_: str | None) -> bytes | None:
        if field_ is None or field_ == self.null_marker:
            return None
        return field_.encode()

    def parse(self, line: str, number: int) -> ParsedRecord:
        """The record of ``line``, the ``number``-th line (from 1)."""
        headers = self._split(
            self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", number
        )
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._split(
            self.parse_key, line, header_end, self.key_separator, "key separator", number
        )
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_end + key_end :]
        parsed: list[tuple[str, bytes | None]] = []
        if headers is not None and headers != self.null_marker:
            parsed = self._split_headers(headers, number)
        return ParsedRecord(self._bytes(key), self._bytes(value), parsed)

    def _split_headers(self, headers: str, number: int) -> list[tuple[str, bytes | None]]:
        pairs = self._headers_split.split(headers)
        while len(pairs) > 1 and pairs[-1] == "":  # Java's split drops trailing empty strings
            pairs.pop()
        out: list[tuple[str, bytes | None]] = []
        for pair in pairs:
            i = pair.find(self.headers_key_separator)
            if i == -1:
                if self.ignore_error:
                    out.append((pair, None))
                    continue
                raise LineParseError(
                    f"No header key separator found in pair '{pair}' on line number {number}"
                )
            name = pair[:i]
            if name == self.null_marker:
                raise LineParseError(
                    f"Header keys should not be equal to the null marker '{self.null_marker}' "
                    "as they can't be null"
                )
            out.append((name, self._bytes(pair[i + len(self.headers_key_separator) :])))
        return out


def read_lines(stream: BinaryIO, prompt: TextIO | None = None) -> Iterator[str]:
    """Lines of ``stream`` as text without their line ending (``\\n``, ``\\r\\n`` or ``\\r``
    before end of input, as Java's ``readLine``); with ``prompt``, ``>`` is written to it
    before each line is read."""
    while True:
        if prompt is not None:
            prompt.write(">")
            prompt.flush()
        raw = stream.readline()
        if not raw:
            return
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        yield raw.decode("utf-8", errors="replace")


# -- the command --------------------------------------------------------------------------------


def _describe(b: bytes | None) -> str:
    return "null" if b is None else f"{len(b)} bytes"


class _Failures:
    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.count = 0

    def report(self, record: ParsedRecord, exc: BaseException) -> None:
        self.count += 1
        print(
            f"ERROR Error when sending message to topic {self.topic} with key: "
            f"{_describe(record.key)}, value: {_describe(record.value)} with error: {exc}",
            file=sys.stderr,
            flush=True,
        )


def run(args: argparse.Namespace) -> int:
    if not (args.bootstrap_server or args.broker_list):
        raise SystemExit(
            "Error: Missing required option(s) [bootstrap-server] (or the deprecated --broker-list)"
        )
    reader_props: dict[str, str] = {}
    if args.reader_config:
        reader_props.update(load_properties(args.reader_config))
    reader_props.update(parse_key_value_args(args.property))
    reader = LineReader(reader_props)
    file_props = load_properties(args.producer_config) if args.producer_config else {}
    configs = producer_configs(file_props, parse_key_value_args(args.producer_property), args)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    failures = _Failures(args.topic)
    status = 0
    producer = Producer(configs)
    try:
        for number, line in enumerate(
            read_lines(sys.stdin.buffer, sys.stdout if interactive else None), start=1
        ):
            try:
                record = reader.parse(line, number)
            except LineParseError as e:
                print(f"Error: {e}", file=sys.stderr)
                status = 1
                break
            try:
                future = producer.send(
                    args.topic, record.value, key=record.key, headers=record.headers or None
                )
            except KafkaError as e:
                failures.report(record, e)
                if args.sync and not reader.ignore_error:
                    break
                continue
            if args.sync:
                try:
                    future.get()
                except KafkaError as e:
                    failures.report(record, e)
                    if not reader.ignore_error:
                        break
            else:
                future.add_errback(failures.report, record)
    except KeyboardInterrupt:
        status = 130
    finally:
        if interactive:
            print()
        producer.close()
    if status:
        return status
    return 1 if failures.count and not reader.ignore_error else 0
