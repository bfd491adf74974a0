"""The Kafka wire protocol codec as Python sees it (``rillet._core.kafka_*``): frames that
kafka-python writes are read, frames Rillet writes are read by kafka-python, every request
of the schemas round-trips at every version, and bad frames and bodies get clear errors."""

from __future__ import annotations

import uuid
import warnings

import pytest

from rillet import _core
from rillet.errors import InvalidRequestError, UnsupportedVersionError

with warnings.catch_warnings():
    # kafka-python reads its JSON schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.old import produce as old_produce
    from kafka.record.default_records import DefaultRecordBatchBuilder

PRODUCE, METADATA, CONTROLLED_SHUTDOWN, API_VERSIONS = 0, 3, 7, 18


def unframed(message: object, correlation_id: int, client_id: str = "kp") -> bytes:
    """kafka-python's frame of ``message`` without its 4-byte size."""
    message.with_header(correlation_id=correlation_id, client_id=client_id)  # type: ignore[attr-defined]
    frame: bytes = message.encode(header=True, framed=True)  # type: ignore[attr-defined]
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    return bytes(frame[4:])


def test_a_flexible_metadata_request_from_kafka_python() -> None:
    t = MetadataRequest.MetadataRequestTopic
    request = MetadataRequest[12](
        topics=[t(topic_id=uuid.UUID(int=0), name="orders")],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    frame = unframed(request, 7)
    assert _core.kafka_decode_request(memoryview(frame)) == (
        METADATA,
        12,
        7,
        "kp",
        {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": "orders"}],
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        },
    )
    # A null topic list (all topics) stays None.
    everything = MetadataRequest[12](
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert _core.kafka_decode_request(unframed(everything, 8))[4]["topics"] is None


def test_a_produce_request_carries_its_record_batch_as_bytes() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"v", headers=[])
    batch = bytes(builder.build())
    request = old_produce.ProduceRequest_v7(
        transactional_id=None, required_acks=-1, timeout=30_000, topics=[("t", [(0, batch)])]
    )
    api_key, version, correlation_id, client_id, body = _core.kafka_decode_request(
        unframed(request, 3)
    )
    assert (api_key, version, correlation_id, client_id) == (PRODUCE, 7, 3, "kp")
    assert body == {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}],
    }


