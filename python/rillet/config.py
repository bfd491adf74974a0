"""Configuration with Kafka's keys, defaults and validation.

Broker configs (:class:`BrokerConfig`) are read from a ``server.properties`` file in Java
properties syntax, or from a dict, with Kafka's keys, defaults, types and validators. An unknown
key is logged as a warning and kept; a bad value raises :class:`InvalidConfigurationError`
naming the key ("Invalid value X for configuration KEY: ...").

Topic-level log configs (``segment.bytes``, ``retention.ms``, ...) are resolved the way
Kafka resolves them: a per-topic override wins, else the broker's synonym
(``log.segment.bytes``; for times the ``.ms`` key beats ``.minutes`` beats ``.hours``), else
Kafka's default. A bad value raises :class:`InvalidConfigurationError` naming the key.
"""

from __future__ import annotations

import logging
import os
import re
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar, cast, overload

from rillet._core import LogConfig
from rillet.errors import InvalidConfigurationError

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigKey",
    "Endpoint",
    "HostPort",
    "TopicConfig",
    "config_value_to_string",
    "default_data_dir",
    "format_properties",
    "load_properties",
    "parse_listener",
    "parse_properties",
    "parse_quorum_voters",
    "parse_security_protocol_map",
    "parse_value",
    "resolve_topic_config",
]

_log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1

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


def between(low: float, high: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if not low <= value <= high:
            raise InvalidConfigurationError(
                f"Invalid value {value} for configuration {key}: "
                f"Value must be between {low} and {high}"
            )

    return check


@dataclass(frozen=True)
class ConfigKey:
    """One config: its Kafka name, type, default and validator, and the broker keys it
    falls back to (``synonyms``: ``(key, multiplier)`` in order of precedence)."""

    name: str
    type: str  # "short", "int", "long", "double", "string", "boolean", "list"
    default: Any
    doc: str
    validator: Validator | None = None
    synonyms: tuple[tuple[str, int], ...] = field(default=())


_INT_RANGES = {
    "short": (-(2**15), SHORT_MAX),
    "int": (-(2**31), INT_MAX),
    "long": (-(2**63), LONG_MAX),
}


def parse_value(key: ConfigKey | str, raw: object, type_: str | None = None) -> Any:
    """Parse ``raw`` (a string from a properties file or the wire, or a Python value) as the
    key's type; raise :class:`InvalidConfigurationError` naming the key."""
    name = key.name if isinstance(key, ConfigKey) else key
    t = key.type if isinstance(key, ConfigKey) else (type_ or "string")
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    try:
        if t in ("short", "int", "long"):
            if isinstance(raw, bool):
                raise ValueError
            value: Any = int(raw.strip()) if isinstance(raw, str) else int(raw)  # type: ignore[call-overload]
            low, high = _INT_RANGES[t]
            if not low <= value <= high:
                raise ValueError
        elif t == "double":
            if isinstance(raw, bool) or not isinstance(raw, str | int | float):
                raise ValueError
            value = float(raw.strip()) if isinstance(raw, str) else float(raw)
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
                value = [os.fspath(p) if isinstance(p, os.PathLike) else str(p) for p in raw]
            else:
                raise ValueError
        else:
            if not isinstance(raw, str):
                raise ValueError
            value = raw.strip()
    except (ValueError, TypeError):
        expected = {
            "short": "a 16-bit integer",
            "int": "a 32-bit integer",
            "long": "a 64-bit integer",
            "double": "a number",
            "list": "a list",
        }
        shown = raw if isinstance(raw, str) else repr(raw)
        raise InvalidConfigurationError(
            f"Invalid value {shown} for configuration {name}: "
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


# ---------------------------------------------------------------------------------------------
# Java properties files (java.util.Properties.load / store)

_PROPS_WS = " \t\f"
_PROPS_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse Java properties text the way ``java.util.Properties.load`` does: ``#`` and ``!``
    comment lines, ``key=value``, ``key: value`` and ``key value``, a line ending in an odd
    number of backslashes continues on the next line (whose leading blanks are dropped), and
    escapes (``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX``, ``\\`` before any other char).
    A later duplicate key wins. ``source`` names the text in error messages."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        try:
            key = _unescape(raw_key)
            props[key] = _unescape(raw_value)
        except ValueError as e:
            raise InvalidConfigurationError(f"{source}, line {lineno}: {e}") from None
    return props


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file (UTF-8; Latin-1 if it is not valid UTF-8, as Java reads it)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InvalidConfigurationError(
            f"Cannot read properties file {os.fspath(path)}: {e.strerror or e}"
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, os.fspath(path))


def format_properties(props: Mapping[str, str], comments: Sequence[str] = ()) -> str:
    """Properties text that :func:`parse_properties` (and Java) read back as ``props``,
    escaped the way ``java.util.Properties.store`` escapes, one ``#`` line per comment."""
    lines = [f"#{c}" for c in comments]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "".join(line + "\n" for line in lines)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        lineno = i + 1
        line = natural[i].lstrip(_PROPS_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # a blank or comment line; a comment is never continued
        parts = []
        while True:
            backslashes = len(line) - len(line.rstrip("\\"))
            if backslashes % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])
            if i >= len(natural):
                break  # a continuation at the end of the text continues into nothing
            line = natural[i].lstrip(_PROPS_WS)
            i += 1
        yield lineno, "".join(parts)


def _split_key_value(line: str) -> tuple[str, str]:
    key_end = value_start = len(line)
    has_separator = preceding_backslash = False
    for idx, c in enumerate(line):
        if not preceding_backslash and c in "=:":
            key_end, value_start, has_separator = idx, idx + 1, True
            break
        if not preceding_backslash and c in _PROPS_WS:
            key_end, value_start = idx, idx + 1
            break
        preceding_backslash = c == "\\" and not preceding_backslash
    while value_start < len(line):
        c = line[value_start]
        if c not in _PROPS_WS:
            if has_separator or c not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= len(s):
            break  # a lone backslash at the very end is dropped, as Java does
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROPS_ESCAPES.get(c, c))
    result = "".join(out)
    try:  # \uD83D\uDE00: Java strings are UTF-16, so a surrogate pair is one character
        return result.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return result


