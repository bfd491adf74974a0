"""What the Raft driver measures on its clock (the core has none): the commit latency of a
proposal, from the leader's append to the commit that needed the follower, and the status
the metrics read. Two drivers talk through a transport that can hold responses back, and
the clock moves only when the test moves it, so the latency is known exactly."""

from __future__ import annotations

import asyncio

from raft_harness import new_node

from rillet.raft.driver import QuorumStatus, RaftDriver
from rillet.raft.memory import MemoryQuorumStateStore, MemoryRaftLog
from rillet.raft.messages import Message


class _Gated:
    """Delivers requests to the other driver; holds the responses while ``open`` is clear."""

    def __init__(self) -> None:
        self.drivers: dict[int, RaftDriver] = {}
        self.open = asyncio.Event()
        self.open.set()

    async def send(self, request: Message, timeout_s: float) -> Message | None:
        target = self.drivers.get(request.destination_id)
        if target is None:
            return None
        response = await target.handle(request)
        await self.open.wait()
        return response

    async def close(self) -> None:
        pass


class _ManualClock:
    def __init__(self) -> None:
        self.now_ms = 1_000

    def __call__(self) -> int:
        return self.now_ms


async def _until(check: object, clock: _ManualClock | None = None) -> None:
    """Poll ``check()`` (a callable); with ``clock``, time moves 10 ms each round."""
    assert callable(check)
    async with asyncio.timeout(60):
        while not check():
            if clock is not None:
                clock.now_ms += 10
            await asyncio.sleep(0.005)


async def test_commit_latency_is_append_to_commit_on_the_leader_s_clock() -> None:
    clock = _ManualClock()
    transport = _Gated()
    observed: dict[int, list[float]] = {1: [], 2: []}
    for i in (1, 2):
        log, store = MemoryRaftLog(), MemoryQuorumStateStore()
        node = new_node(i, [1, 2], log=log, store=store, seed=i, now_ms=clock())
        transport.drivers[i] = RaftDriver(
            node,
            store,
            log,
            clock,
            transport,
            lambda _: None,
            commit_latency_ms=observed[i].append,
        )
    for d in transport.drivers.values():
        await d.start()
    try:
        await _until(lambda: any(d.leader_ready for d in transport.drivers.values()), clock)
        leader_id = next(i for i, d in transport.drivers.items() if d.leader_ready)
        leader = transport.drivers[leader_id]
        follower = transport.drivers[3 - leader_id]
        await _until(lambda: follower.status().high_watermark == leader.status().high_watermark)

        # The follower's fetch answer is held back: nothing commits until it arrives.
        transport.open.clear()
        offsets = leader.propose([b"record"])
        clock.now_ms += 25
        await asyncio.sleep(0.05)
        assert leader.status().high_watermark <= offsets[-1]
        transport.open.set()
        await asyncio.wait_for(leader.wait_committed(offsets[-1]), 60)

        assert observed[leader_id] == [25]
        assert observed[3 - leader_id] == []  # a follower appends nothing of its own

        status = leader.status()
        assert status == QuorumStatus(
            "leader", leader_id, status.epoch, offsets[-1] + 1, offsets[-1] + 1
        )
        await _until(lambda: follower.status().high_watermark == offsets[-1] + 1)
        assert follower.status().state == "follower"
        assert follower.status().leader_id == leader_id
    finally:
        for d in transport.drivers.values():
            await d.stop()


async def test_a_lone_voter_commits_on_its_own_append() -> None:
    # No follower to wait for: the commit comes with the append, before the clock moves.
    clock = _ManualClock()
    log, store = MemoryRaftLog(), MemoryQuorumStateStore()
    node = new_node(1, [1], log=log, store=store, now_ms=clock(), election_timeout_ms=10)
    observed: list[float] = []
    driver = RaftDriver(
        node, store, log, clock, _Gated(), lambda _: None, commit_latency_ms=observed.append
    )
    await driver.start()
    try:
        await _until(lambda: driver.leader_ready, clock)
        offsets = driver.propose([b"a", b"b"])
        await asyncio.wait_for(driver.wait_committed(offsets[-1]), 60)
        await _until(lambda: observed)
        assert observed == [0]  # one observation per proposal, not per record
        assert driver.status() == QuorumStatus(
            "leader", 1, node.epoch, offsets[-1] + 1, offsets[-1] + 1
        )
    finally:
        await driver.stop()
