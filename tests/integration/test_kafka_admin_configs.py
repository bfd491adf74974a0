"""Kafka's config api keys on the Kafka listener (``server/kafka/admin_configs.py``):
DescribeConfigs with Kafka's sources, synonyms and documentation; IncrementalAlterConfigs
and AlterConfigs on topics and brokers, validated as Kafka's broker validates them, with
``validate_only``. Outcomes are read back with DescribeConfigs, not from the answers.

One broker serves the module; each test uses topics of its own."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from rillet import errors
from tests.support.kafka_admin import (
    ALTER_CONFIGS,
    APPEND,
    BROKER,
    BROKER_LOGGER,
    DEFAULT_CONFIG,
    DELETE,
    DESCRIBE_CONFIGS,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    INCREMENTAL_ALTER_CONFIGS,
    INVALID_CONFIG,
    INVALID_REQUEST,
    SET,
    TOPIC,
    UNKNOWN_TOPIC,
    create,
    topic_configs,
    wait_for,
)
from tests.support.kafka_wire import call, connect, kafka_broker
from tests.support.mini_broker import MiniBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniBroker]:
    b = kafka_broker(tmp_path_factory.mktemp("admin-configs") / "data", {"orders": 3})
    yield b
    b.close()


@pytest.fixture
def sock(broker: MiniBroker) -> Iterator[socket.socket]:
    with connect(broker) as s:
        yield s


# -- raw requests: configs -----------------------------------------------------------------------


def describe(
    sock: socket.socket, version: int, *resources: tuple[int, str, list[str] | None], **flags: bool
) -> list[dict[str, Any]]:
    answer = call(
        sock,
        DESCRIBE_CONFIGS,
        version,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configuration_keys": keys}
                for t, n, keys in resources
            ],
            **flags,
        },
    )
    results: list[dict[str, Any]] = answer["results"]
    return results


def test_describe_configs_reports_sources_synonyms_and_documentation(
    broker: MiniBroker, sock: socket.socket
) -> None:
    create(sock, ("dc-topic", 1), configs={"retention.ms": "3000"})
    node = str(broker.server.config.node_id)
    (v0,) = describe(sock, 0, (TOPIC, "dc-topic", ["retention.ms", "segment.bytes"]))
    assert {c["name"]: (c["value"], c["is_default"]) for c in v0["configs"]} == {
        "retention.ms": ("3000", False),
        "segment.bytes": (str(1 << 30), True),
    }
    topic, this_broker, cluster_default = describe(
        sock,
        4,
        (TOPIC, "dc-topic", None),
        (BROKER, node, ["log.retention.hours", "num.io.threads", "log.dirs"]),
        (BROKER, "", None),
        include_synonyms=True,
        include_documentation=True,
    )
    configs = {c["name"]: c for c in topic["configs"]}
    assert topic["error_code"] == 0 and "cleanup.policy" in configs
    retention = configs["retention.ms"]
    assert (retention["value"], retention["config_source"], retention["read_only"]) == (
        "3000",
        DYNAMIC_TOPIC_CONFIG,
        False,
    )
    # The override first, then the broker synonyms from the primary one on (Kafka's order).
    assert [s["name"] for s in retention["synonyms"]] == ["retention.ms"]
    assert configs["segment.bytes"]["synonyms"] == [
        {"name": "log.segment.bytes", "value": str(1 << 30), "source": DEFAULT_CONFIG}
    ]
    assert (retention["config_type"], configs["cleanup.policy"]["config_type"]) == (5, 7)
    assert retention["documentation"]
    brokers = {c["name"]: c for c in this_broker["configs"]}
    assert brokers.keys() == {"log.retention.hours", "num.io.threads", "log.dirs"}
    assert brokers["log.dirs"]["read_only"] and not brokers["num.io.threads"]["read_only"]
    assert brokers["log.retention.hours"]["value"] == "168"
    assert cluster_default == {
        "error_code": 0,
        "error_message": None,
        "resource_type": BROKER,
        "resource_name": "",
        "configs": [],  # no cluster-wide dynamic config is set
    }
    # Without the flags: no synonyms, no documentation.
    (plain,) = describe(sock, 3, (TOPIC, "dc-topic", ["retention.ms"]))
    assert plain["configs"][0]["synonyms"] == [] and plain["configs"][0]["documentation"] is None

    refused = describe(
        sock,
        4,
        (TOPIC, "dc-missing", None),
        (TOPIC, "bad/name", None),
        (BROKER, "99", None),
        (BROKER, "one", None),
        (BROKER_LOGGER, node, None),
    )
    assert [(r["error_code"], r["configs"]) for r in refused] == [
        (UNKNOWN_TOPIC, []),
        (errors.InvalidTopicError.code, []),
        (INVALID_REQUEST, []),
        (INVALID_REQUEST, []),
        (INVALID_REQUEST, []),
    ]
    assert refused[2]["error_message"] == (
        f"Unexpected broker id, expected {node} or empty string, but received 99"
    )
    assert refused[3]["error_message"] == "Broker id must be an integer, but it is: one"


def alter(
    sock: socket.socket,
    api_key: int,
    version: int,
    resources: list[tuple[int, str, list[dict[str, Any]]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    answer = call(
        sock,
        api_key,
        version,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configs": c} for t, n, c in resources
            ],
            "validate_only": validate_only,
        },
    )
    return [(r["error_code"], r["error_message"]) for r in answer["responses"]]


def test_incremental_alter_configs_on_topics_and_brokers(
    broker: MiniBroker, sock: socket.socket
) -> None:
    create(sock, ("iac-topic", 1), configs={"segment.ms": "60000"})
    node = str(broker.server.config.node_id)

    def op(name: str, operation: int, value: str | None = None) -> dict[str, Any]:
        return {"name": name, "config_operation": operation, "value": value}

    # validate_only changes nothing.
    checked = alter(
        sock,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        [(TOPIC, "iac-topic", [op("retention.ms", SET, "1")])],
        True,
    )
    assert checked == [(0, None)]
    assert topic_configs(sock, "iac-topic")["retention.ms"][1] == DEFAULT_CONFIG
    done = alter(
        sock,
        INCREMENTAL_ALTER_CONFIGS,
        0,
        [
            (
                TOPIC,
                "iac-topic",
                [
                    op("retention.ms", SET, "4000"),
                    op("segment.ms", DELETE),
                    op("cleanup.policy", APPEND, "compact"),
                ],
            )
        ],
    )
    assert done == [(0, None)]
    wait_for(lambda: topic_configs(sock, "iac-topic")["retention.ms"][0] == "4000", "altered")
    configs = topic_configs(sock, "iac-topic")
    assert configs["segment.ms"][1] == DEFAULT_CONFIG
    assert configs["cleanup.policy"] == ("delete,compact", DYNAMIC_TOPIC_CONFIG)

    # One request per case: a resource named twice in a request is refused as a whole.
    cases: list[tuple[int, str, list[dict[str, Any]], tuple[int, str | None]]] = [
        (
            TOPIC,
            "iac-topic",
            [op("retention.ms", APPEND, "5")],
            (INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."),
        ),
        (
            TOPIC,
            "",
            [op("retention.ms", SET, "5")],
            (INVALID_REQUEST, "Default topic resources are not allowed."),
        ),
        (
            BROKER,
            node,
            [op("log.dirs", SET, "/elsewhere")],
            (INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)"),
        ),
        (
            BROKER,
            "",
            [op("listeners", SET, "PLAINTEXT://:1")],
            (
                INVALID_REQUEST,
                "Cannot update these configs at default cluster level, broker id must be "
                "specified: Set(listeners)",
            ),
        ),
        (
            BROKER,
            "99",
            [op("num.io.threads", SET, "4")],
            (INVALID_REQUEST, f"Unexpected broker id, expected {node}, but received 99"),
        ),
        (
            BROKER,
            node,
            [op("num.io.threads", SET, "4"), op("num.io.threads", DELETE)],
            (INVALID_REQUEST, "Error due to duplicate config keys"),
        ),
        (
            BROKER,
            node,
            [op("num.io.threads", SET, None)],
            (INVALID_REQUEST, "Null value not supported for : num.io.threads"),
        ),
        (
            BROKER,
            node,
            [op("num.io.threads", 9, "4")],
            (INVALID_REQUEST, "Unknown operations type 9"),
        ),
    ]
    for rtype, name, ops, expected in cases:
        assert alter(sock, INCREMENTAL_ALTER_CONFIGS, 1, [(rtype, name, ops)]) == [expected]
    ((code, message),) = alter(
        sock, INCREMENTAL_ALTER_CONFIGS, 1, [(BROKER, node, [op("num.io.threads", SET, "four")])]
    )
    assert code == INVALID_REQUEST and "num.io.threads" in (message or "")
    ((code, _),) = alter(
        sock, INCREMENTAL_ALTER_CONFIGS, 1, [(BROKER_LOGGER, node, [op("root", SET, "DEBUG")])]
    )
    assert code == INVALID_REQUEST
    refused = alter(
        sock,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        [
            (TOPIC, "iac-missing", [op("retention.ms", SET, "5")]),
            (TOPIC, "orders", [op("retention.ms", SET, "five")]),
            (TOPIC, "iac-topic", [op("no.such.config", SET, "1")]),
            (TOPIC, "named-twice", [op("retention.ms", SET, "5")]),
            (TOPIC, "named-twice", [op("segment.ms", SET, "5")]),
        ],
    )
    assert [code for code, _ in refused] == [
        UNKNOWN_TOPIC,
        INVALID_CONFIG,
        INVALID_CONFIG,
        INVALID_REQUEST,
        INVALID_REQUEST,
    ]
    assert "retention.ms" in (refused[1][1] or "")
    assert refused[2][1] == "Unknown topic config name: no.such.config"
    assert refused[3][1] == refused[4][1] == "Each resource must appear at most once."
    # Every resource named in the refused requests was left as it was.
    assert topic_configs(sock, "orders")["retention.ms"][1] == DEFAULT_CONFIG

    # A dynamic broker config, set and described with its source, then removed.
    assert alter(
        sock,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        [(BROKER, node, [op("log.cleaner.backoff.ms", SET, "20000")])],
    ) == [(0, None)]

    def backoff() -> dict[str, Any]:
        (r,) = describe(sock, 4, (BROKER, node, ["log.cleaner.backoff.ms"]), include_synonyms=True)
        entry: dict[str, Any] = r["configs"][0]
        return entry

    wait_for(lambda: backoff()["value"] == "20000", "broker config set")
    assert backoff()["config_source"] == DYNAMIC_BROKER_CONFIG
    assert [s["source"] for s in backoff()["synonyms"]] == [DYNAMIC_BROKER_CONFIG, DEFAULT_CONFIG]
    assert alter(
        sock, INCREMENTAL_ALTER_CONFIGS, 1, [(BROKER, node, [op("log.cleaner.backoff.ms", DELETE)])]
    ) == [(0, None)]
    wait_for(lambda: backoff()["config_source"] == DEFAULT_CONFIG, "broker config removed")


def test_alter_configs_replaces_every_override(sock: socket.socket) -> None:
    create(sock, ("ac-topic", 1), configs={"segment.ms": "60000", "retention.ms": "2000"})

    def config(name: str, value: str | None) -> dict[str, Any]:
        return {"name": name, "value": value}

    assert alter(
        sock, ALTER_CONFIGS, 0, [(TOPIC, "ac-topic", [config("retention.ms", "1")])], True
    ) == [(0, None)]
    assert topic_configs(sock, "ac-topic")["retention.ms"][0] == "2000"
    assert alter(
        sock, ALTER_CONFIGS, 2, [(TOPIC, "ac-topic", [config("retention.ms", "9000")])]
    ) == [(0, None)]
    wait_for(lambda: topic_configs(sock, "ac-topic")["retention.ms"][0] == "9000", "altered")
    assert topic_configs(sock, "ac-topic")["segment.ms"][1] == DEFAULT_CONFIG  # not given: gone
    refused = alter(
        sock,
        ALTER_CONFIGS,
        1,
        [
            (TOPIC, "ac-topic", [config("retention.ms", None)]),
            (TOPIC, "orders", [config("retention.ms", "-5")]),
            (TOPIC, "ac-missing", [config("retention.ms", "5")]),
        ],
    )
    assert refused[0] == (INVALID_REQUEST, "Null value not supported for : retention.ms")
    assert refused[1][0] == INVALID_CONFIG and "retention.ms" in (refused[1][1] or "")
    assert refused[2][0] == UNKNOWN_TOPIC
    assert topic_configs(sock, "ac-topic")["retention.ms"][0] == "9000"
