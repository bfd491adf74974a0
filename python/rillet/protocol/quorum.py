"""QuorumService messages (``quorum.proto``) to and from the domain: the Raft core's messages
(KIP-595), broker registration and heartbeats (KIP-631), and DescribeQuorum.

A request converts to the core's message with the receiver as ``destination_id``; a
response converts back knowing the request it answers, because the core's responses echo
fields (``candidate_epoch``, ``fetch_offset``) that the wire does not carry.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from rillet.controller import HeartbeatResult
from rillet.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from rillet.errors import KafkaError
from rillet.metadata.records import BrokerEndpoint
from rillet.protocol.errors import (
    error_from_wire,
    raft_error_from_wire,
    raft_error_to_wire,
    set_error,
)
from rillet.protocol.gen.v1 import quorum_pb2
from rillet.raft.log import EpochEndOffset, SnapshotId
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
from rillet.raft.metadata_log import batches_to_entries, entries_to_batches
from rillet.raft.node import QuorumInfo
from rillet.raft.state import ReplicaState

__all__ = [
    "QuorumRequest",
    "QuorumResponse",
    "broker_heartbeat_from_pb",
    "broker_heartbeat_request_to_pb",
    "broker_heartbeat_response",
    "broker_heartbeat_result_from_pb",
    "broker_registration_from_pb",
    "broker_registration_request_to_pb",
    "broker_registration_response",
    "describe_quorum_from_pb",
    "describe_quorum_response",
    "raft_request_from_pb",
    "raft_request_to_pb",
    "raft_response_from_pb",
    "raft_response_to_pb",
]

QuorumRequest = (
    quorum_pb2.VoteRequest
    | quorum_pb2.BeginQuorumEpochRequest
    | quorum_pb2.EndQuorumEpochRequest
    | quorum_pb2.QuorumFetchRequest
    | quorum_pb2.FetchSnapshotRequest
)
QuorumResponse = (
    quorum_pb2.VoteResponse
    | quorum_pb2.BeginQuorumEpochResponse
    | quorum_pb2.EndQuorumEpochResponse
    | quorum_pb2.QuorumFetchResponse
    | quorum_pb2.FetchSnapshotResponse
)


def _opt(node_id: int) -> int | None:
    return None if node_id < 0 else node_id


def _wire_id(node_id: int | None) -> int:
    return -1 if node_id is None else node_id


def _snapshot_id(s: quorum_pb2.SnapshotId) -> SnapshotId:
    return SnapshotId(s.end_offset, s.epoch)


def _set_snapshot_id(field: quorum_pb2.SnapshotId, snapshot_id: SnapshotId) -> None:
    field.end_offset = snapshot_id.end_offset
    field.epoch = snapshot_id.epoch


# -- the Raft core's messages ------------------------------------------------------------------


def raft_request_to_pb(m: Message, cluster_id: str) -> QuorumRequest:
    """The wire form of a request the local core sends to ``m.destination_id``."""
    if isinstance(m, VoteRequest):
        return quorum_pb2.VoteRequest(
            cluster_id=cluster_id,
            voter_id=m.destination_id,
            candidate_epoch=m.candidate_epoch,
            candidate_id=m.candidate_id,
            last_offset_epoch=m.last_offset_epoch,
            last_offset=m.last_offset,
            pre_vote=m.pre_vote,
        )
    if isinstance(m, BeginQuorumEpochRequest):
        return quorum_pb2.BeginQuorumEpochRequest(
            cluster_id=cluster_id,
            voter_id=m.destination_id,
            leader_id=m.leader_id,
            leader_epoch=m.leader_epoch,
        )
    if isinstance(m, EndQuorumEpochRequest):
        return quorum_pb2.EndQuorumEpochRequest(
            cluster_id=cluster_id,
            leader_id=m.leader_id,
            leader_epoch=m.leader_epoch,
            preferred_successors=m.preferred_successors,
        )
    if isinstance(m, FetchRequest):
        return quorum_pb2.QuorumFetchRequest(
            cluster_id=cluster_id,
            replica_id=m.replica_id,
            fetch_offset=m.fetch_offset,
            last_fetched_epoch=m.last_fetched_epoch,
            current_leader_epoch=m.current_leader_epoch,
            max_wait_ms=m.max_wait_ms,
        )
    if isinstance(m, FetchSnapshotRequest):
        fetch_snapshot = quorum_pb2.FetchSnapshotRequest(
            cluster_id=cluster_id,
            replica_id=m.replica_id,
            current_leader_epoch=m.current_leader_epoch,
            position=m.position,
            max_bytes=m.max_bytes,
        )
        _set_snapshot_id(fetch_snapshot.snapshot_id, m.snapshot_id)
        return fetch_snapshot
    raise TypeError(f"not a quorum request: {m!r}")


def raft_response_from_pb(request: Message, r: QuorumResponse) -> Message:
    """The core's response to its own ``request`` from the peer's wire response."""
    me, peer = request.source_id, request.destination_id
    error = raft_error_from_wire(r.error_code)
    if isinstance(request, VoteRequest) and isinstance(r, quorum_pb2.VoteResponse):
        return VoteResponse(
            source_id=peer,
            destination_id=me,
            error=error,
            leader_id=_opt(r.leader_id),
            leader_epoch=r.leader_epoch,
            vote_granted=r.vote_granted,
            candidate_epoch=request.candidate_epoch,
            pre_vote=request.pre_vote,
        )
    if isinstance(request, BeginQuorumEpochRequest) and isinstance(
        r, quorum_pb2.BeginQuorumEpochResponse
    ):
        return BeginQuorumEpochResponse(
            source_id=peer,
            destination_id=me,
            error=error,
            leader_id=_opt(r.leader_id),
            leader_epoch=r.leader_epoch,
        )
    if isinstance(request, EndQuorumEpochRequest) and isinstance(
        r, quorum_pb2.EndQuorumEpochResponse
    ):
        return EndQuorumEpochResponse(
            source_id=peer,
            destination_id=me,
            error=error,
            leader_id=_opt(r.leader_id),
            leader_epoch=r.leader_epoch,
        )
    if isinstance(request, FetchRequest) and isinstance(r, quorum_pb2.QuorumFetchResponse):
        diverging = None
        if r.HasField("diverging_epoch") and r.diverging_epoch.end_offset >= 0:
            diverging = EpochEndOffset(r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
        return FetchResponse(
            source_id=peer,
            destination_id=me,
            error=error,
            leader_id=_opt(r.current_leader.leader_id),
            leader_epoch=r.current_leader.leader_epoch,
            high_watermark=r.high_watermark if r.high_watermark >= 0 else None,
            fetch_offset=request.fetch_offset,
            last_fetched_epoch=request.last_fetched_epoch,
            records=tuple(batches_to_entries(r.records)),
            diverging_epoch=diverging,
            snapshot_id=(
                _snapshot_id(r.snapshot_id)
                if r.HasField("snapshot_id") and r.snapshot_id.end_offset >= 0
                else None
            ),
        )
    if isinstance(request, FetchSnapshotRequest) and isinstance(
        r, quorum_pb2.FetchSnapshotResponse
    ):
        return FetchSnapshotResponse(
            source_id=peer,
            destination_id=me,
            error=error,
            leader_id=_opt(r.current_leader.leader_id),
            leader_epoch=r.current_leader.leader_epoch,
            snapshot_id=_snapshot_id(r.snapshot_id),
            size=r.size,
            position=r.position,
            data=r.unaligned_records,
        )
    raise TypeError(f"{type(r).__name__} does not answer {type(request).__name__}")


def raft_request_from_pb(r: QuorumRequest, me: int) -> Message:
    """The core's message for a request that arrived for replica ``me``."""
    if isinstance(r, quorum_pb2.VoteRequest):
        return VoteRequest(
            source_id=r.candidate_id,
            destination_id=me,
            candidate_epoch=r.candidate_epoch,
            candidate_id=r.candidate_id,
            last_offset_epoch=r.last_offset_epoch,
            last_offset=r.last_offset,
            pre_vote=r.pre_vote,
        )
    if isinstance(r, quorum_pb2.BeginQuorumEpochRequest):
        return BeginQuorumEpochRequest(
            source_id=r.leader_id,
            destination_id=me,
            leader_id=r.leader_id,
            leader_epoch=r.leader_epoch,
        )
    if isinstance(r, quorum_pb2.EndQuorumEpochRequest):
        return EndQuorumEpochRequest(
            source_id=r.leader_id,
            destination_id=me,
            leader_id=r.leader_id,
            leader_epoch=r.leader_epoch,
            preferred_successors=tuple(r.preferred_successors),
        )
    if isinstance(r, quorum_pb2.FetchSnapshotRequest):
        return FetchSnapshotRequest(
            source_id=r.replica_id,
            destination_id=me,
            replica_id=r.replica_id,
            current_leader_epoch=r.current_leader_epoch,
            snapshot_id=_snapshot_id(r.snapshot_id),
            position=r.position,
            max_bytes=r.max_bytes,
        )
    return FetchRequest(
        source_id=r.replica_id,
        destination_id=me,
        replica_id=r.replica_id,
        current_leader_epoch=r.current_leader_epoch,
        fetch_offset=r.fetch_offset,
        last_fetched_epoch=r.last_fetched_epoch,
        max_wait_ms=r.max_wait_ms,
    )


