"""QuorumService on the controller listener, and the Raft driver's transport to the other
voters.

The Raft RPCs are stepped into the local :class:`~rillet.raft.driver.RaftDriver`; broker
registration and heartbeats go to the :class:`~rillet.controller.service.ControllerService`
(which answers NOT_CONTROLLER unless it is the active controller).
"""

from __future__ import annotations

import logging
from typing import Any, cast

import grpc

from rillet.controller.service import ControllerService
from rillet.errors import (
    InconsistentClusterIdError,
    KafkaError,
    NotControllerError,
)
from rillet.protocol.errors import set_error
from rillet.protocol.gen.v1 import quorum_pb2, quorum_pb2_grpc
from rillet.protocol.gen.v1.common_pb2 import ErrorCode
from rillet.protocol.quorum import (
    QuorumRequest,
    QuorumResponse,
    broker_heartbeat_from_pb,
    broker_heartbeat_response,
    broker_registration_from_pb,
    broker_registration_response,
    describe_quorum_response,
    raft_request_from_pb,
    raft_request_to_pb,
    raft_response_from_pb,
    raft_response_to_pb,
)
from rillet.raft.driver import RaftDriver
from rillet.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Errors,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    VoteRequest,
    VoteResponse,
)
from rillet.scheduler import Clock
from rillet.security.tls import ClientTls, grpc_channel

__all__ = ["GrpcRaftTransport", "QuorumServicer"]

_log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[object, object]

_METHODS: dict[type, str] = {
    VoteRequest: "Vote",
    BeginQuorumEpochRequest: "BeginQuorumEpoch",
    EndQuorumEpochRequest: "EndQuorumEpoch",
    FetchRequest: "Fetch",
    FetchSnapshotRequest: "FetchSnapshot",
}


_RESPONSE_TYPES: dict[type, type[QuorumResponse]] = {
    quorum_pb2.VoteRequest: quorum_pb2.VoteResponse,
    quorum_pb2.BeginQuorumEpochRequest: quorum_pb2.BeginQuorumEpochResponse,
    quorum_pb2.EndQuorumEpochRequest: quorum_pb2.EndQuorumEpochResponse,
    quorum_pb2.QuorumFetchRequest: quorum_pb2.QuorumFetchResponse,
    quorum_pb2.FetchSnapshotRequest: quorum_pb2.FetchSnapshotResponse,
}


def _source_id(request: QuorumRequest) -> int:
    if isinstance(request, quorum_pb2.VoteRequest):
        return request.candidate_id
    if isinstance(request, quorum_pb2.QuorumFetchRequest | quorum_pb2.FetchSnapshotRequest):
        return request.replica_id
    return request.leader_id


