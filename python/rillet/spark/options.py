"""The options of ``spark.read.format("rillet")``, ``readStream`` and ``write``: Spark's Kafka
source and sink option names and rules, parsed once on the driver into frozen values.

Option names are case-insensitive (Spark hands them over lowercased). Every error names the
option it is about. ``kafka.security.protocol`` and ``kafka.ssl.*`` reach every client the
source or sink opens (TLS, with the Java client's keys); other ``kafka.*`` options than
``kafka.bootstrap.servers`` are accepted and ignored by the source, so a job written for
Spark's Kafka source runs unchanged; any other unknown option is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rillet.errors import InvalidConfigurationError

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "RilletOptionError",
    "SinkOptions",
    "SourceOptions",
    "parse_sink_options",
    "parse_source_options",
]

# Kafka's (and Spark's) sentinels in per-partition offset JSON.
EARLIEST = -2
LATEST = -1


class RilletOptionError(InvalidConfigurationError, ValueError):
    """A Spark option of the rillet data source is missing, unknown or has a bad value."""


def _error(option: str, message: str) -> RilletOptionError:
    return RilletOptionError(f"rillet data source option '{option}': {message}")


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends, before it is resolved against the broker.

    ``kind`` is "earliest", "latest", "offsets" (``per_partition``: topic -> partition ->
    offset, with -2 earliest and -1 latest), "timestamp" (``timestamp``: one time for every
    partition) or "timestamps" (``per_partition``: topic -> partition -> milliseconds)."""

    kind: str
    per_partition: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()
    timestamp: int = -1

    def partition_map(self) -> dict[str, dict[int, int]]:
        return {t: dict(parts) for t, parts in self.per_partition}


@dataclass(frozen=True)
class SourceOptions:
    """Parsed options of the source (batch and streaming)."""

    bootstrap_servers: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, tuple[int, ...]], ...] = ()
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    # What a starting timestamp with no record at or after it means: "error" or "latest".
    starting_by_timestamp_strategy: str = "error"
    include_headers: bool = False
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    fetch_max_bytes: int = 8 << 20
    request_timeout_ms: int = 30_000
    # kafka.security.protocol and kafka.ssl.* as client configs (Kafka's dotted names).
    security: tuple[tuple[str, str], ...] = ()

    @property
    def strategy(self) -> str:
        if self.subscribe:
            return "subscribe"
        if self.subscribe_pattern is not None:
            return "subscribePattern"
        return "assign"


@dataclass(frozen=True)
class SinkOptions:
    """Parsed options of the sink."""

    bootstrap_servers: str
    topic: str | None = None
    producer_configs: tuple[tuple[str, str], ...] = ()
    # Exactly-once writes: each task writes in a transaction of
    # ``<prefix>-<partition id>``, committed by the driver when Spark commits the job.
    transactional_id_prefix: str | None = None
    security: tuple[tuple[str, str], ...] = ()


_BOOTSTRAP = ("kafka.bootstrap.servers", "rillet.bootstrap.servers")

# Spark Kafka source options that have no meaning here but are accepted (and ignored) so that
# existing jobs run unchanged.
_IGNORED_SOURCE = frozenset(
    {
        "fetchoffset.numretries",
        "fetchoffset.retryintervalms",
        "kafkaconsumer.polltimeoutms",
        "groupidprefix",
        "maxtriggerdelay",
        "minoffsetspertrigger",
        "maxrecordsperpartition",
    }
)

_SOURCE_OPTIONS = {
    name.lower(): name
    for name in (
        *_BOOTSTRAP,
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "includeHeaders",
        "minPartitions",
        "failOnDataLoss",
        "maxOffsetsPerTrigger",
        "rillet.fetch.max.bytes",
        "rillet.request.timeout.ms",
    )
}

# Producer configs a sink passes on from ``kafka.<name>`` options; acks is always "all".
_SINK_PRODUCER_CONFIGS = frozenset(
    {
        "compression.type",
        "batch.size",
        "linger.ms",
        "buffer.memory",
        "max.request.size",
        "request.timeout.ms",
        "delivery.timeout.ms",
        "retries",
        "retry.backoff.ms",
        "max.block.ms",
        "client.id",
        "transaction.timeout.ms",
    }
)


