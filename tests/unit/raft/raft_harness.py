"""Helpers for the Raft unit tests: build nodes and logs, fire timers, fake peers' answers."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, TypeVar

from rillet.raft import (
    Entry,
    FetchRequest,
    FetchResponse,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    Outputs,
    RaftConfig,
    RaftNode,
    VoteResponse,
)

VOTERS = (1, 2, 3)

M = TypeVar("M")


def new_node(
    node_id: int = 1,
    voters: Sequence[int] = VOTERS,
    *,
    log: MemoryRaftLog | None = None,
    store: MemoryQuorumStateStore | None = None,
    seed: int = 0,
    now_ms: int = 0,
    applied_offset: int = 0,
    **config: Any,
) -> RaftNode:
    """A node with Kafka's default timeouts; pre-vote off unless asked for."""
    config.setdefault("pre_vote", False)
    return RaftNode(
        node_id=node_id,
        voters=voters,
        log=log if log is not None else MemoryRaftLog(),
        store=store if store is not None else MemoryQuorumStateStore(),
        rng=random.Random(seed),
        now_ms=now_ms,
        config=RaftConfig(**config),
        applied_offset=applied_offset,
    )


def log_of(*epochs: int) -> MemoryRaftLog:
    """A flushed log with one entry per given epoch, at offsets 0, 1, 2, ..."""
    return MemoryRaftLog([Entry(i, e, f"o{i}".encode()) for i, e in enumerate(epochs)])


def sent(out: Outputs, kind: type[M]) -> list[M]:
    return [m for m in out.messages if isinstance(m, kind)]


def expire(node: RaftNode) -> int:
    """Advance to the node's next deadline and tick; return that time."""
    deadline = node.next_deadline_ms()
    assert deadline is not None
    node.tick(deadline)
    return deadline


def grant(
    node: RaftNode, voter: int, now_ms: int, *, granted: bool = True, pre_vote: bool = False
) -> None:
    """Deliver ``voter``'s answer to the node's current candidacy."""
    target = node.epoch + 1 if pre_vote else node.epoch
    node.step(
        VoteResponse(
            source_id=voter,
            destination_id=node.node_id,
            leader_id=None,
            leader_epoch=node.epoch,
            vote_granted=granted,
            candidate_epoch=target,
            pre_vote=pre_vote,
        ),
        now_ms,
    )


def elect(node: RaftNode) -> int:
    """Make an unattached or follower voter the leader (votes from the other voters); return
    the time it happened."""
    now = expire(node)
    for voter in sorted(node.voters - {node.node_id}):
        if node.is_leader:
            break
        grant(node, voter, now)
    assert node.is_leader, node
    return now


def fetch(
    node: RaftNode,
    replica_id: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    now_ms: int,
    *,
    epoch: int | None = None,
    max_wait_ms: int = 500,
) -> None:
    node.step(
        FetchRequest(
            source_id=replica_id,
            destination_id=node.node_id,
            replica_id=replica_id,
            current_leader_epoch=node.epoch if epoch is None else epoch,
            fetch_offset=fetch_offset,
            last_fetched_epoch=last_fetched_epoch,
            max_wait_ms=max_wait_ms,
        ),
        now_ms,
    )


def fetch_response(
    follower: RaftNode,
    sender: int,
    now_ms: int,
    *,
    records: Sequence[Entry] = (),
    high_watermark: int | None = None,
    **fields: Any,
) -> None:
    """Deliver ``sender``'s answer (as the leader, unless ``fields`` say otherwise) to the
    follower's fetch from its current position."""
    values: dict[str, Any] = {
        "source_id": sender,
        "destination_id": follower.node_id,
        "leader_id": sender,
        "leader_epoch": follower.epoch,
        "high_watermark": high_watermark,
        "fetch_offset": follower.log.end_offset,
        "last_fetched_epoch": follower.log.last_fetched_epoch,
        "records": tuple(records),
    }
    values.update(fields)
    follower.step(FetchResponse(**values), now_ms)