def raft_response_to_pb(m: Message, log_start_offset: int, now_ms: int) -> QuorumResponse:
    """The wire form of the local core's response (a fetch's entries become RecordBatch
    bytes timestamped ``now_ms``)."""
    if isinstance(m, VoteResponse):
        return quorum_pb2.VoteResponse(
            error_code=raft_error_to_wire(m.error),
            leader_id=_wire_id(m.leader_id),
            leader_epoch=m.leader_epoch,
            vote_granted=m.vote_granted,
        )
    if isinstance(m, BeginQuorumEpochResponse):
        return quorum_pb2.BeginQuorumEpochResponse(
            error_code=raft_error_to_wire(m.error),
            leader_id=_wire_id(m.leader_id),
            leader_epoch=m.leader_epoch,
        )
    if isinstance(m, EndQuorumEpochResponse):
        return quorum_pb2.EndQuorumEpochResponse(
            error_code=raft_error_to_wire(m.error),
            leader_id=_wire_id(m.leader_id),
            leader_epoch=m.leader_epoch,
        )
    if isinstance(m, FetchResponse):
        response = quorum_pb2.QuorumFetchResponse(
            error_code=raft_error_to_wire(m.error),
            high_watermark=-1 if m.high_watermark is None else m.high_watermark,
            log_start_offset=log_start_offset,
            records=entries_to_batches(m.records, now_ms),
        )
        response.current_leader.leader_id = _wire_id(m.leader_id)
        response.current_leader.leader_epoch = m.leader_epoch
        if m.diverging_epoch is not None:
            response.diverging_epoch.epoch = m.diverging_epoch.epoch
            response.diverging_epoch.end_offset = m.diverging_epoch.end_offset
        if m.snapshot_id is not None:
            _set_snapshot_id(response.snapshot_id, m.snapshot_id)
        return response
    if isinstance(m, FetchSnapshotResponse):
        chunk = quorum_pb2.FetchSnapshotResponse(
            error_code=raft_error_to_wire(m.error),
            size=m.size,
            position=m.position,
            unaligned_records=m.data,
        )
        chunk.current_leader.leader_id = _wire_id(m.leader_id)
        chunk.current_leader.leader_epoch = m.leader_epoch
        _set_snapshot_id(chunk.snapshot_id, m.snapshot_id)
        return chunk
    raise TypeError(f"not a quorum response: {m!r}")


