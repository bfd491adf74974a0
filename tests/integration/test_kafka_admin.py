"""Kafka's admin api keys on the Kafka listener (``server/kafka/admin.py``): unmodified
confluent-kafka (librdkafka), kafka-python and aiokafka admin clients create, grow, alter,
describe and delete topics, delete records and list transactions through it, at the
versions they negotiate; raw requests at the oldest and newest versions check the fields
each version carries and Kafka's error codes and messages for bad input. Outcomes are
read back from the broker (Metadata, DescribeConfigs, ListOffsets), not from the answers.

One broker serves the module; each test uses topics of its own."""

from __future__ import annotations

import asyncio
import socket
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import ElectionType, Producer
from confluent_kafka import KafkaException as ConfluentException
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from rillet import errors
from rillet.protocol.gen.v1 import admin_pb2, admin_pb2_grpc
from tests.support.kafka_admin import (
    ALTER_CONFIGS,
    API_VERSIONS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DEFAULT_CONFIG,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_PRODUCERS,
    DYNAMIC_TOPIC_CONFIG,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    INVALID_CONFIG,
    INVALID_REQUEST,
    LIST_TRANSACTIONS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    UNKNOWN_TOPIC,
    ZERO_UUID,
    create,
    earliest_offset,
    errors_of,
    new_topic,
    partition_counts,
    produce,
    topic_configs,
    wait_for,
)
from tests.support.kafka_wire import call, connect, kafka_broker, kafka_port
from tests.support.mini_broker import MiniBroker

with warnings.catch_warnings():
    # kafka-python reads its JSON schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType as KpConfigResourceType
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.admin import NewTopic as KpNewTopic


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniBroker]:
    b = kafka_broker(tmp_path_factory.mktemp("admin") / "data", {"orders": 3})
    yield b
    b.close()


@pytest.fixture(scope="module")
def bootstrap(broker: MiniBroker) -> str:
    return f"127.0.0.1:{kafka_port(broker)}"


