"""Broker configs (rillet.config.BrokerConfig)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from rillet.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigEntry,
    Endpoint,
    HostPort,
    default_data_dir,
    parse_value,
    resolve_topic_config,
)
from rillet.config.keys import LONG_MAX
from rillet.errors import InvalidConfigurationError

EXAMPLE = Path(__file__).resolve().parents[3] / "config" / "server.properties"

# The smallest valid config: one combined node.
MINIMAL: dict[str, object] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093",
}


def config(**overrides: object) -> BrokerConfig:
    """MINIMAL with overrides; keyword names use _ for . (None removes the key)."""
    props = dict(MINIMAL)
    for k, v in overrides.items():
        name = k.replace("_", ".")
        if v is None:
            props.pop(name, None)
        else:
            props[name] = v
    return BrokerConfig(props)


def with_props(**props: object) -> BrokerConfig:
    return BrokerConfig({**MINIMAL, **props})


# ---------------------------------------------------------------------------------------------
# defaults

KAFKA_DEFAULTS: dict[str, Any] = {
    "listeners": ["PLAINTEXT://:9092", "CONTROLLER://:9093"],
    "advertised.listeners": None,
    "controller.listener.names": ["CONTROLLER"],
    "listener.security.protocol.map": [
        "SASL_SSL:SASL_SSL",
        "PLAINTEXT:PLAINTEXT",
        "SSL:SSL",
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
    ],
    "inter.broker.listener.name": None,
    "security.inter.broker.protocol": "PLAINTEXT",
    "log.dirs": None,
    "log.dir": "/tmp/kafka-logs",
    "metadata.log.dir": None,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "auto.create.topics.enable": True,
    "offsets.topic.num.partitions": 50,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "socket.request.max.bytes": 104_857_600,
    "message.max.bytes": 1_048_588,
    "replica.lag.time.max.ms": 30_000,
    "replica.fetch.max.bytes": 1_048_576,
    "replica.fetch.wait.max.ms": 500,
    "unclean.leader.election.enable": False,
    "broker.session.timeout.ms": 9000,
    "broker.heartbeat.interval.ms": 2000,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "metadata.log.segment.bytes": 1_073_741_824,
    "metadata.max.retention.bytes": 104_857_600,
    "log.retention.check.interval.ms": 300_000,
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.flush.offset.checkpoint.interval.ms": 60_000,
    "log.flush.start.offset.checkpoint.interval.ms": 60_000,
    "num.network.threads": 3,
    "num.io.threads": 8,
    "group.initial.rebalance.delay.ms": 3000,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.check.interval.seconds": 300,
    "log.segment.bytes": 1_073_741_824,
    "log.roll.hours": 168,
    "log.roll.ms": None,
    "log.retention.hours": 168,
    "log.retention.minutes": None,
    "log.retention.ms": None,
    "log.retention.bytes": -1,
    "log.index.size.max.bytes": 10_485_760,
    "log.index.interval.bytes": 4096,
    "log.cleanup.policy": ["delete"],
    "log.cleaner.enable": True,
    "log.cleaner.min.cleanable.ratio": 0.5,
    "compression.type": "producer",
    "num.recovery.threads.per.data.dir": 1,
    "socket.send.buffer.bytes": 102_400,
    "socket.receive.buffer.bytes": 102_400,
}


@pytest.mark.parametrize(("key", "expected"), list(KAFKA_DEFAULTS.items()))
def test_defaults_are_kafkas(key: str, expected: object) -> None:
    c = config()
    assert c[key] == expected
    assert c.source(key) == "DEFAULT_CONFIG"


def test_typed_attributes_of_the_defaults() -> None:
    c = config()
    assert c.node_id == 1
    assert c["node.id"] == c["broker.id"] == 1
    assert c.process_roles == frozenset({"broker", "controller"})
    assert c.is_broker and c.is_controller
    assert dict(c.quorum_voters) == {1: HostPort("localhost", 9093)}
    assert c.controller_listener_names == ("CONTROLLER",)
    assert c.listeners == (
        Endpoint("PLAINTEXT", "", 9092, "PLAINTEXT"),
        Endpoint("CONTROLLER", "", 9093, "PLAINTEXT"),
    )
    assert c.broker_listeners == (Endpoint("PLAINTEXT", "", 9092),)
    assert c.controller_listeners == (Endpoint("CONTROLLER", "", 9093),)
    assert c.advertised_listeners == (Endpoint("PLAINTEXT", "", 9092),)
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.inter_broker_listener == Endpoint("PLAINTEXT", "", 9092)
    # an unset map still maps the controller listener, as Kafka does
    assert c.listener_security_protocol_map["CONTROLLER"] == "PLAINTEXT"
    assert c.log_dirs == (Path("/tmp/kafka-logs"),)
    assert c.metadata_log_dir == Path("/tmp/kafka-logs")
    assert c.all_log_dirs == (Path("/tmp/kafka-logs"),)
    assert c.log_flush_interval_ms == LONG_MAX
    assert c.num_partitions == 1
    assert c.default_replication_factor == 1
    assert c.offsets_topic_num_partitions == 50
    assert c.offsets_topic_replication_factor == 3
    assert c.socket_request_max_bytes == 104_857_600
    assert c.broker_session_timeout_ms == 9000
    assert c.broker_heartbeat_interval_ms == 2000
    assert c.quorum_election_timeout_ms == 1000
    assert c.quorum_fetch_timeout_ms == 2000
    assert c.log_retention_check_interval_ms == 300_000
    assert c.auto_create_topics_enable is True
    assert c.unknown == {}
    assert c.explicit == set(MINIMAL)


def test_every_broker_default_passes_its_own_validation() -> None:
    for name, key in BROKER_CONFIGS.items():
        assert key.name == name
        if key.default is not None and name not in ("node.id", "broker.id"):
            assert parse_value(key, key.default) == key.default, name


def test_every_topic_synonym_is_a_broker_key() -> None:
    synonyms = {s for key in TOPIC_CONFIGS.values() for s, _ in key.synonyms}
    assert synonyms <= BROKER_CONFIGS.keys()


def test_topic_configs_follow_the_broker_synonyms() -> None:
    c = config()
    assert c.topic_synonyms == {}
    assert c.topic_config().values == resolve_topic_config().values
    c = with_props(**{"log.retention.minutes": "5", "log.segment.bytes": 1 << 20})
    assert c.topic_synonyms == {"log.retention.minutes": 5, "log.segment.bytes": 1 << 20}
    tc = c.topic_config({"segment.bytes": "4096"})
    assert tc["retention.ms"] == 5 * 60_000
    assert tc.sources["retention.ms"] == "STATIC_BROKER_CONFIG"
    assert tc["segment.bytes"] == 4096
    assert tc["retention.bytes"] == -1
    assert tc.sources["retention.bytes"] == "DEFAULT_CONFIG"


def test_describe_and_source() -> None:
    c = with_props(**{"num.partitions": "3", "log.cleaner.enable": "false"})
    entries = {e.name: e for e in c.describe()}
    assert entries["num.partitions"] == ConfigEntry("num.partitions", "3", "STATIC_BROKER_CONFIG")
    assert entries["log.cleaner.enable"].value == "false"
    assert entries["listeners"] == ConfigEntry(
        "listeners", "PLAINTEXT://:9092,CONTROLLER://:9093", "DEFAULT_CONFIG"
    )
    assert entries["log.dirs"].value is None
    assert [e.name for e in c.describe()] == sorted(BROKER_CONFIGS)
    assert "num.partitions=3" in repr(c)


def test_values_are_parsed_from_python_values_too(tmp_path: Path) -> None:
    c = with_props(
        **{
            "num.partitions": 4,
            "auto.create.topics.enable": False,
            "log.dirs": [tmp_path / "a", str(tmp_path / "b")],
            "metadata.log.dir": tmp_path / "meta",
            "listeners": ["PLAINTEXT://:9092", "CONTROLLER://:9093"],
            "log.cleaner.min.cleanable.ratio": 0.25,
            "advertised.listeners": None,  # None is unset
        }
    )
    assert c.num_partitions == 4
    assert c.auto_create_topics_enable is False
    assert c.log_dirs == (tmp_path / "a", tmp_path / "b")
    assert c.metadata_log_dir == tmp_path / "meta"
    assert c.all_log_dirs == (tmp_path / "a", tmp_path / "b", tmp_path / "meta")
    assert c["log.cleaner.min.cleanable.ratio"] == 0.25
    assert "advertised.listeners" not in c.explicit


def test_values_are_read_only() -> None:
    c = config()
    with pytest.raises(TypeError):
        c.values["num.partitions"] = 5  # type: ignore[index]


def test_updated_returns_a_new_validated_config() -> None:
    c = with_props(**{"num.partitions": "2"})
    d = c.updated({"num.partitions": "5", "log.retention.hours": "1"})
    assert (c.num_partitions, d.num_partitions) == (2, 5)
    assert d.topic_config()["retention.ms"] == 3_600_000
    assert d.updated({"num.partitions": None}).num_partitions == 1
    with pytest.raises(InvalidConfigurationError, match=r"num\.partitions"):
        c.updated({"num.partitions": "0"})


# ---------------------------------------------------------------------------------------------
# bad values name the key


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("process.roles", "broker,zookeeper"),
        ("process.roles", "Broker"),
        ("node.id", "one"),
        ("node.id", "-2"),
        ("node.id", str(2**31)),
        ("broker.id", "-1"),
        ("controller.quorum.voters", "1@localhost"),
        ("controller.quorum.voters", "localhost:9093"),
        ("controller.quorum.voters", "x@localhost:9093"),
        ("controller.quorum.voters", "1@:9093"),
        ("controller.quorum.voters", "1@localhost:0"),
        ("controller.quorum.voters", "1@localhost:70000"),
        ("controller.quorum.voters", "1@localhost:9093,1@other:9093"),
        ("controller.quorum.voters", "1@a@localhost:9093"),
        ("controller.quorum.voters", "-1@localhost:9093"),
        ("listeners", "PLAINTEXT:/:9092"),
        ("listeners", "PLAINTEXT://:port"),
        ("listeners", "PLAINTEXT://localhost"),
        ("listeners", "PLAINTEXT://:70000"),
        ("listeners", "://:9092"),
        ("advertised.listeners", "PLAINTEXT//localhost:9092"),
        ("listener.security.protocol.map", "PLAINTEXT"),
        ("listener.security.protocol.map", "PLAINTEXT:TLS"),
        ("listener.security.protocol.map", "A:PLAINTEXT,A:SSL"),
        ("security.inter.broker.protocol", "TLS"),
        ("num.partitions", "0"),
        ("num.partitions", "many"),
        ("default.replication.factor", "0"),
        ("min.insync.replicas", "0"),
        ("auto.create.topics.enable", "yes"),
        ("offsets.topic.num.partitions", "0"),
        ("offsets.topic.replication.factor", "0"),
        ("offsets.topic.replication.factor", "40000"),  # a short
        ("transaction.state.log.replication.factor", "0"),
        ("socket.request.max.bytes", "0"),
        ("message.max.bytes", "-1"),
        ("replica.lag.time.max.ms", "soon"),
        ("replica.fetch.max.bytes", "-1"),
        ("replica.fetch.wait.max.ms", "1.5"),
        ("unclean.leader.election.enable", "1"),
        ("broker.session.timeout.ms", "0"),
        ("broker.heartbeat.interval.ms", "0"),
        ("controller.quorum.election.timeout.ms", "x"),
        ("controller.quorum.fetch.timeout.ms", "x"),
        ("controller.quorum.election.backoff.max.ms", "x"),
        ("metadata.log.segment.bytes", "11"),
        ("metadata.max.retention.bytes", "x"),
        ("log.retention.check.interval.ms", "0"),
        ("log.flush.interval.messages", "0"),
        ("log.flush.interval.ms", "-1"),
        ("log.flush.scheduler.interval.ms", "x"),
        ("log.flush.offset.checkpoint.interval.ms", "-1"),
        ("log.flush.start.offset.checkpoint.interval.ms", "-1"),
        ("num.network.threads", "0"),
        ("num.io.threads", "0"),
        ("group.initial.rebalance.delay.ms", "x"),
        ("auto.leader.rebalance.enable", "x"),
        ("leader.imbalance.check.interval.seconds", "0"),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
        ("log.cleaner.min.cleanable.ratio", "half"),
        ("log.segment.bytes", "13"),
        ("log.roll.hours", "0"),
        ("log.roll.ms", "0"),
        ("log.retention.hours", "x"),
        ("log.retention.minutes", "1.5"),
        ("log.retention.ms", "-5h"),
        ("log.retention.bytes", "x"),
        ("log.index.size.max.bytes", "3"),
        (
            "log.index.size.max.bytes",
            "8",
        ),  # fine as a broker key, too small for segment.index.bytes
        ("log.index.interval.bytes", "-1"),
        ("log.message.timestamp.type", "Now"),
        ("log.cleanup.policy", "keep"),
        ("compression.type", "brotli"),
        ("log.preallocate", "maybe"),
        ("log.cleaner.delete.retention.ms", "-1"),
        ("log.segment.delete.delay.ms", "-1"),
    ],
)
def test_bad_value_names_the_key(key: str, raw: str) -> None:
    with pytest.raises(InvalidConfigurationError) as e:
        with_props(**{key: raw})
    assert str(e.value).startswith("[INVALID_CONFIG] Invalid value ")
    assert raw.split(",")[-1] in str(e.value)
    assert f"for configuration {key}: " in str(e.value)
    assert e.value.code == 40


def test_bad_value_says_what_was_expected() -> None:
    with pytest.raises(InvalidConfigurationError, match="Expected value to be a 32-bit integer"):
        with_props(**{"num.partitions": "x"})
    with pytest.raises(InvalidConfigurationError, match="Value must be at least 1"):
        with_props(**{"num.partitions": "0"})
    with pytest.raises(
        InvalidConfigurationError, match="String must be one of: broker, controller"
    ):
        with_props(**{"process.roles": "worker"})
    with pytest.raises(InvalidConfigurationError, match=r"\{id\}@\{host\}:\{port\}"):
        with_props(**{"controller.quorum.voters": "localhost:9093"})
    with pytest.raises(InvalidConfigurationError, match="Unable to parse x to a broker endpoint"):
        with_props(**{"listeners": "x"})
    with pytest.raises(InvalidConfigurationError, match="between 0 and 1"):
        with_props(**{"log.cleaner.min.cleanable.ratio": "2"})
    with pytest.raises(InvalidConfigurationError, match="16-bit integer"):
        with_props(**{"offsets.topic.replication.factor": "x"})


# ---------------------------------------------------------------------------------------------
# unknown keys


def test_unknown_key_is_warned_about_and_kept(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rillet.config"):
        c = with_props(**{"no.such.key": "1", "segment.bytes": "4096"})
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert {r.name for r in warned} == {"rillet.config"}
    messages = [r.getMessage() for r in warned]
    assert "The configuration 'no.such.key' was supplied but isn't a known config." in messages
    assert any("'segment.bytes'" in m for m in messages)  # a topic key is not a broker key
    assert dict(c.unknown) == {"no.such.key": "1", "segment.bytes": "4096"}
    assert c.get("no.such.key") == "1"
    assert c.get("absent", "dflt") == "dflt"
    assert c.source("no.such.key") == "STATIC_BROKER_CONFIG"
    assert c.topic_config()["segment.bytes"] == 1 << 30  # not read as a broker synonym
    with pytest.raises(KeyError):
        c["no.such.key"]


def test_known_keys_are_not_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="rillet.config"):
        BrokerConfig.from_file(EXAMPLE)
        BrokerConfig.embedded_default("/tmp/x")
    assert caplog.records == []


# ---------------------------------------------------------------------------------------------
# required keys and cross-key checks


@pytest.mark.parametrize(
    ("props", "match"),
    [
        ({"process.roles": None}, 'Missing required configuration "process.roles"'),
        ({"process.roles": ""}, 'Missing required configuration "process.roles"'),
        ({"process.roles": "broker,broker"}, "Duplicate role names"),
        ({"node.id": None}, 'Missing required configuration "node.id"'),
        ({"node.id": "1", "broker.id": "2"}, "You must set `node.id` to the same value"),
        ({"controller.quorum.voters": None}, "controller.quorum.voters must contain"),
        ({"controller.quorum.voters": " , "}, "controller.quorum.voters must contain"),
        (
            {"controller.quorum.voters": "2@localhost:9093"},
            r"the node id 1 must be included in the set of voters "
            r"controller.quorum.voters=\{2\}",
        ),
        (
            {"process.roles": "broker", "listeners": "PLAINTEXT://:9092"},
            r"just the 'broker' role, the node id 1 must not be included in the set of voters",
        ),
        ({"controller.listener.names": ""}, "controller.listener.names must contain"),
        (
            {"listeners": "PLAINTEXT://:9092"},
            "controller.listener.names must contain at least one value appearing in the "
            "'listeners' configuration",
        ),
        (
            {
                "controller.listener.names": "C",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            },
            "controller.listener.names must contain at least one value appearing",
        ),
        (
            {"listeners": "CONTROLLER://:9093"},
            "A broker needs a listener that is not a controller listener",
        ),
        (
            {"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9094,CONTROLLER://:9093"},
            "Each listener must have a different name",
        ),
        (
            {"listeners": "PLAINTEXT://:9092,CONTROLLER://localhost:9092"},
            "Each listener must have a different port",
        ),
        (
            {"listeners": "PLAINTEXT://:9092,INTERNAL://:9094,CONTROLLER://:9093"},
            "No security protocol defined for listener INTERNAL in listeners",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"},
            "No security protocol defined for listener CONTROLLER",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "cannot use the nonroutable meta-address 0.0.0.0",
        ),
        (
            {"advertised.listeners": "SSL://host:9092"},
            "advertised.listeners listener names must be equal to or a subset of the ones "
            "defined in listeners. Found SSL",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://h:9092,CONTROLLER://h:9093"},
            "advertised.listeners config must not contain KRaft controller listeners",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://h:9092,PLAINTEXT://g:9092"},
            "Each listener must have a different name, advertised.listeners",
        ),
        (
            {"inter.broker.listener.name": "SSL"},
            r"inter.broker.listener.name must be a listener name defined in "
            r"advertised.listeners \(found SSL\)",
        ),
        (
            {"inter.broker.listener.name": "CONTROLLER"},
            "inter.broker.listener.name must be a listener name defined in advertised.listeners",
        ),
        (
            {"security.inter.broker.protocol": "SSL"},
            r"advertised.listeners \(found SSL\)",
        ),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "Only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        ({"log.dirs": ""}, "At least one log directory must be defined via log.dirs or log.dir"),
        ({"log.dir": " "}, "At least one log directory must be defined"),
        ({"log.dirs": "/a,/b,/a/"}, "Duplicate log directory found in log.dirs: /a"),
        (
            {"replica.fetch.wait.max.ms": "40000"},
            "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms",
        ),
        (
            {"replica.lag.time.max.ms": "100"},
            "replica.fetch.wait.max.ms should always be less than or equal to "
            "replica.lag.time.max.ms",
        ),
        (
            {"broker.heartbeat.interval.ms": "9000"},
            "broker.heartbeat.interval.ms must be less than broker.session.timeout.ms",
        ),
        (
            {"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"},
            "group.max.session.timeout.ms must be at least group.min.session.timeout.ms",
        ),
    ],
)
def test_cross_key_checks(props: dict[str, object], match: str) -> None:
    merged = {**MINIMAL, **props}
    with pytest.raises(InvalidConfigurationError, match=match) as e:
        BrokerConfig({k: v for k, v in merged.items() if v is not None})
    assert e.value.code == 40


def test_broker_id_is_an_alias_of_node_id() -> None:
    c = config(node_id=None, broker_id="1")
    assert c.node_id == 1
    assert c["node.id"] == c["broker.id"] == 1
    assert with_props(**{"broker.id": "1"}).node_id == 1


def test_a_broker_only_node() -> None:
    c = BrokerConfig(
        {
            "process.roles": "broker",
            "node.id": "4",
            "controller.quorum.voters": "1@c1:9093,2@c2:9093,3@[::1]:9093",
            "listeners": "PLAINTEXT://0.0.0.0:19092,INTERNAL://[::1]:19093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "advertised.listeners": "PLAINTEXT://b4.example.com:19092,INTERNAL://[::1]:19093",
            "inter.broker.listener.name": "internal",
        }
    )
    assert c.is_broker and not c.is_controller
    assert dict(c.quorum_voters) == {
        1: HostPort("c1", 9093),
        2: HostPort("c2", 9093),
        3: HostPort("::1", 9093),
    }
    assert str(c.quorum_voters[3]) == "[::1]:9093"
    assert c.controller_listeners == ()
    assert [str(e) for e in c.broker_listeners] == [
        "PLAINTEXT://0.0.0.0:19092",
        "INTERNAL://[::1]:19093",
    ]
    assert c.inter_broker_listener_name == "INTERNAL"
    assert c.inter_broker_listener == Endpoint("INTERNAL", "::1", 19093)
    assert c.advertised_listeners[0].address == "b4.example.com:19092"


def test_a_controller_only_node() -> None:
    c = BrokerConfig(
        {
            "process.roles": "controller",
            "node.id": "1",
            "controller.quorum.voters": "1@c1:9093,2@c2:9093,3@c3:9093",
            "listeners": "CONTROLLER://:9093",
        }
    )
    assert c.is_controller and not c.is_broker
    assert c.controller_listeners == (Endpoint("CONTROLLER", "", 9093),)
    assert c.broker_listeners == ()
    assert c.advertised_listeners == ()
    assert c.inter_broker_listener_name is None
    with pytest.raises(InvalidConfigurationError, match="must only contain KRaft controller"):
        c.updated({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"})
    with pytest.raises(InvalidConfigurationError, match="node id 4 must be included"):
        c.updated({"node.id": "4"})


def test_listener_forms() -> None:
    c = with_props(
        listeners="plaintext://[::1]:0,CONTROLLER://127.0.0.1:9093",
        **{"advertised.listeners": "PLAINTEXT://localhost:0"},
    )
    assert c.listeners[0] == Endpoint("PLAINTEXT", "::1", 0)  # names are upper-cased
    assert c.listeners[0].bind_address == "[::1]:0"
    assert c.listeners[1].bind_address == "127.0.0.1:9093"
    assert Endpoint("PLAINTEXT", "", 9092).bind_address == "[::]:9092"
    assert Endpoint("PLAINTEXT", "", 9092).address == ":9092"
    assert str(Endpoint("X", "::1", 1)) == "X://[::1]:1"
    # port 0 (any free port) may repeat
    with_props(listeners="PLAINTEXT://:0,CONTROLLER://:0")


def test_log_dirs_wins_over_log_dir() -> None:
    c = with_props(**{"log.dir": "/one", "log.dirs": "/two, /three"})
    assert c.log_dirs == (Path("/two"), Path("/three"))
    assert c.metadata_log_dir == Path("/two")
    assert with_props(**{"log.dir": "/one"}).log_dirs == (Path("/one"),)
    c = with_props(**{"log.dirs": "/two", "metadata.log.dir": "/meta"})
    assert c.metadata_log_dir == Path("/meta")
    assert c.all_log_dirs == (Path("/two"), Path("/meta"))
    c = with_props(**{"log.dirs": "/two,/three", "metadata.log.dir": "/three/"})
    assert c.all_log_dirs == (Path("/two"), Path("/three"))


def test_log_dirs_expand_the_home_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert with_props(**{"log.dirs": "~/logs"}).log_dirs == (tmp_path / "logs",)


def test_log_flush_interval_ms_falls_back_to_the_scheduler_interval() -> None:
    assert with_props(**{"log.flush.scheduler.interval.ms": "5"}).log_flush_interval_ms == 5
    c = with_props(**{"log.flush.scheduler.interval.ms": "5", "log.flush.interval.ms": "7"})
    assert c.log_flush_interval_ms == 7


# ---------------------------------------------------------------------------------------------
# embedded default and data dir


def test_embedded_default(tmp_path: Path) -> None:
    c = BrokerConfig.embedded_default(tmp_path)
    assert c.process_roles == {"broker", "controller"}
    assert c.node_id == 1
    assert dict(c.quorum_voters) == {1: HostPort("localhost", 9093)}
    assert [str(e) for e in c.listeners] == [
        "PLAINTEXT://localhost:9092",
        "GRPC://localhost:9094",
        "CONTROLLER://localhost:9093",
    ]
    assert [str(e) for e in c.advertised_listeners] == [
        "PLAINTEXT://localhost:9092",
        "GRPC://localhost:9094",
    ]
    # Kafka's protocol where Kafka users look for it; gRPC beside it, replicating.
    assert [str(e) for e in c.kafka_listeners] == ["PLAINTEXT://localhost:9092"]
    assert [str(e) for e in c.grpc_listeners] == ["GRPC://localhost:9094"]
    assert c.controller_listener_names == ("CONTROLLER",)
    assert c.inter_broker_listener_name == "GRPC"
    assert c.log_dirs == (tmp_path / "kraft-combined-logs",)
    assert c.metadata_log_dir == tmp_path / "kraft-combined-logs"
    assert c.offsets_topic_replication_factor == 1  # a single node can host the offsets topic
    assert c.transaction_state_log_replication_factor == 1
    assert c["transaction.state.log.min.isr"] == 1


def test_embedded_default_overrides(tmp_path: Path) -> None:
    c = BrokerConfig.embedded_default(
        tmp_path,
        {
            "listeners": "PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093",
            "advertised.listeners": "PLAINTEXT://localhost:19092",
            "controller.quorum.voters": "1@localhost:19093",
            "num.partitions": 3,
        },
    )
    assert c.broker_listeners[0].port == 19092
    assert c.num_partitions == 3
    # Listeners given replace the GRPC listener's presets: all of them serve gRPC.
    assert [str(e) for e in c.advertised_listeners] == ["PLAINTEXT://localhost:19092"]
    assert c.grpc_listeners == c.broker_listeners and not c.kafka_listeners
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_embedded_default_uses_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "rillet"
    c = BrokerConfig.embedded_default()
    assert c.log_dirs == (tmp_path / "xdg" / "rillet" / "kraft-combined-logs",)


@pytest.mark.parametrize("xdg", [None, "", "relative/dir"])
def test_data_dir_without_a_usable_xdg_data_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str | None
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
    assert default_data_dir() == tmp_path / ".local" / "share" / "rillet"


# ---------------------------------------------------------------------------------------------
# the shipped example


def test_the_example_server_properties() -> None:
    c = BrokerConfig.from_file(EXAMPLE)
    assert c.unknown == {}
    assert c.node_id == 1
    assert c.process_roles == {"broker", "controller"}
    assert dict(c.quorum_voters) == {1: HostPort("localhost", 9093)}
    assert c.log_dirs == (Path("/tmp/rillet-combined-logs"),)
    assert [str(e) for e in c.listeners] == [
        "PLAINTEXT://:9092",
        "GRPC://:9094",
        "CONTROLLER://:9093",
    ]
    assert [str(e) for e in c.advertised_listeners] == [
        "PLAINTEXT://localhost:9092",
        "GRPC://localhost:9094",
    ]
    # The embedded default's shape: Kafka's protocol on 9092, gRPC (and replication) on 9094.
    assert [e.listener_name for e in c.kafka_listeners] == ["PLAINTEXT"]
    assert [e.listener_name for e in c.grpc_listeners] == ["GRPC"]
    assert c.inter_broker_listener_name == "GRPC"
    assert c.num_partitions == 1
    assert c.offsets_topic_replication_factor == 1
    assert c.topic_config()["retention.ms"] == 168 * 3_600_000
    text = EXAMPLE.read_text()
    assert text.count("\n#") > 40  # commented like Kafka's


# ---------------------------------------------------------------------------------------------
# settings that name what does not exist yet: refused when unsafe, warned about when inert


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {
                "listeners": "CLIENTS://:9092,CONTROLLER://:9093",
                "listener.security.protocol.map": "CLIENTS:SASL_SSL,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "CLIENTS",
            },
            "Invalid value CLIENTS://:9092 for configuration listeners: listener CLIENTS uses "
            "security protocol SASL_SSL",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            },
            "Invalid value CONTROLLER://:9093 for configuration listeners: listener CONTROLLER "
            "uses security protocol SASL_PLAINTEXT",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://:9092,CONTROLLER://:9093",
                "listener.security.protocol.map": "SASL_PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
            },
            "Invalid value SASL_PLAINTEXT for configuration security.inter.broker.protocol: only "
            "PLAINTEXT and SSL are supported yet",
        ),
    ],
)
def test_sasl_on_node_to_node_listeners_is_refused_not_served_without_authentication(
    props: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        with_props(**props)
    assert info.value.message.startswith(message)


def test_sasl_on_a_grpc_client_listener_is_served() -> None:
    c = with_props(listeners="PLAINTEXT://:9092,CONTROLLER://:9093,SASL_SSL://:9094")
    assert [e.listener_name for e in c.grpc_listeners] == ["PLAINTEXT", "SASL_SSL"]
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_security_protocols_mapped_but_unused_are_fine() -> None:
    c = with_props(
        **{"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL"}
    )
    assert {e.security_protocol for e in c.listeners} == {"PLAINTEXT"}


def test_compaction_is_a_broker_default_cleanup_policy() -> None:
    c = with_props(**{"log.cleanup.policy": "compact"})
    assert c.topic_config()["cleanup.policy"] == ["compact"]
    assert c.topic_config().log_config().compact


def test_inert_settings_are_the_ones_the_user_set(tmp_path: Path) -> None:
    assert config().inert_settings() == []
    assert config().inert_settings_warning() is None
    c = with_props(
        **{
            "auto.leader.rebalance.enable": "false",
            "controlled.shutdown.enable": "false",
            "transaction.max.timeout.ms": "60000",  # the transaction coordinator acts on it
            "log.cleaner.threads": "2",  # the log cleaner acts on it
            "replica.fetch.max.bytes": "1048576",
            "num.partitions": "3",
        }
    )
    assert c.inert_settings() == ["controlled.shutdown.enable"]
    assert c.inert_settings_warning() == (
        "These settings are accepted but have no effect yet: "
        "controlled.shutdown.enable (turning controlled shutdown off)"
    )
    # The embedded default sets a few keys itself; none of them is inert.
    embedded = BrokerConfig.embedded_default(tmp_path)
    assert "transaction.state.log.replication.factor" in embedded.explicit
    assert embedded.inert_settings() == []
    tuned = BrokerConfig.embedded_default(
        tmp_path, {"transaction.state.log.replication.factor": "3"}
    )
    assert tuned.inert_settings() == []
    assert tuned.updated({"controlled.shutdown.enable": "false"}).inert_settings() == [
        "controlled.shutdown.enable"
    ]
    assert embedded.updated({"num.partitions": "2"}).inert_settings() == []
    # The shipped example sets Kafka's single-node transaction settings, which take effect.
    assert BrokerConfig.from_file(EXAMPLE).inert_settings() == []


def test_grpc_listener_names_split_broker_listeners_between_grpc_and_kafkas_protocol() -> None:
    two = {
        "listeners": "PLAINTEXT://:9092,GRPC://:9095,CONTROLLER://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,GRPC:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }
    # Unset: every broker listener serves gRPC, as before the Kafka protocol existed.
    c = with_props(**two)
    assert [e.listener_name for e in c.grpc_listeners] == ["PLAINTEXT", "GRPC"]
    assert c.kafka_listeners == ()
    c = with_props(**two, **{"grpc.listener.names": "grpc", "inter.broker.listener.name": "GRPC"})
    assert c.grpc_listener_names == ("GRPC",)
    assert [e.listener_name for e in c.grpc_listeners] == ["GRPC"]
    assert [e.listener_name for e in c.kafka_listeners] == ["PLAINTEXT"]
    with pytest.raises(InvalidConfigurationError, match="GRPC, which is not a broker listener"):
        with_props(**{"grpc.listener.names": "GRPC"})
    with pytest.raises(InvalidConfigurationError, match="CONTROLLER, which is not a broker"):
        with_props(**two, **{"grpc.listener.names": "GRPC,CONTROLLER"})
    with pytest.raises(
        InvalidConfigurationError,
        match=r"inter\.broker\.listener\.name PLAINTEXT must be one of grpc\.listener\.names",
    ):
        with_props(**two, **{"grpc.listener.names": "GRPC"})