# -- broker lifecycle --------------------------------------------------------------------------


def broker_registration_from_pb(
    r: quorum_pb2.BrokerRegistrationRequest,
) -> BrokerRegistrationRequest:
    """Raises ValueError for a malformed incarnation id (not 16 bytes)."""
    return BrokerRegistrationRequest(
        broker_id=r.broker_id,
        incarnation_id=uuid.UUID(bytes=r.incarnation_id),
        listeners=tuple(BrokerEndpoint(e.name, e.host, e.port, "PLAINTEXT") for e in r.listeners),
        rack=r.rack if r.HasField("rack") else None,
        previous_broker_epoch=r.previous_broker_epoch,
    )


def broker_registration_request_to_pb(
    request: BrokerRegistrationRequest, cluster_id: str
) -> quorum_pb2.BrokerRegistrationRequest:
    out = quorum_pb2.BrokerRegistrationRequest(
        cluster_id=cluster_id,
        broker_id=request.broker_id,
        incarnation_id=request.incarnation_id.bytes,
        previous_broker_epoch=request.previous_broker_epoch,
    )
    for e in request.listeners:
        out.listeners.add(name=e.name, host=e.host, port=e.port)
    if request.rack is not None:
        out.rack = request.rack
    return out


def broker_registration_response(
    result: int | BaseException,
) -> quorum_pb2.BrokerRegistrationResponse:
    """The response for a broker epoch, or for the error that refused the registration."""
    if isinstance(result, int):
        return quorum_pb2.BrokerRegistrationResponse(broker_epoch=result)
    response = quorum_pb2.BrokerRegistrationResponse(broker_epoch=-1)
    set_error(response, result)
    return response