def _security(opts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``kafka.security.protocol`` and ``kafka.ssl.*`` options as client configs."""
    out = []
    for key, value in sorted(opts.items()):
        name = key.removeprefix("kafka.")
        if key.startswith("kafka.") and (name == "security.protocol" or name.startswith("ssl.")):
            out.append((name, value))
    return tuple(out)


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bootstrap(opts: Mapping[str, str]) -> str:
    for name in _BOOTSTRAP:
        value = opts.get(name)
        if value is not None:
            if not value.strip():
                raise _error(name, "must not be empty")
            return value.strip()
    raise _error(
        "kafka.bootstrap.servers",
        "is required (host:port[,host:port...]; 'rillet.bootstrap.servers' is an alias)",
    )


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise _error(name, f"must be 'true' or 'false', got {value!r}")
    return text == "true"


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise _error(name, f"must be a positive integer, got {value!r}") from None
    if number < 1:
        raise _error(name, f"must be a positive integer, got {value!r}")
    return number


def _json_object(name: str, value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        raise _error(name, f"is not valid JSON ({e.msg}): {value!r}") from None
    if not isinstance(parsed, dict):
        raise _error(name, f"must be a JSON object, got {value!r}")
    return parsed


def _partition_json(name: str, value: str, what: str) -> dict[str, dict[int, int]]:
    """``{"topic": {"0": 23, "1": -2}}`` -> {"topic": {0: 23, 1: -2}}."""
    out: dict[str, dict[int, int]] = {}
    for topic, parts in _json_object(name, value).items():
        if not isinstance(parts, dict):
            raise _error(name, f"topic {topic!r} must map partition numbers to {what}")
        out[topic] = {}
        for p, number in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise _error(name, f"{p!r} of topic {topic!r} is not a partition number") from None
            if not isinstance(number, int) or isinstance(number, bool):
                raise _error(name, f"{what} of {topic}-{partition} must be an integer")
            out[topic][partition] = number
    return out


def _freeze(
    m: Mapping[str, Mapping[int, int]],
) -> tuple[tuple[str, tuple[tuple[int, int], ...]], ...]:
    return tuple((t, tuple(sorted(parts.items()))) for t, parts in sorted(m.items()))


def _timestamp(name: str, value: str) -> int:
    try:
        ts = int(value.strip())
    except ValueError:
        raise _error(name, f"must be milliseconds since the epoch, got {value!r}") from None
    if ts < 0:
        raise _error(name, f"must be >= 0, got {value!r}")
    return ts


def _offset_spec(opts: Mapping[str, str], which: str, default: str, streaming: bool) -> OffsetSpec:
    """startingX / endingX with Spark's precedence: Timestamp > OffsetsByTimestamp > Offsets."""
    ts_name = f"{which}Timestamp"
    by_ts_name = f"{which}OffsetsByTimestamp"
    offsets_name = f"{which}Offsets"
    if streaming and which == "ending":
        for name in (ts_name, by_ts_name, offsets_name):
            if name.lower() in opts:
                raise _error(name, "is not supported by streaming queries (batch reads only)")
    value = opts.get(ts_name.lower())
    if value is not None:
        return OffsetSpec("timestamp", timestamp=_timestamp(ts_name, value))
    value = opts.get(by_ts_name.lower())
    if value is not None:
        times = _partition_json(by_ts_name, value, "the timestamp")
        for topic, parts in times.items():
            for p, ts in parts.items():
                if ts < 0:
                    raise _error(by_ts_name, f"the timestamp of {topic}-{p} must be >= 0")
        return OffsetSpec("timestamps", per_partition=_freeze(times))
    value = opts.get(offsets_name.lower(), default).strip()
    if value.lower() in ("earliest", "latest"):
        kind = value.lower()
        if not streaming and which == "starting" and kind == "latest":
            raise _error(offsets_name, "'latest' is not allowed for batch queries")
        if not streaming and which == "ending" and kind == "earliest":
            raise _error(offsets_name, "'earliest' is not allowed for batch queries")
        return OffsetSpec(kind)
    if not value.startswith("{"):
        raise _error(
            offsets_name,
            f"must be 'earliest', 'latest' or JSON like {{\"topic\":{{\"0\":23}}}}, got {value!r}",
        )
    offsets = _partition_json(offsets_name, value, "the offset")
    for topic, parts in offsets.items():
        for p, offset in parts.items():
            if offset < EARLIEST:
                raise _error(offsets_name, f"offset {offset} of {topic}-{p} is invalid")
            if not streaming and which == "starting" and offset == LATEST:
                raise _error(
                    offsets_name,
                    f"latest (-1) for {topic}-{p} is not allowed for batch queries",
                )
            if which == "ending" and offset == EARLIEST:
                raise _error(
                    offsets_name,
                    f"earliest (-2) for {topic}-{p} is not allowed for batch queries",
                )
    return OffsetSpec("offsets", per_partition=_freeze(offsets))


def parse_source_options(options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    """Validate the source options; raises :class:`RilletOptionError` naming the option."""
    opts = _lower(options)
    for key in opts:
        if key.startswith("kafka.") or key in _SOURCE_OPTIONS or key in _IGNORED_SOURCE:
            continue
        if key == "path":
            raise _error("path", "is not supported: name topics with 'subscribe' or 'assign'")
        raise _error(key, "is not a known option of the rillet data source")
    bootstrap = _bootstrap(opts)

    given = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(given) != 1:
        raise _error(
            "subscribe",
            "exactly one of 'subscribe', 'subscribePattern' or 'assign' must be given"
            + (f" (got {', '.join(given)})" if given else ""),
        )
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, tuple[int, ...]], ...] = ()
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise _error("subscribe", "names no topic")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise _error("subscribePattern", f"is not a valid regular expression: {e}") from None
        if not pattern.strip():
            raise _error("subscribePattern", "must not be empty")
    else:
        parsed = _json_object("assign", opts["assign"])
        items: list[tuple[str, tuple[int, ...]]] = []
        for topic, parts in sorted(parsed.items()):
            if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
            ):
                raise _error("assign", f"topic {topic!r} must map to a list of partition numbers")
            items.append((topic, tuple(sorted(set(parts)))))
        if not any(parts for _, parts in items):
            raise _error("assign", "names no partition")
        assign = tuple(items)

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _error(
            "startingOffsetsByTimestampStrategy",
            f"must be 'error' or 'latest', got {opts['startingoffsetsbytimestampstrategy']!r}",
        )
    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    if max_per_trigger is not None and not streaming:
        max_per_trigger = None  # Spark's Kafka source ignores it in batch queries too
    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=_offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming),
        # Streaming: refuses every ending option, else the end is always "latest".
        ending=_offset_spec(opts, "ending", "latest", streaming),
        starting_by_timestamp_strategy=strategy,
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_positive_int(opts, "minPartitions"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_offsets_per_trigger=max_per_trigger,
        fetch_max_bytes=_positive_int(opts, "rillet.fetch.max.bytes") or 8 << 20,
        request_timeout_ms=_positive_int(opts, "rillet.request.timeout.ms") or 30_000,
        security=_security(opts),
    )


