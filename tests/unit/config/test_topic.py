"""Topic config resolution (rillet.config.topic)."""

from __future__ import annotations

import pytest

from rillet import LogConfig
from rillet.config import (
    TOPIC_CONFIGS,
    ConfigKey,
    TopicConfig,
    parse_value,
    resolve_topic_config,
)
from rillet.config.keys import LONG_MAX
from rillet.errors import InvalidConfigurationError

HOUR = 3_600_000
MINUTE = 60_000

# ---------------------------------------------------------------------------------------------
# defaults

KAFKA_DEFAULTS = {
    "segment.bytes": 1_073_741_824,
    "segment.ms": 604_800_000,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 10_485_760,
    "index.interval.bytes": 4096,
    "max.message.bytes": 1_048_588,
    "retention.ms": 604_800_000,
    "retention.bytes": -1,
    "message.timestamp.type": "CreateTime",
    "cleanup.policy": ["delete"],
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "compression.type": "producer",
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "delete.retention.ms": 86_400_000,
    "min.cleanable.dirty.ratio": 0.5,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": LONG_MAX,
    "file.delete.delay.ms": 60_000,
    "preallocate": False,
}


def test_defaults_are_kafkas() -> None:
    cfg = resolve_topic_config()
    assert dict(cfg.values) == KAFKA_DEFAULTS
    assert set(cfg.sources.values()) == {"DEFAULT_CONFIG"}
    assert resolve_topic_config({}, {}).values == cfg.values
    assert resolve_topic_config(None, None).values == cfg.values


@pytest.mark.parametrize("key", list(TOPIC_CONFIGS))
def test_every_default_passes_its_own_validation(key: str) -> None:
    k = TOPIC_CONFIGS[key]
    assert k.name == key
    assert parse_value(k, k.default) == k.default


def test_default_log_config_matches_log_config_defaults() -> None:
    ours = resolve_topic_config().log_config()
    native = LogConfig()
    for attr in (
        "segment_bytes",
        "segment_ms",
        "segment_jitter_ms",
        "segment_index_bytes",
        "index_interval_bytes",
        "max_message_bytes",
        "retention_ms",
        "retention_bytes",
        "message_timestamp_type",
        "compact",
        "delete_retention_ms",
        "min_compaction_lag_ms",
        "max_compaction_lag_ms",
        "min_cleanable_dirty_ratio",
    ):
        assert getattr(ours, attr) == getattr(native, attr), attr


# ---------------------------------------------------------------------------------------------
# precedence: override > broker synonym > default


def test_override_beats_broker_beats_default() -> None:
    cfg = resolve_topic_config(
        broker={"log.segment.bytes": "2048", "log.retention.bytes": "999"},
        overrides={"segment.bytes": "4096"},
    )
    assert cfg["segment.bytes"] == 4096
    assert cfg.sources["segment.bytes"] == "DYNAMIC_TOPIC_CONFIG"
    assert cfg["retention.bytes"] == 999
    assert cfg.sources["retention.bytes"] == "STATIC_BROKER_CONFIG"
    assert cfg["max.message.bytes"] == 1_048_588
    assert cfg.sources["max.message.bytes"] == "DEFAULT_CONFIG"


@pytest.mark.parametrize(
    ("broker", "expected"),
    [
        ({"log.retention.hours": "5"}, 5 * HOUR),
        ({"log.retention.minutes": "7"}, 7 * MINUTE),
        ({"log.retention.ms": "1234"}, 1234),
        ({"log.retention.hours": "5", "log.retention.minutes": "7"}, 7 * MINUTE),
        ({"log.retention.hours": "5", "log.retention.ms": "1234"}, 1234),
        ({"log.retention.minutes": "7", "log.retention.ms": "1234"}, 1234),
        (
            {"log.retention.hours": "5", "log.retention.minutes": "7", "log.retention.ms": "1"},
            1,
        ),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.ms": -1, "log.retention.hours": 3}, -1),
    ],
)
def test_retention_time_synonyms(broker: dict, expected: int) -> None:
    cfg = resolve_topic_config(broker)
    assert cfg["retention.ms"] == expected
    assert cfg.sources["retention.ms"] == "STATIC_BROKER_CONFIG"


def test_override_beats_every_time_synonym() -> None:
    broker = {"log.retention.hours": "5", "log.retention.minutes": "7", "log.retention.ms": "9"}
    cfg = resolve_topic_config(broker, {"retention.ms": "123"})
    assert cfg["retention.ms"] == 123
    assert cfg.sources["retention.ms"] == "DYNAMIC_TOPIC_CONFIG"


