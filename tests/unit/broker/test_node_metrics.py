"""The node's metrics: records counted from batch headers, the gauges read from the
metadata image at each scrape, and the endpoint's answers."""

from __future__ import annotations

import asyncio
import uuid

from prometheus_client import generate_latest

from rillet.broker.metrics import BrokerMetrics, NodeState, record_count
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import PartitionRecord, TopicRecord
from rillet.server.metrics_endpoint import MetricsEndpoint
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
