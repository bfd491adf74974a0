"""Incremental fetch sessions (KIP-227) on the Kafka listener: raw Fetch requests through the
codec (a full fetch creating a session, incremental ones answered only with news, forgotten
partitions by name and by topic id, the session errors, closing, the long poll, the cache's
size from ``max.incremental.fetch.session.cache.slots``), and unmodified consumers reading
every record of several partitions while a producer goes on: kafka-python, which keeps fetch
sessions, and confluent-kafka (librdkafka), which fetches sessionless (session id 0, epoch
-1, in every request)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from rillet import BatchBuilder, _core, decode_batches
from rillet.controller import CreatableTopic
from rillet.server.kafka.fetch_sessions import FetchSessionCache
from rillet.server.kafka.listener import KafkaListener
from tests.support.kafka_wire import call, connect, kafka_broker, kafka_port, read_frame
from tests.support.mini_broker import MiniBroker

with warnings.catch_warnings():
    # kafka-python reads its JSON schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KPTopicPartition

PRODUCE, FETCH, METADATA = 0, 1, 3
UNKNOWN_TOPIC_OR_PARTITION, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 3, 70, 71
UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID, FETCH_SESSION_TOPIC_ID_ERROR = 100, 103, 106
TOPIC, PARTITIONS = "orders", 3
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = kafka_broker(tmp_path / "data", {TOPIC: PARTITIONS})
    yield b
    b.close()


# -- helpers ---------------------------------------------------------------------------------


def produce(s: socket.socket, partition: int, *values: bytes) -> int:
    """Append ``values`` to one partition of TOPIC (acks=all): the first one's offset."""
    batch = BatchBuilder()
    for v in values:
        batch.append(0, None, v)
    body = {
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": partition, "records": batch.build()}]}
        ],
    }
    (topic,) = call(s, PRODUCE, 9, body)["responses"]
    (p,) = topic["partition_responses"]
    assert p["error_code"] == 0
    return int(p["base_offset"])


def partition(index: int, offset: int) -> dict[str, Any]:
    return {"partition": index, "fetch_offset": offset, "partition_max_bytes": 1 << 20}


def fetch_body(
    session_id: int,
    epoch: int,
    topics: list[dict[str, Any]] | None = None,
    forgotten: list[dict[str, Any]] | None = None,
    max_wait_ms: int = 0,
) -> dict[str, Any]:
    return {
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": topics or [],
        "forgotten_topics_data": forgotten or [],
    }


def named(*partitions: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"topic": TOPIC, "partitions": list(partitions)}]


def answered(response: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The response's partitions of TOPIC (by name or id) by index."""
    return {p["partition_index"]: p for t in response["responses"] for p in t["partitions"]}


def values(records: bytes | None) -> list[bytes]:
    return [r.value for b in decode_batches(records or b"") for r in b.records]


def maybe_topic_id(s: socket.socket, name: str) -> uuid.UUID | None:
    """The topic's id once every partition has a leader, else None."""
    (t,) = call(s, METADATA, 12, {"topics": [{"name": name, "topic_id": ZERO_UUID}]})["topics"]
    ready = t["error_code"] == 0 and all(p["leader_id"] >= 0 for p in t["partitions"])
    return uuid.UUID(str(t["topic_id"])) if ready and t["partitions"] else None


def topic_id(s: socket.socket, name: str) -> uuid.UUID:
    found = maybe_topic_id(s, name)
    assert found is not None
    return found


def session_cache(broker: MiniBroker) -> FetchSessionCache:
    (kafka,) = [x for x in broker.server.listeners if isinstance(x, KafkaListener)]
    return kafka.apis.fetch_sessions


def on_loop(broker: MiniBroker, fn: Any) -> Any:
    """``fn()`` run on the broker's event loop (its state is not thread safe)."""

    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.loop).result(30)


def wait_until_parked(broker: MiniBroker) -> None:
    """Until a fetch waits in the broker's fetch purgatory (a long poll)."""
    replicas = broker.server.replicas
    assert replicas is not None
    deadline = time.monotonic() + 60
    while not on_loop(broker, lambda: len(replicas.fetch_purgatory)):
        assert time.monotonic() < deadline, "the fetch never waited"
        time.sleep(0.01)


# -- raw requests ----------------------------------------------------------------------------


