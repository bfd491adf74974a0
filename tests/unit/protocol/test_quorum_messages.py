"""The Raft core's messages survive the trip over QuorumService's wire form.

Each request goes core -> wire -> serialized bytes -> wire -> core on the receiver, and each
response goes back the same way, reassembled against the request it answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from rillet.protocol.gen.v1 import quorum_pb2
from rillet.protocol.quorum import (
    raft_request_from_pb,
    raft_request_to_pb,
    raft_response_from_pb,
    raft_response_to_pb,
)
from rillet.raft.log import Entry, EpochEndOffset, SnapshotId
from rillet.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)

SENDER, RECEIVER = 1, 2


def _over_the_wire(message: Any) -> Any:
    """Serialize and parse a protobuf message, as gRPC does."""
    again = type(message)()
    again.ParseFromString(message.SerializeToString())
    return again


def _request(m: Message) -> Message:
    wire = _over_the_wire(raft_request_to_pb(m, "cluster-x"))
    assert wire.cluster_id == "cluster-x"
    return raft_request_from_pb(wire, RECEIVER)


def _response(request: Message, response: Message) -> Message:
    wire = _over_the_wire(raft_response_to_pb(response, 0, 1_700_000_000_000))
    return raft_response_from_pb(request, wire)


REQUESTS: list[Message] = [
    VoteRequest(
        source_id=SENDER,
        destination_id=RECEIVER,
        candidate_epoch=7,
        candidate_id=SENDER,
        last_offset_epoch=6,
        last_offset=1234,
        pre_vote=True,
    ),
    BeginQuorumEpochRequest(
        source_id=SENDER, destination_id=RECEIVER, leader_id=SENDER, leader_epoch=9
    ),
    FetchRequest(
        source_id=SENDER,
        destination_id=RECEIVER,
        replica_id=SENDER,
        current_leader_epoch=4,
        fetch_offset=88,
        last_fetched_epoch=3,
        max_wait_ms=500,
    ),
    FetchSnapshotRequest(
        source_id=SENDER,
        destination_id=RECEIVER,
        replica_id=SENDER,
        current_leader_epoch=4,
        snapshot_id=SnapshotId(5000, 3),
        position=65536,
        max_bytes=1 << 20,
    ),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda m: type(m).__name__)
def test_requests_arrive_as_sent(request_: Message) -> None:
    assert _request(request_) == request_


def test_end_quorum_epoch_keeps_the_successor_order() -> None:
    m = EndQuorumEpochRequest(
        source_id=SENDER,
        destination_id=RECEIVER,
        leader_id=SENDER,
        leader_epoch=3,
        preferred_successors=(3, 2),
    )
    assert _request(m) == m


def _fetch(**fields: Any) -> tuple[FetchRequest, FetchResponse]:
    request = FetchRequest(
        source_id=SENDER,
        destination_id=RECEIVER,
        replica_id=SENDER,
        current_leader_epoch=4,
        fetch_offset=10,
        last_fetched_epoch=3,
        max_wait_ms=0,
    )
    response = FetchResponse(
        source_id=RECEIVER,
        destination_id=SENDER,
        leader_id=RECEIVER,
        leader_epoch=4,
        fetch_offset=10,
        last_fetched_epoch=3,
        **fields,
    )
    return request, response


@pytest.mark.parametrize(
    "fields",
    [
        {
            "high_watermark": 12,
            "records": (
                Entry(10, 4, b"", control=True),
                Entry(11, 4, b"topic record"),
                Entry(12, 4, b"another"),
            ),
        },
        {"high_watermark": 9, "diverging_epoch": EpochEndOffset(3, 8)},
        {"high_watermark": 900, "snapshot_id": SnapshotId(850, 2)},
        {"error": Errors.FENCED_LEADER_EPOCH},
    ],
    ids=["records", "diverging", "snapshot", "error"],
)
def test_fetch_responses_return_as_sent(fields: dict[str, Any]) -> None:
    request, response = _fetch(**fields)
    assert _response(request, response) == response


def test_a_fetch_response_without_a_snapshot_id_has_none() -> None:
    request, response = _fetch(high_watermark=10)
    back = _response(request, response)
    assert isinstance(back, FetchResponse)
    assert back.snapshot_id is None and back.diverging_epoch is None


@pytest.mark.parametrize(
    "error", [Errors.NONE, Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE]
)
def test_fetch_snapshot_responses_return_as_sent(error: Errors) -> None:
    request = REQUESTS[3]
    assert isinstance(request, FetchSnapshotRequest)
    data = bytes(range(256)) * 40 if error is Errors.NONE else b""
    response = FetchSnapshotResponse(
        source_id=RECEIVER,
        destination_id=SENDER,
        error=error,
        leader_id=RECEIVER,
        leader_epoch=4,
        snapshot_id=request.snapshot_id,
        size=200_000 if error is Errors.NONE else 0,
        position=65536 if error is Errors.NONE else 0,
        data=data,
    )
    assert _response(request, response) == response


def test_other_responses_return_as_sent() -> None:
    vote = REQUESTS[0]
    assert isinstance(vote, VoteRequest)
    vote_response = VoteResponse(
        source_id=RECEIVER,
        destination_id=SENDER,
        leader_id=None,
        leader_epoch=7,
        vote_granted=True,
        candidate_epoch=7,
        pre_vote=True,
    )
    assert _response(vote, vote_response) == vote_response
    begin = REQUESTS[1]
    begin_response = BeginQuorumEpochResponse(
        source_id=RECEIVER, destination_id=SENDER, leader_id=SENDER, leader_epoch=9
    )
    assert _response(begin, begin_response) == begin_response
    end = EndQuorumEpochRequest(
        source_id=SENDER, destination_id=RECEIVER, leader_id=SENDER, leader_epoch=3
    )
    end_response = EndQuorumEpochResponse(
        source_id=RECEIVER,
        destination_id=SENDER,
        error=Errors.NOT_LEADER_OR_FOLLOWER,
        leader_id=None,
        leader_epoch=3,
    )
    assert _response(end, end_response) == end_response


def test_an_unknown_error_code_becomes_invalid_request() -> None:
    request = REQUESTS[3]
    wire = quorum_pb2.FetchSnapshotResponse()
    wire.error_code = 9999  # type: ignore[assignment]  # a code from a newer version
    back = raft_response_from_pb(request, wire)
    assert isinstance(back, FetchSnapshotResponse)
    assert back.error is Errors.INVALID_REQUEST
