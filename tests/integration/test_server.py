"""Real ``rillet server start`` processes: produce, fetch, restart, kill -9, bad input."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from rillet.client.producer import Producer
from rillet.errors import KafkaError
from rillet.protocol import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
)
from tests.support.server_process import ServerProcess, fetch_all

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path / "data")
    s.start()
    yield s
    s.kill()


def test_produce_consume_restart(server: ServerProcess) -> None:
    server.create_topic("orders", 2)
    with Producer(bootstrap_servers=server.bootstrap, acks="all") as p:
        metas = [p.send("orders", b"v%d" % i, partition=i % 2).get(30) for i in range(20)]
    assert [m.offset for m in metas if m.partition == 0] == list(range(10))
    assert server.stop() == 0
    assert "shut down completed" in server.output()
    server.start()
    assert [(r.offset, r.value) for r in fetch_all(server.bootstrap, "orders", 1)] == [
        (i, b"v%d" % (2 * i + 1)) for i in range(10)
    ]


def test_kill_9_during_acks_1_produce_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data")
    server.start()
    try:
        server.create_topic("t", 1)
        acked: list[tuple[int, bytes]] = []
        stop = threading.Event()

        def produce() -> None:
            with Producer(
                bootstrap_servers=server.bootstrap,
                acks=1,
                linger_ms=0,
                retries=0,
                delivery_timeout_ms=5000,
                max_block_ms=5000,
            ) as p:
                i = 0
                while not stop.is_set():
                    value = b"record-%06d" % i
                    try:
                        m = p.send("t", value).get(10)
                    except KafkaError:
                        return
                    acked.append((m.offset, value))
                    i += 1

        t = threading.Thread(target=produce)
        t.start()
        deadline = time.monotonic() + 30
        while len(acked) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.kill()
        stop.set()
        t.join(60)
        assert len(acked) >= 200
        server.start()
        stored = {r.offset: r.value for r in fetch_all(server.bootstrap, "t", 0)}
        offsets = sorted(stored)
        assert offsets == list(range(len(offsets)))  # contiguous, in order
        for offset, value in acked:
            assert stored[offset] == value
    finally:
        server.kill()


def test_bad_input_gets_kafka_errors_and_the_broker_keeps_serving(server: ServerProcess) -> None:
    with grpc.insecure_channel(server.bootstrap) as ch:
        admin = admin_pb2_grpc.AdminServiceStub(ch)
        bad = ["../escape", "a/b", "..", "x" * 250, "bad name"]
        r = admin.CreateTopics(
            admin_pb2.CreateTopicsRequest(
                topics=[admin_pb2.CreateTopicsRequest.Topic(name=n) for n in bad]
                + [
                    admin_pb2.CreateTopicsRequest.Topic(
                        name="cfg", configs={"retention.ms": "soon"}
                    )
                ]
            ),
            timeout=30,
        )
        names = [common_pb2.ErrorCode.Name(t.error_code) for t in r.topics]
        assert names == ["INVALID_TOPIC_EXCEPTION"] * 5 + ["INVALID_CONFIG"]
        assert "retention.ms" in r.topics[-1].error_message
    assert not any(p.name.startswith("escape") for p in (server.data_dir).rglob("*"))
    assert not (server.data_dir.parent / "escape-0").exists()
    # Random bytes on the client port do not hurt the broker.
    with socket.create_connection(("localhost", server.port)) as s:
        s.sendall(b"\x00\xff garbage " * 100)
        time.sleep(0.2)
    server.create_topic("still-ok")
    with Producer(bootstrap_servers=server.bootstrap) as p:
        assert p.send("still-ok", b"x").get(30).offset == 0


def test_a_second_server_on_the_same_dir_is_refused(server: ServerProcess, tmp_path: Path) -> None:
    second = ServerProcess(server.data_dir)
    with pytest.raises(RuntimeError, match="lock"):
        second.start(timeout=30)