@pytest.fixture(scope="module")
def confluent(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def sock(broker: MiniBroker) -> Iterator[socket.socket]:
    with connect(broker) as s:
        yield s


# -- versions ----------------------------------------------------------------------------------


def test_api_versions_lists_every_admin_key_at_its_schema_range(sock: socket.socket) -> None:
    answer = call(sock, API_VERSIONS, 3, {"client_software_name": "raw"})
    served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    expected = {
        CREATE_TOPICS: (0, 7),
        DELETE_TOPICS: (0, 6),
        DELETE_RECORDS: (0, 2),
        OFFSET_FOR_LEADER_EPOCH: (0, 4),
        DESCRIBE_CONFIGS: (0, 4),
        ALTER_CONFIGS: (0, 2),
        DESCRIBE_LOG_DIRS: (0, 4),
        CREATE_PARTITIONS: (0, 3),
        ELECT_LEADERS: (0, 2),
        INCREMENTAL_ALTER_CONFIGS: (0, 1),
        DESCRIBE_CLUSTER: (0, 1),
        DESCRIBE_PRODUCERS: (0, 0),
        LIST_TRANSACTIONS: (0, 1),
    }
    assert {k: served.get(k) for k in expected} == expected


# -- confluent-kafka (librdkafka) ----------------------------------------------------------------


def test_confluent_creates_topics_with_configs_and_assignments(
    confluent: AdminClient, sock: socket.socket
) -> None:
    futures = confluent.create_topics(
        [
            NewTopic("cf-configured", 3, 1, config={"retention.ms": "5000"}),
            NewTopic("cf-assigned", 2, replica_assignment=[[1], [1]]),
            NewTopic("orders", 1, 1),
        ]
    )
    assert futures["cf-configured"].result() is None
    assert futures["cf-assigned"].result() is None
    with pytest.raises(ConfluentException) as e:
        futures["orders"].result()
    assert e.value.args[0].code() == errors.TopicAlreadyExistsError.code
    assert e.value.args[0].str() == "Topic 'orders' already exists."
    wait_for(lambda: {"cf-configured", "cf-assigned"} <= partition_counts(sock).keys(), "created")
    counts = partition_counts(sock)
    assert (counts["cf-configured"], counts["cf-assigned"]) == (3, 2)
    assert topic_configs(sock, "cf-configured")["retention.ms"] == ("5000", DYNAMIC_TOPIC_CONFIG)
    assert topic_configs(sock, "cf-assigned")["retention.ms"][1] == DEFAULT_CONFIG

    # validate_only answers as a creation would, and creates nothing: a topic created after it
    # is listed while the validated one never is (metadata is applied in order).
    checked = confluent.create_topics([NewTopic("cf-validated", 4, 1)], validate_only=True)
    assert checked["cf-validated"].result() is None
    bad = confluent.create_topics(
        [NewTopic("cf-validated-bad", 1, 1, config={"retention.ms": "soon"})], validate_only=True
    )
    with pytest.raises(ConfluentException) as e:
        bad["cf-validated-bad"].result()
    assert e.value.args[0].code() == INVALID_CONFIG
    confluent.create_topics([NewTopic("cf-after", 1, 1)])["cf-after"].result()
    wait_for(lambda: "cf-after" in partition_counts(sock), "cf-after created")
    assert not {"cf-validated", "cf-validated-bad"} & partition_counts(sock).keys()


def test_confluent_grows_alters_and_deletes(confluent: AdminClient, sock: socket.socket) -> None:
    create(sock, ("cf-grow", 1), ("cf-doomed", 1))
    checked = confluent.create_partitions([NewPartitions("cf-grow", 3)], validate_only=True)
    assert checked["cf-grow"].result() is None
    assert partition_counts(sock)["cf-grow"] == 1
    grown = confluent.create_partitions([NewPartitions("cf-grow", 3), NewPartitions("orders", 2)])
    assert grown["cf-grow"].result() is None
    with pytest.raises(ConfluentException) as e:
        grown["orders"].result()
    assert e.value.args[0].code() == errors.InvalidPartitionsError.code
    assert e.value.args[0].str() == (
        "The topic orders currently has 3 partition(s); 2 would not be an increase."
    )
    wait_for(lambda: partition_counts(sock)["cf-grow"] == 3, "cf-grow has 3 partitions")

    resource = ConfigResource(
        ResourceType.TOPIC,
        "cf-grow",
        incremental_configs=[
            ConfigEntry("retention.ms", "7000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    assert confluent.incremental_alter_configs([resource])[resource].result() is None
    wait_for(lambda: topic_configs(sock, "cf-grow")["retention.ms"][0] == "7000", "altered")
    described = confluent.describe_configs([ConfigResource(ResourceType.TOPIC, "cf-grow")])
    configs = next(iter(described.values())).result()
    assert configs["retention.ms"].value == "7000"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert topic_configs(sock, "cf-grow")["retention.ms"] == ("7000", DYNAMIC_TOPIC_CONFIG)
    bad = ConfigResource(
        ResourceType.TOPIC,
        "cf-grow",
        incremental_configs=[
            ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(ConfluentException) as e:
        confluent.incremental_alter_configs([bad])[bad].result()
    assert e.value.args[0].code() == INVALID_CONFIG
    assert "retention.ms" in e.value.args[0].str()
    assert topic_configs(sock, "cf-grow")["retention.ms"][0] == "7000"

    deleted = confluent.delete_topics(["cf-doomed", "cf-never-was"])
    assert deleted["cf-doomed"].result() is None
    with pytest.raises(ConfluentException) as e:
        deleted["cf-never-was"].result()
    assert e.value.args[0].code() == UNKNOWN_TOPIC
    wait_for(lambda: "cf-doomed" not in partition_counts(sock), "cf-doomed deleted")


def test_confluent_deletes_records_and_elects_leaders(
    confluent: AdminClient, sock: socket.socket
) -> None:
    create(sock, ("cf-records", 2))
    produce(sock, "cf-records", 0, 10)
    deleted = confluent.delete_records([ConfluentPartition("cf-records", 0, 4)])
    (result,) = deleted.values()
    assert result.result().low_watermark == 4
    assert earliest_offset(sock, "cf-records", 0) == 4
    listed = confluent.list_offsets({ConfluentPartition("cf-records", 0): OffsetSpec.earliest()})
    assert next(iter(listed.values())).result().offset == 4
    assert earliest_offset(sock, "cf-records", 1) == 0  # the other partition is untouched

    elected = confluent.elect_leaders(ElectionType.PREFERRED, [ConfluentPartition("orders", 0)])
    outcome = elected.result()
    (err,) = outcome.values()
    assert err.code() == errors.ElectionNotNeededError.code


# -- kafka-python and aiokafka -------------------------------------------------------------------


def test_kafka_python_admin_round_trip(bootstrap: str, sock: socket.socket) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        created = admin.create_topics(
            [KpNewTopic("kp-topic", 2, 1, topic_configs={"retention.ms": "5000"})]
        )
        (topic,) = created["topics"]
        # CreateTopics v5+: the new topic's shape and effective configs.
        assert (topic["error_code"], topic["num_partitions"], topic["replication_factor"]) == (
            0,
            2,
            1,
        )
        assert topic["configs"]["retention.ms"]["value"] == "5000"
        assert topic["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic["configs"]["segment.ms"]["config_source"] == "DEFAULT_CONFIG"
        wait_for(lambda: "kp-topic" in partition_counts(sock), "kp-topic created")

        admin.create_partitions({"kp-topic": KpNewPartitions(4)})
        wait_for(lambda: partition_counts(sock)["kp-topic"] == 4, "kp-topic grown")

        admin.alter_configs(
            [KpConfigResource(KpConfigResourceType.TOPIC, "kp-topic", {"retention.ms": "9000"})]
        )
        wanted = ("9000", DYNAMIC_TOPIC_CONFIG)
        wait_for(lambda: topic_configs(sock, "kp-topic")["retention.ms"] == wanted, "altered")
        described = admin.describe_configs(
            [KpConfigResource(KpConfigResourceType.TOPIC, "kp-topic", ["retention.ms"])],
            include_synonyms=True,
        )
        entry = described["topic"]["kp-topic"]["retention.ms"]
        assert entry["value"] == "9000" and entry["config_type"] == "LONG"
        assert entry["synonyms"] == [
            {"name": "retention.ms", "value": "9000", "source": "DYNAMIC_TOPIC_CONFIG"}
        ]

        cluster = admin.describe_cluster()
        (node,) = cluster["brokers"]
        assert (node["host"], node["port"]) == ("127.0.0.1", int(bootstrap.rsplit(":", 1)[1]))
        assert cluster["controller_id"] == node["broker_id"]

        (dirs,) = admin.describe_log_dirs()
        (log_dir,) = dirs["log_dirs"]
        on_disk = {t["name"]: len(t["partitions"]) for t in log_dir["topics"]}
        assert on_disk["kp-topic"] == 4 and log_dir["error_code"] == 0

        produce(sock, "kp-topic", 1, 5)
        admin.delete_records({KafkaPythonPartition("kp-topic", 1): 3})
        assert earliest_offset(sock, "kp-topic", 1) == 3

        admin.delete_topics(["kp-topic"])
        wait_for(lambda: "kp-topic" not in partition_counts(sock), "kp-topic deleted")
    finally:
        admin.close()


def test_aiokafka_admin_at_the_versions_it_speaks(bootstrap: str, sock: socket.socket) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.admin import NewPartitions as AioNewPartitions
    from aiokafka.admin import NewTopic as AioNewTopic
    from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
    from aiokafka.structs import TopicPartition as AioPartition

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            topic = AioNewTopic(
                "aio-topic", 1, 1, topic_configs={"retention.ms": "5000", "segment.ms": "60000"}
            )
            created = await admin.create_topics([topic])
            assert [e[1] for e in created.topic_errors] == [0]
            await asyncio.to_thread(
                wait_for, lambda: "aio-topic" in partition_counts(sock), "aio-topic created"
            )
            grown = await admin.create_partitions({"aio-topic": AioNewPartitions(2)})
            assert [e[1] for e in grown.topic_errors] == [0]
            # AlterConfigs (the legacy form) replaces the topic's overrides: segment.ms goes.
            resource = AioConfigResource(
                AioConfigResourceType.TOPIC, "aio-topic", {"retention.ms": "6000"}
            )
            (altered,) = await admin.alter_configs([resource])
            assert [r[0] for r in altered.resources] == [0]
            wait_for(lambda: topic_configs(sock, "aio-topic")["retention.ms"][0] == "6000", "set")
            (described,) = await admin.describe_configs(
                [
                    AioConfigResource(
                        AioConfigResourceType.TOPIC, "aio-topic", {"retention.ms": None}
                    )
                ]
            )
            ((code, _, _, _, entries),) = described.resources
            assert code == 0 and [(e[0], e[1], e[3]) for e in entries] == [
                ("retention.ms", "6000", DYNAMIC_TOPIC_CONFIG)
            ]
            configs = topic_configs(sock, "aio-topic")
            assert configs["segment.ms"][1] == DEFAULT_CONFIG
            produce(sock, "aio-topic", 0, 4)
            await admin.delete_records({AioPartition("aio-topic", 0): RecordsToDelete(2)})
            assert earliest_offset(sock, "aio-topic", 0) == 2
            deleted = await admin.delete_topics(["aio-topic"])
            assert [e[1] for e in deleted.topic_error_codes] == [0]
        finally:
            await admin.close()

    asyncio.run(run())
    wait_for(lambda: "aio-topic" not in partition_counts(sock), "aio-topic deleted")


# -- raw requests: topics and partitions ---------------------------------------------------------


def test_create_topics_at_the_oldest_and_newest_versions(sock: socket.socket) -> None:
    v0 = call(sock, CREATE_TOPICS, 0, {"topics": [new_topic("raw-v0")], "timeout_ms": 10_000})
    assert v0 == {"topics": [{"name": "raw-v0", "error_code": 0}]}
    v7 = call(
        sock,
        CREATE_TOPICS,
        7,
        {
            "topics": [
                new_topic(
                    "raw-v7",
                    num_partitions=2,
                    configs=[{"name": "cleanup.policy", "value": "compact"}],
                ),
                new_topic(
                    "raw-assigned",
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=[
                        {"partition_index": 0, "broker_ids": [1]},
                        {"partition_index": 1, "broker_ids": [1]},
                        {"partition_index": 2, "broker_ids": [1]},
                    ],
                ),
            ],
            "timeout_ms": 10_000,
            "validate_only": False,
        },
    )
    made = {t["name"]: t for t in v7["topics"]}
    assert {n: (t["error_code"], t["error_message"]) for n, t in made.items()} == {
        "raw-v7": (0, None),
        "raw-assigned": (0, None),
    }
    assert (made["raw-v7"]["num_partitions"], made["raw-v7"]["replication_factor"]) == (2, 1)
    assert made["raw-assigned"]["num_partitions"] == 3
    configs = {c["name"]: c for c in made["raw-v7"]["configs"]}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"]["config_source"] == DEFAULT_CONFIG
    wait_for(lambda: {"raw-v0", "raw-v7", "raw-assigned"} <= partition_counts(sock).keys(), "made")
    described = call(sock, METADATA, 12, {"topics": [{"name": "raw-v7"}]})["topics"][0]
    assert described["topic_id"] == made["raw-v7"]["topic_id"] != ZERO_UUID
    assert partition_counts(sock)["raw-assigned"] == 3


def test_create_topics_refuses_bad_input_with_kafkas_errors(sock: socket.socket) -> None:
    cases = [
        new_topic("bad-partitions", num_partitions=-5),
        new_topic("bad-replication", replication_factor=0),
        new_topic("bad-manual", assignments=[{"partition_index": 0, "broker_ids": [1]}]),
        new_topic("bad-config", configs=[{"name": "retention.ms", "value": "soon"}]),
        new_topic("bad-config-name", configs=[{"name": "no.such.config", "value": "1"}]),
        new_topic("bad-null", configs=[{"name": "retention.ms", "value": None}]),
        new_topic("bad/name"),
        new_topic("__cluster_metadata"),
        new_topic("twice"),
        new_topic("twice"),
    ]
    answer = call(
        sock,
        CREATE_TOPICS,
        7,
        {"topics": cases, "timeout_ms": 10_000, "validate_only": False},
    )
    got = errors_of(answer["topics"])
    assert got["bad-partitions"] == (
        errors.InvalidPartitionsError.code,
        "Number of partitions was set to an invalid non-positive value.",
    )
    assert got["bad-replication"] == (
        errors.InvalidReplicationFactorError.code,
        "Replication factor must be larger than 0, or -1 to use the default value.",
    )
    assert got["bad-manual"] == (
        INVALID_REQUEST,
        "A manual partition assignment was specified, but replication factor was not set to -1.",
    )
    assert got["bad-config"][0] == INVALID_CONFIG and "retention.ms" in got["bad-config"][1]
    assert got["bad-config-name"] == (INVALID_CONFIG, "Unknown topic config name: no.such.config")
    assert got["bad-null"] == (
        INVALID_CONFIG,
        "Null value not supported for topic configs: retention.ms",
    )
    assert got["bad/name"][0] == errors.InvalidTopicError.code
    assert got["__cluster_metadata"] == (
        INVALID_REQUEST,
        "Creation of internal topic __cluster_metadata is prohibited.",
    )
    assert got["twice"] == (INVALID_REQUEST, "Duplicate topic name.")
    assert [t["name"] for t in answer["topics"]].count("twice") == 1
    assert all(t["topic_id"] == ZERO_UUID for t in answer["topics"])
    # validate_only (v1+) answers like a creation and creates nothing.
    checked = call(
        sock,
        CREATE_TOPICS,
        1,
        {"topics": [new_topic("raw-validated")], "timeout_ms": 10_000, "validate_only": True},
    )
    assert errors_of(checked["topics"]) == {"raw-validated": (0, None)}
    create(sock, ("raw-after-validate", 1))
    assert not {t["name"] for t in cases} & partition_counts(sock).keys()
    assert "raw-validated" not in partition_counts(sock)


def test_delete_topics_by_name_and_by_id(sock: socket.socket) -> None:
    create(sock, ("del-by-name", 1), ("del-by-id", 1), ("del-v6-name", 2))
    topic_ids = {
        t["name"]: t["topic_id"]
        for t in call(sock, METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})[
            "topics"
        ]
    }
    v0 = call(
        sock, DELETE_TOPICS, 0, {"topic_names": ["del-by-name", "nope"], "timeout_ms": 10_000}
    )
    assert errors_of(v0["responses"]) == {"del-by-name": (0, None), "nope": (UNKNOWN_TOPIC, None)}
    unknown_id = uuid.uuid4()
    v6 = call(
        sock,
        DELETE_TOPICS,
        6,
        {
            "topics": [
                {"name": None, "topic_id": topic_ids["del-by-id"]},
                {"name": None, "topic_id": unknown_id},
                {"name": "del-v6-name", "topic_id": ZERO_UUID},
                {"name": "orders", "topic_id": topic_ids["orders"]},
                {"name": None, "topic_id": ZERO_UUID},
            ],
            "timeout_ms": 10_000,
        },
    )
    got = {
        (r["name"], r["topic_id"]): (r["error_code"], r["error_message"]) for r in v6["responses"]
    }
    assert got == {
        ("del-by-id", topic_ids["del-by-id"]): (0, None),
        ("del-v6-name", topic_ids["del-v6-name"]): (0, None),
        (None, unknown_id): (errors.UnknownTopicIdError.code, None),
        ("orders", topic_ids["orders"]): (
            INVALID_REQUEST,
            "You may not specify both topic name and topic id.",
        ),
        (None, ZERO_UUID): (INVALID_REQUEST, "Neither topic name nor id were specified."),
    }
    gone = {"del-by-name", "del-by-id", "del-v6-name"}
    wait_for(lambda: not gone & partition_counts(sock).keys(), "topics deleted")
    assert partition_counts(sock)["orders"] == 3


def test_delete_topics_refused_while_deletion_is_disabled(tmp_path: Path) -> None:
    b = kafka_broker(tmp_path / "data", {"kept": 1}, {"delete.topic.enable": "false"})
    try:
        with connect(b) as s:
            v6 = call(
                s,
                DELETE_TOPICS,
                6,
                {"topics": [{"name": "kept", "topic_id": ZERO_UUID}], "timeout_ms": 5_000},
            )
            assert errors_of(v6["responses"]) == {
                "kept": (errors.TopicDeletionDisabledError.code, None)
            }
            v2 = call(s, DELETE_TOPICS, 2, {"topic_names": ["kept"], "timeout_ms": 5_000})
            assert errors_of(v2["responses"]) == {
                "kept": (INVALID_REQUEST, None)  # v0-4 carry no message
            }
            assert "kept" in partition_counts(s)
        # The gRPC API refuses it too.
        with grpc.insecure_channel(b.bootstrap) as ch:
            r = admin_pb2_grpc.AdminServiceStub(ch).DeleteTopics(
                admin_pb2.DeleteTopicsRequest(topic_names=["kept"]), timeout=30
            )
        assert [(t.name, t.error_code) for t in r.topics] == [
            ("kept", errors.TopicDeletionDisabledError.code)
        ]
        with connect(b) as s:
            assert "kept" in partition_counts(s)
    finally:
        b.close()


def test_create_partitions_checks_counts_and_assignments(sock: socket.socket) -> None:
    create(sock, ("cp-grow", 2), ("cp-assigned", 1))
    body = {
        "topics": [
            {"name": "cp-grow", "count": 4, "assignments": None},
            {"name": "cp-assigned", "count": 3, "assignments": [{"broker_ids": [1]}]},
            {"name": "orders", "count": 3, "assignments": None},
            {"name": "cp-missing", "count": 2, "assignments": None},
            {"name": "cp-twice", "count": 2, "assignments": None},
            {"name": "cp-twice", "count": 3, "assignments": None},
        ],
        "timeout_ms": 10_000,
        "validate_only": True,
    }
    checked = errors_of(call(sock, CREATE_PARTITIONS, 3, body)["results"])
    assert checked == {
        "cp-grow": (0, None),
        "cp-assigned": (
            errors.InvalidReplicaAssignmentError.code,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        "orders": (errors.InvalidPartitionsError.code, "Topic already has 3 partition(s)."),
        "cp-missing": (UNKNOWN_TOPIC, checked["cp-missing"][1]),
        "cp-twice": (INVALID_REQUEST, "Duplicate topic name."),
    }
    assert partition_counts(sock)["cp-grow"] == 2  # validate_only
    grown = call(
        sock,
        CREATE_PARTITIONS,
        0,
        {
            "topics": [
                {"name": "cp-grow", "count": 4, "assignments": None},
                {"name": "cp-assigned", "count": 3, "assignments": [{"broker_ids": [1]}] * 2},
            ],
            "timeout_ms": 10_000,
            "validate_only": False,
        },
    )
    assert errors_of(grown["results"]) == {"cp-grow": (0, None), "cp-assigned": (0, None)}
    wait_for(
        lambda: (
            (partition_counts(sock)["cp-grow"], partition_counts(sock)["cp-assigned"]) == (4, 3)
        ),
        "partitions added",
    )


# -- raw requests: records and epochs ------------------------------------------------------------


def delete_records(
    sock: socket.socket, version: int, *wanted: tuple[str, int, int]
) -> dict[Any, Any]:
    """DeleteRecords of ``(topic, partition, offset)``: (topic, partition) -> (error, low)."""
    by_topic: dict[str, list[dict[str, int]]] = {}
    for topic, partition, offset in wanted:
        by_topic.setdefault(topic, []).append({"partition_index": partition, "offset": offset})
    answer = call(
        sock,
        DELETE_RECORDS,
        version,
        {
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            "timeout_ms": 10_000,
        },
    )
    return {
        (t["name"], p["partition_index"]): (p["error_code"], p["low_watermark"])
        for t in answer["topics"]
        for p in t["partitions"]
    }


def test_delete_records_moves_the_log_start_on_the_leader(sock: socket.socket) -> None:
    create(sock, ("dr-topic", 2))
    create(sock, ("dr-compacted", 1), configs={"cleanup.policy": "compact"})
    produce(sock, "dr-topic", 0, 10)
    produce(sock, "dr-topic", 1, 3)
    produce(sock, "dr-compacted", 0, 2)
    got = delete_records(sock, 0, ("dr-topic", 0, 6), ("dr-topic", 1, -1))
    assert got == {("dr-topic", 0): (0, 6), ("dr-topic", 1): (0, 3)}  # -1: the high watermark
    assert (earliest_offset(sock, "dr-topic", 0), earliest_offset(sock, "dr-topic", 1)) == (6, 3)
    # Never backwards: an older offset leaves the log start where it is.
    assert delete_records(sock, 2, ("dr-topic", 0, 2)) == {("dr-topic", 0): (0, 6)}
    refused = delete_records(
        sock,
        2,
        ("dr-topic", 0, 11),
        ("dr-topic", 1, -7),
        ("dr-topic", 9, 0),
        ("dr-missing", 0, 0),
        ("dr-compacted", 0, 1),
    )
    assert refused == {
        ("dr-topic", 0): (errors.OffsetOutOfRangeError.code, -1),
        ("dr-topic", 1): (errors.OffsetOutOfRangeError.code, -1),
        ("dr-topic", 9): (UNKNOWN_TOPIC, -1),
        ("dr-missing", 0): (UNKNOWN_TOPIC, -1),
        ("dr-compacted", 0): (errors.PolicyViolationError.code, -1),
    }
    assert (earliest_offset(sock, "dr-topic", 0), earliest_offset(sock, "dr-compacted", 0)) == (
        6,
        0,
    )


def test_offset_for_leader_epoch_answers_where_epochs_end(sock: socket.socket) -> None:
    create(sock, ("epochs", 1))
    produce(sock, "epochs", 0, 5)
    (meta,) = call(sock, METADATA, 12, {"topics": [{"name": "epochs"}]})["topics"]
    epoch = meta["partitions"][0]["leader_epoch"]

    def ask(version: int, *partitions: dict[str, int]) -> list[dict[str, Any]]:
        body = {"replica_id": -1, "topics": [{"topic": "epochs", "partitions": list(partitions)}]}
        answer = call(sock, OFFSET_FOR_LEADER_EPOCH, version, body)
        result: list[dict[str, Any]] = answer["topics"][0]["partitions"]
        return result

    current = {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch}
    assert ask(4, current) == [
        {"error_code": 0, "partition": 0, "leader_epoch": epoch, "end_offset": 5}
    ]
    assert ask(0, {"partition": 0, "leader_epoch": epoch}) == [
        {"error_code": 0, "partition": 0, "end_offset": 5}  # v0: no leader epoch
    ]
    newer = {"partition": 0, "current_leader_epoch": epoch + 1, "leader_epoch": epoch}
    unknown_epoch = {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch + 5}
    missing = {"partition": 4, "current_leader_epoch": -1, "leader_epoch": 0}
    assert [(p["error_code"], p["leader_epoch"], p["end_offset"]) for p in ask(2, newer)] == [
        (errors.UnknownLeaderEpochError.code, -1, -1)
    ]
    assert [(p["error_code"], p["end_offset"]) for p in ask(3, unknown_epoch, missing)] == [
        (0, -1),
        (UNKNOWN_TOPIC, -1),
    ]


# -- raw requests: the cluster -------------------------------------------------------------------


def test_describe_cluster_names_the_brokers_of_this_listener(
    broker: MiniBroker, sock: socket.socket
) -> None:
    node = broker.server.config.node_id
    v0 = call(sock, DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert v0["error_code"] == 0 and v0["controller_id"] == node
    assert v0["brokers"] == [
        {"broker_id": node, "host": "127.0.0.1", "port": kafka_port(broker), "rack": None}
    ]
    assert v0["cluster_authorized_operations"] == -(2**31)  # not asked for
    assert v0["cluster_id"] == broker.server.cluster_id
    v1 = call(
        sock,
        DESCRIBE_CLUSTER,
        1,
        {"include_cluster_authorized_operations": True, "endpoint_type": 1},
    )
    assert v1["endpoint_type"] == 1 and v1["brokers"] == v0["brokers"]
    # No authorizer: every cluster operation (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
    # DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE), as Kafka answers.
    assert v1["cluster_authorized_operations"] == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    controllers = call(
        sock,
        DESCRIBE_CLUSTER,
        1,
        {"include_cluster_authorized_operations": False, "endpoint_type": 2},
    )
    assert (controllers["error_code"], controllers["brokers"]) == (
        errors.MismatchedEndpointTypeError.code,
        [],
    )
    unknown = call(
        sock,
        DESCRIBE_CLUSTER,
        1,
        {"include_cluster_authorized_operations": False, "endpoint_type": 7},
    )
    assert (unknown["error_code"], unknown["error_message"]) == (
        errors.UnsupportedEndpointTypeError.code,
        "Unsupported endpoint type 7",
    )


def test_describe_log_dirs_lists_the_replicas_on_disk(sock: socket.socket) -> None:
    create(sock, ("ld-topic", 2))
    produce(sock, "ld-topic", 1, 4)
    everything = call(sock, DESCRIBE_LOG_DIRS, 0, {"topics": None})
    (log_dir,) = everything["results"]
    on_disk = {
        t["name"]: {p["partition_index"] for p in t["partitions"]} for t in log_dir["topics"]
    }
    assert on_disk["ld-topic"] == {0, 1} and on_disk["orders"] == {0, 1, 2}
    asked = call(sock, DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": "ld-topic", "partitions": [1]}]})
    (log_dir,) = asked["results"]
    assert asked["error_code"] == 0 and log_dir["error_code"] == 0
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] >= 0
    (topic,) = log_dir["topics"]
    (partition,) = topic["partitions"]
    assert (topic["name"], partition["partition_index"], partition["offset_lag"]) == (
        "ld-topic",
        1,
        0,
    )
    assert partition["partition_size"] > 0 and partition["is_future_key"] is False


def test_elect_leaders_at_every_version(sock: socket.socket) -> None:
    not_needed = errors.ElectionNotNeededError.code
    v0 = call(
        sock,
        ELECT_LEADERS,
        0,
        {"topic_partitions": [{"topic": "orders", "partitions": [0, 1]}], "timeout_ms": 10_000},
    )
    (result,) = v0["replica_election_results"]
    assert result["topic"] == "orders"
    assert [(p["partition_id"], p["error_code"]) for p in result["partition_result"]] == [
        (0, not_needed),
        (1, not_needed),
    ]
    v2 = call(
        sock,
        ELECT_LEADERS,
        2,
        {
            "election_type": 1,
            "topic_partitions": [{"topic": "el-missing", "partitions": [0]}],
            "timeout_ms": 10_000,
        },
    )
    assert v2["error_code"] == 0
    (result,) = v2["replica_election_results"]
    assert [p["error_code"] for p in result["partition_result"]] == [UNKNOWN_TOPIC]
    # Every partition: those that need no election are left out, as Kafka leaves them.
    everything = call(
        sock,
        ELECT_LEADERS,
        1,
        {"election_type": 0, "topic_partitions": None, "timeout_ms": 10_000},
    )
    assert everything == {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": []}
    bad_type = call(
        sock,
        ELECT_LEADERS,
        2,
        {
            "election_type": 5,
            "topic_partitions": [{"topic": "orders", "partitions": [0]}],
            "timeout_ms": 10_000,
        },
    )
    assert bad_type["error_code"] == INVALID_REQUEST
    (result,) = bad_type["replica_election_results"]
    assert [p["error_code"] for p in result["partition_result"]] == [INVALID_REQUEST]


# -- producers and transactions ------------------------------------------------------------------


def test_open_transactions_are_listed_and_their_producers_described(
    bootstrap: str, sock: socket.socket
) -> None:
    create(sock, ("txn-topic", 1))
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "admin-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txn-topic", b"pending", partition=0)
    producer.flush(30)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = [t for ts in admin.list_transactions().values() for t in ts]
        (txn,) = [t for t in listed if t.transactional_id == "admin-txn"]
        assert txn.state == "Ongoing"
        ongoing = admin.list_transactions(
            state_filters=["Ongoing"], producer_id_filters=[txn.producer_id]
        )
        assert [t.transactional_id for ts in ongoing.values() for t in ts] == ["admin-txn"]
        states = admin.describe_producers([KafkaPythonPartition("txn-topic", 0)])
        (state,) = states[KafkaPythonPartition("txn-topic", 0)].active_producers
        assert (state.producer_id, state.current_transaction_start_offset) == (txn.producer_id, 0)
        assert state.last_sequence == 0
    finally:
        admin.close()

    raw = call(
        sock,
        LIST_TRANSACTIONS,
        0,
        {"state_filters": ["Ongoing", "Unheard-of"], "producer_id_filters": []},
    )
    assert raw["error_code"] == 0 and raw["unknown_state_filters"] == ["Unheard-of"]
    assert [t["transactional_id"] for t in raw["transaction_states"]] == ["admin-txn"]
    # v1: only transactions running longer than the duration (an hour: none).
    long_running = call(
        sock,
        LIST_TRANSACTIONS,
        1,
        {"state_filters": [], "producer_id_filters": [], "duration_filter": 3_600_000},
    )
    assert long_running["transaction_states"] == []
    described = call(
        sock,
        DESCRIBE_PRODUCERS,
        0,
        {
            "topics": [
                {"name": "txn-topic", "partition_indexes": [0, 3]},
                {"name": "txn-none", "partition_indexes": [0]},
            ]
        },
    )
    got = {
        (t["name"], p["partition_index"]): (p["error_code"], len(p["active_producers"]))
        for t in described["topics"]
        for p in t["partitions"]
    }
    assert got == {
        ("txn-topic", 0): (0, 1),
        ("txn-topic", 3): (UNKNOWN_TOPIC, 0),
        ("txn-none", 0): (UNKNOWN_TOPIC, 0),
    }
    producer.abort_transaction(30)
    wait_for(
        lambda: (
            not call(
                sock,
                LIST_TRANSACTIONS,
                1,
                {"state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": -1},
            )["transaction_states"]
        ),
        "the transaction ended",
    )
