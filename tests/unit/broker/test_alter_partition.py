"""A leader's ISR changes reach the controller through the AlterPartitionManager, one request
per partition in flight."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from rillet import BatchBuilder
from rillet.broker.alter_partition import AlterPartitionManager
from rillet.broker.replica_manager import FetchPartition, ReplicaManager
from rillet.controller import AlterPartitionResult, AlterPartitionState
from rillet.errors import StaleBrokerEpochError
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

TID = uuid.UUID(int=9)
TP = TopicPartition("t", 0)


class Channel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, list[AlterPartitionState]]] = []
        self.release = asyncio.Event()

    controller_id = 1

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> list[AlterPartitionResult]:
        self.sent.append((broker_id, broker_epoch, list(changes)))
        await self.release.wait()
        raise StaleBrokerEpochError("a refusal is logged, not raised")


@pytest.fixture
def log_manager(tmp_path: Path) -> Iterator[LogManager]:
    lm = LogManager([tmp_path / "logs"])
    lm.startup()
    yield lm
    lm.shutdown()


async def test_a_caught_up_follower_is_asked_into_the_isr(log_manager: LogManager) -> None:
    channel = Channel()
    epoch = [-1]
    manager = AlterPartitionManager(1, channel, lambda: epoch[0])  # type: ignore[arg-type]
    rm = ReplicaManager(1, log_manager, lambda: 1_000, manager)
    ep = (BrokerEndpoint("PLAINTEXT", "h", 1),)
    delta = MetadataDelta(MetadataImage())
    records = [
        RegisterBrokerRecord(1, uuid.UUID(int=1), 1, ep),
        UnfenceBrokerRecord(1, 1),
        TopicRecord("t", TID),
        PartitionRecord(TID, 0, (1, 2), (1,), 1),
    ]
    for i, r in enumerate(records):
        delta.replay(i, r)
    rm.apply_partition_changes(delta.partition_changes(), delta.apply())
    b = BatchBuilder()
    b.append(1, None, b"v")
    await rm.append_records({TP: b.build()}, 1, 1000)

    # Not registered yet: nothing is sent.
    await rm.fetch({TP: FetchPartition(1, 1 << 20)}, replica_id=2)
    assert channel.sent == [] and not manager.in_flight

    epoch[0] = 5
    await rm.fetch({TP: FetchPartition(1, 1 << 20)}, replica_id=2)
    await asyncio.sleep(0)
    p = rm.partitions[TP]
    assert channel.sent == [
        (1, 5, [AlterPartitionState(TID, 0, p.leader_epoch, p.partition_epoch, (1, 2))])
    ]
    # While that request is in flight, the same change is not sent again.
    await rm.fetch({TP: FetchPartition(1, 1 << 20)}, replica_id=2)
    await asyncio.sleep(0)
    assert len(channel.sent) == 1 and TP in manager.in_flight
    channel.release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not manager.in_flight
    await manager.shutdown()
    rm.shutdown()
