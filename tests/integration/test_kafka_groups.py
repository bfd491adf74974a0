"""Consumer groups over Kafka's protocol (``server/kafka/groups.py`` and
``consumer_groups.py``): unmodified clients consume in classic and KIP-848 groups (two
consumers split the partitions, every record is consumed once, commits are resumed from),
list, describe and delete groups; raw requests check the error paths and the old and new
versions of ConsumerGroupHeartbeat, ConsumerGroupDescribe, DescribeGroups, ListGroups,
DeleteGroups, OffsetDelete, OffsetCommit and OffsetFetch."""

from __future__ import annotations

import asyncio
import functools
import socket
import struct
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupType,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from rillet import _core
from rillet import errors as e
from rillet.server.kafka.consumer_groups import GROUP_AUTHORIZED_OPERATIONS, KafkaConsumerGroups
from rillet.server.kafka.request import KafkaRequest
from tests.support.kafka_wire import call, connect, kafka_broker, kafka_port
from tests.support.mini_broker import MiniBroker

with warnings.catch_warnings():
    # kafka-python reads its JSON schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, API_VERSIONS = 8, 9, 10, 18
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
HEARTBEAT, DESCRIBE = 68, 69  # ConsumerGroupHeartbeat, ConsumerGroupDescribe
JOIN_GROUP, SYNC_GROUP = 11, 14

TOPICS = {
    "classic-t": 4,
    "kip848-t": 4,
    "raw-t": 4,
    "aio-t": 2,
    "admin-t": 2,
    "rx-a": 2,
    "rx-b": 1,
}
OVERRIDES = {
    "offsets.topic.num.partitions": "4",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "6000",
}
# ConsumerProtocol (v0) subscription to admin-t and assignment of its partition 1.
SUBSCRIPTION = struct.pack(">hih7si", 0, 1, 7, b"admin-t", -1)
ASSIGNMENT = struct.pack(">hih7siii", 0, 1, 7, b"admin-t", 1, 1, -1)
DEADLINE_S = 45  # a bound so that a broken broker fails the test instead of hanging it


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniBroker]:
    b = kafka_broker(tmp_path_factory.mktemp("groups") / "data", TOPICS, OVERRIDES)
    try:
        yield b
    finally:
        b.close()


def _bootstrap(broker: MiniBroker) -> str:
    return f"127.0.0.1:{kafka_port(broker)}"