def _escape(s: str, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(s):
        if c == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(c)])
        elif c in "=:#!\\":
            out.append("\\" + c)
        elif " " < c <= "~":
            out.append(c)
        else:
            units = c.encode("utf-16-be", "surrogatepass")
            out += [f"\\u{units[j]:02X}{units[j + 1]:02X}" for j in range(0, len(units), 2)]
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# broker configs

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_LISTENERS = "PLAINTEXT://:9092,CONTROLLER://:9093"
DEFAULT_SECURITY_PROTOCOL_MAP = (
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
)
PROCESS_ROLES = ("broker", "controller")

_HOST = r"\[?([0-9a-zA-Z\-%._:]*)\]?"
_LISTENER_RE = re.compile(r"^([^:/\s,]+)://" + _HOST + r":(-?[0-9]+)$")
_HOST_PORT_RE = re.compile(r"^" + _HOST + r":([0-9]+)$")
_VOTER_FORMAT = "Each voter entry must be in the form {id}@{host}:{port}."


class HostPort(NamedTuple):
    """A host (``""`` for every interface) and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Endpoint:
    """One listener: ``NAME://host:port``. An empty host means every interface."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.listener_name}://{HostPort(self.host, self.port)}"

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets)."""
        return str(HostPort(self.host, self.port))

    @property
    def bind_address(self) -> str:
        """The address to bind, e.g. for ``grpc.aio.Server.add_insecure_port``: an empty host
        binds every interface (``[::]``, which gRPC makes dual-stack)."""
        return str(HostPort(self.host or "::", self.port))


def parse_listener(s: str) -> tuple[str, str, int]:
    """``NAME://host:port`` as (upper-cased name, host, port); raise ValueError."""
    m = _LISTENER_RE.match(s.strip())
    if m is None or not 0 <= int(m.group(3)) <= 65535:
        raise ValueError(f"Unable to parse {s} to a broker endpoint")
    return m.group(1).upper(), m.group(2), int(m.group(3))


def parse_quorum_voters(entries: Sequence[str]) -> dict[int, HostPort]:
    """``["1@host:9093", ...]`` as ``{1: HostPort("host", 9093), ...}``; raise ValueError."""
    voters: dict[int, HostPort] = {}
    for entry in entries:
        node, at, address = entry.strip().partition("@")
        m = _HOST_PORT_RE.match(address)
        if not at or "@" in address or m is None or not node.strip().isdigit() or not m[1]:
            raise ValueError(f"{_VOTER_FORMAT} Found {entry}")
        node_id, port = int(node), int(m[2])
        if not 0 < port <= 65535:
            raise ValueError(f"Invalid port {port} in voter entry {entry}")
        if node_id > INT_MAX:
            raise ValueError(f"Invalid node id {node} in voter entry {entry}")
        if node_id in voters:
            raise ValueError(f"Duplicate voter id {node_id} in {','.join(entries)}")
        voters[node_id] = HostPort(m[1], port)
    return voters


def parse_security_protocol_map(entries: Sequence[str]) -> dict[str, str]:
    """``["CONTROLLER:PLAINTEXT", ...]`` as ``{"CONTROLLER": "PLAINTEXT"}``; raise ValueError."""
    result: dict[str, str] = {}
    for entry in entries:
        name, colon, protocol = entry.strip().partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name or ":" in protocol:
            raise ValueError(f"Map entry '{entry}' is not in the form LISTENER_NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"No enum constant for security protocol {protocol}; one of: "
                + ", ".join(SECURITY_PROTOCOLS)
            )
        if name in result:
            raise ValueError(f"Duplicate listener name {name}")
        result[name] = protocol
    return result


def _checked(parse: Callable[[Sequence[str]], object]) -> Validator:
    def check(key: str, value: Any) -> None:
        try:
            parse(value)
        except ValueError as e:
            raise InvalidConfigurationError(
                f"Invalid value {','.join(value)} for configuration {key}: {e}"
            ) from None

    return check


def _listeners_validator(key: str, value: Any) -> None:
    _checked(lambda entries: [parse_listener(e) for e in entries])(key, value)


def _k(
    name: str, type_: str, default: Any, doc: str, validator: Validator | None = None
) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, validator)


