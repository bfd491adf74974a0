"""What :class:`~rillet.raft.node.RaftNode` hands its driver: the outputs of a batch of
inputs, the leader it knows, its view of replication, and the error for a broken safety
invariant."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from rillet.raft.log import Entry, SnapshotId
from rillet.raft.messages import Message
from rillet.raft.state import LeaderState, ReplicaState
from rillet.raft.store import ElectionState

__all__ = ["LeaderAndEpoch", "Outputs", "QuorumInfo", "RaftInvariantError"]


class RaftInvariantError(RuntimeError):
    """The protocol's safety argument failed: a leader asked this replica to truncate
    committed entries. Only a bug, or storage that lost acknowledged writes, gets here."""


class LeaderAndEpoch(NamedTuple):
    """The leader a replica knows of (None while there is none) and its epoch."""

    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class Outputs:
    """Everything a batch of inputs produced, for the driver to act on in this order:

    1. ``quorum_state``: if set, persist it durably (``QuorumStateStore.persist``), and if
       ``flush_log``, make the log durable (fsync);
    2. then send ``messages``;
    3. then, if ``load_snapshot`` is set, replace the state machine's state with that
       snapshot's (fetched from the leader; it is in the log's snapshots);
    4. then apply ``committed`` (all entries below ``high_watermark`` not handed out before,
       in offset order, each exactly once; control entries included, to skip).

    ``leader_change`` is set when the known leader or epoch changed since the last poll.
    """

    messages: tuple[Message, ...] = ()
    quorum_state: ElectionState | None = None
    flush_log: bool = False
    committed: tuple[Entry, ...] = ()
    high_watermark: int = 0
    leader_change: LeaderAndEpoch | None = None
    load_snapshot: SnapshotId | None = None

    def __bool__(self) -> bool:
        return bool(
            self.messages
            or self.quorum_state is not None
            or self.load_snapshot is not None
            or self.flush_log
            or self.committed
            or self.leader_change is not None
        )


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The leader's view of replication (``metadata-quorum describe --replication``)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]

    @classmethod
    def of_leader(cls, state: LeaderState, high_watermark: int, now_ms: int) -> QuorumInfo:
        """A copy of the leader's replica states; its own fetch and caught-up times are now
        (as in Kafka's DescribeQuorum)."""
        return cls(
            leader_id=state.local_id,
            leader_epoch=state.epoch,
            high_watermark=high_watermark,
            voters=tuple(
                replace(s, last_fetch_ms=now_ms, last_caught_up_ms=now_ms)
                if s.replica_id == state.local_id
                else replace(s)
                for s in state.voter_states.values()
            ),
            observers=tuple(replace(s) for _, s in sorted(state.observer_states.items())),
        )
