"""Rillet's producer and consumer over Kafka's protocol (``transport="kafka"``, or
``auto`` on a Kafka listener) against a real ``rillet server start`` process: records
produced with each acks setting, idempotently and in a transaction, read back byte for byte
over gRPC and by the consumer over Kafka's protocol (in a group too, and read_committed); a
broker killed with -9 and restarted mid-stream loses no acknowledged record and duplicates
none; a broker that stops answering fails the requests with a timeout and the next request
reconnects."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Consumer, Producer
from rillet._core import kafka_decode_request, kafka_encode_response
from rillet.client.kafka_connection import API_VERSIONS, KafkaConnection
from rillet.errors import InvalidConfigurationError, KafkaError, KafkaTimeoutError, NetworkError
from rillet.types import TopicPartition
from tests.support.server_process import ServerProcess, fetch_all, serving

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serving(tmp_path_factory.mktemp("kafka-transport") / "data", kafka=True) as s:
        yield s


def producer(server: ServerProcess, **configs: object) -> Producer:
    return Producer(bootstrap_servers=server.kafka_bootstrap, transport="kafka", **configs)


@pytest.mark.parametrize("acks", ["all", "1", "0"])
def test_records_cross_kafkas_protocol_and_read_back_over_grpc(
    server: ServerProcess, acks: str
) -> None:
    topic = f"transport-acks-{acks}"
    server.create_topic(topic, 2)
    with producer(server, acks=acks, linger_ms=1, batch_size=2048) as p:
        futures = [
            p.send(
                topic,
                value=b"v%d" % i * (i % 7),
                key=b"k%d" % i,
                headers=[("h", b"%d" % i)],
                partition=i % 2,
            )
            for i in range(500)
        ]
        p.flush()
        metas = [f.get(10) for f in futures]
    if acks != "0":
        # Offsets are the broker's, each batch's records numbered from its base.
        for partition in (0, 1):
            offsets = [m.offset for m in metas if m.partition == partition]
            assert offsets == list(range(250))
    for partition in (0, 1):
        got = fetch_all(server.bootstrap, topic, partition)
        want = [i for i in range(500) if i % 2 == partition]
        assert [r.key for r in got] == [b"k%d" % i for i in want]
        assert [r.value for r in got] == [b"v%d" % i * (i % 7) for i in want]
        assert [list(r.headers) for r in got] == [[("h", b"%d" % i)] for i in want]


def test_transactions_commit_over_the_kafka_listener(server: ServerProcess) -> None:
    """Produce goes over Kafka's protocol; InitProducerId, AddPartitionsToTxn and EndTxn
    reach gRPC through the Kafka listener's relay."""
    server.create_topic("transport-txn", 1)
    with producer(server, transactional_id="transport-tx") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(10):
            p.send("transport-txn", b"aborted-%d" % i)
        p.abort_transaction()
        p.begin_transaction()
        for i in range(10):
            p.send("transport-txn", b"committed-%d" % i)
        p.commit_transaction()
    for bootstrap, transport in ((server.bootstrap, "grpc"), (server.kafka_bootstrap, "kafka")):
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            consumer_timeout_ms=3000,
        )
        consumer.assign([TopicPartition("transport-txn", 0)])
        values = [r.value for r in consumer]
        assert consumer._cluster.transport == transport
        consumer.close()
        assert values == [b"committed-%d" % i for i in range(10)]


def test_an_unknown_transport_is_a_config_error(server: ServerProcess) -> None:
    with pytest.raises(InvalidConfigurationError, match="transport"):
        Producer(bootstrap_servers=server.kafka_bootstrap, transport="carrier-pigeon")


