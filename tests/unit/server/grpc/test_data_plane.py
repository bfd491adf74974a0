"""The gRPC data plane end to end in one process: real server, real channel, real log."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from rillet import BatchBuilder, decode_batches
from rillet.broker.apis import BrokerApis
from rillet.broker.replica_manager import ReplicaManager
from rillet.config import BrokerConfig
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.protocol import common_pb2, fetch_pb2, fetch_pb2_grpc, produce_pb2, produce_pb2_grpc
from rillet.server.grpc.fetch import FetchServicer, add_fetch_servicer
from rillet.server.grpc.produce import ProduceServicer, add_produce_servicer
from rillet.storage.log_manager import LogManager

TID = uuid.UUID(int=3)
NOW = 1_700_000_000_000


class Stubs:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.produce = produce_pb2_grpc.ProduceServiceStub(channel)
        self.fetch = fetch_pb2_grpc.FetchServiceStub(channel)


@pytest.fixture
async def stubs(tmp_path: Path) -> AsyncIterator[Stubs]:
    lm = LogManager([tmp_path / "logs"])
    lm.startup()
    rm = ReplicaManager(1, lm, lambda: NOW)
    delta = MetadataDelta(MetadataImage())
    records = [
        RegisterBrokerRecord(1, uuid.UUID(int=1), 1, (BrokerEndpoint("PLAINTEXT", "h", 1),)),
        UnfenceBrokerRecord(1, 1),
        TopicRecord("t", TID),
        PartitionRecord(TID, 0, (1,), (1,), 1),
        PartitionRecord(TID, 1, (1,), (1,), 1),
    ]
    for i, r in enumerate(records):
        delta.replay(i, r)
    image = delta.apply()
    rm.apply_partition_changes(delta.partition_changes(), image)
    # Produce and fetch need no controller.
    apis = BrokerApis(BrokerConfig.embedded_default(tmp_path), "c", rm, lambda: image, None)  # type: ignore[arg-type]
    server = grpc.aio.server()
    add_produce_servicer(ProduceServicer(apis, lambda: NOW), server)
    add_fetch_servicer(FetchServicer(apis), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield Stubs(channel)
    await server.stop(None)
    rm.shutdown()
    lm.shutdown()


def produce_request(partition: int, **fields: object) -> produce_pb2.ProduceRequest:
    return produce_pb2.ProduceRequest(
        acks=1,
        topics=[
            produce_pb2.ProduceRequest.Topic(
                name="t",
                partitions=[produce_pb2.ProduceRequest.Partition(partition=partition, **fields)],  # type: ignore[arg-type]
            )
        ],
    )


def fetch_request(partition: int, offset: int, structured: bool) -> fetch_pb2.FetchRequest:
    return fetch_pb2.FetchRequest(
        structured=structured,
        topics=[
            fetch_pb2.FetchRequest.Topic(
                name="t",
                partitions=[
                    fetch_pb2.FetchRequest.Partition(partition=partition, fetch_offset=offset)
                ],
            )
        ],
    )


async def test_batches_and_structured_records_round_trip(stubs: Stubs) -> None:
    b = BatchBuilder("zstd")
    b.append(5, b"k", b"v0")
    b.append(6, None, b"v1")
    r = await stubs.produce.Produce(produce_request(0, record_batches=b.build()))
    part = r.topics[0].partitions[0]
    assert (part.error_code, part.base_offset) == (common_pb2.NONE, 0)
    structured = [
        common_pb2.Record(key=b"a", value=b"x", headers=[common_pb2.Header(key="h", value=b"1")]),
        common_pb2.Record(value=b"y", timestamp_ms=42),
    ]
    r = await stubs.produce.Produce(
        produce_request(0, records=structured, compression=common_pb2.COMPRESSION_TYPE_LZ4)
    )
    assert r.topics[0].partitions[0].base_offset == 2
    raw = await stubs.fetch.Fetch(fetch_request(0, 0, structured=False))
    rp = raw.topics[0].partitions[0]
    assert rp.high_watermark == 4
    values = [rec.value for batch in decode_batches(rp.record_batches) for rec in batch.records]
    assert values == [b"v0", b"v1", b"x", b"y"]
    got = await stubs.fetch.Fetch(fetch_request(0, 1, structured=True))
    recs = got.topics[0].partitions[0].records
    assert [(x.offset, x.value) for x in recs] == [(1, b"v1"), (2, b"x"), (3, b"y")]
    assert recs[1].key == b"a" and recs[1].headers[0].value == b"1" and recs[1].timestamp_ms == NOW
    assert recs[2].timestamp_ms == 42 and not recs[2].HasField("key")
    listed = await stubs.fetch.ListOffsets(
        fetch_pb2.ListOffsetsRequest(
            topics=[
                fetch_pb2.ListOffsetsRequest.Topic(
                    name="t",
                    partitions=[
                        fetch_pb2.ListOffsetsRequest.Partition(partition=0, timestamp_ms=-1)
                    ],
                )
            ]
        )
    )
    assert listed.topics[0].partitions[0].offset == 4


async def test_errors_are_per_partition_with_kafka_names(stubs: Stubs) -> None:
    r = await stubs.produce.Produce(produce_request(0, record_batches=b"\x00" * 70))
    assert common_pb2.ErrorCode.Name(r.topics[0].partitions[0].error_code) == "CORRUPT_MESSAGE"
    r = await stubs.produce.Produce(produce_request(9, records=[common_pb2.Record(value=b"x")]))
    part = r.topics[0].partitions[0]
    assert common_pb2.ErrorCode.Name(part.error_code) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert part.base_offset == -1
    r = await stubs.produce.Produce(produce_request(1))
    assert common_pb2.ErrorCode.Name(r.topics[0].partitions[0].error_code) == "INVALID_REQUEST"
    f = await stubs.fetch.Fetch(fetch_request(1, 50, structured=False))
    assert common_pb2.ErrorCode.Name(f.topics[0].partitions[0].error_code) == "OFFSET_OUT_OF_RANGE"
    # The broker keeps serving.
    r = await stubs.produce.Produce(produce_request(1, records=[common_pb2.Record(value=b"ok")]))
    assert r.topics[0].partitions[0].error_code == common_pb2.NONE


async def test_a_partition_listed_twice_is_refused_not_overwritten(stubs: Stubs) -> None:
    def batch(value: bytes) -> bytes:
        b = BatchBuilder("none")
        b.append(NOW, None, value, [])
        return b.build()

    request = produce_pb2.ProduceRequest(
        acks=1,
        topics=[
            produce_pb2.ProduceRequest.Topic(
                name="t",
                partitions=[
                    produce_pb2.ProduceRequest.Partition(partition=0, record_batches=batch(b"a")),
                    produce_pb2.ProduceRequest.Partition(partition=0, record_batches=batch(b"b")),
                    produce_pb2.ProduceRequest.Partition(
                        partition=1, record_batches=batch(b"c") + batch(b"d")
                    ),
                ],
            )
        ],
    )
    r = await stubs.produce.Produce(request)
    first, second, other = r.topics[0].partitions
    assert (first.error_code, first.base_offset) == (common_pb2.NONE, 0)
    assert common_pb2.ErrorCode.Name(second.error_code) == "INVALID_REQUEST"
    assert "more than once" in second.error_message and second.base_offset == -1
    # Batches one after the other in one entry are appended together.
    assert (other.error_code, other.base_offset) == (common_pb2.NONE, 0)
    f = await stubs.fetch.Fetch(fetch_request(0, 0, structured=True))
    assert [rec.value for rec in f.topics[0].partitions[0].records] == [b"a"]
    f = await stubs.fetch.Fetch(fetch_request(1, 0, structured=True))
    assert [rec.value for rec in f.topics[0].partitions[0].records] == [b"c", b"d"]