def test_responses_rillet_writes_are_read_by_kafka_python() -> None:
    topic_id = uuid.uuid4()
    body = {
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
        "cluster_id": "c1",
        "controller_id": 1,
        "topics": [
            {
                "name": "orders",
                "topic_id": topic_id,
                "partitions": [
                    {"partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}
                ],
            }
        ],
    }
    frame = _core.kafka_encode_response(METADATA, 12, 9, body)
    decoded = MetadataResponse.decode(frame, version=12, header=True, framed=True)
    assert decoded.cluster_id == "c1" and decoded.controller_id == 1
    (broker,) = decoded.brokers
    assert (broker.node_id, broker.host, broker.port, broker.rack) == (1, "localhost", 9092, None)
    (topic,) = decoded.topics
    assert (topic.name, topic.topic_id, topic.error_code) == ("orders", topic_id, 0)
    (p,) = topic.partitions
    assert (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes) == (0, 1, -1, [1])
    # The schema's defaults fill what the body left out, and the frame reads back the same.
    correlation_id, back = _core.kafka_decode_response(METADATA, 12, frame[4:])
    assert correlation_id == 9 and back["throttle_time_ms"] == 0
    assert back["topics"][0]["is_internal"] is False


def test_api_versions_responses_keep_header_v0_in_every_version() -> None:
    """A client that asked with a version the broker does not know reads the answer with
    header v0 (KIP-511), so ApiVersionsResponse never has the flexible header's tags."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in [(0, 3, 9)]]
    frame = _core.kafka_encode_response(API_VERSIONS, 3, 4, {"api_keys": keys})
    decoded = ApiVersionsResponse.decode(frame, version=3, header=True, framed=True)
    assert decoded.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(0, 3, 9)]
    request = ApiVersionsRequest[3](client_software_name="kp", client_software_version="3")
    assert _core.kafka_decode_request(unframed(request, 1))[4] == {
        "client_software_name": "kp",
        "client_software_version": "3",
    }


def test_every_request_round_trips_at_every_version() -> None:
    versions = _core.kafka_api_versions()
    assert (API_VERSIONS, 0, 4) in versions and (METADATA, 0, 12) in versions
    for api_key, low, high in versions:
        for version in range(low, high + 1):
            frame = _core.kafka_encode_request(api_key, version, 42, "c", {})
            header = _core.kafka_decode_request(frame[4:])[:4]
            # ControlledShutdown v0 uses request header v0, which has no client id.
            client_id = None if (api_key, version) == (CONTROLLED_SHUTDOWN, 0) else "c"
            assert header == (api_key, version, 42, client_id), (api_key, version)


def test_bad_frames_and_bodies_get_clear_errors() -> None:
    with pytest.raises(UnsupportedVersionError, match="unknown api key 999"):
        _core.kafka_decode_request(b"\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff")
    too_new = _core.kafka_encode_request(METADATA, 12, 1, None, {})[4:]
    with pytest.raises(UnsupportedVersionError, match="version 99 is not supported"):
        _core.kafka_decode_request(too_new[:2] + b"\x00\x63" + too_new[4:])
    frame = unframed(MetadataRequest[12](topics=None), 1)
    for cut in range(len(frame)):
        with pytest.raises((InvalidRequestError, UnsupportedVersionError)):
            _core.kafka_decode_request(frame[:cut])
    with pytest.raises(TypeError, match=r"topics\[0\].partitions\[0\].leader_id: .* an int"):
        _core.kafka_encode_response(
            METADATA, 12, 1, {"topics": [{"partitions": [{"leader_id": "one"}]}]}
        )
    with pytest.raises(ValueError, match=r'MetadataResponseTopic has no field "leader"'):
        _core.kafka_encode_response(METADATA, 12, 1, {"topics": [{"leader": 1}]})
    with pytest.raises(ValueError, match=r"error_code: 1048576 is out of range for int16"):
        _core.kafka_encode_response(METADATA, 12, 1, {"topics": [{"error_code": 1 << 20}]})
    with pytest.raises(UnsupportedVersionError):
        _core.kafka_encode_response(999, 0, 1, {})


def test_produced_record_sets_are_read_in_place() -> None:
    """With records_in_place a Produce request's record sets are memoryviews of the frame
    (no copy) when the frame is bytes, and copies when it is a mutable buffer."""
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [
            {"name": "a", "partition_data": [{"index": 0, "records": b"first"}]},
            {"name": "b", "partition_data": [{"index": 3, "records": b"second!"}]},
        ],
    }
    frame = _core.kafka_encode_request(PRODUCE, 9, 5, "c", body)[4:]
    *_, read = _core.kafka_decode_request(frame, records_in_place=True)
    views = [p["records"] for t in read["topic_data"] for p in t["partition_data"]]
    assert all(isinstance(v, memoryview) and v.obj is frame for v in views)
    assert [bytes(v) for v in views] == [b"first", b"second!"]
    *_, copied = _core.kafka_decode_request(bytearray(frame), records_in_place=True)
    assert copied["topic_data"][1]["partition_data"][0]["records"] == b"second!"
    # Without the flag, and for bytes fields that are not record sets, bytes as before.
    *_, plain = _core.kafka_decode_request(frame)
    assert plain["topic_data"][0]["partition_data"][0]["records"] == b"first"


def test_a_frame_buffer_is_bytes_written_through_its_view() -> None:
    frame, into = _core.kafka_frame_buffer(6)
    assert isinstance(frame, bytes) and len(frame) == 6 and not into.readonly
    into[:3] = b"abc"
    into[3:] = b"def"
    into.release()
    assert frame == b"abcdef"
    with pytest.raises((ValueError, OverflowError)):
        _core.kafka_frame_buffer(-1)
