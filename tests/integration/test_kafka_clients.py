"""Unmodified Kafka clients against a real ``rillet server start`` process serving Kafka's
protocol beside gRPC: kcat (``-L``, ``-P``, ``-C``, ``-G``, ``-Q``), confluent-kafka
(idempotent produce, a consumer group that commits and seeks, transactions with
``send_offsets_to_transaction``), kafka-python and aiokafka. Records written by each client
are read back byte for byte by every other one and by the gRPC API; Rillet's own client
bootstraps from the Kafka port."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiokafka
import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from rillet import Consumer, Producer
from tests.integration import kafka_clients as kc
from tests.support.server_process import ServerProcess, free_port, serving

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serving(tmp_path_factory.mktemp("kafka-clients") / "data", kafka=True) as s:
        yield s


def kcat(server: ServerProcess, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["kcat", "-b", server.kafka_bootstrap, *args],
        input=stdin,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout


def test_kcat_lists_produces_consumes_queries_and_joins_a_group(server: ServerProcess) -> None:
    server.create_topic("kcat", 2)
    listing = json.loads(kcat(server, "-L", "-J", "-t", "kcat"))
    assert [b["name"] for b in listing["brokers"]] == [server.kafka_bootstrap]
    (topic,) = listing["topics"]
    assert topic["topic"] == "kcat" and [p["partition"] for p in topic["partitions"]] == [0, 1]

    before = int(time.time() * 1000)
    kcat(server, "-P", "-t", "kcat", "-p", "0", "-K", ":", stdin=b"a:1\nb:2\nc:3\n")
    kcat(server, "-P", "-t", "kcat", "-p", "1", "-K", ":", stdin=b"d:4\n")
    consumed = kcat(server, "-C", "-t", "kcat", "-o", "beginning", "-e", "-f", "%p %o %k %s\n")
    assert sorted(consumed.decode().splitlines()) == ["0 0 a 1", "0 1 b 2", "0 2 c 3", "1 0 d 4"]

    # -Q: the first offset at or after a time, per partition.
    offsets = kcat(server, "-Q", "-t", f"kcat:0:{before}", "-t", "kcat:1:-1").decode()
    assert "kcat [0] offset 0" in offsets and "kcat [1] offset 1" in offsets

    # -G: a balanced group consumer that commits what it read; a second run starts at the
    # commits, so it reads nothing. (-o would override the commits.)
    group = ["-G", "kcat-group", "-X", "auto.offset.reset=earliest", "-e", "-f", "%p %o\n"]
    grouped = kcat(server, *group, "kcat")
    assert sorted(grouped.decode().split("\n")[:-1]) == ["0 0", "0 1", "0 2", "1 0"]
    again = kcat(server, *group, "kcat")
    assert again == b""


def test_confluent_idempotent_producer_and_a_group_that_commits_and_seeks(
    server: ServerProcess,
) -> None:
    server.create_topic("ck", 3)
    p = CKProducer({"bootstrap.servers": server.kafka_bootstrap, "enable.idempotence": True})
    for i in range(300):
        p.produce("ck", value=b"v%d" % i, key=b"k%d" % (i % 7))
    assert p.flush(30) == 0

    def consumer() -> CKConsumer:
        return CKConsumer(
            {
                "bootstrap.servers": server.kafka_bootstrap,
                "group.id": "ck-group",
                "group.protocol": "classic",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            }
        )

    c = consumer()
    c.subscribe(["ck"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < 150 and time.monotonic() < deadline:
        seen += [m.value() for m in c.consume(50, 0.5) if m.error() is None]
    c.commit(asynchronous=False)
    committed = {
        tp.partition: tp.offset for tp in c.committed([CKTopicPartition("ck", i) for i in range(3)])
    }
    c.close()
    assert sum(o for o in committed.values() if o > 0) == len(seen)

    # A new member of the group resumes from the commits: every record exactly once overall.
    c = consumer()
    c.subscribe(["ck"])
    deadline = time.monotonic() + 60
    while len(seen) < 300 and time.monotonic() < deadline:
        seen += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
    assert sorted(seen) == sorted(b"v%d" % i for i in range(300))

    # Seek back on one assigned partition: its records come again from the start.
    (first, *_) = c.assignment()
    c.seek(CKTopicPartition("ck", first.partition, 0))
    again: list[int] = []
    deadline = time.monotonic() + 30
    while not again and time.monotonic() < deadline:
        got = [m for m in c.consume(100, 0.5) if m.error() is None]
        again += [m.offset() for m in got if m.partition() == first.partition]
    c.close()
    assert again[:1] == [0]


def test_confluent_transactions_send_offsets_and_abort(server: ServerProcess) -> None:
    server.create_topic("tx-in", 1)
    server.create_topic("tx-out", 1)
    p = CKProducer({"bootstrap.servers": server.kafka_bootstrap})
    for i in range(20):
        p.produce("tx-in", value=b"in%d" % i)
    assert p.flush(30) == 0

    c = CKConsumer(
        {
            "bootstrap.servers": server.kafka_bootstrap,
            "group.id": "tx-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.subscribe(["tx-in"])
    tp = CKProducer({"bootstrap.servers": server.kafka_bootstrap, "transactional.id": "copier"})
    tp.init_transactions(30)
    copied = 0
    aborted_once = False
    deadline = time.monotonic() + 90
    while copied < 20 and time.monotonic() < deadline:
        batch = [m for m in c.consume(5, 0.5) if m.error() is None]
        if not batch:
            continue
        tp.begin_transaction()
        for m in batch:
            tp.produce("tx-out", value=b"out-" + m.value())
        if not aborted_once:
            # The first transaction is aborted: its output must never be read, and its
            # input is consumed again from the committed position.
            tp.abort_transaction(30)
            aborted_once = True
            c.seek(CKTopicPartition("tx-in", 0, batch[0].offset()))
            continue
        tp.send_offsets_to_transaction(
            [CKTopicPartition("tx-in", 0, batch[-1].offset() + 1)], c.consumer_group_metadata(), 30
        )
        tp.commit_transaction(30)
        copied += len(batch)
    c.close()
    assert copied == 20

    reader = CKConsumer(
        {
            "bootstrap.servers": server.kafka_bootstrap,
            "group.id": "tx-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([CKTopicPartition("tx-out", 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(out) < 20 and time.monotonic() < deadline:
        out += [m.value() for m in reader.consume(20, 0.5) if m.error() is None]
    committed = reader.committed([CKTopicPartition("tx-in", 0)])
    reader.close()
    assert out == [b"out-in%d" % i for i in range(20)]

    check = CKConsumer({"bootstrap.servers": server.kafka_bootstrap, "group.id": "tx-group"})
    (offset,) = check.committed([CKTopicPartition("tx-in", 0)], 30)
    check.close()
    assert offset.offset == 20, committed


def test_aiokafka_produces_and_consumes_in_a_group_that_commits(server: ServerProcess) -> None:
    server.create_topic("aio", 2)

    async def run() -> tuple[list[bytes], dict[int, int]]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=server.kafka_bootstrap, acks="all")
        await p.start()
        try:
            for i in range(100):
                await p.send("aio", value=b"a%d" % i, partition=i % 2)
            await p.flush()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(
            "aio",
            bootstrap_servers=server.kafka_bootstrap,
            group_id="aio-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await c.start()
        try:
            seen: list[bytes] = []
            for _ in range(200):
                if len(seen) >= 100:
                    break
                for records in (await c.getmany(timeout_ms=300)).values():
                    seen += [r.value for r in records if r.value is not None]
            await c.commit()
            committed = {
                i: await c.committed(aiokafka.TopicPartition("aio", i)) or 0 for i in (0, 1)
            }
        finally:
            await c.stop()
        return seen, committed

    seen, committed = asyncio.run(run())
    assert sorted(seen) == sorted(b"a%d" % i for i in range(100))
    assert committed == {0: 50, 1: 50}


@pytest.mark.parametrize("writer", sorted(kc.WRITERS))
def test_records_are_read_byte_for_byte_by_every_client(server: ServerProcess, writer: str) -> None:
    write, make, kafka = kc.WRITERS[writer]
    topic = f"xc-{writer}"
    server.create_topic(topic, 1)
    records = make(writer)
    write(server.kafka_bootstrap if kafka else server.bootstrap, topic, records)
    timestamps = None
    for reader, (read, reads_kafka) in sorted(kc.READERS.items()):
        got = read(server.kafka_bootstrap if reads_kafka else server.bootstrap, topic, len(records))
        assert kc.as_written(got) == records, f"{reader} read what {writer} wrote differently"
        stamps = [ts for *_, ts in got]
        assert timestamps is None or stamps == timestamps, f"{reader}'s timestamps differ"
        timestamps = stamps


def test_rillet_client_and_tools_bootstrap_from_the_kafka_port(tmp_path: Path) -> None:
    """The embedded default's shape: Kafka's protocol on PLAINTEXT, gRPC on GRPC. Rillet's
    client given the Kafka port is relayed to gRPC for its first connection, and learns the
    GRPC listener's endpoints from the metadata."""
    kafka, grpc_port, controller = free_port(), free_port(), free_port()
    listeners = f"PLAINTEXT://localhost:{kafka},GRPC://localhost:{grpc_port}"
    s = ServerProcess(
        tmp_path / "data",
        port=grpc_port,
        cport=controller,
        overrides={
            "listeners": f"{listeners},CONTROLLER://localhost:{controller}",
            "advertised.listeners": listeners,
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,GRPC:PLAINTEXT,CONTROLLER:PLAINTEXT"
            ),
            "grpc.listener.names": "GRPC",
            "inter.broker.listener.name": "GRPC",
        },
    )
    s.start()
    try:
        out = s.output()
        assert f"PLAINTEXT://localhost:{kafka} (Kafka's protocol)" in out
        assert f"GRPC://localhost:{grpc_port} (the client API, gRPC)" in out
        bootstrap = f"localhost:{kafka}"
        subprocess.run(
            ["rillet", "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "relayed"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        p = Producer(bootstrap_servers=bootstrap)
        p.send("relayed", b"through the Kafka port")
        p.flush(30)
        p.close()
        c = Consumer("relayed", bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += [r.value for rs in c.poll(500).values() for r in rs]
        c.close()
        assert got == [b"through the Kafka port"]
        listing = subprocess.run(
            ["kcat", "-b", bootstrap, "-L", "-J"], capture_output=True, check=True, timeout=60
        ).stdout
        assert "relayed" in {t["topic"] for t in json.loads(listing)["topics"]}
    finally:
        s.stop()


def test_bad_bytes_on_the_kafka_port_leave_the_broker_serving(server: ServerProcess) -> None:
    host, port = "localhost", int(server.kafka_bootstrap.rsplit(":", 1)[1])
    cases = [
        struct.pack(">i", 2**31 - 1),  # a 2 GiB size prefix
        struct.pack(">i", 12) + b"\x00\x03",  # truncated
        struct.pack(">i", 10) + struct.pack(">hhi", 9999, 0, 1) + b"xx",  # unknown api key
        struct.pack(">i", 14) + struct.pack(">hhi", 3, 12, 1) + b"\xff" * 6,  # garbage body
    ]
    for frame in cases:
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(10)
            while sock.recv(65536):
                pass
    silent = socket.create_connection((host, port), timeout=10)
    try:
        p = CKProducer({"bootstrap.servers": server.kafka_bootstrap})
        server.create_topic("after-bad", 1)
        p.produce("after-bad", value=b"still serving")
        assert p.flush(30) == 0
    finally:
        silent.close()
    assert kcat(server, "-C", "-t", "after-bad", "-o", "beginning", "-e", "-f", "%s") == (
        b"still serving"
    )
