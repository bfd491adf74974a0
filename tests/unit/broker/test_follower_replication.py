"""Leader and follower ReplicaManagers in one process: follower fetches, the high watermark,
acks=all, truncation by diverging epoch (KIP-279/KIP-320), and the errors a follower meets.

Each broker has its own LogManager; metadata reaches them as the same committed records. A
:class:`Loopback` client carries a follower's fetch to the leader's ReplicaManager, as the
gRPC client does between processes; the fetcher's rounds are driven by hand
(``build_request`` then ``handle_response``), so nothing here sleeps or runs in the
background.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from rillet import BatchBuilder, decode_batches, errors
from rillet.broker.replica_fetcher import (
    FetcherConfig,
    LeaderFetchResult,
    ReplicaFetcher,
    ReplicaFetchRequest,
)
from rillet.broker.replica_manager import FetchPartition, ReplicaManager
from rillet.errors import FencedLeaderEpochError
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

TID = uuid.UUID(int=1)
TP = TopicPartition("t", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def batch(*values: bytes) -> bytes:
    b = BatchBuilder()
    for v in values:
        b.append(1_000, None, v)
    return b.build()


class Loopback:
    """A follower's connection to a leader's ReplicaManager in the same process."""

    def __init__(self, leader: ReplicaManager) -> None:
        self.leader = leader
        self.down = False
        self.long_poll = False  # rounds driven by hand do not wait

    async def fetch(
        self, request: ReplicaFetchRequest, timeout_ms: int
    ) -> dict[TopicPartition, LeaderFetchResult]:
        if self.down:
            raise errors.NetworkError("the leader is unreachable")
        wanted = {
            tp: FetchPartition(
                p.fetch_offset, p.max_bytes, p.current_leader_epoch, p.last_fetched_epoch
            )
            for tp, p in request.partitions.items()
        }
        got = await self.leader.fetch(
            wanted,
            replica_id=request.replica_id,
            max_wait_ms=request.max_wait_ms if self.long_poll else 0,
            min_bytes=request.min_bytes,
        )
        return {
            tp: LeaderFetchResult(
                r.error,
                r.high_watermark,
                r.log_start_offset,
                r.diverging_epoch,
                r.data.read_all() if r.data is not None and r.size else b"",
            )
            for tp, r in got.items()
        }

    async def close(self) -> None:
        pass


class Brokers:
    """Brokers 1..n, each with its own log dir, following the same metadata records."""

    def __init__(self, root: Path, n: int) -> None:
        self.clock = Clock()
        self.managers: dict[int, LogManager] = {}
        self.rms: dict[int, ReplicaManager] = {}
        for b in range(1, n + 1):
            lm = LogManager([root / f"b{b}"], clock=self.clock)
            lm.startup()
            self.managers[b] = lm
            self.rms[b] = ReplicaManager(b, lm, self.clock)
        self.image = MetadataImage()
        ep = (BrokerEndpoint("PLAINTEXT", "localhost", 9092),)
        recs: list[MetadataRecord] = []
        for b in self.rms:
            recs += [
                RegisterBrokerRecord(b, uuid.UUID(int=b), b, ep, None, True),
                UnfenceBrokerRecord(b, b),
            ]
        self.commit(recs)

    def commit(self, records: list[MetadataRecord]) -> None:
        delta = MetadataDelta(self.image)
        for i, r in enumerate(records):
            delta.replay(self.image.offset + 1 + i, r)
        self.image = delta.apply()
        for rm in self.rms.values():
            rm.apply_partition_changes(delta.partition_changes(), self.image)

    def fetcher(self, follower: int, leader: int) -> tuple[ReplicaFetcher, Loopback]:
        client = Loopback(self.rms[leader])
        f = ReplicaFetcher(
            "test",
            follower,
            leader,
            client,
            self.rms[follower].partitions.get,
            lambda: follower,
            self.clock,
            FetcherConfig(backoff_ms=100),
        )
        p = self.rms[follower].partitions[TP]
        f.add_partitions({TP: p.leader_epoch})
        return f, client

    def close(self) -> None:
        for lm in self.managers.values():
            lm.shutdown()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    b = Brokers(tmp_path, 3)
    yield b
    b.close()


async def round_trip(f: ReplicaFetcher, client: Loopback, now: int | None = None) -> None:
    request = f.build_request(now if now is not None else f.clock())
    assert request is not None
    results: Mapping[TopicPartition, LeaderFetchResult] = await client.fetch(request, 1000)
    f.handle_response(request, results, f.clock())


def values(rm: ReplicaManager) -> list[bytes]:
    log = rm.partitions[TP].log
    data = log.read(log.log_start_offset, 1 << 30).read_all() if log.log_end_offset else b""
    return [r.value or b"" for b in decode_batches(data) for r in b.records]


def create(b: Brokers, replicas: tuple[int, ...], **kw: int) -> None:
    b.commit([TopicRecord("t", TID), PartitionRecord(TID, 0, replicas, replicas, replicas[0])])
    for rm in b.rms.values():
        if TP in rm.partitions and "min_isr" in kw:
            rm.partitions[TP].min_insync_replicas = kw["min_isr"]


async def test_a_follower_copies_the_leader_and_acks_all_waits_for_it(brokers: Brokers) -> None:
    create(brokers, (1, 2))
    leader, follower = brokers.rms[1], brokers.rms[2]
    assert leader.partitions[TP].is_leader and not follower.partitions[TP].is_leader
    f, client = brokers.fetcher(2, 1)
    produce = asyncio.create_task(leader.append_records({TP: batch(b"a", b"b")}, -1, 10_000))
    await asyncio.sleep(0)
    assert not produce.done()
    await round_trip(f, client)  # gets offsets 0-1
    assert values(follower) == [b"a", b"b"] and not produce.done()
    await round_trip(f, client)  # fetches at 2: the leader's HW moves, the produce completes
    res = await asyncio.wait_for(produce, 5)
    assert res[TP].error is None and res[TP].base_offset == 0
    assert leader.partitions[TP].high_watermark == 2
    assert follower.partitions[TP].high_watermark == 2  # learned from that fetch
    # The leader epoch travels in the batches into the follower's epoch cache.
    assert follower.partitions[TP].log.latest_epoch() == leader.partitions[TP].leader_epoch


async def test_a_deposed_leader_truncates_by_diverging_epoch(brokers: Brokers) -> None:
    create(brokers, (1, 2))
    b1, b2 = brokers.rms[1], brokers.rms[2]
    f21, c21 = brokers.fetcher(2, 1)
    await b1.append_records({TP: batch(b"a")}, 1, 1000)
    await round_trip(f21, c21)
    # Broker 1 takes two more records that never reach broker 2 (acks=1).
    await b1.append_records({TP: batch(b"lost1")}, 1, 1000)
    await b1.append_records({TP: batch(b"lost2")}, 1, 1000)
    assert values(b2) == [b"a"]
    # Broker 2 becomes leader (epoch 1) and takes new records at offset 1.
    brokers.commit([PartitionChangeRecord(TID, 0, leader=2, isr=(2,))])
    assert b2.partitions[TP].is_leader and b2.partitions[TP].leader_epoch == 1
    await b2.append_records({TP: batch(b"new1", b"new2")}, 1, 1000)
    await b2.append_records({TP: batch(b"new3")}, 1, 1000)
    # Broker 1 follows: its fetch names epoch 0; the leader answers epoch 0 ended at 1.
    f12, c12 = brokers.fetcher(1, 2)
    await round_trip(f12, c12)
    assert values(b1) == [b"a"], "truncated to where epoch 0 ends on the new leader"
    await round_trip(f12, c12)
    assert values(b1) == values(b2) == [b"a", b"new1", b"new2", b"new3"]
    assert [e.epoch for e in b1.partitions[TP].log.leader_epoch_entries()] == [0, 1]


async def test_truncation_is_by_epoch_not_by_high_watermark(brokers: Brokers) -> None:
    """KIP-101: a follower whose records above its HW are committed keeps them."""
    create(brokers, (1, 2))
    b1, b2 = brokers.rms[1], brokers.rms[2]
    f21, c21 = brokers.fetcher(2, 1)
    await b1.append_records({TP: batch(b"a")}, 1, 1000)
    await b1.append_records({TP: batch(b"b")}, 1, 1000)
    await round_trip(f21, c21)
    assert b2.partitions[TP].high_watermark == 0  # it learns the HW on its next fetch
    # The leader changes; broker 1 (with the same records) comes back as follower of 2.
    brokers.commit([PartitionChangeRecord(TID, 0, leader=2)])
    f12, c12 = brokers.fetcher(1, 2)
    await round_trip(f12, c12)
    assert values(b1) == [b"a", b"b"], "nothing truncated: epoch 0 ends at 2 on both"


async def test_acks_all_fails_when_leadership_moves_or_the_isr_shrinks(brokers: Brokers) -> None:
    create(brokers, (1, 2, 3), min_isr=2)
    b1 = brokers.rms[1]
    waiting = asyncio.create_task(b1.append_records({TP: batch(b"x")}, -1, 10_000))
    await asyncio.sleep(0)
    brokers.commit([PartitionChangeRecord(TID, 0, leader=2)])
    res = await asyncio.wait_for(waiting, 5)
    assert isinstance(res[TP].error, errors.NotLeaderOrFollowerError)

    brokers.commit([PartitionChangeRecord(TID, 0, leader=1, isr=(1, 2, 3))])
    f21, c21 = brokers.fetcher(2, 1)
    waiting = asyncio.create_task(b1.append_records({TP: batch(b"y")}, -1, 10_000))
    await asyncio.sleep(0)
    brokers.commit([PartitionChangeRecord(TID, 0, isr=(1,))])  # below min.insync.replicas
    await round_trip(f21, c21)
    await round_trip(f21, c21)
    res = await asyncio.wait_for(waiting, 5)
    assert isinstance(res[TP].error, errors.NotEnoughReplicasAfterAppendError)
    res = await b1.append_records({TP: batch(b"z")}, -1, 10_000)
    assert isinstance(res[TP].error, errors.NotEnoughReplicasError)


async def test_a_follower_behind_the_leaders_log_start_starts_over(brokers: Brokers) -> None:
    create(brokers, (1, 2))
    b1, b2 = brokers.rms[1], brokers.rms[2]
    for i in range(4):
        await b1.append_records({TP: batch(f"v{i}".encode())}, 1, 1000)
    b1.partitions[TP].log.maybe_increment_log_start_offset(3)
    f21, c21 = brokers.fetcher(2, 1)
    await round_trip(f21, c21)  # offset 0 is gone on the leader
    log = b2.partitions[TP].log
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    await round_trip(f21, c21)
    assert values(b2) == [b"v3"]


async def test_errors_back_off_and_stale_answers_are_ignored(brokers: Brokers) -> None:
    create(brokers, (1, 2))
    b1, b2 = brokers.rms[1], brokers.rms[2]
    await b1.append_records({TP: batch(b"a")}, 1, 1000)
    f21, c21 = brokers.fetcher(2, 1)
    # An answer that comes after the follower moved to a new leader epoch is dropped.
    request = f21.build_request(brokers.clock())
    assert request is not None
    results = await c21.fetch(request, 1000)
    brokers.commit([PartitionChangeRecord(TID, 0, leader=1, isr=(1, 2))])
    brokers.commit([PartitionChangeRecord(TID, 0, leader=2)])
    f21.handle_response(request, results, brokers.clock())
    assert b2.partitions[TP].log.log_end_offset == 0
    # A broker that does not lead answers NOT_LEADER_OR_FOLLOWER: back off.
    f12, c12 = brokers.fetcher(1, 2)
    c12.leader = brokers.rms[3]  # asks broker 3, which hosts nothing
    await round_trip(f12, c12)
    assert f12.build_request(brokers.clock()) is None
    assert f12.build_request(brokers.clock() + 100) is not None


async def test_the_fetch_loop_follows_and_backs_off_when_the_leader_is_down(
    brokers: Brokers,
) -> None:
    create(brokers, (1, 2))
    b1, b2 = brokers.rms[1], brokers.rms[2]
    f21, c21 = brokers.fetcher(2, 1)
    c21.down = True
    c21.long_poll = True
    f21.start()
    try:
        await asyncio.sleep(0.05)
        assert f21.partitions[TP].delayed_until_ms == brokers.clock() + 100
        c21.down = False
        await b1.append_records({TP: batch(b"a")}, 1, 1000)
        brokers.clock.now += 100  # the backoff passes (the loop sleeps in real time too)
        for _ in range(200):
            if values(b2) == [b"a"]:
                break
            await asyncio.sleep(0.01)
        assert values(b2) == [b"a"]
    finally:
        await f21.shutdown()


async def test_a_consumer_is_told_where_the_log_diverged_from_what_it_read(
    brokers: Brokers,
) -> None:
    """KIP-320 for consumers: one that read records of epoch 0 that the new leader's log
    does not have (an unclean election) learns where the logs diverge."""
    create(brokers, (1, 2))
    b1, b2 = brokers.rms[1], brokers.rms[2]
    f21, c21 = brokers.fetcher(2, 1)
    await b1.append_records({TP: batch(b"a")}, 1, 1000)
    await round_trip(f21, c21)
    await b1.append_records({TP: batch(b"lost")}, 1, 1000)
    # Broker 2 leads without "lost", unclean, in epoch 1; a consumer read "lost" at 1.
    brokers.commit([PartitionChangeRecord(TID, 0, leader=2, isr=(2,))])
    await b2.append_records({TP: batch(b"new")}, 1, 1000)
    got = b2.read({TP: FetchPartition(2, 1 << 20, 1, last_fetched_epoch=0)}, -1, 1 << 20)
    assert got[TP].error is None and got[TP].size == 0
    assert got[TP].diverging_epoch == (0, 1)
    # A consumer whose last record's epoch the leader holds up to its position reads on.
    ok = b2.read({TP: FetchPartition(1, 1 << 20, 1, last_fetched_epoch=0)}, -1, 1 << 20)
    assert ok[TP].diverging_epoch is None and ok[TP].size > 0
    # One that names a deposed leader's epoch is fenced.
    stale = b2.read({TP: FetchPartition(1, 1 << 20, 0)}, -1, 1 << 20)
    assert isinstance(stale[TP].error, FencedLeaderEpochError)


async def test_the_high_watermark_stands_still_below_min_insync_replicas(
    brokers: Brokers,
) -> None:
    create(brokers, (1, 2, 3), min_isr=2)
    b1 = brokers.rms[1]
    brokers.commit([PartitionChangeRecord(TID, 0, isr=(1,))])
    res = await b1.append_records({TP: batch(b"a")}, 1, 1000)
    assert res[TP].error is None
    p = b1.partitions[TP]
    # KIP-966: a replica that left the ISR may lead and must hold all below the HW.
    assert p.log.log_end_offset == 1 and p.high_watermark == 0
    brokers.commit([PartitionChangeRecord(TID, 0, isr=(1, 2))])
    assert p.maybe_increment_high_watermark() is False  # follower 2 has not fetched yet
    f21, c21 = brokers.fetcher(2, 1)
    await round_trip(f21, c21)
    await round_trip(f21, c21)
    assert p.high_watermark == 1
