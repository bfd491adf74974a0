"""Pure helpers of ``rillet configs`` (Kafka's kafka-configs.sh): --add-config parsing with
square brackets, --delete-config, entity flags, and Kafka's synonyms and output lines."""

from __future__ import annotations

import argparse

import pytest

from rillet.cli import configs
from rillet.cli.configs import (
    UsageError,
    broker_config_synonyms,
    format_entry,
    parse_add_config,
    parse_delete_config,
    resolve_entities,
    topic_synonyms,
    validate_keys,
)
from rillet.cli.main import main


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    configs.add_arguments(p)
    return p.parse_args(["--bootstrap-server", "localhost:9092", *argv])


# -- --add-config -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("retention.ms=1000", {"retention.ms": "1000"}),
        ("a=1,b=2", {"a": "1", "b": "2"}),
        ("k1=v1,k2=[v1,v2,v2],k3=v3", {"k1": "v1", "k2": "v1,v2,v2", "k3": "v3"}),
        ("cleanup.policy=[compact,delete]", {"cleanup.policy": "compact,delete"}),
        (" a = 1 , b = 2 ", {"a": "1", "b": "2"}),
        ("ssl.endpoint.identification.algorithm=", {"ssl.endpoint.identification.algorithm": ""}),
        ("k=[a=b]", {"k": "a=b"}),
        ("a=1,a=2", {"a": "2"}),
        ("k=[x],j=[y,z]", {"k": "x", "j": "y,z"}),
    ],
)
def test_add_config_as_kafka_splits_it(text: str, expected: dict[str, str]) -> None:
    assert parse_add_config(text) == expected


@pytest.mark.parametrize("text", ["a", "a=1,b", "a=b=c", "a=1,,b=2"])
def test_add_config_refuses_what_kafka_refuses(text: str) -> None:
    with pytest.raises(UsageError, match='must be in the format "key=val"'):
        parse_add_config(text)


def test_delete_config_splits_trims_and_dedups() -> None:
    assert parse_delete_config(["a, b", "c,a", ""]) == ["a", "b", "c"]
    assert parse_delete_config(None) == []


def test_config_keys_use_kafkas_characters() -> None:
    validate_keys(["retention.ms", "a-b_c$D9"])
    with pytest.raises(UsageError, match="Invalid character found for config key: a b"):
        validate_keys(["a b"])


# -- entity flags -------------------------------------------------------------------------------


def test_entity_from_generic_flags_and_shortcuts() -> None:
    generic = args("--describe", "--entity-type", "topics", "--entity-name", "e")
    assert resolve_entities(generic) == [("topics", "e")]
    assert resolve_entities(args("--describe", "--topic", "e")) == [("topics", "e")]
    assert resolve_entities(args("--describe", "--broker", "1")) == [("brokers", "1")]
    assert resolve_entities(args("--describe", "--entity-type", "topics")) == [("topics", None)]


