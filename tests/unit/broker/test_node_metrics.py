"""The node's metrics: records counted from batch headers, the gauges read from the
metadata image, the quorum, the purgatories and the groups at each scrape, the series
handed to the log flusher, the Raft driver and the gRPC interceptor, and the endpoint's
answers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

from prometheus_client import generate_latest

from rillet.broker.metrics import BrokerMetrics, NodeState, record_count
from rillet.broker.purgatory import Purgatory
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import PartitionRecord, TopicRecord
from rillet.raft.driver import QuorumStatus
from rillet.server.metrics_endpoint import MetricsEndpoint
from rillet.types import TopicPartition
from tests.unit.test_records import sample_batch


def _image() -> MetadataImage:
    t = uuid.uuid4()
    return MetadataImage().replay(
        enumerate(
            [
                TopicRecord("t", t),
                PartitionRecord(t, 0, (1, 2, 3), (1, 2, 3), 1),  # led here, in sync
                PartitionRecord(t, 1, (1, 2, 3), (1,), 1),  # led here, under-replicated
                PartitionRecord(t, 2, (2, 1, 3), (2, 1), 2),  # led elsewhere
                PartitionRecord(t, 3, (2, 3), (), -1),  # offline
            ]
        )
    )


def _metrics(active: bool = True) -> BrokerMetrics:
    return BrokerMetrics(NodeState(1, _image, lambda topic: 2, lambda: active, lambda: 3))


def _text(m: BrokerMetrics) -> str:
    return generate_latest(m.registry).decode()


def test_records_are_counted_from_the_batch_headers() -> None:
    two = sample_batch(n=2) + sample_batch(n=3)
    assert record_count(two) == 5
    assert record_count(two[:30]) == 0  # no whole header


def test_gauges_come_from_the_image_at_each_scrape() -> None:
    text = generate_latest(_metrics().registry).decode()
    assert "kafka_server_replicamanager_leadercount 2.0" in text
    assert "kafka_server_replicamanager_underreplicatedpartitions 1.0" in text
    assert "kafka_server_replicamanager_underminisrpartitioncount 1.0" in text
    assert "kafka_controller_kafkacontroller_offlinepartitionscount 1.0" in text
    assert "kafka_controller_kafkacontroller_activecontrollercount 1.0" in text
    inactive = generate_latest(_metrics(active=False).registry).decode()
    assert "kafka_controller_kafkacontroller_offlinepartitionscount 0.0" in inactive


def test_produce_fetch_and_requests_are_counted() -> None:
    m = _metrics()
    m.record_produce("t", sample_batch(n=4))
    m.record_fetch({"t": 100, "u": 0})
    m.record_request(0, 3.5)
    text = generate_latest(m.registry).decode()
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 4.0' in text
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic=""} 4.0' in text
    assert 'kafka_server_brokertopicmetrics_bytesout_total{topic="t"} 100.0' in text
    assert 'kafka_server_brokertopicmetrics_bytesout_total{topic="u"}' not in text
    assert 'kafka_network_requestmetrics_requests_total{request="Produce"} 1.0' in text
    assert 'kafka_network_requestmetrics_totaltimems_bucket{le="5.0",request="Produce"} 1.0' in text


async def _get(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    writer.write_eof()
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_the_endpoint_serves_metrics_and_404_elsewhere() -> None:
    endpoint = MetricsEndpoint(_metrics(), "127.0.0.1", 0)
    port = await endpoint.start()
    try:
        ok = await _get(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK") and b"leadercount 2.0" in ok
        missing = await _get(port, b"GET /nothing HTTP/1.1\r\n\r\n")
        assert missing.startswith(b"HTTP/1.1 404")
        assert await _get(port, b"\x00\x01garbage") == b""  # no request head: closed
    finally:
        await endpoint.stop()


def test_the_node_s_roles_broker_state_and_quorum_view() -> None:
    quorum = QuorumStatus("follower", 3, 7, 120, 125)
    m = BrokerMetrics(
        NodeState(
            1,
            _image,
            lambda topic: 2,
            lambda: False,
            lambda: 3,
            ("broker", "controller"),
            broker_state=lambda: "RECOVERY",
            quorum=lambda: quorum,
        )
    )
    text = _text(m)
    assert 'rillet_node_info{node_id="1",process_roles="broker,controller"} 1.0' in text
    assert "kafka_server_kafkaserver_brokerstate 2.0" in text  # Kafka's RECOVERY
    assert 'kafka_server_raft_metrics_current_state{state="follower"} 1.0' in text
    assert "kafka_server_raft_metrics_current_leader 3.0" in text
    assert "kafka_server_raft_metrics_current_epoch 7.0" in text
    assert "kafka_server_raft_metrics_high_watermark 120.0" in text
    assert "kafka_server_raft_metrics_log_end_offset 125.0" in text
    # Without a broker or a driver (a controller-only node, a node still starting): none.
    bare = _text(_metrics())
    assert "brokerstate" not in bare and "raft_metrics_current_leader" not in bare


async def test_purgatory_sizes_are_read_as_operations_wait_and_complete() -> None:
    produce, fetch = Purgatory("Produce"), Purgatory("Fetch")
    m = BrokerMetrics(
        NodeState(1, _image, lambda t: 2, lambda: True, lambda: 3, purgatories=(produce, fetch))
    )
    done = {"a": False, "b": False}
    a = asyncio.create_task(produce.wait(["t-0", "t-1"], lambda: done["a"], 60_000))
    b = asyncio.create_task(produce.wait(["t-1"], lambda: done["b"], 60_000))
    await asyncio.sleep(0)
    text = _text(m)
    size = "kafka_server_delayedoperationpurgatory_purgatorysize"
    waiting = "kafka_server_delayedoperationpurgatory_numdelayedoperations"
    assert f'{size}{{delayedOperation="Produce"}} 3.0' in text  # a watches two partitions
    assert f'{waiting}{{delayedOperation="Produce"}} 2.0' in text
    assert f'{size}{{delayedOperation="Fetch"}} 0.0' in text
    done["a"] = True
    assert produce.check_and_complete("t-1") == 1
    assert await a
    text = _text(m)
    assert f'{size}{{delayedOperation="Produce"}} 1.0' in text
    assert f'{waiting}{{delayedOperation="Produce"}} 1.0' in text
    produce.cancel_all()
    assert not await b
    text = _text(m)
    assert f'{size}{{delayedOperation="Produce"}} 0.0' in text
    assert f'{waiting}{{delayedOperation="Produce"}} 0.0' in text


def test_consumer_group_lag_is_end_offset_minus_committed() -> None:
    committed = [
        ("g", TopicPartition("t", 0), 40),
        ("g", TopicPartition("t", 1), 10),  # ahead of the end a follower knows: lag 0
        ("h", TopicPartition("t", 0), 0),
        ("g", TopicPartition("elsewhere", 0), 5),  # no replica here: offset, no lag
    ]
    ends = {TopicPartition("t", 0): 100, TopicPartition("t", 1): 8}

    def offsets() -> Iterable[tuple[str, TopicPartition, int]]:
        return committed

    m = BrokerMetrics(
        NodeState(
            1,
            _image,
            lambda t: 2,
            lambda: True,
            lambda: 3,
            committed_offsets=offsets,
            end_offset=ends.get,
        )
    )
    text = _text(m)
    assert 'kafka_consumergroup_lag{group="g",partition="0",topic="t"} 60.0' in text
    assert 'kafka_consumergroup_lag{group="g",partition="1",topic="t"} 0.0' in text
    assert 'kafka_consumergroup_lag{group="h",partition="0",topic="t"} 100.0' in text
    assert 'kafka_consumergroup_lag{group="g",partition="0",topic="elsewhere"}' not in text
    current = "kafka_consumergroup_current_offset"
    assert f'{current}{{group="g",partition="0",topic="elsewhere"}} 5.0' in text
    # Computed at each scrape: a commit shows at the next one.
    committed[0] = ("g", TopicPartition("t", 0), 100)
    assert 'kafka_consumergroup_lag{group="g",partition="0",topic="t"} 0.0' in _text(m)


def test_flush_commit_latency_and_grpc_series() -> None:
    m = _metrics()
    m.log_flush_time_ms(3.0)
    m.raft_commit_latency_ms(12)
    produce = m.grpc_method("/rillet.v1.ProduceService/Produce")
    assert m.grpc_method("/rillet.v1.ProduceService/Produce") is produce  # resolved once
    produce.started.inc()
    produce.handling_seconds.observe(0.004)
    produce.handled("OK").inc()
    produce.handled("PERMISSION_DENIED").inc()
    assert produce.handled("OK") is produce.handled("OK")
    text = _text(m)
    assert "kafka_log_logflushstats_logflushrateandtimems_count 1.0" in text
    assert 'kafka_log_logflushstats_logflushrateandtimems_bucket{le="5.0"} 1.0' in text
    assert "kafka_server_raft_metrics_commit_latency_ms_sum 12.0" in text
    labels = 'grpc_method="Produce",grpc_service="rillet.v1.ProduceService",grpc_type="unary"'
    assert f"grpc_server_started_total{{{labels}}} 1.0" in text
    assert f'grpc_server_handled_total{{grpc_code="OK",{labels}}} 1.0' in text
    assert f'grpc_server_handled_total{{grpc_code="PERMISSION_DENIED",{labels}}} 1.0' in text
    assert f'grpc_server_handling_seconds_bucket{{{labels},le="0.005"}} 1.0' in text
