"""The asyncio driver around the pure Raft core: what arrives between two of its timers is
acted on when due, not at the next timer the driver happened to be sleeping towards."""

from __future__ import annotations

import asyncio

from raft_harness import new_node

from rillet.raft import FetchRequest, FetchResponse
from rillet.raft.driver import RaftDriver
from rillet.raft.memory import MemoryQuorumStateStore, MemoryRaftLog
from rillet.raft.messages import Message


class _NoPeers:
    async def send(self, request: Message, timeout_s: float) -> Message | None:
        raise AssertionError(f"a single voter sends nothing, not {request}")

    async def close(self) -> None:
        pass


def _clock() -> int:
    return int(asyncio.get_running_loop().time() * 1000)


async def test_a_parked_fetch_is_answered_at_its_max_wait() -> None:
    # A lone voter leads at once. Its own timers are far away (check quorum after a 10-minute
    # fetch timeout), so only the parked fetch's own deadline can answer it in time.
    log, store = MemoryRaftLog(), MemoryQuorumStateStore()
    node = new_node(
        1,
        [1],
        log=log,
        store=store,
        now_ms=_clock(),
        fetch_timeout_ms=600_000,
        election_timeout_ms=10,
    )
    driver = RaftDriver(node, store, log, _clock, _NoPeers(), lambda _: None)
    await driver.start()
    try:
        while not driver.leader_ready:
            await asyncio.sleep(0.01)
        request = FetchRequest(
            source_id=9,
            destination_id=1,
            replica_id=9,
            current_leader_epoch=node.epoch,
            fetch_offset=log.end_offset,
            last_fetched_epoch=log.last_fetched_epoch,
            max_wait_ms=50,
        )
        response = await asyncio.wait_for(driver.handle(request), timeout=60)
        assert isinstance(response, FetchResponse) and response.records == ()
    finally:
        await driver.stop()