@pytest.mark.parametrize(
    ("broker", "key", "expected"),
    [
        ({"log.roll.hours": "2"}, "segment.ms", 2 * HOUR),
        ({"log.roll.ms": "500"}, "segment.ms", 500),
        ({"log.roll.hours": "2", "log.roll.ms": "500"}, "segment.ms", 500),
        ({"log.roll.jitter.hours": "1"}, "segment.jitter.ms", HOUR),
        ({"log.roll.jitter.hours": "1", "log.roll.jitter.ms": "10"}, "segment.jitter.ms", 10),
        ({"log.segment.bytes": 1 << 20}, "segment.bytes", 1 << 20),
        ({"log.index.size.max.bytes": "4096"}, "segment.index.bytes", 4096),
        ({"log.index.interval.bytes": "1"}, "index.interval.bytes", 1),
        ({"message.max.bytes": "100"}, "max.message.bytes", 100),
        ({"log.retention.bytes": "1000"}, "retention.bytes", 1000),
        (
            {"log.message.timestamp.type": "LogAppendTime"},
            "message.timestamp.type",
            "LogAppendTime",
        ),
        ({"log.cleanup.policy": " delete , delete"}, "cleanup.policy", ["delete", "delete"]),
        ({"log.flush.interval.messages": "10"}, "flush.messages", 10),
        ({"log.flush.interval.ms": "10"}, "flush.ms", 10),
        ({"compression.type": "zstd"}, "compression.type", "zstd"),
        ({"min.insync.replicas": "2"}, "min.insync.replicas", 2),
        ({"unclean.leader.election.enable": "TRUE"}, "unclean.leader.election.enable", True),
        ({"log.cleaner.delete.retention.ms": "5"}, "delete.retention.ms", 5),
        ({"log.segment.delete.delay.ms": "0"}, "file.delete.delay.ms", 0),
        ({"log.preallocate": "true"}, "preallocate", True),
    ],
)
def test_broker_synonyms(broker: dict, key: str, expected: object) -> None:
    cfg = resolve_topic_config(broker)
    assert cfg[key] == expected
    assert cfg.sources[key] == "STATIC_BROKER_CONFIG"


def test_topic_keys_are_not_broker_keys() -> None:
    # A broker config is read under its broker name only ("segment.bytes" is not a broker key).
    cfg = resolve_topic_config({"segment.bytes": "4096", "retention.ms": "5"})
    assert cfg["segment.bytes"] == KAFKA_DEFAULTS["segment.bytes"]
    assert cfg["retention.ms"] == KAFKA_DEFAULTS["retention.ms"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("100", 100),
        (" 100 ", 100),
        (100, 100),
        ("-1", -1),
        (str(2**31 - 1), 2**31 - 1),
    ],
)
def test_int_parsing(raw: object, expected: int) -> None:
    assert resolve_topic_config(overrides={"retention.bytes": raw})["retention.bytes"] == expected


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("preallocate", "true", True),
        ("preallocate", "False", False),
        ("preallocate", True, True),
        ("cleanup.policy", "delete", ["delete"]),
        ("cleanup.policy", " delete, ", ["delete"]),
        ("cleanup.policy", ["delete"], ["delete"]),
        ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
        ("compression.type", "uncompressed", "uncompressed"),
        ("segment.bytes", "14", 14),
        ("retention.ms", "-1", -1),
        ("flush.ms", str(LONG_MAX), LONG_MAX),
    ],
)
def test_override_values(key: str, raw: object, expected: object) -> None:
    assert resolve_topic_config(overrides={key: raw})[key] == expected


@pytest.mark.parametrize(
    ("broker", "overrides", "expected"),
    [
        ({}, {"cleanup.policy": "compact"}, ["compact"]),
        ({}, {"cleanup.policy": "delete,compact"}, ["delete", "compact"]),
        ({}, {"cleanup.policy": ["compact"]}, ["compact"]),
        ({"log.cleanup.policy": "compact,delete"}, {}, ["compact", "delete"]),
    ],
)
def test_compaction_is_a_cleanup_policy(
    broker: dict[str, object], overrides: dict[str, object], expected: list[str]
) -> None:
    cfg = resolve_topic_config(broker, overrides)
    assert cfg["cleanup.policy"] == expected
    assert cfg.log_config().compact


def test_log_config_carries_resolved_values() -> None:
    cfg = resolve_topic_config(
        broker={"log.retention.hours": "1", "log.index.interval.bytes": "128"},
        overrides={
            "segment.bytes": "65536",
            "segment.ms": 1000,
            "segment.jitter.ms": "10",
            "segment.index.bytes": "4096",
            "max.message.bytes": "2000",
            "retention.bytes": "100000",
            "message.timestamp.type": "LogAppendTime",
        },
    )
    lc = cfg.log_config()
    assert isinstance(lc, LogConfig)
    assert (
        lc.segment_bytes,
        lc.segment_ms,
        lc.segment_jitter_ms,
        lc.segment_index_bytes,
        lc.index_interval_bytes,
        lc.max_message_bytes,
        lc.retention_ms,
        lc.retention_bytes,
        lc.message_timestamp_type,
    ) == (65536, 1000, 10, 4096, 128, 2000, HOUR, 100000, "LogAppendTime")


