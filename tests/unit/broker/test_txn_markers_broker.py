"""Markers on brokers: the channel that sends a coordinator's markers to partition leaders
(broker/txn_marker_channel.py) and the leader's WriteTxnMarkers / DescribeProducers
(broker/txn_marker_writer.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rillet import errors
from rillet.broker.txn_broker_clients import MarkerErrors, TxnMarkerEntry
from rillet.broker.txn_marker_writer import TxnMarkerWriter
from rillet.coordinator.transaction import TxnMarker
from rillet.errors import KafkaError
from rillet.metadata.records import RemoveTopicRecord
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition
from tests.unit.broker.txn_world import T0, T1, TxnWorld

U0 = TopicPartition("u", 0)
OFFSETS0 = TopicPartition("__consumer_offsets", 0)


@pytest.fixture
async def world(log_manager: LogManager) -> AsyncIterator[TxnWorld]:
    w = TxnWorld(log_manager, replicas=(1, 2, 3), topics={"t": 2, "u": 1, "v": 1})
    await w.replicate(2, 3)
    yield w
    await w.close()


def marker(*tps: TopicPartition, marker_id: int = 0, committed: bool = True) -> TxnMarker:
    return TxnMarker("tx", 5, 0, 0, committed, tps, marker_id)


class Answers:
    """What on_answer got: (marker id, errors by partition name, deleted names)."""

    def __init__(self) -> None:
        self.got: list[tuple[int, dict[str, str | None], list[str]]] = []
        self.current = True

    def __call__(
        self,
        m: TxnMarker,
        errs: MarkerErrors,
        deleted: frozenset[TopicPartition],
    ) -> None:
        named = {f"{tp.topic}-{tp.partition}": e.name if e else None for tp, e in errs.items()}
        self.got.append((m.marker_id, named, sorted(f"{t.topic}-{t.partition}" for t in deleted)))

    def is_current(self) -> bool:
        return self.current


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


# -- the channel ------------------------------------------------------------------------------


async def test_markers_are_split_by_leader_and_batched_per_broker(world: TxnWorld) -> None:
    world.move_leader("u", 0, 2)
    world.move_leader("v", 0, 2)
    world.move_leader("t", 1, 3)
    answers = Answers()
    gate = asyncio.Event()
    world._connect(2, "").gate = gate
    world.channel.send(marker(T0, T1, U0), answers, answers.is_current)
    await settle()
    # Broker 2's first request is in flight: a second marker for it waits and goes in one
    # request with nothing else.
    world.channel.send(marker(TopicPartition("v", 0), marker_id=1), answers, answers.is_current)
    world.channel.send(marker(U0, marker_id=2), answers, answers.is_current)
    await settle()
    assert [[e.partitions for e in r] for r in world.clients[2].markers] == [[(U0,)]]
    assert [[e.partitions for e in r] for r in world.clients[3].markers] == [[(T1,)]]
    gate.set()
    await settle()
    assert [[e.partitions for e in r] for r in world.clients[2].markers] == [
        [(U0,)],
        [(TopicPartition("v", 0),), (U0,)],
    ]
    # t-0 is this broker's: written in-process, acks=all (brokers 2 and 3 must fetch it).
    await world.replicate(2, 3)
    await settle()
    got = sorted(answers.got, key=lambda a: (a[0], sorted(a[1])))
    assert got == [
        (0, {"t-0": None}, []),
        (0, {"t-1": None}, []),
        (0, {"u-0": None}, []),
        (1, {"v-0": None}, []),
        (2, {"u-0": None}, []),
    ]
    assert world.markers(T0) == [(5, 0, "COMMIT")]
    (entry,) = world.clients[3].markers[0]
    assert entry == TxnMarkerEntry(5, 0, 0, True, (T1,))


async def test_lost_requests_leaderless_and_deleted_partitions(world: TxnWorld) -> None:
    world.move_leader("u", 0, 2)
    world.move_leader("t", 1, -1)
    world.apply([RemoveTopicRecord(world.topic_ids["v"])])
    client = world._connect(2, "")

    def lost(markers: object) -> list[MarkerErrors]:
        raise errors.NetworkError("connection reset")

    client.marker_answer = lost  # type: ignore[assignment]
    answers = Answers()
    world.channel.send(marker(T1, U0, TopicPartition("v", 0)), answers, answers.is_current)
    await settle()
    assert sorted(answers.got, key=str) == [
        (0, {"t-1": "NOT_LEADER_OR_FOLLOWER"}, ["v-0"]),
        (0, {"u-0": "NETWORK_EXCEPTION"}, []),
    ]


async def test_a_partial_or_fatal_answer_is_retried_and_a_stale_marker_dropped(
    world: TxnWorld,
) -> None:
    world.move_leader("u", 0, 2)
    world.move_leader("v", 0, 2)
    client = world._connect(2, "")
    client.marker_answer = lambda ms: [{} for _ in ms]
    answers = Answers()
    world.channel.send(marker(U0), answers, answers.is_current)
    await settle()
    assert answers.got == [(0, {"u-0": "NETWORK_EXCEPTION"}, [])]
    # A marker of a shard unloaded meanwhile is neither sent nor answered.
    answers.current = False
    world.channel.send(marker(TopicPartition("v", 0), marker_id=1), answers, answers.is_current)
    await settle()
    assert len(client.markers) == 1 and len(answers.got) == 1
    # A delayed send goes later.
    answers.current = True
    world.channel.send(marker(U0, marker_id=2), answers, answers.is_current, delay_ms=30)
    await settle()
    assert len(client.markers) == 1
    await asyncio.sleep(0.06)
    assert len(client.markers) == 2


# -- WriteTxnMarkers on the leader --------------------------------------------------------------


async def test_write_txn_markers_on_the_leader(world: TxnWorld) -> None:
    writer = world.writer
    pid = 7
    res = await world.rm.append_records({T0: world.produce_batch(pid, 0)}, 1, 1000)
    assert res[T0].error is None
    world.move_leader("u", 0, 2)
    entries = [
        TxnMarkerEntry(pid, 0, 3, True, (T0, U0, TopicPartition("nope", 0))),
        TxnMarkerEntry(pid, 0, 2, False, (T1,)),
    ]
    task = asyncio.create_task(writer.write_txn_markers(entries))
    await settle()
    assert not task.done()  # acks=all: brokers 2 and 3 must have the markers
    await world.replicate(2, 3)
    first, second = await asyncio.wait_for(task, 5)
    assert first[T0] is None
    assert isinstance(first[U0], errors.NotLeaderOrFollowerError)
    assert isinstance(first[TopicPartition("nope", 0)], errors.UnknownTopicOrPartitionError)
    assert second == {T1: None}
    assert world.markers(T0) == [(pid, 0, "COMMIT")]
    # A deposed coordinator (an older coordinator epoch) and a zombie producer epoch.
    fenced, zombie = await writer.write_txn_markers(
        [TxnMarkerEntry(pid, 0, 2, True, (T0,)), TxnMarkerEntry(pid, -1, 3, True, (T0,))]
    )
    assert isinstance(fenced[T0], errors.TransactionCoordinatorFencedError)
    assert isinstance(zombie[T0], errors.InvalidProducerEpochError)
    # Too few in-sync replicas: refused before writing.
    world.rm.partitions[T1].min_insync_replicas = 4
    (short,) = await writer.write_txn_markers([TxnMarkerEntry(pid, 0, 3, True, (T1,))])
    assert isinstance(short[T1], errors.NotEnoughReplicasError)


async def test_consumer_offsets_markers_go_to_the_group_coordinator(world: TxnWorld) -> None:
    calls: list[tuple[TopicPartition, int, int, int, bool]] = []
    answer: dict[str, KafkaError | None] = {"next": None}

    class Groups:
        async def complete_transaction(
            self, tp: TopicPartition, pid: int, epoch: int, coordinator_epoch: int, c: bool
        ) -> KafkaError | None:
            calls.append((tp, pid, epoch, coordinator_epoch, c))
            return answer["next"]

    writer = TxnMarkerWriter(world.rm, world.clock, groups=Groups())
    entry = TxnMarkerEntry(9, 1, 4, False, (OFFSETS0,))
    assert await writer.write_txn_markers([entry]) == [{OFFSETS0: None}]
    assert calls == [(OFFSETS0, 9, 1, 4, False)]
    answer["next"] = errors.CoordinatorLoadInProgressError("loading")
    ((err,),) = [list(r.values()) for r in await writer.write_txn_markers([entry])]
    assert isinstance(err, errors.NotLeaderOrFollowerError)  # retried by the coordinator
    answer["next"] = errors.TransactionCoordinatorFencedError("old")
    ((err,),) = [list(r.values()) for r in await writer.write_txn_markers([entry])]
    assert isinstance(err, errors.TransactionCoordinatorFencedError)


async def test_describe_producers(world: TxnWorld) -> None:
    await world.rm.append_records({T0: world.produce_batch(8, 2)}, 1, 1000)
    world.move_leader("u", 0, 2)
    asked = [T0, T1, U0, TopicPartition("t", 7), TopicPartition("bad name!", 0)]
    t0, t1, u0, t7, bad = world.writer.describe_producers(world.image, asked)
    (p,) = t0.active_producers
    assert (p.producer_id, p.producer_epoch, p.last_sequence) == (8, 2, 0)
    assert p.current_txn_start_offset == 0
    assert t1.error is None and t1.active_producers == ()
    assert isinstance(u0.error, errors.NotLeaderOrFollowerError)
    assert isinstance(t7.error, errors.UnknownTopicOrPartitionError)
    assert isinstance(bad.error, errors.InvalidTopicError)
