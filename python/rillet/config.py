"""Configuration with Kafka's keys, defaults and validation.

Topic-level log configs (``segment.bytes``, ``retention.ms``, ...) are resolved the way
Kafka resolves them: a per-topic override wins, else the broker's synonym
(``log.segment.bytes``; for times the ``.ms`` key beats ``.minutes`` beats ``.hours``), else
Kafka's default. A bad value raises :class:`InvalidConfigurationError` naming the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rillet._core import LogConfig
from rillet.errors import InvalidConfigurationError

__all__ = ["TOPIC_CONFIGS", "ConfigKey", "TopicConfig", "parse_value", "resolve_topic_config"]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

Validator = Callable[[str, Any], None]


def at_least(low: int) -> Validator:
    def check(key: str, value: Any) -> None:
        if value < low:
            raise InvalidConfigurationError(
                f"Invalid value {value} for configuration {key}: Value must be at least {low}"
            )

    return check


def one_of(*choices: str) -> Validator:
    def check(key: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v not in choices:
                raise InvalidConfigurationError(
                    f"Invalid value {v} for configuration {key}: String must be one of: "
                    + ", ".join(choices)
                )

    return check


@dataclass(frozen=True)
class ConfigKey:
    """One config: its Kafka name, type, default and validator, and the broker keys it
    falls back to (``synonyms``: ``(key, multiplier)`` in order of precedence)."""

    name: str
    type: str  # "int", "long", "string", "boolean", "list"
    default: Any
    doc: str
    validator: Validator | None = None
    synonyms: tuple[tuple[str, int], ...] = field(default=())


def parse_value(key: ConfigKey | str, raw: object, type_: str | None = None) -> Any:
    """Parse ``raw`` (a string from a properties file or the wire, or a Python value) as the
    key's type; raise :class:`InvalidConfigurationError` naming the key."""
    name = key.name if isinstance(key, ConfigKey) else key
    t = key.type if isinstance(key, ConfigKey) else (type_ or "string")
    try:
        if t in ("int", "long"):
            if isinstance(raw, bool):
                raise ValueError
            value: Any = int(raw.strip()) if isinstance(raw, str) else int(raw)  # type: ignore[call-overload]
            low, high = (-(2**31), INT_MAX) if t == "int" else (-(2**63), LONG_MAX)
            if not low <= value <= high:
                raise ValueError
        elif t == "boolean":
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                value = raw.strip().lower() == "true"
            else:
                raise ValueError
        elif t == "list":
            if isinstance(raw, str):
                value = [p.strip() for p in raw.split(",") if p.strip()]
            elif isinstance(raw, list | tuple):
                value = [str(p) for p in raw]
            else:
                raise ValueError
        else:
            if not isinstance(raw, str):
                raise ValueError
            value = raw.strip()
    except (ValueError, TypeError):
        expected = {"int": "a 32-bit integer", "long": "a 64-bit integer", "list": "a list"}
        raise InvalidConfigurationError(
            f"Invalid value {raw!r} for configuration {name}: "
            f"Expected value to be {expected.get(t, 'a ' + t)}"
        ) from None
    if isinstance(key, ConfigKey) and key.validator is not None:
        key.validator(name, value)
    return value


_HOUR = 3_600_000
_MINUTE = 60_000

