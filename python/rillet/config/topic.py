"""Topic-level configs (``segment.bytes``, ``retention.ms``, ...), resolved the way Kafka
resolves them: a per-topic override wins, else the broker's synonym (``log.segment.bytes``;
for times the ``.ms`` key beats ``.minutes`` beats ``.hours``), else Kafka's default. A bad
value raises :class:`~rillet.errors.InvalidConfigurationError` naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rillet._core import LogConfig
from rillet.config.keys import (
    HOUR_MS,
    LONG_MAX,
    MINUTE_MS,
    ConfigKey,
    at_least,
    between,
    one_of,
    parse_value,
)
from rillet.errors import InvalidConfigurationError

__all__ = [
    "TOPIC_CONFIGS",
    "TOPIC_SYNONYMS",
    "TopicConfig",
    "resolve_topic_config",
    "valid_cleanup_policy",
]


# cleanup.policy and log.cleanup.policy: Kafka's values, delete, compact or both.
valid_cleanup_policy = one_of("delete", "compact")

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
            168 * HOUR_MS,
            "Roll a segment after this long",
            at_least(1),
            (("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)),
        ),
        ConfigKey(
            "segment.jitter.ms",
            "long",
            0,
            "Random jitter subtracted from segment.ms",
            at_least(0),
            (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)),
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
            168 * HOUR_MS,
            "Delete segments older than this",
            at_least(-1),
            (
                ("log.retention.ms", 1),
                ("log.retention.minutes", MINUTE_MS),
                ("log.retention.hours", HOUR_MS),
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
            valid_cleanup_policy,
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
            "min.cleanable.dirty.ratio",
            "double",
            0.5,
            "Dirty share of a log that makes the cleaner compact it",
            between(0, 1),
            (("log.cleaner.min.cleanable.ratio", 1),),
        ),
        ConfigKey(
            "min.compaction.lag.ms",
            "long",
            0,
            "A record stays uncompacted at least this long",
            at_least(0),
            (("log.cleaner.min.compaction.lag.ms", 1),),
        ),
        ConfigKey(
            "max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "A record is compacted at most this long after it was written",
            at_least(1),
            (("log.cleaner.max.compaction.lag.ms", 1),),
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


# Kafka's topic-config synonyms at the broker level (for resolve_topic_config).
TOPIC_SYNONYMS = frozenset(s for key in TOPIC_CONFIGS.values() for s, _ in key.synonyms)


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
            compact="compact" in v["cleanup.policy"],
            delete_retention_ms=v["delete.retention.ms"],
            min_compaction_lag_ms=v["min.compaction.lag.ms"],
            max_compaction_lag_ms=v["max.compaction.lag.ms"],
            min_cleanable_dirty_ratio=v["min.cleanable.dirty.ratio"],
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
    _check_compaction_lags(values)
    return TopicConfig(values, sources)


def _check_compaction_lags(values: Mapping[str, Any]) -> None:
    """Kafka's LogConfig.validateValues: a record cannot have to wait longer before it may be
    compacted than the time by which it must be."""
    low, high = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if low > high:
        raise InvalidConfigurationError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )
