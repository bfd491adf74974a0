"""Pure helpers of ``rillet console-producer`` (Kafka's kafka-console-producer.sh): the line
reader (Kafka's LineMessageReader), --property/--producer-property parsing and the producer
configs the flags make."""

from __future__ import annotations

import argparse
import io

import pytest

from rillet.cli import console_producer
from rillet.cli.console_producer import (
    LineParseError,
    LineReader,
    ParsedRecord,
    parse_key_value_args,
    producer_configs,
    read_lines,
)
from rillet.errors import InvalidConfigurationError


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    console_producer.add_arguments(p)
    return p.parse_args(["--bootstrap-server", "h:9092", "--topic", "t", *argv])


# -- the line reader ----------------------------------------------------------------------------


def test_plain_lines_are_values() -> None:
    r = LineReader({})
    assert r.parse("hello\tworld", 1) == ParsedRecord(None, b"hello\tworld")
    assert r.parse("", 2) == ParsedRecord(None, b"")


def test_keys_split_at_the_first_separator() -> None:
    r = LineReader({"parse.key": "true"})
    assert r.parse("k\tv\tw", 1) == ParsedRecord(b"k", b"v\tw")
    assert r.parse("\tv", 1) == ParsedRecord(b"", b"v")
    custom = LineReader({"parse.key": "TRUE ", "key.separator": "::"})
    assert custom.parse("a::b::c", 1) == ParsedRecord(b"a", b"b::c")


def test_a_line_without_separator_is_kafkas_error() -> None:
    r = LineReader({"parse.key": "true"})
    with pytest.raises(LineParseError) as e:
        r.parse("no separator", 3)
    assert str(e.value) == "No key separator found on line number 3: 'no separator'"
    # ignore.error: the whole line becomes the value, without a key.
    lenient = LineReader({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse("no separator", 3) == ParsedRecord(None, b"no separator")


def test_headers_and_null_marker() -> None:
    r = LineReader({"parse.key": "true", "parse.headers": "true", "null.marker": "NULL"})
    assert r.parse("h1:v1,h2:NULL\tk\tv", 1) == ParsedRecord(
        b"k", b"v", [("h1", b"v1"), ("h2", None)]
    )
    assert r.parse("NULL\tNULL\tNULL", 2) == ParsedRecord(None, None)
    with pytest.raises(LineParseError, match="No header key separator found in pair 'h'"):
        r.parse("h\tk\tv", 3)
    with pytest.raises(LineParseError, match="No headers delimiter found on line number 4"):
        r.parse("nothing", 4)


def test_unicode_values_are_utf8() -> None:
    assert LineReader({}).parse("héllo", 1).value == "héllo".encode()


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"headers.delimiter": ",", "headers.separator": ","}, "headers.delimiter and headers."),
        ({"null.marker": "\t"}, "null.marker and key.separator may not be equal"),
        ({"headers.separator": ":"}, "headers.separator and headers.key.separator"),
    ],
)
def test_reader_refuses_clashing_separators(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=message):
        LineReader(props)


def test_read_lines_strips_line_endings_and_prompts() -> None:
    data = io.BytesIO(b"a\nb\r\n\nlast")
    assert list(read_lines(data)) == ["a", "b", "", "last"]
    prompt = io.StringIO()
    assert list(read_lines(io.BytesIO(b"x\ny\n"), prompt)) == ["x", "y"]
    assert prompt.getvalue() == ">>>"


# -- configs ------------------------------------------------------------------------------------


def test_key_value_args_keep_whitespace_and_empty_values() -> None:
    assert parse_key_value_args(["key.separator= ", "a=b=c", "empty"]) == {
        "key.separator": " ",
        "a": "b=c",
        "empty": "",
    }


def test_console_producer_defaults_are_kafkas() -> None:
    c = producer_configs({}, {}, args())
    assert c == {
        "bootstrap.servers": "h:9092",
        "client.id": "console-producer",
        "acks": "-1",
        "linger.ms": 1000,
        "request.timeout.ms": 1500,
        "retries": 3,
        "retry.backoff.ms": 100,
        "buffer.memory": 33554432,
        "batch.size": 16384,
        "metadata.max.age.ms": 300000,
        "max.block.ms": 60000,
        "compression.type": "none",
    }


def test_flags_win_then_properties_then_defaults() -> None:
    a = args("--compression-codec", "--timeout", "5", "--batch-size", "100")
    c = producer_configs(
        {"linger.ms": "7", "acks": "1", "client.id": "file"},
        {"batch_size": "200", "client.id": "prop"},
        a,
    )
    assert c["compression.type"] == "gzip"  # the flag alone means gzip
    assert c["linger.ms"] == 5 and c["batch.size"] == 100
    assert c["acks"] == "1" and c["client.id"] == "prop"
    both = args("--batch-size", "100", "--max-partition-memory-bytes", "300")
    assert producer_configs({}, {}, both)["batch.size"] == 300
    assert producer_configs({}, {"compression.type": "zstd"}, args())["compression.type"] == "zstd"
    assert producer_configs({}, {}, args("--broker-list", "b:1"))["bootstrap.servers"] == "h:9092"
    assert producer_configs({}, {}, args("--linger-ms", "9"))["linger.ms"] == 9


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"max.in.flight.requests.per.connection": "1"}, "Unknown producer config: max.in."),
        ({"batch.size": "abc"}, "Invalid value abc for configuration batch.size"),
        ({"linger.ms": "-1"}, "Invalid value -1 for configuration linger.ms"),
        ({"acks": "2"}, "Invalid value 2 for configuration acks"),
        ({"compression.type": "brotli"}, "configuration compression.type"),
        ({"enable.idempotence": "maybe"}, "configuration enable.idempotence"),
    ],
)
def test_bad_producer_configs_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=message):
        producer_configs({}, props, args())


def test_bad_acks_flag_names_the_key() -> None:
    with pytest.raises(InvalidConfigurationError, match="configuration acks"):
        producer_configs({}, {}, args("--request-required-acks", "3"))
