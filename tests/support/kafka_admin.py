"""Kafka's admin api keys spoken raw to a test broker (the tests of ``server/kafka/admin.py``
and ``admin_configs.py``): api keys and enum values, and reading a broker back."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from rillet import errors
from rillet._core import BatchBuilder
from tests.support.kafka_wire import call

__all__ = [
    "ALTER_CONFIGS",
    "API_VERSIONS",
    "APPEND",
    "BROKER",
    "BROKER_LOGGER",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DEFAULT_CONFIG",
    "DELETE",
    "DELETE_RECORDS",
    "DELETE_TOPICS",
    "DESCRIBE_CLUSTER",
    "DESCRIBE_CONFIGS",
    "DESCRIBE_LOG_DIRS",
    "DESCRIBE_PRODUCERS",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_TOPIC_CONFIG",
    "ELECT_LEADERS",
    "INCREMENTAL_ALTER_CONFIGS",
    "INVALID_CONFIG",
    "INVALID_REQUEST",
    "LIST_OFFSETS",
    "LIST_TRANSACTIONS",
    "METADATA",
    "OFFSET_FOR_LEADER_EPOCH",
    "PRODUCE",
    "SET",
    "TOPIC",
    "UNKNOWN_TOPIC",
    "ZERO_UUID",
    "create",
    "earliest_offset",
    "errors_of",
    "new_topic",
    "partition_counts",
    "produce",
    "topic_configs",
    "wait_for",
]

PRODUCE, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 2, 3, 18
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 19, 20, 21, 23
DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE_LOG_DIRS, CREATE_PARTITIONS = 32, 33, 35, 37
ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 43, 44, 60
DESCRIBE_PRODUCERS, LIST_TRANSACTIONS = 61, 66
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND = 0, 1, 2
DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG = 5, 1, 2
ZERO_UUID = uuid.UUID(int=0)

INVALID_REQUEST = errors.InvalidRequestError.code
INVALID_CONFIG = errors.InvalidConfigurationError.code
UNKNOWN_TOPIC = errors.UnknownTopicOrPartitionError.code


def wait_for(check: Callable[[], bool], what: str) -> None:
    """Until ``check()`` holds (the broker applies committed metadata asynchronously)."""
    deadline = time.monotonic() + 30
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.02)


def partition_counts(s: socket.socket) -> dict[str, int]:
    """Every topic the broker's Metadata lists, with its partition count."""
    answer = call(s, METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    return {t["name"]: len(t["partitions"]) for t in answer["topics"]}


def topic_configs(s: socket.socket, topic: str) -> dict[str, tuple[str | None, int]]:
    """A topic's configs as DescribeConfigs v4 gives them: name -> (value, source)."""
    (result,) = call(
        s,
        DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": None}
            ]
        },
    )["results"]
    assert result["error_code"] == 0, result
    return {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}


def produce(s: socket.socket, topic: str, partition: int, count: int) -> None:
    builder = BatchBuilder()
    keys = [b"k%d" % i for i in range(count)]  # keyed: compacted topics refuse null keys
    builder.append_values([b"v%d" % i for i in range(count)], int(time.time() * 1000), keys)
    records = builder.build()
    answer = call(
        s,
        PRODUCE,
        9,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 10_000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [{"index": partition, "records": records}],
                }
            ],
        },
    )
    (t,) = answer["responses"]
    assert t["partition_responses"][0]["error_code"] == 0, answer


def earliest_offset(s: socket.socket, topic: str, partition: int) -> int:
    answer = call(
        s,
        LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -2}
                    ],
                }
            ],
        },
    )
    (p,) = answer["topics"][0]["partitions"]
    assert p["error_code"] == 0, answer
    offset: int = p["offset"]
    return offset


def create(
    s: socket.socket, *topics: tuple[str, int], configs: dict[str, str] | None = None
) -> None:
    """Create topics (raw, v7) and wait until Metadata lists them."""
    answer = call(
        s,
        CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": n,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
                for name, n in topics
            ],
            "timeout_ms": 10_000,
            "validate_only": False,
        },
    )
    assert [t["error_code"] for t in answer["topics"]] == [0] * len(topics), answer
    wait_for(lambda: {n for n, _ in topics} <= partition_counts(s).keys(), f"{topics} created")


def new_topic(name: str, **fields: Any) -> dict[str, Any]:
    """A CreateTopics entry: one partition, replication factor 1, unless ``fields`` say."""
    return {
        "name": name,
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
        **fields,
    }


def errors_of(results: list[dict[str, Any]], key: str = "name") -> dict[str, tuple[int, Any]]:
    return {r[key]: (r["error_code"], r.get("error_message")) for r in results}