def test_a_full_fetch_creates_a_session_and_incremental_ones_answer_only_news(
    broker: MiniBroker,
) -> None:
    with connect(broker) as s:
        produce(s, 1, b"a", b"b", b"c")
        full = call(s, FETCH, 12, fetch_body(0, 0, named(*(partition(p, 0) for p in range(3)))))
        sid = full["session_id"]
        assert full["error_code"] == 0 and sid != 0
        parts = answered(full)
        assert sorted(parts) == [0, 1, 2]
        assert values(parts[1]["records"]) == [b"a", b"b", b"c"]
        assert (parts[1]["high_watermark"], parts[0]["high_watermark"]) == (3, 0)

        # The client moves partition 1 on: nothing is new anywhere.
        quiet = call(s, FETCH, 12, fetch_body(sid, 1, named(partition(1, 3))))
        assert (quiet["error_code"], quiet["session_id"], answered(quiet)) == (0, sid, {})

        # New records in partition 2 only: only it is answered.
        produce(s, 2, b"x", b"y")
        news = call(s, FETCH, 12, fetch_body(sid, 2))
        assert news["session_id"] == sid
        assert list(answered(news)) == [2]
        assert values(answered(news)[2]["records"]) == [b"x", b"y"]
        assert answered(news)[2]["high_watermark"] == 2

        # Forget partition 0, move 2 on; records in 0 and 1 then come back for 1 only.
        forget = [{"topic": TOPIC, "partitions": [0]}]
        moved = call(s, FETCH, 12, fetch_body(sid, 3, named(partition(2, 2)), forget))
        assert answered(moved) == {}
        produce(s, 0, b"gone")
        produce(s, 1, b"d")
        after = call(s, FETCH, 12, fetch_body(sid, 4))
        assert list(answered(after)) == [1]
        assert values(answered(after)[1]["records"]) == [b"d"]
        # Re-adding partition 0 answers it, at the offset the request gives.
        readd = call(s, FETCH, 12, fetch_body(sid, 5, named(partition(0, 0), partition(1, 4))))
        assert list(answered(readd)) == [0]
        assert values(answered(readd)[0]["records"]) == [b"gone"]

    (session,) = on_loop(broker, lambda: session_cache(broker).sessions())
    assert (session.id, session.epoch, len(session)) == (sid, 6, 3)


def test_an_incremental_fetch_long_polls_for_new_data_and_does_not_repeat_itself(
    broker: MiniBroker,
) -> None:
    with connect(broker) as s, connect(broker) as producer:
        produce(producer, 0, b"first")
        full = call(s, FETCH, 12, fetch_body(0, 0, named(*(partition(p, 0) for p in range(3)))))
        sid = full["session_id"]
        assert values(answered(full)[0]["records"]) == [b"first"]

        # Nothing new: the fetch waits (up to a minute) for records...
        body = fetch_body(sid, 1, named(partition(0, 1)), max_wait_ms=60_000)
        s.sendall(_core.kafka_encode_request(FETCH, 12, 21, "raw", body))
        wait_until_parked(broker)
        produce(producer, 2, b"second")
        # ...and answers with them, alone, once they come.
        correlation_id, waited = _core.kafka_decode_response(FETCH, 12, read_frame(s))
        assert (correlation_id, waited["error_code"], waited["session_id"]) == (21, 0, sid)
        assert list(answered(waited)) == [2]
        assert values(answered(waited)[2]["records"]) == [b"second"]

        # Caught up everywhere: answers carry nothing, however often the client asks.
        for epoch in (2, 3, 4):
            moved = named(partition(2, 1)) if epoch == 2 else None
            quiet = call(s, FETCH, 12, fetch_body(sid, epoch, moved, max_wait_ms=50))
            assert (quiet["error_code"], answered(quiet)) == (0, {})


def test_session_errors_are_the_responses_top_level_error(broker: MiniBroker) -> None:
    with connect(broker) as s:
        unknown = call(s, FETCH, 12, fetch_body(424242, 1, named(partition(0, 0))))
        assert (unknown["error_code"], unknown["session_id"], unknown["responses"]) == (
            FETCH_SESSION_ID_NOT_FOUND,
            0,
            [],
        )
        sid = call(s, FETCH, 12, fetch_body(0, 0, named(partition(0, 0))))["session_id"]
        for wrong in (2, 9):
            bad = call(s, FETCH, 12, fetch_body(sid, wrong))
            assert (bad["error_code"], bad["session_id"], bad["responses"]) == (
                INVALID_FETCH_SESSION_EPOCH,
                0,
                [],
            )
        # A session created by name cannot go on by topic id.
        by_id = call(s, FETCH, 13, fetch_body(sid, 1))
        assert (by_id["error_code"], by_id["session_id"]) == (FETCH_SESSION_TOPIC_ID_ERROR, 0)
        # None of these moved the session: its next epoch is still 1.
        assert call(s, FETCH, 12, fetch_body(sid, 1)) == {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": sid,
            "responses": [],
        }


