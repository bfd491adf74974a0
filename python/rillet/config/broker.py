"""A broker's static configuration (:class:`BrokerConfig`): read from a
``server.properties`` file in Java properties syntax, or from a dict, with Kafka's keys,
defaults, types and validators. An unknown key is logged as a warning and kept; a bad value
raises :class:`~rillet.errors.InvalidConfigurationError` naming the key ("Invalid value X for
configuration KEY: ..."), and so does a combination of keys Kafka refuses."""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar, cast, overload

from rillet.config.broker_keys import BROKER_CONFIGS, INERT_KEYS
from rillet.config.keys import config_value_to_string, parse_value
from rillet.config.listeners import (
    Endpoint,
    HostPort,
    parse_listener,
    parse_quorum_voters,
    parse_security_protocol_map,
)
from rillet.config.properties import load_properties, parse_properties
from rillet.config.sasl_keys import SASL_MECHANISMS
from rillet.config.topic import TOPIC_SYNONYMS, TopicConfig, resolve_topic_config
from rillet.errors import InvalidConfigurationError

__all__ = [
    "DEFAULT_CONFIG",
    "STATIC_BROKER_CONFIG",
    "BrokerConfig",
    "ConfigEntry",
    "default_data_dir",
]


# Warnings come from the package, as before it was split, so a filter on it keeps working.
_log = logging.getLogger("rillet.config")


STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"

# The embedded default's keys that describe its GRPC listener (see embedded_default).
_GRPC_LISTENER_PRESETS = frozenset(
    {"advertised.listeners", "grpc.listener.names", "inter.broker.listener.name"}
)


# The security protocols listeners are served with; SASL's on client listeners only.
_SERVED_PROTOCOLS = ("PLAINTEXT", "SSL")
_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_LISTENER_PREFIX = "listener.name."