# Kafka's broker keys (KafkaConfig), with Kafka's types, defaults and validators. A default of
# None is Kafka's null: unset, with a fallback described in the doc.
BROKER_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        # -- KRaft ---------------------------------------------------------------------------
        _k("process.roles", "list", [], "broker, controller, or both", one_of(*PROCESS_ROLES)),
        _k("node.id", "int", -1, "This node's id in the quorum and cluster", at_least(0)),
        _k("broker.id", "int", -1, "Alias of node.id", at_least(0)),
        _k(
            "controller.quorum.voters",
            "list",
            [],
            "The voters, id@host:port,...",
            _checked(parse_quorum_voters),
        ),
        _k("controller.listener.names", "list", ["CONTROLLER"], "Listeners of the controller"),
        _k("controller.quorum.election.timeout.ms", "int", 1000, "Raft election timeout"),
        _k("controller.quorum.fetch.timeout.ms", "int", 2000, "Raft leader fetch timeout"),
        _k("controller.quorum.election.backoff.max.ms", "int", 1000, "Raft election backoff"),
        _k("controller.quorum.request.timeout.ms", "int", 2000, "Raft request timeout"),
        _k("controller.quorum.retry.backoff.ms", "int", 20, "Raft retry backoff"),
        _k("controller.quorum.append.linger.ms", "int", 25, "Raft append linger"),
        _k("metadata.log.dir", "string", None, "Metadata log dir (default: first of log.dirs)"),
        _k("metadata.log.segment.bytes", "int", 1 << 30, "Metadata log segment size", at_least(12)),
        _k("metadata.log.segment.ms", "long", 7 * 24 * _HOUR, "Metadata log segment roll time"),
        _k("metadata.max.retention.bytes", "long", 100 << 20, "Metadata log retention size"),
        _k("metadata.max.retention.ms", "long", 7 * 24 * _HOUR, "Metadata log retention time"),
        _k(
            "metadata.log.max.record.bytes.between.snapshots",
            "long",
            20 << 20,
            "Snapshot after this many new metadata bytes",
            at_least(1),
        ),
        _k(
            "metadata.log.max.snapshot.interval.ms",
            "long",
            _HOUR,
            "Snapshot at least this often (0: never by time)",
            at_least(0),
        ),
        _k("metadata.max.idle.interval.ms", "int", 500, "No-op record interval", at_least(0)),
        _k(
            "broker.session.timeout.ms",
            "int",
            9000,
            "Fence a broker without heartbeats this long",
            at_least(1),
        ),
        _k("broker.heartbeat.interval.ms", "int", 2000, "Broker heartbeat interval", at_least(1)),
        _k(
            "initial.broker.registration.timeout.ms",
            "int",
            60_000,
            "Give up registering after this long",
        ),
        _k("broker.rack", "string", None, "Rack of this broker"),
        # -- listeners -----------------------------------------------------------------------
        _k(
            "listeners",
            "list",
            DEFAULT_LISTENERS.split(","),
            "NAME://host:port,...",
            _listeners_validator,
        ),
        _k(
            "advertised.listeners",
            "list",
            None,
            "Listeners given to clients (default: listeners without controller listeners)",
            _listeners_validator,
        ),
        _k(
            "listener.security.protocol.map",
            "list",
            DEFAULT_SECURITY_PROTOCOL_MAP.split(","),
            "LISTENER_NAME:PROTOCOL,...",
            _checked(parse_security_protocol_map),
        ),
        _k("inter.broker.listener.name", "string", None, "Listener for replication"),
        _k(
            "security.inter.broker.protocol",
            "string",
            "PLAINTEXT",
            "Protocol for replication when inter.broker.listener.name is unset",
            one_of(*SECURITY_PROTOCOLS),
        ),
        _k("num.network.threads", "int", 3, "Network threads", at_least(1)),
        _k("num.io.threads", "int", 8, "Request handler threads", at_least(1)),
        _k("background.threads", "int", 10, "Background task threads", at_least(1)),
        _k("queued.max.requests", "int", 500, "Queued requests before blocking", at_least(1)),
        _k("socket.send.buffer.bytes", "int", 102_400, "SO_SNDBUF (-1: OS default)"),
        _k("socket.receive.buffer.bytes", "int", 102_400, "SO_RCVBUF (-1: OS default)"),
        _k("socket.request.max.bytes", "int", 104_857_600, "Largest request", at_least(1)),
        _k("socket.listen.backlog.size", "int", 50, "Listen backlog", at_least(1)),
        _k("connections.max.idle.ms", "long", 600_000, "Close idle connections after this"),
        _k("request.timeout.ms", "int", 30_000, "Request timeout", at_least(0)),
        # -- log dirs and topics -------------------------------------------------------------
        _k("log.dirs", "list", None, "Log directories (default: log.dir)"),
        _k("log.dir", "string", "/tmp/kafka-logs", "Log directory when log.dirs is unset"),
        _k("num.partitions", "int", 1, "Partitions of a new topic", at_least(1)),
        _k(
            "default.replication.factor", "int", 1, "Replication factor of a new topic", at_least(1)
        ),
        _k("auto.create.topics.enable", "boolean", True, "Create a topic on first use"),
        _k("delete.topic.enable", "boolean", True, "Allow deleting topics"),
        _k(
            "num.recovery.threads.per.data.dir",
            "int",
            1,
            "Threads per log dir for recovery and flush on shutdown",
            at_least(1),
        ),
        _k(
            "log.retention.check.interval.ms",
            "long",
            300_000,
            "How often retention runs",
            at_least(1),
        ),
        _k(
            "log.flush.scheduler.interval.ms",
            "long",
            LONG_MAX,
            "How often the flusher checks logs",
        ),
        _k(
            "log.flush.offset.checkpoint.interval.ms",
            "int",
            60_000,
            "Recovery-point checkpoint interval",
            at_least(0),
        ),
        _k(
            "log.flush.start.offset.checkpoint.interval.ms",
            "int",
            60_000,
            "Log-start-offset checkpoint interval",
            at_least(0),
        ),
        _k("log.cleaner.enable", "boolean", True, "Run the log cleaner (compaction)"),
        _k("log.cleaner.threads", "int", 1, "Log cleaner threads", at_least(0)),
        _k("log.cleaner.backoff.ms", "long", 15_000, "Cleaner idle backoff", at_least(0)),
        _k(
            "log.cleaner.min.cleanable.ratio",
            "double",
            0.5,
            "Dirty ratio that makes a log cleanable",
            between(0, 1),
        ),
        _k("log.cleaner.dedupe.buffer.size", "long", 128 << 20, "Cleaner dedupe memory"),
        _k("log.cleaner.io.buffer.size", "int", 512 << 10, "Cleaner I/O buffers", at_least(0)),
        _k("log.cleaner.min.compaction.lag.ms", "long", 0, "Min age to compact", at_least(0)),
        _k(
            "log.cleaner.max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "Max age before compaction",
            at_least(1),
        ),
        # -- broker synonyms of topic configs (see TOPIC_CONFIGS) ----------------------------
        _k("log.segment.bytes", "int", 1 << 30, "Segment file size", at_least(14)),
        _k("log.roll.ms", "long", None, "Segment roll time (default: log.roll.hours)", at_least(1)),
        _k("log.roll.hours", "int", 168, "Segment roll time in hours", at_least(1)),
        _k("log.roll.jitter.ms", "long", None, "Roll jitter (default: .hours)", at_least(0)),
        _k("log.roll.jitter.hours", "int", 0, "Roll jitter in hours", at_least(0)),
        _k("log.index.size.max.bytes", "int", 10 << 20, "Index size", at_least(4)),
        _k("log.index.interval.bytes", "int", 4096, "Bytes between index entries", at_least(0)),
        _k("message.max.bytes", "int", 1_048_588, "Largest record batch", at_least(0)),
        _k("log.retention.ms", "long", None, "Retention time (default: .minutes)"),
        _k("log.retention.minutes", "int", None, "Retention time (default: .hours)"),
        _k("log.retention.hours", "int", 168, "Retention time in hours"),
        _k("log.retention.bytes", "long", -1, "Retention size per partition"),
        _k(
            "log.message.timestamp.type",
            "string",
            "CreateTime",
            "Record timestamp source",
            one_of("CreateTime", "LogAppendTime"),
        ),
        _k(
            "log.cleanup.policy",
            "list",
            ["delete"],
            "delete and/or compact",
            one_of("delete", "compact"),
        ),
        _k("log.flush.interval.messages", "long", LONG_MAX, "fsync every N records", at_least(1)),
        _k("log.flush.interval.ms", "long", None, "fsync interval", at_least(0)),
        _k(
            "compression.type",
            "string",
            "producer",
            "Compression the broker stores",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        _k("min.insync.replicas", "int", 1, "Minimum ISR size for acks=all", at_least(1)),
        _k("unclean.leader.election.enable", "boolean", False, "Allow out-of-sync leaders"),
        _k(
            "log.cleaner.delete.retention.ms",
            "long",
            86_400_000,
            "Keep tombstones this long",
            at_least(0),
        ),
        _k("log.segment.delete.delay.ms", "long", 60_000, "Delay before deleting", at_least(0)),
        _k("log.preallocate", "boolean", False, "Preallocate segment files"),
        # -- replication ---------------------------------------------------------------------
        _k("replica.lag.time.max.ms", "long", 30_000, "Drop a lagging follower from the ISR"),
        _k("replica.fetch.max.bytes", "int", 1 << 20, "Follower fetch size", at_least(0)),
        _k("replica.fetch.min.bytes", "int", 1, "Follower fetch min bytes"),
        _k("replica.fetch.wait.max.ms", "int", 500, "Follower fetch max wait"),
        _k(
            "replica.fetch.response.max.bytes",
            "int",
            10 << 20,
            "Follower fetch response size",
            at_least(0),
        ),
        _k("replica.fetch.backoff.ms", "int", 1000, "Follower backoff", at_least(0)),
        _k("replica.socket.timeout.ms", "int", 30_000, "Follower request timeout"),
        _k("num.replica.fetchers", "int", 1, "Follower fetcher threads"),
        _k(
            "replica.high.watermark.checkpoint.interval.ms",
            "long",
            5000,
            "High watermark checkpoint interval",
        ),
        _k("fetch.max.bytes", "int", 55 << 20, "Largest fetch response", at_least(1024)),
        _k("auto.leader.rebalance.enable", "boolean", True, "Move leaders to preferred replicas"),
        _k(
            "leader.imbalance.check.interval.seconds",
            "long",
            300,
            "Leader balance check interval",
            at_least(1),
        ),
        _k(
            "leader.imbalance.per.broker.percentage",
            "int",
            10,
            "Tolerated leader imbalance",
            at_least(0),
        ),
        _k("controlled.shutdown.enable", "boolean", True, "Move leaders away on shutdown"),
        # -- groups and offsets --------------------------------------------------------------
        _k(
            "group.initial.rebalance.delay.ms",
            "int",
            3000,
            "Wait for more members before the first rebalance",
        ),
        _k("group.min.session.timeout.ms", "int", 6000, "Smallest consumer session timeout"),
        _k("group.max.session.timeout.ms", "int", 1_800_000, "Largest consumer session timeout"),
        _k("group.max.size", "int", INT_MAX, "Members per group", at_least(1)),
        _k(
            "offsets.topic.num.partitions",
            "int",
            50,
            "Partitions of __consumer_offsets",
            at_least(1),
        ),
        _k(
            "offsets.topic.replication.factor",
            "short",
            3,
            "Replication factor of __consumer_offsets",
            at_least(1),
        ),
        _k(
            "offsets.topic.segment.bytes",
            "int",
            100 << 20,
            "Segment size of __consumer_offsets",
            at_least(1),
        ),
        _k("offsets.retention.minutes", "int", 10_080, "Keep committed offsets", at_least(1)),
        _k(
            "offsets.retention.check.interval.ms",
            "long",
            600_000,
            "Offset expiry check interval",
            at_least(1),
        ),
        _k("offsets.commit.timeout.ms", "int", 5000, "Offset commit timeout", at_least(1)),
        _k("offsets.load.buffer.size", "int", 5 << 20, "Offset load buffer", at_least(1)),
        # -- transactions and producer ids ---------------------------------------------------
        _k(
            "transaction.state.log.num.partitions",
            "int",
            50,
            "Partitions of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.state.log.replication.factor",
            "short",
            3,
            "Replication factor of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.state.log.min.isr",
            "int",
            2,
            "min.insync.replicas of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.state.log.segment.bytes",
            "int",
            100 << 20,
            "Segment size of __transaction_state",
            at_least(1),
        ),
        _k(
            "transaction.max.timeout.ms", "int", 900_000, "Largest transaction timeout", at_least(1)
        ),
        _k(
            "transactional.id.expiration.ms",
            "int",
            7 * 24 * _HOUR,
            "Expire idle transactional ids",
            at_least(1),
        ),
        _k(
            "producer.id.expiration.ms",
            "int",
            86_400_000,
            "Expire idle producer ids",
            at_least(1),
        ),
    ]
}

