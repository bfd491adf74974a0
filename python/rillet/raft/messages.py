"""The quorum's RPCs: Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch (KIP-595), and
FetchSnapshot (KIP-630).

Every message is a frozen dataclass that carries its sender (``source_id``) and its addressee
(``destination_id``); the core never talks to a socket, so a driver maps these onto its
transport (gRPC on the controller listener) and back. Error codes keep Kafka's names.

Two fields go beyond Kafka's wire schema because the simulated network, unlike a TCP
connection, duplicates and reorders: a :class:`VoteResponse` echoes the epoch it votes in
(``candidate_epoch``), and a :class:`FetchResponse` echoes the position it answers
(``fetch_offset``, ``last_fetched_epoch``), so a stale answer is recognised and ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from rillet.raft.log import Entry, EpochEndOffset, SnapshotId

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "Errors",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "LeaderChangeMessage",
    "Message",
    "RaftMessage",
    "VoteRequest",
    "VoteResponse",
]


class Errors(StrEnum):
    """Per-request error codes, by Kafka's names."""

    NONE = "NONE"
    # The request's epoch is older than the receiver's: the sender is a zombie or behind.
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
    # The request's epoch is newer than the receiver's: the receiver is behind.
    UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
    # The receiver is not the leader of the request's epoch.
    NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
    # The sender is not one of the receiver's voters (a Vote from an observer, say).
    INCONSISTENT_VOTER_SET = "INCONSISTENT_VOTER_SET"
    INVALID_REQUEST = "INVALID_REQUEST"
    # The fetch offset is below the log start offset and there is no snapshot to send.
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    # FetchSnapshot: the leader no longer (or never) held the snapshot named (KIP-630).
    SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"
    # FetchSnapshot: the position is past the snapshot's end.
    POSITION_OUT_OF_RANGE = "POSITION_OUT_OF_RANGE"


@dataclass(frozen=True, kw_only=True, slots=True)
class RaftMessage:
    """Fields every quorum message has."""

    source_id: int
    destination_id: int


@dataclass(frozen=True, kw_only=True, slots=True)
class VoteRequest(RaftMessage):
    """A candidate asks a voter for its vote in ``candidate_epoch`` (KIP-595 "Vote").

    ``last_offset_epoch`` and ``last_offset`` are the candidate's last fetched epoch and log end
    offset; the voter grants only if that log is at least as up to date as its own (Raft §5.4.1).
    With ``pre_vote`` (KIP-996) the voter only says whether it *would* vote; nobody's epoch
    changes and nothing is persisted. A pre-vote's ``candidate_epoch`` is the epoch the
    candidate would stand in (its current epoch plus one).
    """

    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class VoteResponse(RaftMessage):
    """The voter's answer: its own epoch and known leader, and whether it grants the vote."""

    error: Errors = Errors.NONE
    leader_id: int | None
    leader_epoch: int
    vote_granted: bool
    candidate_epoch: int
    pre_vote: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class BeginQuorumEpochRequest(RaftMessage):
    """A new leader tells a voter that it leads ``leader_epoch`` (KIP-595 "BeginQuorumEpoch")."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, kw_only=True, slots=True)
class BeginQuorumEpochResponse(RaftMessage):
    error: Errors = Errors.NONE
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, kw_only=True, slots=True)
class EndQuorumEpochRequest(RaftMessage):
    """A resigning leader tells a voter that ``leader_epoch`` is over (KIP-595 "EndQuorumEpoch").

    ``preferred_successors`` lists the other voters, most caught up first; a voter stands for
    election sooner the earlier it appears there.
    """

    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class EndQuorumEpochResponse(RaftMessage):
    error: Errors = Errors.NONE
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchRequest(RaftMessage):
    """A follower or observer pulls entries from ``fetch_offset`` (KIP-595 "Fetch").

    ``last_fetched_epoch`` is the epoch of its entry at ``fetch_offset - 1``; the leader checks
    the pair against its own log. ``current_leader_epoch`` is the fetcher's epoch, fenced when
    stale. A fetch that finds nothing new is parked by the leader for up to ``max_wait_ms``.
    The fetch offset doubles as the fetcher's acknowledgement of everything below it.
    """

    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchResponse(RaftMessage):
    """Entries from the fetch offset on, or where the logs diverge, plus the high watermark.

    ``diverging_epoch`` is set when the fetcher's position is inconsistent with the leader's
    log: the fetcher truncates to where that epoch ends (on both sides) and fetches again.
    ``snapshot_id`` is set when the leader's log no longer holds what the fetcher needs: the
    fetcher loads that snapshot (FetchSnapshot) and fetches from its end offset.
    ``high_watermark`` is None when the responder is not the leader or does not know it.
    """

    error: Errors = Errors.NONE
    leader_id: int | None
    leader_epoch: int
    high_watermark: int | None = None
    fetch_offset: int
    last_fetched_epoch: int
    records: tuple[Entry, ...] = ()
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchSnapshotRequest(RaftMessage):
    """A follower or observer reads the leader's snapshot ``snapshot_id`` from byte
    ``position`` (KIP-630 "FetchSnapshot"), at most ``max_bytes`` at a time."""

    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchSnapshotResponse(RaftMessage):
    """A chunk of the snapshot: ``data`` are its bytes from ``position``; ``size`` is the
    whole snapshot's. The fetcher has the snapshot once ``position + len(data) == size``."""

    error: Errors = Errors.NONE
    leader_id: int | None
    leader_epoch: int
    snapshot_id: SnapshotId
    size: int = 0
    position: int = 0
    data: bytes = b""


Message: TypeAlias = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderChangeMessage:
    """Payload of the control entry a leader appends when its epoch starts (Kafka's
    LeaderChangeMessage): the leader, the voters, and the voters that granted its election.

    Committing it is how the leader commits an entry of its own epoch (Raft §5.4.2), which is
    what lets it advance the high watermark at all.
    """

    leader_id: int
    leader_epoch: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]

    def encode(self) -> bytes:
        return json.dumps(
            {
                "leader_id": self.leader_id,
                "leader_epoch": self.leader_epoch,
                "voters": list(self.voters),
                "granting_voters": list(self.granting_voters),
            },
            separators=(",", ":"),
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, payload: bytes) -> LeaderChangeMessage:
        data = json.loads(payload)
        return cls(
            leader_id=int(data["leader_id"]),
            leader_epoch=int(data["leader_epoch"]),
            voters=tuple(int(v) for v in data["voters"]),
            granting_voters=tuple(int(v) for v in data["granting_voters"]),
        )
