"""The rillet Spark source's option parsing, range splitting and per-trigger caps, without
Spark or a broker."""

from __future__ import annotations

import json

import pytest

pytest.importorskip(
    "pyspark", minversion="4.0", reason="the rillet Spark source needs PySpark >= 4.0"
)

from rillet.spark.options import (
    OffsetSpec,
    RilletOptionError,
    parse_sink_options,
    parse_source_options,
)
from rillet.spark.planning import OffsetRange, split_ranges
from rillet.spark.source import _cap
from rillet.types import TopicPartition

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}


def test_defaults_differ_for_batch_and_stream() -> None:
    batch = parse_source_options({**BOOT, "subscribe": "a, b"}, streaming=False)
    assert batch.subscribe == ("a", "b")
    assert batch.starting == OffsetSpec("earliest") and batch.ending == OffsetSpec("latest")
    stream = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert stream.starting == OffsetSpec("latest")


def test_option_names_are_case_insensitive_and_alias_bootstrap() -> None:
    opts = parse_source_options(
        {"RILLET.BOOTSTRAP.SERVERS": "h:1", "SUBSCRIBEPATTERN": "t.*", "includeheaders": "TRUE"},
        streaming=False,
    )
    assert opts.bootstrap_servers == "h:1"
    assert opts.subscribe_pattern == "t.*" and opts.include_headers


def test_timestamp_options_take_precedence() -> None:
    opts = parse_source_options(
        {
            **BOOT,
            "subscribe": "t",
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": json.dumps({"t": {"0": 5}}),
            "startingTimestamp": "7",
        },
        streaming=False,
    )
    assert opts.starting == OffsetSpec("timestamp", timestamp=7)


def test_streaming_refuses_ending_offsets_and_ignores_nothing_unknown() -> None:
    with pytest.raises(RilletOptionError, match="'endingOffsets'"):
        parse_source_options({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    # Spark Kafka options with no meaning here, and kafka.* configs, are accepted.
    parse_source_options(
        {**BOOT, "subscribe": "t", "kafka.security.protocol": "PLAINTEXT", "groupIdPrefix": "x"},
        streaming=True,
    )


def test_sink_options() -> None:
    opts = parse_sink_options({**BOOT, "topic": "t", "kafka.linger.ms": "7"})
    assert opts.topic == "t" and opts.producer_configs == (("linger.ms", "7"),)
    with pytest.raises(RilletOptionError, match=r"'kafka\.acks'"):
        parse_sink_options({**BOOT, "kafka.acks": "1"})
    with pytest.raises(RilletOptionError, match="'bogus'"):
        parse_sink_options({**BOOT, "bogus": "1"})
    assert opts.transactional_id_prefix is None
    txn = parse_sink_options(
        {**BOOT, "rillet.transactional.id.prefix": " job-7 ", "kafka.transaction.timeout.ms": "9"}
    )
    assert txn.transactional_id_prefix == "job-7"
    assert txn.producer_configs == (("transaction.timeout.ms", "9"),)
    with pytest.raises(RilletOptionError, match=r"transactional\.id\.prefix"):
        parse_sink_options({**BOOT, "rillet.transactional.id.prefix": " "})


def test_security_options_reach_the_source_and_the_sink_as_client_configs() -> None:
    tls = {
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/certs/ca.pem",
    }
    expected = (
        ("security.protocol", "SSL"),
        ("ssl.truststore.location", "/certs/ca.pem"),
        ("ssl.truststore.type", "PEM"),
    )
    source = parse_source_options({**BOOT, "subscribe": "t", **tls}, streaming=False)
    assert source.security == expected
    sink = parse_sink_options({**BOOT, "topic": "t", **tls})
    assert sink.security == expected and sink.producer_configs == ()


def test_split_ranges_reaches_min_partitions_and_covers_every_offset() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 5, 15), OffsetRange("t", 2, 3, 3)]
    for min_partitions in (1, 2, 3, 7, 50, 2000):
        out = split_ranges(ranges, min_partitions)
        assert len(out) >= min(min_partitions, 1010)
        covered = sorted(
            (r.partition, o) for r in out for o in range(r.from_offset, r.until_offset)
        )
        assert covered == [(0, o) for o in range(1000)] + [(1, o) for o in range(5, 15)]
        assert all(r.size > 0 for r in out)


def test_cap_splits_the_limit_over_the_backlog() -> None:
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    base = {a: 10, b: 0, c: 7}
    latest = {a: 1010, b: 3, c: 7}
    capped = _cap(base, latest, 100)
    assert sum(capped[tp] - base[tp] for tp in base) == 100
    assert all(base[tp] <= capped[tp] <= latest[tp] for tp in base)
    assert _cap(base, latest, 10_000) == latest
    # Shares that round to zero still add up to the limit.
    many = {TopicPartition("t", p): 0 for p in range(10)}
    capped = _cap(many, {tp: 1 for tp in many}, 3)
    assert sum(capped.values()) == 3