def test_topic_config_is_a_read_only_view() -> None:
    cfg = resolve_topic_config()
    assert isinstance(cfg, TopicConfig)
    with pytest.raises(KeyError):
        cfg["no.such.key"]


# ---------------------------------------------------------------------------------------------
# bad values


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "1.5"),
        ("segment.bytes", ""),
        ("segment.bytes", None),
        ("segment.bytes", True),
        ("segment.bytes", str(2**31)),  # not a 32-bit int
        ("segment.bytes", "13"),  # below the minimum
        ("segment.ms", "0"),
        ("segment.ms", str(2**63)),  # not a 64-bit int
        ("retention.ms", "-2"),
        ("retention.bytes", "-2"),
        ("index.interval.bytes", "-1"),
        ("min.insync.replicas", "0"),
        ("message.timestamp.type", "WallClock"),
        ("compression.type", "brotli"),
        ("cleanup.policy", "compact,shred"),
        ("cleanup.policy", 5),
        ("preallocate", "yes"),
        ("preallocate", 1),
        ("unclean.leader.election.enable", ""),
        ("message.timestamp.type", 5),
    ],
)
def test_bad_override_value_names_the_key(key: str, raw: object) -> None:
    with pytest.raises(InvalidConfigurationError) as e:
        resolve_topic_config(overrides={key: raw})
    assert key in str(e.value)
    assert e.value.code == 40
    assert str(e.value).startswith("[INVALID_CONFIG] ")


@pytest.mark.parametrize(
    ("broker_key", "raw"),
    [
        ("log.segment.bytes", "big"),
        ("log.segment.bytes", "10"),
        ("log.retention.hours", "x"),
        ("log.retention.minutes", "1.5"),
        ("log.retention.ms", "-5h"),
        ("log.roll.hours", "0"),
        ("log.roll.ms", "0"),
        ("log.message.timestamp.type", "Now"),
        ("log.cleanup.policy", "keep"),
        ("log.preallocate", "maybe"),
        ("min.insync.replicas", "0"),
    ],
)
def test_bad_broker_value_names_the_broker_key(broker_key: str, raw: object) -> None:
    with pytest.raises(InvalidConfigurationError) as e:
        resolve_topic_config(broker={broker_key: raw})
    assert broker_key in str(e.value)


def test_bad_value_messages_say_what_was_expected() -> None:
    with pytest.raises(InvalidConfigurationError, match="32-bit integer"):
        resolve_topic_config(overrides={"segment.bytes": "x"})
    with pytest.raises(InvalidConfigurationError, match="64-bit integer"):
        resolve_topic_config(overrides={"segment.ms": "x"})
    with pytest.raises(InvalidConfigurationError, match="at least 14"):
        resolve_topic_config(overrides={"segment.bytes": 1})
    with pytest.raises(InvalidConfigurationError, match="CreateTime, LogAppendTime"):
        resolve_topic_config(overrides={"message.timestamp.type": "x"})
    with pytest.raises(InvalidConfigurationError, match="a boolean"):
        resolve_topic_config(overrides={"preallocate": "x"})


@pytest.mark.parametrize("key", ["segment.byte", "log.segment.bytes", "retention.hours", ""])
def test_unknown_override_key_is_refused(key: str) -> None:
    with pytest.raises(InvalidConfigurationError, match="Unknown topic config") as e:
        resolve_topic_config(overrides={key: "1"})
    assert repr(key)[1:-1] in str(e.value)


def test_unknown_broker_keys_are_ignored() -> None:
    cfg = resolve_topic_config(broker={"broker.id": "1", "listeners": "PLAINTEXT://:9092"})
    assert dict(cfg.values) == KAFKA_DEFAULTS


def test_parse_value_by_name_and_type() -> None:
    assert parse_value("x", "12", "int") == 12
    assert parse_value("x", " s ") == "s"
    assert parse_value("x", "a,,b", "list") == ["a", "b"]
    with pytest.raises(InvalidConfigurationError, match="x"):
        parse_value("x", "1", "boolean")
    k = ConfigKey("my.key", "long", 0, "doc")
    assert parse_value(k, "-9") == -9


@pytest.mark.parametrize("key", ["log.retention.hours", "log.retention.minutes"])
def test_negative_broker_retention_time_means_unlimited(key: str) -> None:
    assert resolve_topic_config(broker={key: "-1"})["retention.ms"] == -1


@pytest.mark.parametrize("key", ["log.retention.hours", "log.retention.minutes", "log.roll.hours"])
def test_huge_broker_time_synonym_is_invalid_config(key: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=key):
        cfg = resolve_topic_config(broker={key: str(2**62)})
        cfg.log_config()
