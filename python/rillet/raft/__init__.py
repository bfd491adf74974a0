"""The KRaft metadata quorum: Raft (KIP-595, pull-based) as a pure, deterministic state machine.

Layout::

    config.py     RaftConfig: timeouts and sizes, Kafka's controller.quorum.* knobs
    log.py        Entry, EpochEndOffset, the RaftLog Protocol, fetch-position validation
    store.py      ElectionState (epoch, voted id, leader id), the QuorumStateStore Protocol
    messages.py   Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot messages
    state.py      one class per role, and QuorumState, the owner of the legal transitions
    node.py       RaftNode (inputs: tick, step, propose, resign; output: poll) and Outputs
    memory.py     in-memory RaftLog and QuorumStateStore (tests, the simulator)

No sockets, clocks, threads, files or global randomness inside: time arrives as ``now_ms``
arguments, randomness (election jitter) from an injected ``random.Random``, storage through
the two Protocols. The same object runs under the asyncio driver and under the seeded
simulator of ``tests/sim``.

The driver's loop, in the style of etcd's ``Ready``::

    node = RaftNode(node_id=1, voters=[1, 2, 3], log=log, store=store,
                    rng=random.Random(seed), now_ms=clock())
    node.tick(clock())
    while running:
        # inputs: any of
        node.step(message, clock())          # a message arrived for this replica
        node.tick(clock())                   # node.next_deadline_ms() has passed
        offsets = node.propose([b"..."], clock())   # on the leader; else errors.NotLeaderError
        # outputs, strictly in this order:
        out = node.poll()
        if out.quorum_state is not None:
            store.persist(*out.quorum_state)  # 1. durable (fsync) before anything is sent
        if out.flush_log:
            flush(log)                        #    and the log's appends and truncations too
        for message in out.messages:
            send(message)                     # 2. then send
        if out.load_snapshot is not None:
            load(out.load_snapshot)           # 3. then replace the state with a fetched snapshot
        for entry in out.committed:
            apply(entry)                      #    and apply, in order, each exactly once

That order is the contract: persist entries and quorum state, then send messages, then apply
committed entries. A vote or an epoch is only ever acknowledged by a message, so it is durable
before anyone can count on it; an entry is only acknowledged by a fetch offset, so a fetch
never acknowledges what a crash could lose. Call ``poll`` after every input (or batch of
inputs) and finish acting on it before the next input.
"""

from __future__ import annotations

from rillet.raft.config import RaftConfig
from rillet.raft.log import (
    Entry,
    EpochEndOffset,
    FetchPosition,
    RaftLog,
    SnapshotId,
    validate_offset_and_epoch,
)
from rillet.raft.memory import MemoryQuorumStateStore, MemoryRaftLog
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
    LeaderChangeMessage,
    Message,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from rillet.raft.node import (
    LeaderAndEpoch,
    Outputs,
    QuorumInfo,
    RaftInvariantError,
    RaftNode,
)
from rillet.raft.state import (
    CandidateState,
    EpochState,
    FollowerState,
    IllegalTransitionError,
    LeaderState,
    QuorumState,
    ReplicaState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from rillet.raft.store import ElectionState, QuorumStateStore

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "CandidateState",
    "ElectionState",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "Entry",
    "EpochEndOffset",
    "EpochState",
    "Errors",
    "FetchPosition",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "FollowerState",
    "IllegalTransitionError",
    "LeaderAndEpoch",
    "LeaderChangeMessage",
    "LeaderState",
    "MemoryQuorumStateStore",
    "MemoryRaftLog",
    "Message",
    "Outputs",
    "QuorumInfo",
    "QuorumState",
    "QuorumStateStore",
    "RaftConfig",
    "RaftInvariantError",
    "RaftLog",
    "RaftMessage",
    "RaftNode",
    "ReplicaState",
    "ResignedState",
    "SnapshotId",
    "UnattachedState",
    "VoteRequest",
    "VoteResponse",
    "VotedState",
    "validate_offset_and_epoch",
]