# Kafka's topic-config synonyms at the broker level (for resolve_topic_config).
_TOPIC_SYNONYMS = frozenset(s for key in TOPIC_CONFIGS.values() for s, _ in key.synonyms)

STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"


class ConfigEntry(NamedTuple):
    """One broker config as DescribeConfigs shows it: Kafka's string form of the value
    (``None`` for null) and its source."""

    name: str
    value: str | None
    source: str


def config_value_to_string(value: object) -> str | None:
    """Kafka's string form of a parsed value: lists comma-joined, booleans lower case."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def default_data_dir() -> Path:
    """The per-user data dir of the embedded start: ``$XDG_DATA_HOME/rillet`` when
    ``XDG_DATA_HOME`` is an absolute path, else ``~/.local/share/rillet``."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "rillet"


T = TypeVar("T")


class _Value(Generic[T]):
    """A typed read-only attribute of :class:`BrokerConfig` backed by a dotted key."""

    def __init__(self, key: str) -> None:
        assert key in BROKER_CONFIGS, key
        self.key = key

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _Value[T]: ...

    @overload
    def __get__(self, obj: BrokerConfig, owner: type[Any]) -> T: ...

    def __get__(self, obj: BrokerConfig | None, owner: type[Any]) -> _Value[T] | T:
        if obj is None:
            return self
        return cast(T, obj.values[self.key])


