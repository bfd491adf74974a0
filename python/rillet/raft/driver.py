"""Drives the pure Raft core (:class:`~rillet.raft.node.RaftNode`) on an asyncio event loop.

The driver owns the contract the core states: after every input it polls, then (1) persists
the quorum state and flushes the metadata log, (2) sends messages, (3) hands committed entries
to the application, in that order. The clock and the transport are injected: requests to
other voters go through a :class:`RaftTransport` (gRPC in a real process) whose responses are
stepped back into the node; requests from them arrive through :meth:`RaftDriver.handle` and
wait for the node's response (a leader parks a fetch until data arrives or ``max_wait_ms``
passes). A single-voter quorum sends nothing and commits on its own append: the same code
path.

Measured here, where the clock is, and not in the core: ``commit_latency_ms`` (KRaft's
commit-latency) is called with the time, on the driver's clock, from a leader's append of
proposed entries to their commit; :meth:`RaftDriver.status` is what the metrics read at a
scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from rillet.errors import NotControllerError, NotLeaderError
from rillet.raft.log import Entry, RaftLog, SnapshotId
from rillet.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from rillet.raft.node import LeaderAndEpoch, RaftNode
from rillet.raft.store import QuorumStateStore
from rillet.scheduler import Clock

__all__ = ["QuorumStatus", "RaftDriver", "RaftTransport"]

_log = logging.getLogger(__name__)

_RESPONSE_OF = {
    VoteResponse: VoteRequest,
    BeginQuorumEpochResponse: BeginQuorumEpochRequest,
    EndQuorumEpochResponse: EndQuorumEpochRequest,
    FetchResponse: FetchRequest,
    FetchSnapshotResponse: FetchSnapshotRequest,
}


class FlushableLog(RaftLog, Protocol):
    def flush(self) -> None: ...


class QuorumStatus(NamedTuple):
    """This replica's view of the metadata quorum (KRaft's raft-metrics): its state
    (``leader``, ``follower``, ``observer`` for a non-voter following, ``candidate``,
    ``voted``, ``unattached``, ``resigned``), the leader it knows (-1: none), the epoch, the
    high watermark and the log end offset."""

    state: str
    leader_id: int
    epoch: int
    high_watermark: int
    log_end_offset: int


class RaftTransport(Protocol):
    """How a driver reaches the other voters."""

    async def send(self, request: Message, timeout_s: float) -> Message | None:
        """Deliver ``request`` to its ``destination_id`` and return the response, or None
        when there is none to step (the peer is unknown, unreachable or timed out: the core
        retries on its own timers)."""
        ...

    async def close(self) -> None: ...


class RaftDriver:
    """Runs one RaftNode. ``on_commit(entries)`` receives committed entries in order;
    ``on_load_snapshot(snapshot_id)`` a snapshot fetched from the leader, whose state replaces
    the state machine's before the entries after it arrive; ``on_leader_change(leader)``
    every change of the known leader or epoch; ``commit_latency_ms(ms)`` the time from a
    proposal's append on this leader to its commit. Not thread safe: every method runs on the
    event loop."""

    def __init__(
        self,
        node: RaftNode,
        store: QuorumStateStore,
        log: FlushableLog,
        clock: Clock,
        transport: RaftTransport,
        on_commit: Callable[[Sequence[Entry]], None],
        on_leader_change: Callable[[LeaderAndEpoch], None] = lambda _: None,
        on_load_snapshot: Callable[[SnapshotId], None] = lambda _: None,
        commit_latency_ms: Callable[[float], None] | None = None,
    ) -> None:
        self.node = node
        self.store = store
        self.log = log
        self.clock = clock
        self.transport = transport
        self.on_commit = on_commit
        self.on_leader_change = on_leader_change
        self.on_load_snapshot = on_load_snapshot
        self.commit_latency_ms = commit_latency_ms
        # (last offset, append time) of each proposal not yet committed, in offset order.
        self._appended: deque[tuple[int, int]] = deque()
        self._wake = asyncio.Event()
        self._replies: dict[tuple[int, type], asyncio.Future[Message]] = {}
        self._commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.node.tick(self.clock())
        self._process()
        self._runner = asyncio.create_task(self._run(), name="raft-driver")

    async def stop(self) -> None:
        """Resign leadership gracefully (EndQuorumEpoch), then stop."""
        with contextlib.suppress(Exception):
            if self.node.is_leader:
                self.node.resign(self.clock())
                self._process()
                await asyncio.sleep(0)
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        for t in list(self._tasks):
            t.cancel()
        for reply in self._replies.values():
            reply.cancel()
        for _, waiter in self._commit_waiters:
            if not waiter.done():
                waiter.set_exception(NotControllerError("the controller is shutting down"))
        await self.transport.close()
        self.log.flush()

    async def _run(self) -> None:
        while True:
            deadline = self.node.next_deadline_ms()
            timeout = None if deadline is None else max(deadline - self.clock(), 0) / 1000
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that
            # arrives as the wake fires, and stop() would wait for this loop forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            try:
                self.node.tick(self.clock())
                self._process()
            except Exception:
                _log.exception("the metadata quorum failed")
                raise

    # -- inputs ----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.node.is_leader

    @property
    def leader_ready(self) -> bool:
        """See :attr:`RaftNode.leader_ready`."""
        return self.node.leader_ready

    def status(self) -> QuorumStatus:
        node = self.node
        state = node.role.lower()
        if state == "follower" and not node.is_voter:
            state = "observer"
        leader = node.leader_id
        return QuorumStatus(
            state,
            -1 if leader is None else leader,
            node.epoch,
            node.high_watermark,
            node.log.end_offset,
        )

    def propose(self, payloads: Sequence[bytes]) -> range:
        """Append on the leader; returns the offsets (not yet committed). The outputs are
        processed by the driver's loop right after the caller yields, so the caller can act
        on the offsets before any of them is reported committed."""
        now = self.clock()
        try:
            offsets = self.node.propose(list(payloads), now)
        except NotLeaderError as e:
            raise NotControllerError(str(e)) from None
        if self.commit_latency_ms is not None and offsets:
            self._appended.append((offsets[-1], now))
        self._wake.set()
        return offsets

    async def wait_committed(self, offset: int) -> None:
        """Return once ``offset`` is committed (below the high watermark)."""
        if self.node.high_watermark > offset:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((offset, fut))
        await fut

    async def handle(self, request: Message) -> Message:
        """A request from another replica; returns the node's response to it."""
        key = (request.source_id, type(request))
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        old = self._replies.pop(key, None)
        if old is not None:
            old.cancel()
        self._replies[key] = fut
        self._step(request)
        return await fut

    # -- outputs ---------------------------------------------------------------------------

    def _process(self) -> None:
        out = self.node.poll()
        if not out:
            return
        if out.quorum_state is not None:
            self.store.persist(*out.quorum_state)
        if out.flush_log:
            self.log.flush()
        for m in out.messages:
            request_type = _RESPONSE_OF.get(type(m))
            if request_type is not None:
                reply = self._replies.pop((m.destination_id, request_type), None)
                if reply is not None and not reply.done():
                    reply.set_result(m)
                continue
            task = asyncio.get_running_loop().create_task(self._send(m))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if out.load_snapshot is not None:
            self.on_load_snapshot(out.load_snapshot)
        if out.committed:
            self.on_commit(out.committed)
        hw = out.high_watermark
        if self._appended and self._appended[0][0] < hw:
            self._observe_commit_latency(hw)
        if self._commit_waiters:
            still = []
            for offset, fut in self._commit_waiters:
                if offset < hw:
                    if not fut.done():
                        fut.set_result(None)
                else:
                    still.append((offset, fut))
            self._commit_waiters = still
        if out.leader_change is not None:
            leader, epoch = out.leader_change
            _log.info(
                "metadata quorum: %s in epoch %d (this node: %s)",
                "no leader" if leader is None else f"leader {leader}",
                epoch,
                type(self.node.state).__name__,
            )
            if not self.node.is_leader:
                # What this leader appended and did not commit is no longer its to time.
                self._appended.clear()
                for _, fut in self._commit_waiters:
                    if not fut.done():
                        fut.set_exception(NotControllerError("leadership moved before commit"))
                self._commit_waiters = []
            self.on_leader_change(out.leader_change)

    def _observe_commit_latency(self, high_watermark: int) -> None:
        assert self.commit_latency_ms is not None
        now = self.clock()
        while self._appended and self._appended[0][0] < high_watermark:
            _, appended_ms = self._appended.popleft()
            self.commit_latency_ms(now - appended_ms)

    async def _send(self, m: Message) -> None:
        timeout = self.node.config.request_timeout_ms / 1000
        if isinstance(m, FetchRequest):
            timeout += m.max_wait_ms / 1000
        response = await self.transport.send(m, timeout)
        if response is not None:
            self._step(response)

    def _step(self, message: Message) -> None:
        """A message from a peer; it may set a new timer (a parked fetch's max wait, a fetch
        timeout), so the loop, asleep towards its earlier deadline, recomputes it."""
        self.node.step(message, self.clock())
        self._process()
        self._wake.set()
