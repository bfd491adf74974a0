"""The group coordinator's driver over a real ``__consumer_offsets`` log led by broker 1 with a
follower (broker 2) that only exists in the metadata, so a write waits for the high watermark
until the test says otherwise: a request cancelled while its write waits (gRPC cancels a
handler whose client went away or whose deadline passed) must not take with it what the
driver does after the wait, here throwing the shard away when the write failed."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from rillet.broker.group_coordinator import OFFSETS_TOPIC, GroupCoordinator
from rillet.broker.replica_manager import ReplicaManager
from rillet.coordinator.group import GroupCoordinatorConfig
from rillet.coordinator.group.messages import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.storage.log_manager import LogManager
from tests.unit.broker.txn_world import Clock, Controller


def _image(replicas: tuple[int, ...]) -> tuple[MetadataImage, MetadataDelta]:
    records: list[MetadataRecord] = []
    for b in replicas:
        endpoints = (BrokerEndpoint("PLAINTEXT", "localhost", 9090 + b),)
        records += [
            RegisterBrokerRecord(b, uuid.UUID(int=10 + b), 1, endpoints, None, True),
            UnfenceBrokerRecord(b, 1),
        ]
    for name in (OFFSETS_TOPIC, "t"):
        tid = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        records += [TopicRecord(name, tid), PartitionRecord(tid, 0, replicas, replicas, 1)]
    delta = MetadataDelta(MetadataImage())
    for offset, r in enumerate(records, 1):
        delta.replay(offset, r)
    return delta.apply(), delta


async def test_a_cancelled_commit_whose_write_fails_still_reloads_the_shard(
    log_manager: LogManager,
) -> None:
    clock = Clock()
    rm = ReplicaManager(1, log_manager, clock)
    coordinator = GroupCoordinator(
        1,
        rm,
        log_manager,
        Controller(),  # type: ignore[arg-type]
        GroupCoordinatorConfig(offsets_topic_num_partitions=1),
        clock,
        replication_factor=2,
        commit_timeout_ms=200,  # the follower never fetches: the write times out
    )
    image, delta = _image((1, 2))
    rm.apply_partition_changes(delta.partition_changes(), image)
    coordinator.on_metadata(image)
    try:
        for _ in range(500):
            if 0 in coordinator._loaded:
                break
            await asyncio.sleep(0.002)
        first = coordinator._loaded[0]
        request = OffsetCommitRequest(
            "g", (OffsetCommitRequestTopic("t", (OffsetCommitRequestPartition(0, 5),)),)
        )

        def refused(e: KafkaError) -> object:
            return e

        commit = asyncio.create_task(
            coordinator.run("g", lambda shard, now: shard.commit_offsets(request, now), refused)
        )
        await asyncio.sleep(0.02)
        assert not commit.done()  # waiting for broker 2, which never fetches
        commit.cancel()
        with pytest.raises(asyncio.CancelledError):
            await commit
        # The write times out: the shard, which applied a commit the log may not keep, is
        # thrown away and loaded again from the log, though nobody waits for the answer.
        for _ in range(500):
            if coordinator._loaded.get(0) not in (None, first):
                break
            await asyncio.sleep(0.002)
        assert coordinator._loaded.get(0) not in (None, first)
    finally:
        await coordinator.close()