class BrokerConfig:
    """A broker's static configuration: Kafka's dotted keys at the edges (:attr:`values`,
    :meth:`get`, :meth:`describe`), typed attributes inside (:attr:`node_id`,
    :attr:`process_roles`, :attr:`listeners`, :attr:`log_dirs`, ...).

    Construction parses and validates everything: a bad value raises
    :class:`InvalidConfigurationError` naming the key, and an inconsistent combination of
    keys raises it with a message naming the keys. Unknown keys are logged as a warning and
    kept (:attr:`unknown`). ``None`` values count as unset. Instances are immutable.
    """

    # -- simple typed attributes (dotted key -> parsed value) ---------------------------------
    num_partitions = _Value[int]("num.partitions")
    default_replication_factor = _Value[int]("default.replication.factor")
    min_insync_replicas = _Value[int]("min.insync.replicas")
    auto_create_topics_enable = _Value[bool]("auto.create.topics.enable")
    delete_topic_enable = _Value[bool]("delete.topic.enable")
    offsets_topic_num_partitions = _Value[int]("offsets.topic.num.partitions")
    offsets_topic_replication_factor = _Value[int]("offsets.topic.replication.factor")
    transaction_state_log_replication_factor = _Value[int](
        "transaction.state.log.replication.factor"
    )
    socket_request_max_bytes = _Value[int]("socket.request.max.bytes")
    message_max_bytes = _Value[int]("message.max.bytes")
    replica_lag_time_max_ms = _Value[int]("replica.lag.time.max.ms")
    replica_fetch_max_bytes = _Value[int]("replica.fetch.max.bytes")
    replica_fetch_wait_max_ms = _Value[int]("replica.fetch.wait.max.ms")
    unclean_leader_election_enable = _Value[bool]("unclean.leader.election.enable")
    broker_session_timeout_ms = _Value[int]("broker.session.timeout.ms")
    broker_heartbeat_interval_ms = _Value[int]("broker.heartbeat.interval.ms")
    quorum_election_timeout_ms = _Value[int]("controller.quorum.election.timeout.ms")
    quorum_fetch_timeout_ms = _Value[int]("controller.quorum.fetch.timeout.ms")
    quorum_election_backoff_max_ms = _Value[int]("controller.quorum.election.backoff.max.ms")
    quorum_request_timeout_ms = _Value[int]("controller.quorum.request.timeout.ms")
    metadata_log_segment_bytes = _Value[int]("metadata.log.segment.bytes")
    metadata_max_retention_bytes = _Value[int]("metadata.max.retention.bytes")
    metadata_max_retention_ms = _Value[int]("metadata.max.retention.ms")
    metadata_log_max_record_bytes_between_snapshots = _Value[int](
        "metadata.log.max.record.bytes.between.snapshots"
    )
    metadata_log_max_snapshot_interval_ms = _Value[int]("metadata.log.max.snapshot.interval.ms")
    log_retention_check_interval_ms = _Value[int]("log.retention.check.interval.ms")
    log_flush_scheduler_interval_ms = _Value[int]("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms = _Value[int]("log.flush.offset.checkpoint.interval.ms")
    log_flush_start_offset_checkpoint_interval_ms = _Value[int](
        "log.flush.start.offset.checkpoint.interval.ms"
    )
    log_cleaner_enable = _Value[bool]("log.cleaner.enable")
    num_network_threads = _Value[int]("num.network.threads")
    num_io_threads = _Value[int]("num.io.threads")
    group_initial_rebalance_delay_ms = _Value[int]("group.initial.rebalance.delay.ms")
    auto_leader_rebalance_enable = _Value[bool]("auto.leader.rebalance.enable")
    leader_imbalance_check_interval_seconds = _Value[int]("leader.imbalance.check.interval.seconds")
    fetch_max_bytes = _Value[int]("fetch.max.bytes")

    # -- derived attributes, set by __init__ --------------------------------------------------
    node_id: int
    process_roles: frozenset[str]
    quorum_voters: Mapping[int, HostPort]
    controller_listener_names: tuple[str, ...]
    listener_security_protocol_map: Mapping[str, str]
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    inter_broker_listener_name: str | None
    log_dirs: tuple[Path, ...]
    metadata_log_dir: Path
    log_flush_interval_ms: int
    source_path: Path | None

    def __init__(
        self, props: Mapping[str, object] | None = None, *, source_path: Path | None = None
    ) -> None:
        self.source_path = source_path
        originals = {str(k): v for k, v in (props or {}).items() if v is not None}
        self.originals: Mapping[str, object] = types.MappingProxyType(originals)
        values: dict[str, Any] = {}
        unknown: dict[str, object] = {}
        for name, raw in originals.items():
            key = BROKER_CONFIGS.get(name)
            if key is None:
                unknown[name] = raw
                _log.warning("The configuration '%s' was supplied but isn't a known config.", name)
            else:
                values[name] = parse_value(key, raw)
        self.explicit: frozenset[str] = frozenset(values)
        for name, key in BROKER_CONFIGS.items():
            values.setdefault(name, key.default)
        self.unknown: Mapping[str, object] = types.MappingProxyType(unknown)
        self._values = values
        self.values: Mapping[str, Any] = types.MappingProxyType(values)
        self._derive()
        # Kafka's synonyms resolve to valid topic configs (e.g. log.index.size.max.bytes >= 12).
        resolve_topic_config(self.topic_synonyms)

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BrokerConfig:
        """Load a ``server.properties`` file."""
        return cls(load_properties(path), source_path=Path(path))

    @classmethod
    def from_properties(cls, text: str) -> BrokerConfig:
        """Load properties text."""
        return cls(parse_properties(text))

    @classmethod
    def embedded_default(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> BrokerConfig:
        """The configuration of ``rillet server start`` with no arguments: one node in combined
        mode (broker and controller, the only voter), clients on localhost:9092, the
        controller on localhost:9093, data in ``<data_dir>/kraft-combined-logs`` (``data_dir``
        defaults to :func:`default_data_dir`). ``overrides`` replace any key."""
        base = Path(data_dir) if data_dir is not None else default_data_dir()
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@localhost:9093",
            "listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
            "advertised.listeners": "PLAINTEXT://localhost:9092",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(base / "kraft-combined-logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
        }
        props.update(overrides or {})
        return cls(props)

    def updated(self, changes: Mapping[str, object | None]) -> BrokerConfig:
        """A new, validated config with ``changes`` applied (``None`` removes a key)."""
        props = dict(self.originals)
        for k, v in changes.items():
            if v is None:
                props.pop(k, None)
            else:
                props[k] = v
        return BrokerConfig(props, source_path=self.source_path)

    # -- Kafka's names at the edges ---------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        """The parsed value of a known key (KeyError for an unknown one)."""
        return self._values[name]

    def get(self, name: str, default: Any = None) -> Any:
        """The parsed value of a known key, the raw value of an unknown one, or ``default``."""
        if name in self._values:
            return self._values[name]
        return self.unknown.get(name, default)

    def source(self, name: str) -> str:
        """``STATIC_BROKER_CONFIG`` when set, else ``DEFAULT_CONFIG`` (Kafka's names)."""
        return (
            STATIC_BROKER_CONFIG
            if name in self.explicit or name in self.unknown
            else DEFAULT_CONFIG
        )

    def describe(self) -> list[ConfigEntry]:
        """Every known key (sorted) with Kafka's string form of its value and its source."""
        return [
            ConfigEntry(name, config_value_to_string(self._values[name]), self.source(name))
            for name in sorted(self._values)
        ]

    @property
    def topic_synonyms(self) -> Mapping[str, object]:
        """The broker-level topic-config synonyms set here (``log.segment.bytes``,
        ``log.retention.hours``, ...): pass as ``broker`` to :func:`resolve_topic_config` or as
        ``broker_config`` to the LogManager. Unset keys are left out, so topic configs keep
        Kafka's precedence (``.ms`` beats ``.minutes`` beats ``.hours``) and sources."""
        return {k: self._values[k] for k in sorted(self.explicit & _TOPIC_SYNONYMS)}

    def topic_config(self, overrides: Mapping[str, object] | None = None) -> TopicConfig:
        """A topic's resolved configs: its ``overrides``, then this broker's synonyms."""
        return resolve_topic_config(self.topic_synonyms, overrides)

    # -- typed views ------------------------------------------------------------------------

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    @property
    def controller_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners this node serves the quorum API on (empty unless a controller)."""
        names = set(self.controller_listener_names)
        return tuple(e for e in self.listeners if e.listener_name in names)

    @property
    def broker_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners this node serves the client API on (empty unless a broker)."""
        if not self.is_broker:
            return ()
        names = set(self.controller_listener_names)
        return tuple(e for e in self.listeners if e.listener_name not in names)

    @property
    def inter_broker_listener(self) -> Endpoint | None:
        """The advertised endpoint other brokers replicate from."""
        for e in self.advertised_listeners:
            if e.listener_name == self.inter_broker_listener_name:
                return e
        return None

    @property
    def all_log_dirs(self) -> tuple[Path, ...]:
        """``log.dirs`` and ``metadata.log.dir`` without duplicates, in that order: the
        directories ``rillet storage format`` writes ``meta.properties`` to."""
        seen: set[str] = set()
        result: list[Path] = []
        for d in (*self.log_dirs, self.metadata_log_dir):
            key = os.path.abspath(d)
            if key not in seen:
                seen.add(key)
                result.append(d)
        return tuple(result)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k}={config_value_to_string(self._values[k])}" for k in sorted(self.explicit)
        )
        return f"BrokerConfig({shown})"

    # -- derivation and cross-key checks ------------------------------------------------------

    def _derive(self) -> None:
        v = self._values
        fail = InvalidConfigurationError

        roles: list[str] = v["process.roles"]
        if not roles:
            raise fail('Missing required configuration "process.roles" which has no default value.')
        if len(set(roles)) != len(roles):
            raise fail(f"Duplicate role names found in `process.roles`: {','.join(roles)}")
        self.process_roles = frozenset(roles)

        # node.id, alias broker.id
        if "node.id" in self.explicit and "broker.id" in self.explicit:
            if v["node.id"] != v["broker.id"]:
                raise fail(
                    f"You must set `node.id` to the same value as `broker.id` "
                    f"(node.id={v['node.id']}, broker.id={v['broker.id']})."
                )
        elif "broker.id" in self.explicit:
            v["node.id"] = v["broker.id"]
        if v["node.id"] < 0:
            raise fail('Missing required configuration "node.id" which has no default value.')
        v["broker.id"] = v["node.id"]
        self.node_id = v["node.id"]

        # the quorum
        voters = parse_quorum_voters(v["controller.quorum.voters"])
        if not voters:
            raise fail(
                "If using process.roles, controller.quorum.voters must contain a parseable set "
                "of voters."
            )
        self.quorum_voters = types.MappingProxyType(voters)
        voter_ids = "{" + ", ".join(str(i) for i in sorted(voters)) + "}"
        if self.is_controller and self.node_id not in voters:
            raise fail(
                f"If process.roles contains the 'controller' role, the node id {self.node_id} "
                f"must be included in the set of voters controller.quorum.voters={voter_ids}"
            )
        if not self.is_controller and self.node_id in voters:
            raise fail(
                f"If process.roles contains just the 'broker' role, the node id {self.node_id} "
                f"must not be included in the set of voters controller.quorum.voters="
                f"{voter_ids}"
            )

        # listeners
        controller_names = tuple(n.strip().upper() for n in v["controller.listener.names"])
        if not controller_names:
            raise fail("controller.listener.names must contain at least one value")
        self.controller_listener_names = controller_names
        protocol_map = parse_security_protocol_map(v["listener.security.protocol.map"])
        if "listener.security.protocol.map" not in self.explicit:
            # As Kafka: an unset map also maps the controller listeners to PLAINTEXT.
            for n in controller_names:
                protocol_map.setdefault(n, "PLAINTEXT")
        self.listener_security_protocol_map = types.MappingProxyType(protocol_map)
        listeners = self._endpoints("listeners", v["listeners"])
        names = [e.listener_name for e in listeners]
        if len(set(names)) != len(names):
            raise fail(
                "Each listener must have a different name, listeners: " + ",".join(v["listeners"])
            )
        ports = [e.port for e in listeners if e.port != 0]
        if len(set(ports)) != len(ports):
            raise fail(
                "Each listener must have a different port, listeners: " + ",".join(v["listeners"])
            )
        self.listeners = listeners
        controller_set = set(controller_names)
        bound_controller = [e for e in listeners if e.listener_name in controller_set]
        if self.is_controller and not bound_controller:
            raise fail(
                "controller.listener.names must contain at least one value appearing in the "
                "'listeners' configuration when running the KRaft controller role (listeners="
                f"{','.join(v['listeners'])}, controller.listener.names="
                f"{','.join(controller_names)})"
            )
        if not self.is_controller and bound_controller:
            raise fail(
                "controller.listener.names must not contain a value appearing in the "
                "'listeners' configuration when running KRaft with just the broker role "
                f"(found {bound_controller[0].listener_name})"
            )
        if not self.is_broker and len(bound_controller) != len(listeners):
            raise fail(
                "The listeners config must only contain KRaft controller listeners from "
                "controller.listener.names when process.roles=controller"
            )

        # advertised listeners and the inter-broker listener
        if "inter.broker.listener.name" in self.explicit and (
            "security.inter.broker.protocol" in self.explicit
        ):
            raise fail(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                "should be set."
            )
        self.advertised_listeners = ()
        self.inter_broker_listener_name = None
        if self.is_broker:
            self._derive_advertised(controller_set)

        # log dirs
        dirs: list[str] = v["log.dirs"] if v["log.dirs"] is not None else [v["log.dir"]]
        if not dirs or not all(d.strip() for d in dirs):
            raise fail("At least one log directory must be defined via log.dirs or log.dir.")
        self.log_dirs = tuple(Path(d).expanduser() for d in dirs)
        seen: set[str] = set()
        for d in self.log_dirs:
            if os.path.abspath(d) in seen:
                raise fail(f"Duplicate log directory found in log.dirs: {d}")
            seen.add(os.path.abspath(d))
        meta = v["metadata.log.dir"]
        self.metadata_log_dir = Path(meta).expanduser() if meta else self.log_dirs[0]

        # flush and replication
        flush_ms = v["log.flush.interval.ms"]
        self.log_flush_interval_ms = (
            flush_ms if flush_ms is not None else v["log.flush.scheduler.interval.ms"]
        )
        if v["replica.fetch.wait.max.ms"] > v["replica.socket.timeout.ms"]:
            raise fail(
                "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms "
                "to prevent unnecessary socket timeouts"
            )
        if v["replica.fetch.wait.max.ms"] > v["replica.lag.time.max.ms"]:
            raise fail(
                "replica.fetch.wait.max.ms should always be less than or equal to "
                "replica.lag.time.max.ms to prevent frequent changes in ISR"
            )
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise fail("group.max.session.timeout.ms must be at least group.min.session.timeout.ms")
        if v["broker.heartbeat.interval.ms"] >= v["broker.session.timeout.ms"]:
            raise fail(
                "broker.heartbeat.interval.ms must be less than broker.session.timeout.ms "
                f"({v['broker.heartbeat.interval.ms']} >= {v['broker.session.timeout.ms']})"
            )

    def _derive_advertised(self, controller_set: set[str]) -> None:
        v = self._values
        fail = InvalidConfigurationError
        if v["advertised.listeners"] is not None:
            advertised = self._endpoints("advertised.listeners", v["advertised.listeners"])
            names = [e.listener_name for e in advertised]
            if len(set(names)) != len(names):
                raise fail(
                    "Each listener must have a different name, advertised.listeners: "
                    + ",".join(v["advertised.listeners"])
                )
            bound = {e.listener_name for e in self.listeners}
            for e in advertised:
                if e.listener_name in controller_set:
                    raise fail(
                        "The advertised.listeners config must not contain KRaft controller "
                        "listeners from controller.listener.names when process.roles contains "
                        "the broker role because clients do not send requests to KRaft "
                        f"controllers (found {e.listener_name})"
                    )
                if e.listener_name not in bound:
                    raise fail(
                        "advertised.listeners listener names must be equal to or a subset of "
                        f"the ones defined in listeners. Found {e.listener_name}. The valid "
                        "options based on currently configured listeners are "
                        + ",".join(sorted(bound - controller_set))
                    )
                if e.host in ("0.0.0.0", "::"):
                    raise fail(
                        f"advertised.listeners cannot use the nonroutable meta-address {e.host}. "
                        "Use a routable IP address."
                    )
        else:
            advertised = tuple(e for e in self.listeners if e.listener_name not in controller_set)
        if not advertised:
            raise fail(
                "A broker needs a listener that is not a controller listener: there must be at "
                "least one broker listener in listeners (perhaps all listeners appear in "
                "controller.listener.names?)"
            )
        self.advertised_listeners = advertised
        name = v["inter.broker.listener.name"]
        inter = name.upper() if name else v["security.inter.broker.protocol"]
        advertised_names = {e.listener_name for e in advertised}
        if inter not in advertised_names:
            raise fail(
                "inter.broker.listener.name must be a listener name defined in "
                f"advertised.listeners (found {inter}). The valid options based on currently "
                "configured listeners are " + ",".join(sorted(advertised_names))
            )
        self.inter_broker_listener_name = inter

    def _endpoints(self, key: str, entries: Sequence[str]) -> tuple[Endpoint, ...]:
        result = []
        for entry in entries:
            name, host, port = parse_listener(entry)
            protocol = self.listener_security_protocol_map.get(name)
            if protocol is None:
                raise InvalidConfigurationError(
                    f"No security protocol defined for listener {name} in {key}: add it to "
                    "listener.security.protocol.map (e.g. "
                    f"{name}:PLAINTEXT)"
                )
            result.append(Endpoint(name, host, port, protocol))
        return tuple(result)