def parse_sink_options(options: Mapping[str, Any]) -> SinkOptions:
    """Validate the sink options; raises :class:`RilletOptionError` naming the option."""
    opts = _lower(options)
    producer: list[tuple[str, str]] = []
    for key, value in opts.items():
        if key in (*_BOOTSTRAP, "topic", "checkpointlocation", _TXN_PREFIX):
            continue  # (Spark passes checkpointLocation on)
        if key.startswith("kafka."):
            name = key.removeprefix("kafka.")
            if name in _SINK_PRODUCER_CONFIGS:
                producer.append((name, value))
            elif name in ("acks", "key.serializer", "value.serializer"):
                raise _error(key, "is set by the rillet sink (acks=all, binary key and value)")
            continue
        raise _error(key, "is not a known option of the rillet sink")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise _error("topic", "must not be empty")
    prefix = opts.get(_TXN_PREFIX)
    if prefix is not None and not prefix.strip():
        raise _error("rillet.transactional.id.prefix", "must not be empty")
    return SinkOptions(
        bootstrap_servers=_bootstrap(opts),
        topic=topic.strip() if topic is not None else None,
        producer_configs=tuple(sorted(producer)),
        transactional_id_prefix=prefix.strip() if prefix is not None else None,
        security=_security(opts),
    )


_TXN_PREFIX = "rillet.transactional.id.prefix"
