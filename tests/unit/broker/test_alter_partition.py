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
from rillet.errors import (
    IneligibleReplicaError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)
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


def _live_brokers(*ids: int) -> list[RegisterBrokerRecord | UnfenceBrokerRecord]:
    out: list[RegisterBrokerRecord | UnfenceBrokerRecord] = []
    for i in ids:
        endpoint = (BrokerEndpoint("PLAINTEXT", f"h{i}", 1),)
        out += [RegisterBrokerRecord(i, uuid.UUID(int=i), i, endpoint), UnfenceBrokerRecord(i, i)]
    return out


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
    delta = MetadataDelta(MetadataImage())
    records = [
        *_live_brokers(1, 2),
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


# -- the maximal ISR (KIP-497) -------------------------------------------------------------------


class ScriptedChannel:
    """Answers each AlterPartition with the next of ``answers`` once ``go`` is set: a
    KafkaError is raised, None grants the change."""

    controller_id = 1

    def __init__(self, *answers: KafkaError | None) -> None:
        self.answers = list(answers)
        self.sent: list[AlterPartitionState] = []
        self.go = asyncio.Event()

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> list[AlterPartitionResult]:
        self.sent.extend(changes)
        await self.go.wait()
        answer = self.answers.pop(0)
        if isinstance(answer, KafkaError):
            raise answer
        c = changes[0]
        return [
            AlterPartitionResult(
                c.topic_id, c.partition, None, 1, c.leader_epoch, c.new_isr, c.partition_epoch + 1
            )
        ]


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def _leader_of_three(
    log_manager: LogManager, channel: ScriptedChannel
) -> tuple[ReplicaManager, AlterPartitionManager]:
    """Broker 1 leads t-0 with replicas (1, 2, 3) and ISR (1, 2); one record at offset 0,
    which broker 2 has; broker 3 has just caught up, so its addition is in flight."""
    manager = AlterPartitionManager(1, channel, lambda: 5, retry_backoff_ms=1)  # type: ignore[arg-type]
    rm = ReplicaManager(1, log_manager, lambda: 1_000, manager)
    delta = MetadataDelta(MetadataImage())
    records = [
        *_live_brokers(1, 2, 3),
        TopicRecord("t", TID),
        PartitionRecord(TID, 0, (1, 2, 3), (1, 2), 1),
    ]
    for i, r in enumerate(records):
        delta.replay(i, r)
    rm.apply_partition_changes(delta.partition_changes(), delta.apply())
    await _append(rm)
    await rm.fetch({TP: FetchPartition(1, 1 << 20)}, replica_id=2)
    await rm.fetch({TP: FetchPartition(1, 1 << 20)}, replica_id=3)
    await _settle()
    assert [c.new_isr for c in channel.sent] == [(1, 2, 3)]
    return rm, manager


async def _append(rm: ReplicaManager) -> None:
    b = BatchBuilder()
    b.append(1, None, b"v")
    await rm.append_records({TP: b.build()}, 1, 1000)


async def test_the_high_watermark_waits_for_a_replica_whose_addition_is_in_flight(
    log_manager: LogManager,
) -> None:
    channel = ScriptedChannel(None)
    rm, manager = await _leader_of_three(log_manager, channel)
    p = rm.partitions[TP]
    await _append(rm)
    await rm.fetch({TP: FetchPartition(2, 1 << 20)}, replica_id=2)
    # The controller may already have broker 3 in the ISR and elect it: offset 1, which it
    # lacks, is not acknowledged yet.
    assert p.isr == (1, 2) and p.high_watermark == 1
    channel.go.set()
    await _settle()
    assert (p.isr, p.partition_epoch, p.pending_isr) == ((1, 2, 3), 1, None)
    await rm.fetch({TP: FetchPartition(2, 1 << 20)}, replica_id=3)
    assert p.high_watermark == 2
    await manager.shutdown()
    rm.shutdown()


async def test_a_refused_addition_stops_holding_the_high_watermark(
    log_manager: LogManager,
) -> None:
    channel = ScriptedChannel(IneligibleReplicaError("broker 3 is fenced"))
    rm, manager = await _leader_of_three(log_manager, channel)
    p = rm.partitions[TP]
    await _append(rm)
    await rm.fetch({TP: FetchPartition(2, 1 << 20)}, replica_id=2)
    assert p.high_watermark == 1
    channel.go.set()
    await _settle()
    assert (p.isr, p.pending_isr, p.high_watermark) == ((1, 2), None, 2)
    await manager.shutdown()
    rm.shutdown()


async def test_a_change_without_an_answer_is_sent_again_until_one_comes(
    log_manager: LogManager,
) -> None:
    channel = ScriptedChannel(NotControllerError("no active controller"), None)
    rm, manager = await _leader_of_three(log_manager, channel)
    p = rm.partitions[TP]
    channel.go.set()
    for _ in range(100):
        await asyncio.sleep(0.005)
        if p.pending_isr is None:
            break
    assert [c.new_isr for c in channel.sent] == [(1, 2, 3), (1, 2, 3)]
    assert (p.isr, p.pending_isr) == ((1, 2, 3), None)
    await manager.shutdown()
    rm.shutdown()


async def test_a_fenced_replica_is_not_asked_into_the_isr(log_manager: LogManager) -> None:
    channel = ScriptedChannel()
    manager = AlterPartitionManager(1, channel, lambda: 5)  # type: ignore[arg-type]
    rm = ReplicaManager(1, log_manager, lambda: 1_000, manager)
    delta = MetadataDelta(MetadataImage())
    records = [
        *_live_brokers(1),
        RegisterBrokerRecord(2, uuid.UUID(int=2), 2, (BrokerEndpoint("PLAINTEXT", "h2", 1),)),
        TopicRecord("t", TID),
        PartitionRecord(TID, 0, (1, 2), (1,), 1),
    ]
    for i, r in enumerate(records):
        delta.replay(i, r)
    rm.apply_partition_changes(delta.partition_changes(), delta.apply())
    await _append(rm)
    await rm.fetch({TP: FetchPartition(1, 1 << 20)}, replica_id=2)
    await _settle()
    # Broker 2 is registered but fenced (KIP-841): nothing is sent, nothing is pending.
    assert channel.sent == [] and rm.partitions[TP].pending_isr is None
    await manager.shutdown()
    rm.shutdown()