def test_a_full_fetch_closes_the_session_it_names(broker: MiniBroker) -> None:
    with connect(broker) as s:
        produce(s, 0, b"v")
        sid = call(s, FETCH, 12, fetch_body(0, 0, named(partition(0, 0))))["session_id"]
        # Epoch -1 with the session id: closed, and this fetch is sessionless (all answered).
        final = call(s, FETCH, 12, fetch_body(sid, -1, named(partition(0, 1), partition(1, 0))))
        assert (final["error_code"], final["session_id"], sorted(answered(final))) == (0, 0, [0, 1])
        gone = call(s, FETCH, 12, fetch_body(sid, 1))
        assert gone["error_code"] == FETCH_SESSION_ID_NOT_FOUND
        # Epoch 0 with a session id: that one closed and another made.
        first = call(s, FETCH, 12, fetch_body(0, 0, named(partition(0, 0))))["session_id"]
        second = call(s, FETCH, 12, fetch_body(first, 0, named(partition(0, 0))))["session_id"]
        assert second not in (0, first)
        assert call(s, FETCH, 12, fetch_body(first, 1))["error_code"] == FETCH_SESSION_ID_NOT_FOUND
        assert call(s, FETCH, 12, fetch_body(second, 1))["error_code"] == 0
    assert [x.id for x in on_loop(broker, lambda: session_cache(broker).sessions())] == [second]


def test_sessions_by_topic_id_forget_by_id_and_answer_unknown_ids(broker: MiniBroker) -> None:
    with connect(broker) as s, connect(broker) as producer:
        tid = topic_id(s, TOPIC)
        stranger = uuid.uuid4()
        topics = [
            {"topic_id": tid, "partitions": [partition(p, 0) for p in range(3)]},
            {"topic_id": stranger, "partitions": [partition(0, 0)]},
        ]
        # The unknown id is answered at once, the others long-poll: records arriving in
        # partition 1 end the wait.
        s.sendall(
            _core.kafka_encode_request(FETCH, 16, 5, "raw", fetch_body(0, 0, topics, [], 60_000))
        )
        wait_until_parked(broker)
        produce(producer, 1, b"p1")
        _, full = _core.kafka_decode_response(FETCH, 16, read_frame(s))
        sid = full["session_id"]
        assert sid != 0
        by_topic = {t["topic_id"]: t["partitions"] for t in full["responses"]}
        assert set(by_topic) == {tid, stranger}
        assert [p["error_code"] for p in by_topic[stranger]] == [UNKNOWN_TOPIC_ID]
        assert values(answered({"responses": [{"partitions": by_topic[tid]}]})[1]["records"]) == [
            b"p1"
        ]

        # Incremental: the unknown id's error comes every time; forgetting partition 1 by id.
        forget = [{"topic_id": tid, "partitions": [1]}]
        inc = call(s, FETCH, 16, fetch_body(sid, 1, forgotten=forget))
        assert [
            (t["topic_id"], [p["error_code"] for p in t["partitions"]]) for t in inc["responses"]
        ] == [(stranger, [UNKNOWN_TOPIC_ID])]
        produce(producer, 1, b"unseen")
        produce(producer, 2, b"p2")
        inc = call(
            s, FETCH, 16, fetch_body(sid, 2, forgotten=[{"topic_id": stranger, "partitions": [0]}])
        )
        ((answered_id, parts),) = [(t["topic_id"], t["partitions"]) for t in inc["responses"]]
        assert answered_id == tid
        assert [(p["partition_index"], values(p["records"])) for p in parts] == [(2, [b"p2"])]
    (session,) = on_loop(broker, lambda: session_cache(broker).sessions())
    assert session.uses_topic_ids and len(session) == 2


def test_a_session_of_a_topic_made_again_under_a_new_id_is_inconsistent(
    broker: MiniBroker,
) -> None:
    with connect(broker) as s:
        old = topic_id(s, TOPIC)
        topics = [{"topic_id": old, "partitions": [partition(p, 0) for p in range(2)]}]
        sid = call(s, FETCH, 13, fetch_body(0, 0, topics))["session_id"]
        controller = broker.server.controller
        broker._call(controller.delete_topics([TOPIC]))
        broker._call(controller.create_topics([CreatableTopic(TOPIC, PARTITIONS)]))
        deadline = time.monotonic() + 60
        while (new := maybe_topic_id(s, TOPIC)) in (None, old):
            assert time.monotonic() < deadline, "the topic was not made again"
            time.sleep(0.02)
        # The session's partitions name the old id: not read from the new topic's log.
        inc = call(s, FETCH, 13, fetch_body(sid, 1))
        ((answered_id, parts),) = [(t["topic_id"], t["partitions"]) for t in inc["responses"]]
        assert answered_id == old != new
        assert [(p["partition_index"], p["error_code"]) for p in parts] == [
            (0, INCONSISTENT_TOPIC_ID),
            (1, INCONSISTENT_TOPIC_ID),
        ]


