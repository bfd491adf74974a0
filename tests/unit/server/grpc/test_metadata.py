"""MetadataService over a MetadataImage, with auto topic creation."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc
import pytest

from rillet.broker.apis import BrokerApis
from rillet.config import BrokerConfig
from rillet.controller import CreatableTopic, TopicResult
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.protocol import common_pb2, metadata_pb2, metadata_pb2_grpc
from rillet.server.grpc.metadata import MetadataServicer

EP = (BrokerEndpoint("PLAINTEXT", "broker-1", 9092), BrokerEndpoint("CONTROLLER", "c", 9093))


class Cluster:
    def __init__(self) -> None:
        self.image = MetadataImage().replay(
            enumerate(
                [
                    RegisterBrokerRecord(1, uuid.UUID(int=1), 1, EP, "rack-1"),
                    UnfenceBrokerRecord(1, 1),
                    TopicRecord("t", uuid.UUID(int=5)),
                    PartitionRecord(uuid.UUID(int=5), 0, (1, 2), (1,), 1),
                    PartitionRecord(uuid.UUID(int=5), 1, (2, 1), (2,), -1),
                ]
            )
        )
        self.created: list[str] = []

    controller_id = 1

    async def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[TopicResult]:
        """The controller channel's auto topic creation: one partition on broker 1."""
        names = [t.name for t in topics]
        self.created.extend(names)
        base = self.image.offset + 1
        records = []
        for i, name in enumerate(names):
            tid = uuid.UUID(int=100 + i)
            records += [TopicRecord(name, tid), PartitionRecord(tid, 0, (1,), (1,), 1)]
        self.image = self.image.replay((base + i, r) for i, r in enumerate(records))
        return [TopicResult(n) for n in names]


@pytest.fixture
async def client(
    tmp_path: Path,
) -> AsyncIterator[tuple[metadata_pb2_grpc.MetadataServiceStub, Cluster]]:
    cluster = Cluster()
    server = grpc.aio.server()
    config = BrokerConfig.embedded_default(tmp_path)
    # Metadata needs no replicas; the cluster stands in for the controller channel.
    apis = BrokerApis(config, "cluster-x", None, lambda: cluster.image, cluster)  # type: ignore[arg-type]
    servicer = MetadataServicer(apis, "PLAINTEXT")
    metadata_pb2_grpc.add_MetadataServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield metadata_pb2_grpc.MetadataServiceStub(channel), cluster
    await server.stop(None)


async def test_brokers_topics_partitions(
    client: tuple[metadata_pb2_grpc.MetadataServiceStub, Cluster],
) -> None:
    stub, _ = client
    r = await stub.Metadata(metadata_pb2.MetadataRequest())
    assert (r.cluster_id, r.controller_id) == ("cluster-x", 1)
    assert [(b.node_id, b.host, b.port, b.rack) for b in r.brokers] == [
        (1, "broker-1", 9092, "rack-1")
    ]
    [t] = r.topics
    assert t.name == "t" and t.error_code == common_pb2.NONE
    p0, p1 = t.partitions
    assert (p0.leader_id, list(p0.replica_nodes), list(p0.isr_nodes)) == (1, [1, 2], [1])
    assert list(p0.offline_replicas) == [2]
    assert p1.error_code == common_pb2.LEADER_NOT_AVAILABLE


async def test_unknown_invalid_and_auto_created_topics(
    client: tuple[metadata_pb2_grpc.MetadataServiceStub, Cluster],
) -> None:
    stub, cluster = client
    r = await stub.Metadata(metadata_pb2.MetadataRequest(topics=["nope", "../x"]))
    codes = [common_pb2.ErrorCode.Name(t.error_code) for t in r.topics]
    assert codes == ["UNKNOWN_TOPIC_OR_PARTITION", "INVALID_TOPIC_EXCEPTION"]
    r = await stub.Metadata(
        metadata_pb2.MetadataRequest(topics=["new", "../x"], allow_auto_topic_creation=True)
    )
    assert cluster.created == ["new"]
    assert r.topics[0].error_code == common_pb2.NONE and len(r.topics[0].partitions) == 1
    assert common_pb2.ErrorCode.Name(r.topics[1].error_code) == "INVALID_TOPIC_EXCEPTION"