def test_kill_9_mid_stream_loses_no_acknowledged_record_and_duplicates_none(
    tmp_path: Path,
) -> None:
    s = ServerProcess(tmp_path / "data", kafka=True)
    s.start()
    try:
        s.create_topic("transport-kill", 1)
        acked: list[bytes] = []
        with producer(
            s,
            linger_ms=1,
            request_timeout_ms=3000,
            retry_backoff_ms=50,
            delivery_timeout_ms=120_000,
        ) as p:

            def on_ack(value: bytes, _meta: object) -> None:
                acked.append(value)

            for i in range(3000):
                value = b"r%05d" % i
                p.send("transport-kill", value).add_callback(on_ack, value)
                if i == 1500:  # requests in flight die with the broker, and are retried
                    s.kill()
                    s.start()
            p.flush(60)
        values = [r.value for r in fetch_all(s.bootstrap, "transport-kill", 0)]
        assert len(values) == len(set(values)), "an idempotent retry was written twice"
        assert set(acked) <= set(values), "an acknowledged record was lost"
        assert len(acked) == 3000  # the producer retried across the restart
        assert values == sorted(values)  # one partition, in order
    finally:
        s.stop()


class _SilentBroker:
    """Answers ApiVersions, then reads requests and answers none."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                frame = conn.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)
                api_key, version, correlation_id, _, _ = kafka_decode_request(frame)
                if api_key == API_VERSIONS:
                    body = {"error_code": 0, "api_keys": [
                        {"api_key": 18, "min_version": 0, "max_version": 3},
                        {"api_key": 3, "min_version": 0, "max_version": 12},
                    ]}  # fmt: skip
                    conn.sendall(kafka_encode_response(api_key, version, correlation_id, body))

    def close(self) -> None:
        self.sock.close()


def test_an_unanswered_request_times_out_and_the_next_one_reconnects() -> None:
    broker = _SilentBroker()
    conn = KafkaConnection(broker.address, "test", request_timeout_ms=300)
    try:
        with pytest.raises(KafkaTimeoutError):
            conn.call(3, (9, 12), {"topics": None})
        with pytest.raises(KafkaTimeoutError):
            conn.call(3, (9, 12), {"topics": None})
        assert broker.connections == 2
        # An api key the broker does not list is refused before anything is sent.
        with pytest.raises(KafkaError, match="does not serve api key 0"):
            conn.call(0, (3, 11), {})
    finally:
        conn.close()
        broker.close()


def test_a_refused_connection_is_a_retriable_network_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        address = f"127.0.0.1:{s.getsockname()[1]}"
    conn = KafkaConnection(address, "test", request_timeout_ms=1000)
    with pytest.raises(NetworkError) as e:
        conn.call(3, (9, 12), {"topics": None})
    assert e.value.retriable


def test_auto_speaks_what_the_bootstrap_listener_serves(server: ServerProcess) -> None:
    server.create_topic("transport-auto", 1)
    for bootstrap, transport in ((server.kafka_bootstrap, "kafka"), (server.bootstrap, "grpc")):
        with Producer(bootstrap_servers=bootstrap) as p:  # transport="auto", the default
            p.send("transport-auto", transport.encode()).get(10)
            assert p._cluster.transport == transport
    values = [r.value for r in fetch_all(server.bootstrap, "transport-auto", 0)]
    assert values == [b"kafka", b"grpc"]


def test_a_group_consumer_reads_over_kafkas_protocol(server: ServerProcess) -> None:
    """Fetches go over Kafka's protocol; JoinGroup, SyncGroup and the offset commit reach
    gRPC through the Kafka listener's relay. A second consumer of the group starts from the
    committed offset."""
    server.create_topic("transport-group", 3)
    with Producer(bootstrap_servers=server.kafka_bootstrap, linger_ms=1) as p:
        for i in range(300):
            p.send("transport-group", b"g%d" % i, key=b"%d" % (i % 17))
    consumer = Consumer(
        "transport-group",
        bootstrap_servers=server.kafka_bootstrap,
        group_id="transport-g",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    seen = []
    for r in consumer:
        seen.append(r.value)
        if len(seen) == 300:
            break
    assert consumer._cluster.transport == "kafka"
    consumer.commit()
    consumer.close()
    assert sorted(seen) == sorted(b"g%d" % i for i in range(300))
    with Producer(bootstrap_servers=server.kafka_bootstrap) as p:
        p.send("transport-group", b"after", partition=0)
    again = Consumer(
        "transport-group",
        bootstrap_servers=server.kafka_bootstrap,
        group_id="transport-g",
        consumer_timeout_ms=5000,
    )
    assert [r.value for r in again] == [b"after"]
    again.close()