def test_an_unknown_partition_is_answered_without_cutting_the_long_poll(
    broker: MiniBroker,
) -> None:
    with connect(broker) as s, connect(broker) as producer:
        topics = named(partition(0, 0), partition(7, 0))
        s.sendall(
            _core.kafka_encode_request(FETCH, 12, 5, "raw", fetch_body(0, -1, topics, [], 60_000))
        )
        wait_until_parked(broker)
        produce(producer, 0, b"late")
        _, response = _core.kafka_decode_response(FETCH, 12, read_frame(s))
        parts = answered(response)
        assert response["session_id"] == 0
        assert parts[7]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
        assert values(parts[0]["records"]) == [b"late"]


def test_the_cache_holds_max_incremental_fetch_session_cache_slots(tmp_path: Path) -> None:
    b = kafka_broker(
        tmp_path / "data", {TOPIC: 1}, {"max.incremental.fetch.session.cache.slots": "1"}
    )
    try:
        with connect(b) as s:
            body = fetch_body(0, 0, named(partition(0, 0)))
            first = call(s, FETCH, 12, body)["session_id"]
            # Full: the fresh session is not evicted, so this client fetches sessionless.
            refused = call(s, FETCH, 12, body)
            assert first != 0 and (refused["session_id"], refused["error_code"]) == (0, 0)
            assert list(answered(refused)) == [0]
            assert call(s, FETCH, 12, fetch_body(first, 1))["error_code"] == 0
    finally:
        b.close()


# -- clients ---------------------------------------------------------------------------------

RECORDS = 600


def produce_in_background(send: Any, flush: Any) -> threading.Thread:
    """A thread sending RECORDS values round-robin over the partitions, a few at a time."""

    def run() -> None:
        for i in range(RECORDS):
            send(i % PARTITIONS, b"m%d" % i)
            if i % 50 == 49:
                flush()
                time.sleep(0.01)  # let the consumer catch up now and then
        flush()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def expected() -> dict[int, list[bytes]]:
    return {p: [b"m%d" % i for i in range(p, RECORDS, PARTITIONS)] for p in range(PARTITIONS)}


def test_kafka_python_reads_every_record_through_a_fetch_session_while_producing(
    broker: MiniBroker,
) -> None:
    bootstrap = f"127.0.0.1:{kafka_port(broker)}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    try:
        parts = [KPTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        writer = produce_in_background(
            lambda p, v: producer.send(TOPIC, value=v, partition=p), producer.flush
        )
        deadline = time.monotonic() + 120
        while sum(map(len, got.values())) < RECORDS:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            for tp, records in consumer.poll(200).items():
                got[tp.partition] += [(r.offset, r.value) for r in records]
        writer.join(60)
        # Incremental fetches went on in one session of every partition.
        sessions = on_loop(broker, lambda: session_cache(broker).sessions())
        assert len(sessions) == 1 and sessions[0].epoch > 2
    finally:
        consumer.close()
        producer.close()
    for p, want in expected().items():
        assert [v for _, v in got[p]] == want
        assert [o for o, _ in got[p]] == list(range(len(want)))


def test_confluent_kafka_reads_every_record_while_producing(broker: MiniBroker) -> None:
    bootstrap = f"127.0.0.1:{kafka_port(broker)}"
    producer = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "sessions",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([CKTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])

        def flush() -> None:
            assert producer.flush(30) == 0

        writer = produce_in_background(
            lambda p, v: producer.produce(TOPIC, value=v, partition=p), flush
        )
        deadline = time.monotonic() + 120
        while sum(map(len, got.values())) < RECORDS:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            for m in consumer.consume(100, 0.2):
                assert m.error() is None, m.error()
                got[m.partition()].append((m.offset(), m.value()))
        writer.join(60)
    finally:
        consumer.close()
    for p, want in expected().items():
        assert [v for _, v in got[p]] == want
        assert [o for o, _ in got[p]] == list(range(len(want)))