def _until(what: str, check: Callable[[], Any]) -> Any:
    """``check()`` until it is truthy (retrying what a broker answers while it starts)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def _produce(broker: MiniBroker, topic: str, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": _bootstrap(broker), "linger.ms": 0})
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=i % partitions)
    assert producer.flush(30) == 0


_NOT_READY = (
    e.CoordinatorNotAvailableError.code,
    e.NotCoordinatorError.code,
    e.CoordinatorLoadInProgressError.code,
)


def _ready(s: socket.socket, *groups: str) -> None:
    """Waits until the groups' coordinator is up (the first FindCoordinator creates
    ``__consumer_offsets``, then each partition loads)."""

    def ready(group: str) -> bool:
        call(s, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        fetched = call(s, OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": []}]})
        return fetched["groups"][0]["error_code"] not in _NOT_READY

    for group in groups:
        _until(f"the coordinator of {group}", functools.partial(ready, group))


def _join(s: socket.socket, group: str, topics: list[str], version: int = 0, **extra: Any) -> Any:
    """A KIP-848 join (epoch 0), once the coordinator is up."""
    _ready(s, group)
    body = {**_join_body(group, topics), **extra}
    return call(s, HEARTBEAT, version, body)


def _topic_ids(s: socket.socket) -> dict[str, uuid.UUID]:
    metadata = call(s, 3, 12, {"topics": None})
    return {t["name"]: t["topic_id"] for t in metadata["topics"]}


# -- real clients -----------------------------------------------------------------------------


def _consumer(broker: MiniBroker, group: str, protocol: str) -> RdConsumer:
    config: dict[str, Any] = {
        "bootstrap.servers": _bootstrap(broker),
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "classic":
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    return RdConsumer(config)


def _partitions(c: RdConsumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def _poll_until(consumers: list[RdConsumer], count: int) -> list[list[Any]]:
    """Messages each consumer got, polling them in turn until ``count`` in all."""
    got: list[list[Any]] = [[] for _ in consumers]

    def poll() -> bool:
        for i, c in enumerate(consumers):
            m = c.poll(0.05)
            if m is not None:
                assert m.error() is None, m.error()
                got[i].append(m)
        return sum(map(len, got)) >= count

    _until(f"{count} records", poll)
    return got


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_consumers_split_a_topic_commit_and_a_third_resumes(
    broker: MiniBroker, protocol: str
) -> None:
    topic = "classic-t" if protocol == "classic" else "kip848-t"
    group = f"rd-{protocol}"
    c1, c2 = _consumer(broker, group, protocol), _consumer(broker, group, protocol)
    try:
        c1.subscribe([topic])
        c2.subscribe([topic])

        def split() -> bool:
            for c in (c1, c2):
                c.poll(0.05)
            a1, a2 = _partitions(c1), _partitions(c2)
            return bool(a1 and a2 and not a1 & a2 and a1 | a2 == {0, 1, 2, 3})

        _until("the partitions split between two members", split)
        values = [b"%s-%d" % (protocol.encode(), i) for i in range(40)]
        _produce(broker, topic, values, 4)
        got = _poll_until([c1, c2], 40)
        assert sorted(m.value() for ms in got for m in ms) == sorted(values)  # each once
        for c, ms in zip((c1, c2), got, strict=True):
            assert {m.partition() for m in ms} <= _partitions(c)
            committed = c.commit(asynchronous=False)
            assert committed and all(tp.error is None for tp in committed)
        every = [TopicPartition(topic, p) for p in range(4)]
        assert [tp.offset for tp in c1.committed(every, timeout=10)] == [10, 10, 10, 10]

        # The admin client sees the group, its type and its two members' assignments.
        admin = AdminClient({"bootstrap.servers": _bootstrap(broker)})
        expected_type = (
            ConsumerGroupType.CLASSIC if protocol == "classic" else ConsumerGroupType.CONSUMER
        )
        listed = admin.list_consumer_groups(types={expected_type}).result(30)
        assert group in {g.group_id for g in listed.valid}
        assert all(g.type == expected_type for g in listed.valid)
        other = ConsumerGroupType.CONSUMER if protocol == "classic" else ConsumerGroupType.CLASSIC
        listed = admin.list_consumer_groups(types={other}).result(30)
        assert group not in {g.group_id for g in listed.valid}
        stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(30)
        assert group in {g.group_id for g in stable.valid}
        description = admin.describe_consumer_groups([group]).get(group)
        assert description is not None
        d = description.result(30)
        assert (d.group_id, d.type, d.state) == (group, expected_type, ConsumerGroupState.STABLE)
        assert d.partition_assignor == ("range" if protocol == "classic" else "uniform")
        assigned = sorted(
            tp.partition for member in d.members for tp in member.assignment.topic_partitions
        )
        assert assigned == [0, 1, 2, 3] and len(d.members) == 2
        # A group with members cannot be deleted.
        (deleting,) = admin.delete_consumer_groups([group]).values()
        with pytest.raises(KafkaException) as refused:
            deleting.result(30)
        assert refused.value.args[0].code() == e.NonEmptyGroupError.code
    finally:
        c1.close()
        c2.close()

    more = [b"%s-more-%d" % (protocol.encode(), i) for i in range(8)]
    _produce(broker, topic, more, 4)
    c3 = _consumer(broker, group, protocol)
    try:
        c3.subscribe([topic])
        (resumed,) = _poll_until([c3], 8)
        assert sorted(m.value() for m in resumed) == sorted(more)  # from the commits
        assert c3.poll(0.5) is None
        assert c3.commit(asynchronous=False)
    finally:
        c3.close()
    # Empty now: deleted with its offsets.
    admin = AdminClient({"bootstrap.servers": _bootstrap(broker)})

    def deleted() -> bool:
        (future,) = admin.delete_consumer_groups([group]).values()
        try:
            future.result(30)
        except KafkaException as refused:  # the last member's leave may still be on its way
            assert refused.args[0].code() == e.NonEmptyGroupError.code
            return False
        return True

    _until(f"{group} deleted", deleted)
    with connect(broker) as s:
        fetched = call(s, OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}]})
        assert fetched["groups"] == [{"group_id": group, "topics": [], "error_code": 0}]


def test_a_kip848_consumer_subscribes_by_regex(broker: MiniBroker) -> None:
    """librdkafka sends the pattern to the broker (ConsumerGroupHeartbeat v1), which
    resolves it against the topics it has."""
    for topic in ("rx-a", "rx-b", "raw-t"):
        _produce(broker, topic, [topic.encode()], 1)
    c = _consumer(broker, "rd-regex", "consumer")
    try:
        c.subscribe(["^rx-.*"])
        (got,) = _poll_until([c], 2)
        assert sorted(m.value() for m in got) == [b"rx-a", b"rx-b"]
        assert {(tp.topic, tp.partition) for tp in c.assignment()} == {
            ("rx-a", 0),
            ("rx-a", 1),
            ("rx-b", 0),
        }
        with connect(broker) as s:
            (group,) = call(s, DESCRIBE, 0, {"group_ids": ["rd-regex"]})["groups"]
        (member,) = group["members"]
        assert member["subscribed_topic_regex"] is not None
        assert "^rx-.*" in member["subscribed_topic_regex"]
        assert member["subscribed_topic_names"] == []
    finally:
        c.close()


def test_aiokafka_consumes_in_a_group_and_commits(broker: MiniBroker) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    values = [b"aio-%d" % i for i in range(12)]
    _produce(broker, "aio-t", values, 2)

    async def consume() -> tuple[list[bytes], dict[int, int | None]]:
        consumer = AIOKafkaConsumer(
            "aio-t",
            bootstrap_servers=_bootstrap(broker),
            group_id="aio-g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(DEADLINE_S):
                while len(got) < len(values):
                    batches = await consumer.getmany(timeout_ms=200)
                    got += [r.value for records in batches.values() for r in records]
            await consumer.commit()
            committed = {p: await consumer.committed(AioTopicPartition("aio-t", p)) for p in (0, 1)}
            return got, committed
        finally:
            await consumer.stop()

    got, committed = asyncio.run(consume())
    assert sorted(got) == sorted(values)
    assert committed == {0: 6, 1: 6}


def test_kafka_python_admin_lists_describes_and_deletes_offsets(broker: MiniBroker) -> None:
    with connect(broker) as s:
        joined = _join(s, "kp-consumer", ["admin-t"])
        assert joined["error_code"] == 0
        # A classic group of one member, Stable after its SyncGroup.
        join = {
            "group_id": "kp-classic",
            "session_timeout_ms": 30_000,
            "rebalance_timeout_ms": 30_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
        }
        first = call(s, JOIN_GROUP, 5, join)
        assert first["error_code"] == e.MemberIdRequiredError.code
        joined_classic = call(s, JOIN_GROUP, 5, {**join, "member_id": first["member_id"]})
        member = joined_classic["member_id"]
        synced = call(
            s,
            SYNC_GROUP,
            5,
            {
                "group_id": "kp-classic",
                "generation_id": joined_classic["generation_id"],
                "member_id": member,
                "assignments": [{"member_id": member, "assignment": ASSIGNMENT}],
            },
        )
        assert synced["error_code"] == 0
        # Offsets of a simple group to delete.
        _ready(s, "kp-simple", "kp-classic", "kp-nope")
        commit = {
            "group_id": "kp-simple",
            "topics": [{"name": "admin-t", "partitions": [_commit_partition(0, 3)]}],
        }
        assert _errors(call(s, OFFSET_COMMIT, 8, commit)) == [0]

    admin = KafkaAdminClient(bootstrap_servers=_bootstrap(broker))
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed["kp-classic"]["group_state"] == "Stable"
        assert listed["kp-classic"]["group_type"] == "classic"
        assert listed["kp-consumer"]["group_type"] == "consumer"
        assert listed["kp-consumer"]["protocol_type"] == "consumer"
        only = admin.list_groups(states_filter=["Stable"], types_filter=["classic"])
        assert "kp-classic" in {g["group_id"] for g in only}
        assert "kp-consumer" not in {g["group_id"] for g in only}

        described = admin.describe_groups(["kp-classic", "kp-consumer", "kp-nope"])
        classic = described["kp-classic"]
        assert (classic["group_state"], classic["protocol_data"]) == ("Stable", "range")
        (m,) = classic["members"]
        assert (m["member_id"], m["client_id"]) == (member, "raw")
        assert m["client_host"] == "/127.0.0.1"
        assert m["member_metadata"]["topics"] == ["admin-t"]
        assert m["member_assignment"]["assigned_partitions"] == [
            {"topic": "admin-t", "partitions": [1]}
        ]
        # Asked for (kafka-python always does): every operation Kafka has on a group.
        assert sorted(classic["authorized_operations"]) == [
            "ALTER_CONFIGS",
            "DELETE",
            "DESCRIBE",
            "DESCRIBE_CONFIGS",
            "READ",
        ]
        # DescribeGroups v5 answers a KIP-848 group, like an unknown one, Dead.
        assert described["kp-consumer"]["group_state"] == "Dead"
        assert described["kp-consumer"]["members"] == []
        assert described["kp-nope"]["group_state"] == "Dead"

        tp = KpTopicPartition("admin-t", 0)
        assert admin.list_group_offsets({"kp-simple": None})["kp-simple"][tp].offset == 3
        admin.delete_group_offsets("kp-simple", [tp])
        assert tp not in admin.list_group_offsets({"kp-simple": None})["kp-simple"]
    finally:
        admin.close()


# -- raw requests: KIP-848 ------------------------------------------------------------------


def test_api_versions_list_the_group_keys(broker: MiniBroker) -> None:
    with connect(broker) as s:
        versions = call(s, API_VERSIONS, 3, {"client_software_name": "raw"})
    served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
    assert served[DESCRIBE_GROUPS] == (0, 5) and served[LIST_GROUPS] == (0, 5)
    assert served[DELETE_GROUPS] == (0, 2) and served[OFFSET_DELETE] == (0, 0)
    assert served[HEARTBEAT] == (0, 1) and served[DESCRIBE] == (0, 0)
    assert served[OFFSET_COMMIT] == (2, 9) and served[OFFSET_FETCH] == (1, 9)


def test_heartbeat_joins_reconciles_fences_and_leaves(broker: MiniBroker) -> None:
    with connect(broker) as s:
        ids = _topic_ids(s)
        # v0: the coordinator names the member.
        a = _join(s, "hb", ["raw-t"])
        assert a["error_code"] == 0 and a["error_message"] is None
        assert a["member_id"] and a["member_epoch"] == 1 and a["heartbeat_interval_ms"] == 300
        (assigned,) = a["assignment"]["topic_partitions"]
        assert (assigned["topic_id"], assigned["partitions"]) == (ids["raw-t"], [0, 1, 2, 3])
        a_id = a["member_id"]
        # v1 (KIP-1082): the member names itself; an empty id is refused.
        no_id = call(s, HEARTBEAT, 1, {**_join_body("hb", ["raw-t"]), "member_id": ""})
        assert no_id["error_code"] == e.InvalidRequestError.code
        assert no_id["error_message"] == "MemberId can't be empty."
        b = call(s, HEARTBEAT, 1, {**_join_body("hb", ["raw-t"]), "member_id": "member-b"})
        assert (b["error_code"], b["member_id"], b["member_epoch"]) == (0, "member-b", 2)
        assert b["assignment"] == {"topic_partitions": []}  # a's partitions are not free yet

        def beat(member: str, epoch: int, owned: list[int] | None, version: int = 0) -> Any:
            body: dict[str, Any] = {"group_id": "hb", "member_id": member, "member_epoch": epoch}
            if owned is not None:
                body["topic_partitions"] = [{"topic_id": ids["raw-t"], "partitions": owned}]
            return call(s, HEARTBEAT, version, body)

        # a is asked to give up two partitions, keeping its epoch until it has.
        revoke = beat(a_id, 1, [0, 1, 2, 3])
        assert revoke["error_code"] == 0 and revoke["member_epoch"] == 1
        (kept,) = revoke["assignment"]["topic_partitions"]
        assert len(kept["partitions"]) == 2
        done = beat(a_id, 1, kept["partitions"])
        assert done["member_epoch"] == 2
        b_got = beat("member-b", 2, [], version=1)
        (b_assigned,) = b_got["assignment"]["topic_partitions"]
        assert sorted(kept["partitions"] + b_assigned["partitions"]) == [0, 1, 2, 3]

        # Fencing: an epoch ahead of the coordinator's, an unknown member.
        ahead = beat(a_id, 7, None)
        assert ahead["error_code"] == e.FencedMemberEpochError.code
        assert "greater member epoch (7)" in ahead["error_message"]
        assert ahead["member_id"] is None and ahead["assignment"] is None
        unknown = beat("nobody", 2, None)
        assert unknown["error_code"] == e.UnknownMemberIdError.code
        assert "nobody" in unknown["error_message"]

        # Leaving: epoch -1 answers -1; the member is gone, the group epoch moves.
        left = beat("member-b", -1, None, version=1)
        assert (left["error_code"], left["member_id"], left["member_epoch"]) == (0, "member-b", -1)
        assert beat("member-b", 3, None)["error_code"] == e.UnknownMemberIdError.code
        described = call(s, DESCRIBE, 0, {"group_ids": ["hb"]})
        (group,) = described["groups"]
        assert [m["member_id"] for m in group["members"]] == [a_id]
        assert group["group_epoch"] == 3


def test_a_static_member_leaves_for_a_while_and_its_next_incarnation_takes_over(
    broker: MiniBroker,
) -> None:
    with connect(broker) as s:
        first = _join(s, "static", ["raw-t"], version=1, member_id="s-1", instance_id="inst")
        assert (first["error_code"], first["member_epoch"]) == (0, 1)
        (owned,) = first["assignment"]["topic_partitions"]
        # Epoch -2: gone for now, the assignment is kept for the instance.
        left = call(
            s,
            HEARTBEAT,
            1,
            {"group_id": "static", "member_id": "s-1", "member_epoch": -2, "instance_id": "inst"},
        )
        assert (left["error_code"], left["member_id"], left["member_epoch"]) == (0, "s-1", -2)
        back = call(
            s,
            HEARTBEAT,
            1,
            {**_join_body("static", ["raw-t"]), "member_id": "s-2", "instance_id": "inst"},
        )
        assert (back["error_code"], back["member_id"], back["member_epoch"]) == (0, "s-2", 1)
        assert back["assignment"]["topic_partitions"] == [owned]  # no rebalance
        # The previous incarnation is fenced by its instance id.
        old = call(
            s,
            HEARTBEAT,
            1,
            {"group_id": "static", "member_id": "s-1", "member_epoch": 1, "instance_id": "inst"},
        )
        assert old["error_code"] == e.FencedInstanceIdError.code
        assert "s-2" in old["error_message"]


def _join_body(group: str, topics: list[str]) -> dict[str, Any]:
    return {
        "group_id": group,
        "member_id": "",
        "member_epoch": 0,
        "rebalance_timeout_ms": 30_000,
        "subscribed_topic_names": topics,
        "topic_partitions": [],
    }


def test_heartbeat_refusals_name_kafkas_errors(broker: MiniBroker) -> None:
    with connect(broker) as s:
        assert _join(s, "hb-errors", ["raw-t"])["error_code"] == 0
        _ready(s, "hb-none", "hb-classic")
        cases = [
            ({"server_assignor": "sticky"}, e.UnsupportedAssignorError, "sticky"),
            ({"member_epoch": -3, "member_id": "x"}, e.InvalidRequestError, "MemberEpoch"),
            ({"rebalance_timeout_ms": -1}, e.InvalidRequestError, "RebalanceTimeoutMs"),
            ({"subscribed_topic_names": None}, e.InvalidRequestError, "SubscribedTopicNames"),
            ({"topic_partitions": None}, e.InvalidRequestError, "TopicPartitions"),
            ({"member_id": "x", "member_epoch": 4}, e.UnknownMemberIdError, "x"),
            ({"subscribed_topic_regex": "("}, e.InvalidRegularExpressionError, "("),
        ]
        for change, error, said in cases:
            body = {**_join_body("hb-errors", ["raw-t"]), "member_id": "m-x", **change}
            r = call(s, HEARTBEAT, 1, body)
            assert (r["error_code"], r["member_epoch"]) == (error.code, 0), change
            assert said in r["error_message"], (change, r["error_message"])
        # Leaving a group that does not exist.
        gone = call(s, HEARTBEAT, 1, {"group_id": "hb-none", "member_id": "m", "member_epoch": -1})
        assert gone["error_code"] == e.GroupIdNotFoundError.code
        assert "hb-none" in gone["error_message"]
        # A consumer heartbeat to a classic group with members.
        classic = call(
            s,
            JOIN_GROUP,
            9,
            {
                "group_id": "hb-classic",
                "session_timeout_ms": 30_000,
                "rebalance_timeout_ms": 30_000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        call(
            s,
            JOIN_GROUP,
            9,
            {
                "group_id": "hb-classic",
                "session_timeout_ms": 30_000,
                "rebalance_timeout_ms": 30_000,
                "member_id": classic["member_id"],
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        r = call(s, HEARTBEAT, 0, _join_body("hb-classic", ["raw-t"]))
        assert r["error_code"] == e.GroupIdNotFoundError.code
        assert "not a consumer group" in r["error_message"]


def test_heartbeat_before_the_coordinator_exists_is_not_coordinator(tmp_path: Path) -> None:
    b = kafka_broker(tmp_path / "data", {"t": 1}, OVERRIDES)
    try:
        with connect(b) as s:
            # No FindCoordinator yet: no __consumer_offsets, no shard for the group here.
            r = call(s, HEARTBEAT, 0, _join_body("early", ["t"]))
            assert r["error_code"] == e.NotCoordinatorError.code
            assert "does not coordinate group 'early'" in r["error_message"]
            described = call(s, DESCRIBE, 0, {"group_ids": ["early"]})
            assert described["groups"][0]["error_code"] == e.NotCoordinatorError.code
            assert call(s, LIST_GROUPS, 5, {})["groups"] == []
    finally:
        b.close()


def test_load_in_progress_is_answered_with_its_message() -> None:
    """While the group's partition loads the coordinator refuses with
    COORDINATOR_LOAD_IN_PROGRESS (Kafka's retriable error); the handler passes it on with
    its message, in a response the codec encodes."""

    class Loading:
        image = None

        async def run(self, group_id: str, operation: Any, on_error: Any) -> Any:
            return on_error(e.CoordinatorLoadInProgressError("__consumer_offsets-3 is loading"))

        async def run_per_group(self, group_ids: Any, operation: Any, on_error: Any) -> Any:
            loading = e.CoordinatorLoadInProgressError("__consumer_offsets-3 is loading")
            return [on_error(g, loading) for g in group_ids]

    service = KafkaConsumerGroups(Loading())  # type: ignore[arg-type]

    def request(api_key: int, body: dict[str, Any]) -> KafkaRequest:
        return KafkaRequest(api_key, 0, 1, "c", body, "KAFKA", "127.0.0.1")

    heartbeat = asyncio.run(
        service.consumer_group_heartbeat(request(HEARTBEAT, _join_body("g", ["t"])))
    )
    assert heartbeat["error_code"] == e.CoordinatorLoadInProgressError.code
    assert heartbeat["error_message"] == "__consumer_offsets-3 is loading"
    frame = _core.kafka_encode_response(HEARTBEAT, 0, 1, heartbeat)
    _, decoded = _core.kafka_decode_response(HEARTBEAT, 0, frame[4:])
    assert decoded["error_code"] == e.CoordinatorLoadInProgressError.code
    described = asyncio.run(
        service.consumer_group_describe(request(DESCRIBE, {"group_ids": ["g"]}))
    )
    (group,) = described["groups"]
    assert (group["error_code"], group["error_message"]) == (
        e.CoordinatorLoadInProgressError.code,
        "__consumer_offsets-3 is loading",
    )


def test_consumer_group_describe(broker: MiniBroker) -> None:
    with connect(broker) as s:
        ids = _topic_ids(s)
        a = _join(s, "cgd", ["raw-t"], version=1, member_id="cgd-a", rack_id="r1")
        assert a["error_code"] == 0
        _ready(s, "cgd-simple", "cgd-none")
        simple = {
            "group_id": "cgd-simple",
            "topics": [{"name": "raw-t", "partitions": [_commit_partition(0, 1)]}],
        }
        assert _errors(call(s, OFFSET_COMMIT, 9, simple)) == [0]
        described = call(
            s,
            DESCRIBE,
            0,
            {
                "group_ids": ["cgd", "cgd-none", "cgd-simple"],
                "include_authorized_operations": True,
            },
        )
        group, none, classic = described["groups"]
        assert (group["error_code"], group["group_state"], group["assignor_name"]) == (
            0,
            "Stable",
            "uniform",
        )
        assert (group["group_epoch"], group["assignment_epoch"]) == (1, 1)
        assert group["authorized_operations"] == GROUP_AUTHORIZED_OPERATIONS
        (member,) = group["members"]
        assert (member["member_id"], member["rack_id"], member["client_id"]) == (
            "cgd-a",
            "r1",
            "raw",
        )
        assert member["client_host"] == "/127.0.0.1" and member["member_epoch"] == 1
        assert member["subscribed_topic_names"] == ["raw-t"]
        expected = {
            "topic_partitions": [
                {"topic_id": ids["raw-t"], "topic_name": "raw-t", "partitions": [0, 1, 2, 3]}
            ]
        }
        assert member["assignment"] == member["target_assignment"] == expected
        assert none["error_code"] == e.GroupIdNotFoundError.code and none["error_message"]
        assert none["members"] == [] and none["authorized_operations"] == -(2**31)
        # A classic group is not described: clients fall back to DescribeGroups on this error.
        assert classic["error_code"] == e.GroupIdNotFoundError.code
        assert classic["error_message"] == "Group cgd-simple is not a consumer group."


# -- raw requests: describing, listing and deleting groups -------------------------------------


def _commit_partition(index: int, offset: int) -> dict[str, Any]:
    return {"partition_index": index, "committed_offset": offset, "committed_metadata": "m"}


def _errors(response: Any) -> list[int]:
    return [p["error_code"] for t in response["topics"] for p in t["partitions"]]


def test_describe_and_list_groups_at_old_and_new_versions(broker: MiniBroker) -> None:
    with connect(broker) as s:
        assert _join(s, "dl-consumer", ["raw-t"])["error_code"] == 0
        _ready(s, "dl-simple", "dl-none")
        simple = {
            "group_id": "dl-simple",
            "topics": [{"name": "raw-t", "partitions": [_commit_partition(1, 5)]}],
        }
        assert _errors(call(s, OFFSET_COMMIT, 2, simple)) == [0]

        for version in (0, 5):
            described = call(s, DESCRIBE_GROUPS, version, {"groups": ["dl-consumer", "dl-none"]})
            for g in described["groups"]:
                assert (g["error_code"], g["group_state"], g["members"]) == (0, "Dead", [])
        simple_described = call(s, DESCRIBE_GROUPS, 1, {"groups": ["dl-simple"]})["groups"]
        assert [(g["group_state"], g["protocol_type"]) for g in simple_described] == [("Empty", "")]

        def listed(version: int, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
            response = call(s, LIST_GROUPS, version, body)
            assert response["error_code"] == 0
            return {g["group_id"]: g for g in response["groups"]}

        old = listed(0, {})
        assert old["dl-consumer"] == {"group_id": "dl-consumer", "protocol_type": "consumer"}
        assert old["dl-simple"] == {"group_id": "dl-simple", "protocol_type": ""}
        v4 = listed(4, {"states_filter": ["stable"]})
        assert v4["dl-consumer"]["group_state"] == "Stable" and "dl-simple" not in v4
        v5 = listed(5, {"states_filter": [], "types_filter": ["consumer"]})
        assert v5["dl-consumer"]["group_type"] == "consumer" and "dl-simple" not in v5
        v5 = listed(5, {"states_filter": ["Empty"], "types_filter": ["classic"]})
        assert v5["dl-simple"] == {
            "group_id": "dl-simple",
            "protocol_type": "",
            "group_state": "Empty",
            "group_type": "classic",
        }
        assert "dl-consumer" not in v5
        assert "dl-simple" not in listed(5, {"types_filter": ["share"]})


def test_delete_groups_and_offset_delete(broker: MiniBroker) -> None:
    with connect(broker) as s:
        assert _join(s, "del-busy", ["raw-t"])["error_code"] == 0
        _ready(s, "del-empty", "del-none")
        commit = {
            "group_id": "del-empty",
            "topics": [
                {"name": "raw-t", "partitions": [_commit_partition(0, 4), _commit_partition(1, 6)]}
            ],
        }
        assert _errors(call(s, OFFSET_COMMIT, 9, commit)) == [0, 0]

        # OffsetDelete: an unknown topic and partition, a subscribed topic, an unknown group.
        deleted = call(
            s,
            OFFSET_DELETE,
            0,
            {
                "group_id": "del-empty",
                "topics": [
                    {
                        "name": "raw-t",
                        "partitions": [{"partition_index": 0}, {"partition_index": 9}],
                    },
                    {"name": "nope", "partitions": [{"partition_index": 0}]},
                ],
            },
        )
        assert deleted["error_code"] == 0
        assert {
            (t["name"], p["partition_index"]): p["error_code"]
            for t in deleted["topics"]
            for p in t["partitions"]
        } == {
            ("raw-t", 0): 0,
            ("raw-t", 9): e.UnknownTopicOrPartitionError.code,
            ("nope", 0): e.UnknownTopicOrPartitionError.code,
        }
        fetched = call(
            s, OFFSET_FETCH, 7, {"group_id": "del-empty", "topics": None, "require_stable": False}
        )
        assert [
            (p["partition_index"], p["committed_offset"])
            for p in fetched["topics"][0]["partitions"]
        ] == [(1, 6)]
        subscribed = call(
            s,
            OFFSET_DELETE,
            0,
            {
                "group_id": "del-busy",
                "topics": [{"name": "raw-t", "partitions": [{"partition_index": 0}]}],
            },
        )
        assert _errors(subscribed) == [e.GroupSubscribedToTopicError.code]
        unknown_group = call(
            s,
            OFFSET_DELETE,
            0,
            {
                "group_id": "del-none",
                "topics": [{"name": "raw-t", "partitions": [{"partition_index": 0}]}],
            },
        )
        assert (unknown_group["error_code"], unknown_group["topics"]) == (
            e.GroupIdNotFoundError.code,
            [],
        )

        # DeleteGroups at its first and last versions.
        for version in (0, 2):
            results = call(s, DELETE_GROUPS, version, {"groups_names": ["del-busy", "del-none"]})[
                "results"
            ]
            assert {r["group_id"]: r["error_code"] for r in results} == {
                "del-busy": e.NonEmptyGroupError.code,
                "del-none": e.GroupIdNotFoundError.code,
            }
        results = call(s, DELETE_GROUPS, 2, {"groups_names": ["del-empty", "del-empty"]})
        assert results["results"] == [{"group_id": "del-empty", "error_code": 0}]
        gone = call(s, DESCRIBE_GROUPS, 5, {"groups": ["del-empty"]})["groups"][0]
        assert gone["group_state"] == "Dead"
        after = call(s, OFFSET_FETCH, 8, {"groups": [{"group_id": "del-empty", "topics": None}]})
        assert after["groups"][0]["topics"] == []


# -- raw requests: offsets of KIP-848 members ---------------------------------------------------


def test_offset_commit_and_fetch_check_member_epochs(broker: MiniBroker) -> None:
    with connect(broker) as s:
        a = _join(s, "off", ["raw-t"], version=1, member_id="off-a")
        _ready(s, "off-none")
        epoch = a["member_epoch"]

        def commit(version: int, member: str, generation: int, topic: str = "raw-t") -> list[int]:
            body = {
                "group_id": "off",
                "generation_id_or_member_epoch": generation,
                "member_id": member,
                "topics": [{"name": topic, "partitions": [_commit_partition(2, 17)]}],
            }
            return _errors(call(s, OFFSET_COMMIT, version, body))

        assert commit(9, "off-a", epoch) == [0]
        assert commit(9, "off-a", epoch + 1) == [e.StaleMemberEpochError.code]
        assert commit(9, "off-x", epoch) == [e.UnknownMemberIdError.code]
        assert commit(9, "off-a", epoch, topic="nope") == [e.UnknownTopicOrPartitionError.code]
        # A KIP-848 member must use v9; an admin commit to a group with members is refused.
        assert commit(8, "off-a", epoch) == [e.UnsupportedVersionError.code]
        assert commit(9, "", -1) == [e.UnknownMemberIdError.code]
        # A generation for a group that does not exist: ILLEGAL_GENERATION before v9.
        body = {
            "group_id": "off-none",
            "generation_id_or_member_epoch": 3,
            "member_id": "m",
            "topics": [{"name": "raw-t", "partitions": [_commit_partition(0, 1)]}],
        }
        assert _errors(call(s, OFFSET_COMMIT, 8, body)) == [e.IllegalGenerationError.code]
        assert _errors(call(s, OFFSET_COMMIT, 9, body)) == [e.GroupIdNotFoundError.code]

        def fetch(member: str | None, member_epoch: int) -> Any:
            group = {
                "group_id": "off",
                "member_id": member,
                "member_epoch": member_epoch,
                "topics": [{"name": "raw-t", "partition_indexes": [2, 3]}],
            }
            other = {"group_id": "off-none", "topics": None}
            return call(s, OFFSET_FETCH, 9, {"groups": [group, other], "require_stable": True})

        good, unknown = fetch("off-a", epoch)["groups"]
        assert good["error_code"] == 0
        assert [
            (p["partition_index"], p["committed_offset"], p["metadata"])
            for p in good["topics"][0]["partitions"]
        ] == [(2, 17, "m"), (3, -1, "")]
        assert unknown == {"group_id": "off-none", "topics": [], "error_code": 0}
        stale, _ = fetch("off-a", epoch + 5)["groups"]
        assert (stale["error_code"], stale["topics"]) == (e.StaleMemberEpochError.code, [])
        assert fetch("off-x", epoch)["groups"][0]["error_code"] == e.UnknownMemberIdError.code
        admin_fetch, _ = fetch(None, -1)["groups"]  # no member: an admin's fetch
        assert admin_fetch["error_code"] == 0
        # v8 has no member fields: fetched as an admin.
        v8 = call(s, OFFSET_FETCH, 8, {"groups": [{"group_id": "off", "topics": None}]})
        assert v8["groups"][0]["topics"][0]["partitions"][0]["committed_offset"] == 17


def test_every_served_version_is_answered(broker: MiniBroker) -> None:
    """Each version of the group APIs reads its request and answers in its own shape."""
    with connect(broker) as s:
        _ready(s, "versions", "versions-none")
        for version in range(2, 10):
            commit = {
                "group_id": "versions",
                "topics": [{"name": "raw-t", "partitions": [_commit_partition(3, version)]}],
            }
            assert _errors(call(s, OFFSET_COMMIT, version, commit)) == [0], version
        for version in range(1, 10):
            if version >= 8:
                group = {
                    "group_id": "versions",
                    "topics": [{"name": "raw-t", "partition_indexes": [3]}],
                }
                (answer,) = call(s, OFFSET_FETCH, version, {"groups": [group]})["groups"]
            else:
                answer = call(
                    s,
                    OFFSET_FETCH,
                    version,
                    {
                        "group_id": "versions",
                        "topics": [{"name": "raw-t", "partition_indexes": [3]}],
                    },
                )
            assert answer["topics"][0]["partitions"][0]["committed_offset"] == 9, version
        for version in range(6):
            (described,) = call(s, DESCRIBE_GROUPS, version, {"groups": ["versions"]})["groups"]
            assert (described["error_code"], described["group_state"]) == (0, "Empty"), version
            assert ("authorized_operations" in described) == (version >= 3)
            listed = call(s, LIST_GROUPS, version, {})
            assert listed["error_code"] == 0
            assert "versions" in {g["group_id"] for g in listed["groups"]}
        for version in range(3):
            (result,) = call(s, DELETE_GROUPS, version, {"groups_names": ["versions-none"]})[
                "results"
            ]
            assert result["error_code"] == e.GroupIdNotFoundError.code
        for version in range(2):
            left = call(
                s,
                HEARTBEAT,
                version,
                {"group_id": "versions-none", "member_id": "m", "member_epoch": -1},
            )
            assert left["error_code"] == e.GroupIdNotFoundError.code