def test_quota_entities_pair_users_with_clients_users_first() -> None:
    both = args("--alter", "--entity-type", "clients", "--entity-name", "app",
                "--entity-type", "users", "--entity-default")  # fmt: skip
    assert resolve_entities(both) == [("users", ""), ("clients", "app")]
    assert resolve_entities(args("--describe", "--client", "app", "--user", "alice")) == [
        ("users", "alice"),
        ("clients", "app"),
    ]
    assert resolve_entities(args("--describe", "--user-defaults")) == [("users", "")]
    assert resolve_entities(args("--describe", "--entity-type", "clients")) == [("clients", None)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--describe"], "At least one entity type must be specified"),
        (["--describe", "--topic", "a", "--entity-type", "topics"], "specific entity flags"),
        (["--describe", "--entity-type", "ips", "--entity-name", "u"], "not supported"),
        (["--describe", "--entity-name", "u"], "At least one entity type"),
        (
            ["--describe", "--entity-type", "users", "--entity-name", "a", "--entity-name", "b"],
            "must follow an --entity-type",
        ),
        (["--describe", "--user", "a", "--user-defaults"], "Only one of --user"),
        (["--describe", "--entity-type", "users", "--entity-type", "users"], "Duplicate entity"),
        (["--describe", "--topic", "a", "--user", "b"], "may be specified together"),
        (["--describe", "--entity-type", "nonsense"], "Invalid entity type nonsense"),
        (["--describe", "--broker", "one"], "must be a valid integer broker id, but it is: one"),
        (["--describe", "--entity-type", "brokers", "--entity-default"], "not supported"),
        (["--alter", "--broker-defaults"], "not supported"),
        (["--describe", "--entity-type", "topics", "--entity-default"], "must not be specified"),
        (["--describe", "--topic", "a", "--broker", "1"], "may be specified together"),
    ],
)
def test_entity_flags_refused(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        resolve_entities(args(*argv))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--describe", "--topic", "t", "--add-config", "a=1"], "can't be used with option"),
        (["--alter", "--entity-type", "topics"], "An entity name must be specified with --alter"),
        (["--alter", "--topic", "t"], "At least one of --add-config"),
        (
            ["--alter", "--topic", "t", "--add-config", "a=1", "--add-config-file", "f"],
            "Only one of --add-config or --add-config-file",
        ),
    ],
)
def test_usage_errors_exit_1_before_connecting(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    # Port 1: nothing listens there; these must fail before any request.
    assert main(["configs", "--bootstrap-server", "localhost:1", *argv]) == 1
    assert message in capsys.readouterr().err


# -- synonyms and output ------------------------------------------------------------------------


def test_topic_synonyms_as_kafka_lists_them() -> None:
    broker = {"log.segment.bytes": ("1073741824", "DEFAULT_CONFIG")}
    assert topic_synonyms("segment.bytes", "50", "DYNAMIC_TOPIC_CONFIG", broker) == [
        ("DYNAMIC_TOPIC_CONFIG", "segment.bytes", "50"),
        ("DEFAULT_CONFIG", "log.segment.bytes", "1073741824"),
    ]
    # log.retention.ms has no default, so Kafka drops the .hours default that follows it.
    assert topic_synonyms("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", {}) == [
        ("DYNAMIC_TOPIC_CONFIG", "retention.ms", "1000")
    ]
    static = {"log.retention.ms": ("5000", "STATIC_BROKER_CONFIG")}
    assert topic_synonyms("retention.ms", "5000", "STATIC_BROKER_CONFIG", static) == [
        ("STATIC_BROKER_CONFIG", "log.retention.ms", "5000"),
        ("DEFAULT_CONFIG", "log.retention.hours", "168"),
    ]
    assert topic_synonyms("max.message.bytes", "1048588", "DEFAULT_CONFIG", {}) == [
        ("DEFAULT_CONFIG", "message.max.bytes", "1048588")
    ]


def test_broker_synonyms_follow_the_group() -> None:
    described = {"log.retention.hours": ("48", "DYNAMIC_BROKER_CONFIG")}
    assert broker_config_synonyms("log.retention.hours", described) == [
        ("DYNAMIC_BROKER_CONFIG", "log.retention.hours", "48"),
        ("DEFAULT_CONFIG", "log.retention.hours", "168"),
    ]
    assert broker_config_synonyms("log.retention.ms", {}) == []
    assert broker_config_synonyms("num.io.threads", {}) == [
        ("DEFAULT_CONFIG", "num.io.threads", "8")
    ]


def test_describe_line_is_kafkas() -> None:
    line = format_entry(
        "retention.ms", "100000", [("DYNAMIC_TOPIC_CONFIG", "retention.ms", "100000")]
    )
    assert line == (
        "  retention.ms=100000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=100000}"
    )
    assert format_entry("log.retention.ms", None, []) == (
        "  log.retention.ms=null sensitive=false synonyms={}"
    )
    two = format_entry("a", "1", [("DYNAMIC_TOPIC_CONFIG", "a", "1"), ("DEFAULT_CONFIG", "b", "2")])
    assert two.endswith("synonyms={DYNAMIC_TOPIC_CONFIG:a=1, DEFAULT_CONFIG:b=2}")