TOPIC_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey(
            "segment.bytes",
            "int",
            1 << 30,
            "Segment file size",
            at_least(14),
            (("log.segment.bytes", 1),),
        ),
        ConfigKey(
            "segment.ms",
            "long",
            168 * _HOUR,
            "Roll a segment after this long",
            at_least(1),
            (("log.roll.ms", 1), ("log.roll.hours", _HOUR)),
        ),
        ConfigKey(
            "segment.jitter.ms",
            "long",
            0,
            "Random jitter subtracted from segment.ms",
            at_least(0),
            (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR)),
        ),
        ConfigKey(
            "segment.index.bytes",
            "int",
            10 << 20,
            "Size of each segment's indexes",
            at_least(12),
            (("log.index.size.max.bytes", 1),),
        ),
        ConfigKey(
            "index.interval.bytes",
            "int",
            4096,
            "Bytes between offset index entries",
            at_least(0),
            (("log.index.interval.bytes", 1),),
        ),
        ConfigKey(
            "max.message.bytes",
            "int",
            1_048_588,
            "Largest record batch accepted",
            at_least(0),
            (("message.max.bytes", 1),),
        ),
        ConfigKey(
            "retention.ms",
            "long",
            168 * _HOUR,
            "Delete segments older than this",
            at_least(-1),
            (
                ("log.retention.ms", 1),
                ("log.retention.minutes", _MINUTE),
                ("log.retention.hours", _HOUR),
            ),
        ),
        ConfigKey(
            "retention.bytes",
            "long",
            -1,
            "Delete old segments past this size",
            at_least(-1),
            (("log.retention.bytes", 1),),
        ),
        ConfigKey(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "Record timestamp source",
            one_of("CreateTime", "LogAppendTime"),
            (("log.message.timestamp.type", 1),),
        ),
        ConfigKey(
            "cleanup.policy",
            "list",
            ["delete"],
            "delete and/or compact",
            one_of("delete", "compact"),
            (("log.cleanup.policy", 1),),
        ),
        ConfigKey(
            "flush.messages",
            "long",
            LONG_MAX,
            "fsync after this many records",
            at_least(1),
            (("log.flush.interval.messages", 1),),
        ),
        ConfigKey(
            "flush.ms",
            "long",
            LONG_MAX,
            "fsync after this long",
            at_least(0),
            (("log.flush.interval.ms", 1),),
        ),
        ConfigKey(
            "compression.type",
            "string",
            "producer",
            "Compression the broker stores",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            (("compression.type", 1),),
        ),
        ConfigKey(
            "min.insync.replicas",
            "int",
            1,
            "Minimum ISR size for acks=all",
            at_least(1),
            (("min.insync.replicas", 1),),
        ),
        ConfigKey(
            "unclean.leader.election.enable",
            "boolean",
            False,
            "Allow an out-of-sync replica to lead",
            None,
            (("unclean.leader.election.enable", 1),),
        ),
        ConfigKey(
            "delete.retention.ms",
            "long",
            86_400_000,
            "Keep tombstones this long",
            at_least(0),
            (("log.cleaner.delete.retention.ms", 1),),
        ),
        ConfigKey(
            "file.delete.delay.ms",
            "long",
            60_000,
            "Delay before deleting files",
            at_least(0),
            (("log.segment.delete.delay.ms", 1),),
        ),
        ConfigKey(
            "preallocate",
            "boolean",
            False,
            "Preallocate segment files",
            None,
            (("log.preallocate", 1),),
        ),
    ]
}


@dataclass(frozen=True)
class TopicConfig:
    """Resolved topic-level configs, keyed by Kafka name, and the source of each."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def log_config(self) -> LogConfig:
        """The subset the Rust log enforces."""
        v = self.values
        return LogConfig(
            segment_bytes=v["segment.bytes"],
            segment_ms=v["segment.ms"],
            segment_jitter_ms=v["segment.jitter.ms"],
            segment_index_bytes=v["segment.index.bytes"],
            index_interval_bytes=v["index.interval.bytes"],
            max_message_bytes=v["max.message.bytes"],
            retention_ms=v["retention.ms"],
            retention_bytes=v["retention.bytes"],
            message_timestamp_type=v["message.timestamp.type"],
        )


def resolve_topic_config(
    broker: Mapping[str, object] | None = None, overrides: Mapping[str, object] | None = None
) -> TopicConfig:
    """Resolve every topic config from per-topic ``overrides``, then the broker's synonyms,
    then Kafka's defaults. Unknown override keys are refused (INVALID_CONFIG)."""
    broker = broker or {}
    overrides = overrides or {}
    for k in overrides:
        if k not in TOPIC_CONFIGS:
            raise InvalidConfigurationError(f"Unknown topic config name: {k}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, key in TOPIC_CONFIGS.items():
        if name in overrides:
            values[name] = parse_value(key, overrides[name])
            sources[name] = "DYNAMIC_TOPIC_CONFIG"
            continue
        for synonym, multiplier in key.synonyms:
            if synonym in broker:
                # Kafka types the .hours/.minutes synonyms as 32-bit ints, and reads any
                # negative retention time as -1, unlimited (KafkaConfig.logRetentionTimeMillis).
                type_ = "int" if multiplier != 1 else key.type
                raw = parse_value(ConfigKey(synonym, type_, None, ""), broker[synonym])
                if name == "retention.ms" and raw < 0:
                    raw = -1
                values[name] = raw * multiplier if multiplier != 1 and raw >= 0 else raw
                if key.validator is not None:
                    key.validator(synonym, values[name])
                sources[name] = "STATIC_BROKER_CONFIG"
                break
        else:
            values[name] = key.default
            sources[name] = "DEFAULT_CONFIG"
    return TopicConfig(values, sources)