class QuorumServicer(quorum_pb2_grpc.QuorumServiceServicer):
    """Requests from another cluster (a ``cluster_id`` that is not this node's) are refused
    with INCONSISTENT_CLUSTER_ID before they reach the quorum."""

    def __init__(
        self, driver: RaftDriver, controller: ControllerService, clock: Clock, cluster_id: str
    ) -> None:
        self.driver = driver
        self.controller = controller
        self.clock = clock
        self.cluster_id = cluster_id
        self._warned: set[str] = set()

    def _foreign(self, cluster_id: str, who: str) -> InconsistentClusterIdError | None:
        if not cluster_id or cluster_id == self.cluster_id:
            return None
        err = InconsistentClusterIdError(
            f"{who} belongs to cluster {cluster_id!r}, but this node belongs to cluster "
            f"{self.cluster_id!r}; check controller.quorum.voters and meta.properties."
        )
        if cluster_id not in self._warned:
            self._warned.add(cluster_id)
            _log.error("refusing a request: %s", err.message)
        return err

    async def _raft(self, request: QuorumRequest) -> QuorumResponse:
        source = _source_id(request)
        foreign = self._foreign(request.cluster_id, f"Node {source}")
        if foreign is not None:
            refusal = _RESPONSE_TYPES[type(request)]()
            set_error(refusal, foreign)
            return refusal
        message = raft_request_from_pb(request, self.driver.node.node_id)
        response = await self.driver.handle(message)
        return raft_response_to_pb(response, self.driver.log.log_start_offset, self.clock())

    async def Vote(
        self, request: quorum_pb2.VoteRequest, context: Context
    ) -> quorum_pb2.VoteResponse:
        return cast(quorum_pb2.VoteResponse, await self._raft(request))

    async def BeginQuorumEpoch(
        self, request: quorum_pb2.BeginQuorumEpochRequest, context: Context
    ) -> quorum_pb2.BeginQuorumEpochResponse:
        return cast(quorum_pb2.BeginQuorumEpochResponse, await self._raft(request))

    async def EndQuorumEpoch(
        self, request: quorum_pb2.EndQuorumEpochRequest, context: Context
    ) -> quorum_pb2.EndQuorumEpochResponse:
        return cast(quorum_pb2.EndQuorumEpochResponse, await self._raft(request))

    async def Fetch(
        self, request: quorum_pb2.QuorumFetchRequest, context: Context
    ) -> quorum_pb2.QuorumFetchResponse:
        return cast(quorum_pb2.QuorumFetchResponse, await self._raft(request))

    async def FetchSnapshot(
        self, request: quorum_pb2.FetchSnapshotRequest, context: Context
    ) -> quorum_pb2.FetchSnapshotResponse:
        return cast(quorum_pb2.FetchSnapshotResponse, await self._raft(request))

    async def BrokerRegistration(
        self, request: quorum_pb2.BrokerRegistrationRequest, context: Context
    ) -> quorum_pb2.BrokerRegistrationResponse:
        foreign = self._foreign(request.cluster_id, f"Broker {request.broker_id}")
        if foreign is not None:
            return broker_registration_response(foreign)
        try:
            epoch = await self.controller.register_broker(broker_registration_from_pb(request))
        except (KafkaError, ValueError) as e:
            return broker_registration_response(e)
        return broker_registration_response(epoch)

    async def BrokerHeartbeat(
        self, request: quorum_pb2.BrokerHeartbeatRequest, context: Context
    ) -> quorum_pb2.BrokerHeartbeatResponse:
        try:
            result = await self.controller.broker_heartbeat(broker_heartbeat_from_pb(request))
        except KafkaError as e:
            return broker_heartbeat_response(e)
        return broker_heartbeat_response(result)

    async def DescribeQuorum(
        self, request: quorum_pb2.DescribeQuorumRequest, context: Context
    ) -> quorum_pb2.DescribeQuorumResponse:
        info = self.driver.node.describe_quorum()
        if info is None:
            return describe_quorum_response(
                NotControllerError("This node is not the quorum leader.")
            )
        return describe_quorum_response(info)


class GrpcRaftTransport:
    """:class:`~rillet.raft.driver.RaftTransport` over QuorumService: one channel per peer
    (``peers`` maps voter ids to ``host:port``), opened on first use."""

    def __init__(
        self, peers: dict[int, str], cluster_id: str, tls: ClientTls | None = None
    ) -> None:
        self.peers = peers
        self.cluster_id = cluster_id
        self.tls = tls
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._refused_by: set[int] = set()

    def _stub(self, node_id: int) -> quorum_pb2_grpc.QuorumServiceAsyncStub:
        ch = self._channels.get(node_id)
        if ch is None:
            ch = self._channels[node_id] = grpc_channel(self.peers[node_id], self.tls)
        return quorum_pb2_grpc.QuorumServiceStub(ch)

    async def send(self, request: Message, timeout_s: float) -> Message | None:
        if request.destination_id not in self.peers:
            return None
        method = _METHODS.get(type(request))
        if method is None:
            return None
        call: Any = getattr(self._stub(request.destination_id), method)
        try:
            r = await call(raft_request_to_pb(request, self.cluster_id), timeout=timeout_s)
        except grpc.RpcError:
            return None  # the core retries on its own timers
        if r.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
            if request.destination_id not in self._refused_by:
                self._refused_by.add(request.destination_id)
                _log.error(
                    "voter %d at %s refuses this node: %s",
                    request.destination_id,
                    self.peers[request.destination_id],
                    r.error_message,
                )
            return None
        response = raft_response_from_pb(request, r)
        if (
            isinstance(response, VoteResponse)
            and response.error is Errors.INCONSISTENT_VOTER_SET
            and request.destination_id not in self._refused_by
        ):
            self._refused_by.add(request.destination_id)
            _log.error(
                "voter %d at %s refuses this node's vote request: INCONSISTENT_VOTER_SET "
                "(its controller.quorum.voters does not list this node as a voter; every node "
                "needs the same voter list)",
                request.destination_id,
                self.peers[request.destination_id],
            )
        return response

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()
