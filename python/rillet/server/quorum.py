"""Drives the pure Raft core (:class:`rillet.raft.RaftNode`) on the event loop and wires it to
the disk and to the controller listener's gRPC QuorumService.

The driver owns the contract the core states: after every input it polls, then (1) persists
the quorum state and flushes the metadata log, (2) sends messages, (3) hands committed entries
to the application, in that order. Requests to other voters are gRPC calls whose responses are
stepped back into the node; requests from them arrive through :class:`QuorumServicer` and wait
for the node's response (a leader parks a fetch until data arrives or ``max_wait_ms`` passes).
A single-voter quorum sends nothing and commits on its own append: the same code path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

import grpc

from rillet.errors import NotControllerError
from rillet.protocol import common_pb2, quorum_pb2, quorum_pb2_grpc
from rillet.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    EpochEndOffset,
    Errors,
    FetchRequest,
    FetchResponse,
    LeaderAndEpoch,
    Message,
    NotLeaderError,
    RaftNode,
    VoteRequest,
    VoteResponse,
)
from rillet.server.metadata_log import (
    FileQuorumStateStore,
    MetadataLog,
    batches_to_entries,
    entries_to_batches,
)

__all__ = ["QuorumDriver", "QuorumServicer"]

_log = logging.getLogger(__name__)

_RESPONSE_OF = {
    VoteResponse: VoteRequest,
    BeginQuorumEpochResponse: BeginQuorumEpochRequest,
    EndQuorumEpochResponse: EndQuorumEpochRequest,
    FetchResponse: FetchRequest,
}
Context = grpc.aio.ServicerContext[object, object]


def _code(error: Errors) -> common_pb2.ErrorCode.ValueType:
    return common_pb2.ErrorCode.Value(error.value)


def _error(code: int) -> Errors:
    names: dict[int, str] = {int(v): k for k, v in common_pb2.ErrorCode.items()}
    try:
        return Errors(names.get(code, ""))
    except ValueError:
        return Errors.INVALID_REQUEST


def _opt(node_id: int) -> int | None:
    return None if node_id < 0 else node_id


class QuorumDriver:
    """Runs one RaftNode. ``on_commit(entries)`` receives committed entries in order;
    ``on_leader_change(leader)`` every change of the known leader or epoch."""

    def __init__(
        self,
        node: RaftNode,
        store: FileQuorumStateStore,
        log: MetadataLog,
        clock: Callable[[], int],
        peers: dict[int, str],
        cluster_id: str,
        on_commit: Callable[[Sequence[Entry]], None],
        on_leader_change: Callable[[LeaderAndEpoch], None] = lambda _: None,
    ) -> None:
        self.node = node
        self.store = store
        self.log = log
        self.clock = clock
        self.peers = peers
        self.cluster_id = cluster_id
        self.on_commit = on_commit
        self.on_leader_change = on_leader_change
        self._wake = asyncio.Event()
        self._replies: dict[tuple[int, type], asyncio.Future[Message]] = {}
        self._commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._channels: dict[int, grpc.aio.Channel] = {}
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
        for ch in self._channels.values():
            await ch.close()
        self.log.flush()

    async def _run(self) -> None:
        while True:
            deadline = self.node.next_deadline_ms()
            timeout = None if deadline is None else max(deadline - self.clock(), 0) / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
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

    def propose(self, payloads: Sequence[bytes]) -> range:
        """Append on the leader; returns the offsets (not yet committed). The outputs are
        processed by the driver's loop right after the caller yields, so the caller can act
        on the offsets before any of them is reported committed."""
        try:
            offsets = self.node.propose(list(payloads), self.clock())
        except NotLeaderError as e:
            raise NotControllerError(str(e)) from None
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
        self.node.step(request, self.clock())
        self._process()
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
        if out.committed:
            self.on_commit(out.committed)
        hw = out.high_watermark
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
            if not self.node.is_leader:
                for _, fut in self._commit_waiters:
                    if not fut.done():
                        fut.set_exception(NotControllerError("leadership moved before commit"))
                self._commit_waiters = []
            self.on_leader_change(out.leader_change)

    def _stub(self, node_id: int) -> quorum_pb2_grpc.QuorumServiceAsyncStub:
        ch = self._channels.get(node_id)
        if ch is None:
            ch = self._channels[node_id] = grpc.aio.insecure_channel(self.peers[node_id])
        return quorum_pb2_grpc.QuorumServiceStub(ch)

    async def _send(self, m: Message) -> None:
        if m.destination_id not in self.peers:
            return
        timeout = self.node.config.request_timeout_ms / 1000
        try:
            response = await self._call(m, timeout)
        except grpc.RpcError:
            return  # the core retries on its own timers
        if response is not None:
            self.node.step(response, self.clock())
            self._process()

    async def _call(self, m: Message, timeout: float) -> Message | None:
        stub = self._stub(m.destination_id)
        me, peer = m.source_id, m.destination_id
        if isinstance(m, VoteRequest):
            r = await stub.Vote(
                quorum_pb2.VoteRequest(
                    cluster_id=self.cluster_id,
                    voter_id=peer,
                    candidate_epoch=m.candidate_epoch,
                    candidate_id=m.candidate_id,
                    last_offset_epoch=m.last_offset_epoch,
                    last_offset=m.last_offset,
                    pre_vote=m.pre_vote,
                ),
                timeout=timeout,
            )
            return VoteResponse(
                source_id=peer,
                destination_id=me,
                error=_error(r.error_code),
                leader_id=_opt(r.leader_id),
                leader_epoch=r.leader_epoch,
                vote_granted=r.vote_granted,
                candidate_epoch=m.candidate_epoch,
                pre_vote=m.pre_vote,
            )
        if isinstance(m, BeginQuorumEpochRequest):
            r2 = await stub.BeginQuorumEpoch(
                quorum_pb2.BeginQuorumEpochRequest(
                    cluster_id=self.cluster_id,
                    voter_id=peer,
                    leader_id=m.leader_id,
                    leader_epoch=m.leader_epoch,
                ),
                timeout=timeout,
            )
            return BeginQuorumEpochResponse(
                source_id=peer,
                destination_id=me,
                error=_error(r2.error_code),
                leader_id=_opt(r2.leader_id),
                leader_epoch=r2.leader_epoch,
            )
        if isinstance(m, EndQuorumEpochRequest):
            r3 = await stub.EndQuorumEpoch(
                quorum_pb2.EndQuorumEpochRequest(
                    cluster_id=self.cluster_id,
                    leader_id=m.leader_id,
                    leader_epoch=m.leader_epoch,
                    preferred_successors=m.preferred_successors,
                ),
                timeout=timeout,
            )
            return EndQuorumEpochResponse(
                source_id=peer,
                destination_id=me,
                error=_error(r3.error_code),
                leader_id=_opt(r3.leader_id),
                leader_epoch=r3.leader_epoch,
            )
        if isinstance(m, FetchRequest):
            r4 = await stub.Fetch(
                quorum_pb2.QuorumFetchRequest(
                    cluster_id=self.cluster_id,
                    replica_id=m.replica_id,
                    fetch_offset=m.fetch_offset,
                    last_fetched_epoch=m.last_fetched_epoch,
                    current_leader_epoch=m.current_leader_epoch,
                    max_wait_ms=m.max_wait_ms,
                ),
                timeout=timeout + m.max_wait_ms / 1000,
            )
            diverging = None
            if r4.HasField("diverging_epoch") and r4.diverging_epoch.end_offset >= 0:
                diverging = EpochEndOffset(r4.diverging_epoch.epoch, r4.diverging_epoch.end_offset)
            return FetchResponse(
                source_id=peer,
                destination_id=me,
                error=_error(r4.error_code),
                leader_id=_opt(r4.current_leader.leader_id),
                leader_epoch=r4.current_leader.leader_epoch,
                high_watermark=r4.high_watermark if r4.high_watermark >= 0 else None,
                fetch_offset=m.fetch_offset,
                last_fetched_epoch=m.last_fetched_epoch,
                records=tuple(batches_to_entries(r4.records)),
                diverging_epoch=diverging,
            )
        return None


class QuorumServicer(quorum_pb2_grpc.QuorumServiceServicer):
    """The quorum RPCs on the controller listener, answered by the local node."""

    def __init__(self, driver: QuorumDriver) -> None:
        self.driver = driver

    def _check_cluster(self, cluster_id: str, context: Context) -> None:
        if cluster_id and cluster_id != self.driver.cluster_id:
            raise NotControllerError(f"cluster id {cluster_id} is not this cluster's")

    async def Vote(
        self, request: quorum_pb2.VoteRequest, context: Context
    ) -> quorum_pb2.VoteResponse:
        me = self.driver.node.node_id
        r = await self.driver.handle(
            VoteRequest(
                source_id=request.candidate_id,
                destination_id=me,
                candidate_epoch=request.candidate_epoch,
                candidate_id=request.candidate_id,
                last_offset_epoch=request.last_offset_epoch,
                last_offset=request.last_offset,
                pre_vote=request.pre_vote,
            )
        )
        assert isinstance(r, VoteResponse)
        return quorum_pb2.VoteResponse(
            error_code=_code(r.error),
            leader_id=-1 if r.leader_id is None else r.leader_id,
            leader_epoch=r.leader_epoch,
            vote_granted=r.vote_granted,
        )

    async def BeginQuorumEpoch(
        self, request: quorum_pb2.BeginQuorumEpochRequest, context: Context
    ) -> quorum_pb2.BeginQuorumEpochResponse:
        r = await self.driver.handle(
            BeginQuorumEpochRequest(
                source_id=request.leader_id,
                destination_id=self.driver.node.node_id,
                leader_id=request.leader_id,
                leader_epoch=request.leader_epoch,
            )
        )
        assert isinstance(r, BeginQuorumEpochResponse)
        return quorum_pb2.BeginQuorumEpochResponse(
            error_code=_code(r.error),
            leader_id=-1 if r.leader_id is None else r.leader_id,
            leader_epoch=r.leader_epoch,
        )

    async def EndQuorumEpoch(
        self, request: quorum_pb2.EndQuorumEpochRequest, context: Context
    ) -> quorum_pb2.EndQuorumEpochResponse:
        r = await self.driver.handle(
            EndQuorumEpochRequest(
                source_id=request.leader_id,
                destination_id=self.driver.node.node_id,
                leader_id=request.leader_id,
                leader_epoch=request.leader_epoch,
                preferred_successors=tuple(request.preferred_successors),
            )
        )
        assert isinstance(r, EndQuorumEpochResponse)
        return quorum_pb2.EndQuorumEpochResponse(
            error_code=_code(r.error),
            leader_id=-1 if r.leader_id is None else r.leader_id,
            leader_epoch=r.leader_epoch,
        )

    async def Fetch(
        self, request: quorum_pb2.QuorumFetchRequest, context: Context
    ) -> quorum_pb2.QuorumFetchResponse:
        r = await self.driver.handle(
            FetchRequest(
                source_id=request.replica_id,
                destination_id=self.driver.node.node_id,
                replica_id=request.replica_id,
                current_leader_epoch=request.current_leader_epoch,
                fetch_offset=request.fetch_offset,
                last_fetched_epoch=request.last_fetched_epoch,
                max_wait_ms=request.max_wait_ms,
            )
        )
        assert isinstance(r, FetchResponse)
        response = quorum_pb2.QuorumFetchResponse(
            error_code=_code(r.error),
            high_watermark=-1 if r.high_watermark is None else r.high_watermark,
            log_start_offset=self.driver.log.log_start_offset,
            records=entries_to_batches(r.records),
        )
        response.current_leader.leader_id = -1 if r.leader_id is None else r.leader_id
        response.current_leader.leader_epoch = r.leader_epoch
        if r.diverging_epoch is not None:
            response.diverging_epoch.epoch = r.diverging_epoch.epoch
            response.diverging_epoch.end_offset = r.diverging_epoch.end_offset
        return response