def broker_heartbeat_from_pb(r: quorum_pb2.BrokerHeartbeatRequest) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        broker_id=r.broker_id,
        broker_epoch=r.broker_epoch,
        current_metadata_offset=r.current_metadata_offset,
        want_fence=r.want_fence,
        want_shutdown=r.want_shutdown,
    )


def broker_heartbeat_request_to_pb(
    request: BrokerHeartbeatRequest,
) -> quorum_pb2.BrokerHeartbeatRequest:
    return quorum_pb2.BrokerHeartbeatRequest(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        current_metadata_offset=request.current_metadata_offset,
        want_fence=request.want_fence,
        want_shutdown=request.want_shutdown,
    )


def broker_heartbeat_result_from_pb(
    r: quorum_pb2.BrokerHeartbeatResponse,
) -> HeartbeatResult | KafkaError:
    err = error_from_wire(r.error_code, r.error_message)
    if err is not None:
        return err
    return HeartbeatResult(
        is_caught_up=r.is_caught_up, is_fenced=r.is_fenced, should_shutdown=r.should_shutdown
    )


def broker_heartbeat_response(
    result: HeartbeatResult | KafkaError,
) -> quorum_pb2.BrokerHeartbeatResponse:
    """The response for a heartbeat's result, or for the error that refused it."""
    if isinstance(result, KafkaError):
        response = quorum_pb2.BrokerHeartbeatResponse(is_fenced=True)
        set_error(response, result)
        return response
    return quorum_pb2.BrokerHeartbeatResponse(
        is_caught_up=result.is_caught_up,
        is_fenced=result.is_fenced,
        should_shutdown=result.should_shutdown,
    )


# -- DescribeQuorum ----------------------------------------------------------------------------


def describe_quorum_response(
    info: QuorumInfo | KafkaError,
) -> quorum_pb2.DescribeQuorumResponse:
    if isinstance(info, KafkaError):
        response = quorum_pb2.DescribeQuorumResponse()
        set_error(response, info)
        return response
    response = quorum_pb2.DescribeQuorumResponse(
        leader_id=info.leader_id,
        leader_epoch=info.leader_epoch,
        high_watermark=info.high_watermark,
    )
    for group, states in (
        (response.current_voters, info.voters),
        (response.observers, info.observers),
    ):
        for s in states:
            group.add(
                replica_id=s.replica_id,
                log_end_offset=s.log_end_offset,
                last_fetch_timestamp_ms=s.last_fetch_ms if s.last_fetch_ms is not None else -1,
                last_caught_up_timestamp_ms=(
                    s.last_caught_up_ms if s.last_caught_up_ms is not None else -1
                ),
            )
    return response


def describe_quorum_from_pb(
    response: quorum_pb2.DescribeQuorumResponse,
) -> QuorumInfo | KafkaError:
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err

    def states(
        group: Sequence[quorum_pb2.DescribeQuorumResponse.ReplicaState],
    ) -> tuple[ReplicaState, ...]:
        return tuple(
            ReplicaState(
                s.replica_id,
                s.log_end_offset,
                s.last_fetch_timestamp_ms if s.last_fetch_timestamp_ms >= 0 else None,
                s.last_caught_up_timestamp_ms if s.last_caught_up_timestamp_ms >= 0 else None,
            )
            for s in group
        )

    return QuorumInfo(
        response.leader_id,
        response.leader_epoch,
        response.high_watermark,
        states(response.current_voters),
        states(response.observers),
    )