def _listener_prefixed(name: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<key>`` with a known ``key`` (or
    ``<mechanism>.<key>``, as ``plain.sasl.jaas.config``) as (upper-cased listener, key),
    else None."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    listener, dot, key = name[len(_LISTENER_PREFIX) :].partition(".")
    if not listener or not dot:
        return None
    if key in BROKER_CONFIGS:
        return listener.upper(), key
    mechanism, _, rest = key.partition(".")
    if mechanism.upper() in SASL_MECHANISMS and rest in BROKER_CONFIGS:
        return listener.upper(), key
    return None


class ConfigEntry(NamedTuple):
    """One broker config as DescribeConfigs shows it: Kafka's string form of the value
    (``None`` for null) and its source."""

    name: str
    value: str | None
    source: str


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
    unclean_leader_election_interval_ms = _Value[int]("unclean.leader.election.interval.ms")
    auto_leader_rebalance_enable = _Value[bool]("auto.leader.rebalance.enable")
    broker_rack = _Value[str | None]("broker.rack")
    leader_imbalance_check_interval_seconds = _Value[int]("leader.imbalance.check.interval.seconds")
    leader_imbalance_per_broker_percentage = _Value[int]("leader.imbalance.per.broker.percentage")
    broker_session_timeout_ms = _Value[int]("broker.session.timeout.ms")
    broker_heartbeat_interval_ms = _Value[int]("broker.heartbeat.interval.ms")
    quorum_election_timeout_ms = _Value[int]("controller.quorum.election.timeout.ms")
    quorum_fetch_timeout_ms = _Value[int]("controller.quorum.fetch.timeout.ms")
    quorum_election_backoff_max_ms = _Value[int]("controller.quorum.election.backoff.max.ms")
    quorum_request_timeout_ms = _Value[int]("controller.quorum.request.timeout.ms")
    metadata_log_segment_bytes = _Value[int]("metadata.log.segment.bytes")
    metadata_log_segment_ms = _Value[int]("metadata.log.segment.ms")
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
    producer_id_expiration_ms = _Value[int]("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms = _Value[int](
        "producer.id.expiration.check.interval.ms"
    )
    num_network_threads = _Value[int]("num.network.threads")
    num_io_threads = _Value[int]("num.io.threads")
    group_initial_rebalance_delay_ms = _Value[int]("group.initial.rebalance.delay.ms")
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
    grpc_listener_names: tuple[str, ...]
    log_dirs: tuple[Path, ...]
    metadata_log_dir: Path
    log_flush_interval_ms: int
    source_path: Path | None

    def __init__(
        self,
        props: Mapping[str, object] | None = None,
        *,
        source_path: Path | None = None,
        preset_keys: frozenset[str] = frozenset(),
    ) -> None:
        self.source_path = source_path
        # Keys Rillet set itself (the embedded default's), not the user: not reported as
        # inert settings (see inert_settings).
        self.preset_keys = preset_keys
        originals = {str(k): v for k, v in (props or {}).items() if v is not None}
        self.originals: Mapping[str, object] = types.MappingProxyType(originals)
        values: dict[str, Any] = {}
        unknown: dict[str, object] = {}
        per_listener: dict[str, dict[str, Any]] = {}
        for name, raw in originals.items():
            key = BROKER_CONFIGS.get(name)
            listener_key = _listener_prefixed(name)
            if listener_key is not None:
                listener, key_name = listener_key
                base = BROKER_CONFIGS.get(key_name) or BROKER_CONFIGS[key_name.partition(".")[2]]
                per_listener.setdefault(listener, {})[key_name] = parse_value(base, raw)
            elif key is None:
                unknown[name] = raw
                _log.warning("The configuration '%s' was supplied but isn't a known config.", name)
            else:
                values[name] = parse_value(key, raw)
        self.explicit: frozenset[str] = frozenset(values)
        for name, key in BROKER_CONFIGS.items():
            values.setdefault(name, key.default)
        self.unknown: Mapping[str, object] = types.MappingProxyType(unknown)
        # ``listener.name.<name>.<key>`` settings, by upper-cased listener name.
        self.listener_values: Mapping[str, Mapping[str, Any]] = types.MappingProxyType(per_listener)
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
        mode (broker and controller, the only voter), Kafka's protocol on localhost:9092
        (listener PLAINTEXT), Rillet's gRPC API on localhost:9094 (listener GRPC, also the
        inter-broker listener), the controller on localhost:9093, data in
        ``<data_dir>/kraft-combined-logs`` (``data_dir`` defaults to
        :func:`default_data_dir`).

        ``overrides`` replace any key. Overriding ``listeners`` drops the GRPC listener's
        presets (``advertised.listeners``, ``grpc.listener.names``,
        ``inter.broker.listener.name``) that are not overridden too, so the listeners given
        take Rillet's defaults for them: every broker listener serves gRPC."""
        base = Path(data_dir) if data_dir is not None else default_data_dir()
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@localhost:9093",
            "listeners": (
                "PLAINTEXT://localhost:9092,GRPC://localhost:9094,CONTROLLER://localhost:9093"
            ),
            "advertised.listeners": "PLAINTEXT://localhost:9092,GRPC://localhost:9094",
            "controller.listener.names": "CONTROLLER",
            "grpc.listener.names": "GRPC",
            "inter.broker.listener.name": "GRPC",
            "listener.security.protocol.map": (
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,GRPC:PLAINTEXT"
            ),
            "log.dirs": str(base / "kraft-combined-logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
        }
        overrides = overrides or {}
        if "listeners" in overrides:
            for key in _GRPC_LISTENER_PRESETS - frozenset(overrides):
                del props[key]
        preset = frozenset(props) - frozenset(overrides)
        props.update(overrides)
        return cls(props, preset_keys=preset)

    def updated(self, changes: Mapping[str, object | None]) -> BrokerConfig:
        """A new, validated config with ``changes`` applied (``None`` removes a key)."""
        props = dict(self.originals)
        for k, v in changes.items():
            if v is None:
                props.pop(k, None)
            else:
                props[k] = v
        return BrokerConfig(
            props,
            source_path=self.source_path,
            preset_keys=self.preset_keys - frozenset(changes),
        )

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
        """Every known key (sorted) with Kafka's string form of its value and its source;
        passwords are shown as null, as Kafka shows sensitive configs."""
        return [
            ConfigEntry(
                name,
                None
                if BROKER_CONFIGS[name].type == "password"
                else config_value_to_string(self._values[name]),
                self.source(name),
            )
            for name in sorted(self._values)
        ]

    def jaas_config(self, listener_name: str, mechanism: str) -> str | None:
        """The JAAS configuration of ``mechanism`` on ``listener_name``:
        ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else the listener's
        ``sasl.jaas.config``, else the broker-wide one."""
        mine = self.listener_values.get(listener_name.upper(), {})
        found = mine.get(f"{mechanism.lower()}.sasl.jaas.config") or mine.get("sasl.jaas.config")
        value: str | None = found or self._values["sasl.jaas.config"]
        return value

    def listener_config(self, listener_name: str, prefix: str) -> dict[str, Any]:
        """The keys starting with ``prefix`` (``"ssl."``) as ``listener_name`` sees them:
        its ``listener.name.<name>.`` settings over the broker-wide ones."""
        out = {k: v for k, v in self._values.items() if k.startswith(prefix)}
        for k, v in self.listener_values.get(listener_name.upper(), {}).items():
            if k.startswith(prefix):
                out[k] = v
        return out

    def inert_settings(self) -> list[str]:
        """The keys set here (by the user, not by Rillet's own defaults) that Rillet accepts
        but does not act on yet, sorted: see :data:`~rillet.config.broker_keys.INERT_KEYS`."""
        return sorted((self.explicit - self.preset_keys) & INERT_KEYS.keys())

    def inert_settings_warning(self) -> str | None:
        """One message naming every :meth:`inert_settings` key and what it waits for, or
        None when there is none; the server logs it once at start-up."""
        keys = self.inert_settings()
        if not keys:
            return None
        listed = ", ".join(f"{k} ({INERT_KEYS[k]})" for k in keys)
        return f"These settings are accepted but have no effect yet: {listed}"

    @property
    def topic_synonyms(self) -> Mapping[str, object]:
        """The broker-level topic-config synonyms set here (``log.segment.bytes``,
        ``log.retention.hours``, ...): pass as ``broker`` to :func:`resolve_topic_config` or as
        ``broker_config`` to the LogManager. Unset keys are left out, so topic configs keep
        Kafka's precedence (``.ms`` beats ``.minutes`` beats ``.hours``) and sources."""
        return {k: self._values[k] for k in sorted(self.explicit & TOPIC_SYNONYMS)}

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
    def grpc_listeners(self) -> tuple[Endpoint, ...]:
        """The broker listeners that serve Rillet's gRPC API (``grpc.listener.names``; all of
        them when it is empty)."""
        names = set(self.grpc_listener_names)
        return tuple(e for e in self.broker_listeners if not names or e.listener_name in names)

    @property
    def kafka_listeners(self) -> tuple[Endpoint, ...]:
        """The broker listeners that serve Kafka's binary protocol: those not in
        ``grpc.listener.names`` (none when it is empty)."""
        grpc = set(self.grpc_listeners)
        return tuple(e for e in self.broker_listeners if e not in grpc)

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
        self.grpc_listener_names = tuple(n.strip().upper() for n in v["grpc.listener.names"])
        self._check_grpc_listeners()

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
        self._refuse_unserved_security_protocols()

    def _refuse_unserved_security_protocols(self) -> None:
        """Listeners are served in the clear or over TLS, and client listeners (gRPC or
        Kafka's protocol) with SASL too: refuse a controller or inter-broker listener whose
        security protocol promises SASL (nodes do not authenticate to each other with SASL
        yet) rather than serve it without authentication."""
        controller = set(self.controller_listener_names)
        inter_broker = self.inter_broker_listener_name
        for key, endpoints in (
            ("listeners", self.listeners),
            ("advertised.listeners", self.advertised_listeners),
        ):
            for e in endpoints:
                node_to_node = e.listener_name in controller or e.listener_name == inter_broker
                sasl_served = e.security_protocol in _SASL_PROTOCOLS and not node_to_node
                if e.security_protocol not in _SERVED_PROTOCOLS and not sasl_served:
                    raise InvalidConfigurationError(
                        f"Invalid value {e} for configuration {key}: listener "
                        f"{e.listener_name} uses security protocol {e.security_protocol}, "
                        "which is not supported yet on it; PLAINTEXT and SSL listeners are "
                        "served, and SASL on client listeners (not the controller's or the "
                        "inter-broker one)"
                    )
        protocol = self._values["security.inter.broker.protocol"]
        if protocol not in _SERVED_PROTOCOLS:
            raise InvalidConfigurationError(
                f"Invalid value {protocol} for configuration security.inter.broker.protocol: "
                "only PLAINTEXT and SSL are supported yet"
            )

    def _check_grpc_listeners(self) -> None:
        """``grpc.listener.names`` names broker listeners, among them the inter-broker one
        (replication between Rillet brokers is gRPC)."""
        if not self.grpc_listener_names:
            return
        broker_names = {e.listener_name for e in self.broker_listeners}
        for name in self.grpc_listener_names:
            if name not in broker_names:
                raise InvalidConfigurationError(
                    f"grpc.listener.names contains {name}, which is not a broker listener in "
                    f"listeners ({', '.join(sorted(broker_names)) or 'none'})"
                )
        ibl = self.inter_broker_listener_name
        if ibl is not None and ibl not in self.grpc_listener_names:
            raise InvalidConfigurationError(
                f"inter.broker.listener.name {ibl} must be one of grpc.listener.names "
                f"({', '.join(self.grpc_listener_names)}): brokers replicate over gRPC"
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
