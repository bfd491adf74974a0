"""Snapshots in the Raft core (KIP-630): a leader whose log no longer goes back far enough
names its snapshot in the Fetch response; the fetcher reads it chunk by chunk with
FetchSnapshot, restarts its log at the snapshot's end, has the driver load it, and fetches on
from there. Position validation follows Kafka's ``validateOffsetAndEpoch``."""

from __future__ import annotations

import pytest
from raft_harness import elect, fetch, fetch_response, log_of, new_node, sent

from rillet.raft import (
    ElectionState,
    Entry,
    EpochEndOffset,
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    FollowerState,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    RaftInvariantError,
    RaftNode,
    SnapshotId,
    validate_offset_and_epoch,
)

SNAPSHOT = b"state of the first five entries"


def snapshotted_leader(**config: object) -> tuple[RaftNode, int, SnapshotId]:
    """Leader 1 of epoch 2 (after epoch 1's five entries), whose log starts at a snapshot of
    the first five entries."""
    log = log_of(1, 1, 1, 1, 1)
    snapshot = SnapshotId(5, 1)
    log.create_snapshot(snapshot, SNAPSHOT)
    assert log.delete_before_snapshot(snapshot)
    store = MemoryQuorumStateStore(ElectionState(1, None, None))
    leader = new_node(1, log=log, store=store, applied_offset=5, **config)
    now = elect(leader)
    leader.poll()
    return leader, now, snapshot


def follower(*epochs: int, leader_id: int = 1, epoch: int = 2, **config: object) -> RaftNode:
    store = MemoryQuorumStateStore(ElectionState(epoch, None, leader_id))
    node = new_node(2, log=log_of(*epochs), store=store, **config)
    node.tick(0)
    node.poll()
    return node


def snapshot_answer(
    node: RaftNode, request: FetchSnapshotRequest, data: bytes, now: int, **fields: object
) -> None:
    chunk = data[request.position : request.position + request.max_bytes]
    values: dict[str, object] = {
        "source_id": request.destination_id,
        "destination_id": node.node_id,
        "leader_id": request.destination_id,
        "leader_epoch": request.current_leader_epoch,
        "snapshot_id": request.snapshot_id,
        "size": len(data),
        "position": request.position,
        "data": chunk,
    }
    values.update(fields)
    node.step(FetchSnapshotResponse(**values), now)  # type: ignore[arg-type]


# -- the leader ----------------------------------------------------------------------------


def test_log_start_moves_only_to_a_held_snapshot_and_older_snapshots_go() -> None:
    log = log_of(1, 1, 2, 2, 2, 3)
    assert not log.delete_before_snapshot(SnapshotId(2, 1))  # not held
    log.create_snapshot(SnapshotId(2, 1), b"a")
    log.create_snapshot(SnapshotId(4, 2), b"b")
    with pytest.raises(ValueError, match="older than the latest"):
        log.create_snapshot(SnapshotId(3, 2), b"c")
    assert log.delete_before_snapshot(SnapshotId(4, 2))
    assert (log.log_start_offset, log.end_offset) == (4, 6)
    assert log.snapshot_ids() == [SnapshotId(4, 2)]
    # The leader-epoch cache keeps the epoch that covers the new start.
    assert log.epochs() == [(2, 4), (3, 5)]
    assert [e.offset for e in log.read(4, 10)] == [4, 5]
    with pytest.raises(ValueError):
        log.read(3, 1)


@pytest.mark.parametrize(
    ("fetch_offset", "last_fetched_epoch", "expected"),
    [
        # Below the log start: only the snapshot can help.
        (3, 1, "snapshot"),
        # At the log start, with the snapshot's epoch: consistent.
        (4, 2, None),
        # At the log start with another epoch: the snapshot.
        (4, 1, "snapshot"),
        # An epoch older than the earliest snapshot's: the snapshot.
        (5, 1, "snapshot"),
        # Within the log: the usual rules.
        (5, 2, None),
        (6, 3, None),
    ],
)
def test_validate_offset_and_epoch_with_a_snapshot(
    fetch_offset: int, last_fetched_epoch: int, expected: str | None
) -> None:
    log = log_of(1, 1, 2, 2, 2, 3)
    log.create_snapshot(SnapshotId(4, 2), b"b")
    log.delete_before_snapshot(SnapshotId(4, 2))
    position = validate_offset_and_epoch(log, fetch_offset, last_fetched_epoch)
    if expected == "snapshot":
        assert position.snapshot == SnapshotId(4, 2) and position.diverging is None
    else:
        assert position == (None, None)


def test_an_epoch_missing_from_the_log_ends_at_the_snapshot() -> None:
    # Epoch 3 began right at the log start; a fetcher of epoch 2 that is not at the log
    # start diverges at the snapshot (Kafka's endOffsetForEpoch override).
    log = MemoryRaftLog([Entry(i, 2 if i < 4 else 4, b"x") for i in range(6)])
    log.create_snapshot(SnapshotId(4, 2), b"s")
    log.delete_before_snapshot(SnapshotId(4, 2))
    position = validate_offset_and_epoch(log, 5, 3)
    assert position.diverging == EpochEndOffset(2, 4)


def test_leader_names_its_snapshot_to_a_fetcher_below_its_log_start() -> None:
    leader, now, snapshot = snapshotted_leader()
    fetch(leader, 2, 2, 1, now)
    (response,) = sent(leader.poll(), FetchResponse)
    assert response.snapshot_id == snapshot
    assert response.records == () and response.diverging_epoch is None


def test_leader_serves_its_snapshot_in_chunks_and_validates_the_request() -> None:
    leader, now, snapshot = snapshotted_leader(fetch_snapshot_max_bytes=8)

    def ask(**fields: object) -> FetchSnapshotResponse:
        values: dict[str, object] = {
            "source_id": 2,
            "destination_id": 1,
            "replica_id": 2,
            "current_leader_epoch": leader.epoch,
            "snapshot_id": snapshot,
            "position": 0,
            "max_bytes": 100,
        }
        values.update(fields)
        leader.step(FetchSnapshotRequest(**values), now)  # type: ignore[arg-type]
        (answer,) = sent(leader.poll(), FetchSnapshotResponse)
        return answer

    first = ask()
    assert (first.error, first.size, first.data) == (Errors.NONE, len(SNAPSHOT), SNAPSHOT[:8])
    assert ask(position=8).data == SNAPSHOT[8:16]
    assert ask(position=len(SNAPSHOT)).data == b""
    assert ask(position=len(SNAPSHOT) + 1).error is Errors.POSITION_OUT_OF_RANGE
    assert ask(snapshot_id=SnapshotId(9, 1)).error is Errors.SNAPSHOT_NOT_FOUND
    assert ask(position=-1).error is Errors.INVALID_REQUEST
    assert ask(max_bytes=0).error is Errors.INVALID_REQUEST
    assert ask(replica_id=3).error is Errors.INVALID_REQUEST
    assert ask(current_leader_epoch=leader.epoch - 1).error is Errors.FENCED_LEADER_EPOCH
    assert ask(current_leader_epoch=leader.epoch + 1).error is Errors.UNKNOWN_LEADER_EPOCH


def test_a_follower_refuses_to_serve_snapshots() -> None:
    node = follower(1, 1)
    node.step(
        FetchSnapshotRequest(
            source_id=3,
            destination_id=2,
            replica_id=3,
            current_leader_epoch=node.epoch,
            snapshot_id=SnapshotId(1, 1),
            position=0,
            max_bytes=10,
        ),
        1,
    )
    (answer,) = sent(node.poll(), FetchSnapshotResponse)
    assert answer.error is Errors.NOT_LEADER_OR_FOLLOWER and answer.leader_id == 1


# -- the fetcher ---------------------------------------------------------------------------


def test_follower_loads_the_leaders_snapshot_then_fetches_from_its_end() -> None:
    node = follower(1, 1, fetch_snapshot_max_bytes=10)
    snapshot = SnapshotId(5, 1)
    fetch_response(node, 1, 1, snapshot_id=snapshot, high_watermark=6)
    chunks = 0
    while True:
        (request,) = sent(node.poll(), FetchSnapshotRequest)
        assert request.snapshot_id == snapshot and request.position == chunks * 10
        assert request.max_bytes == 10
        snapshot_answer(node, request, SNAPSHOT, 2)
        chunks += 1
        if request.position + 10 >= len(SNAPSHOT):
            break
    assert chunks == 4
    out = node.poll()
    # The driver loads the snapshot before anything committed after it.
    assert out.load_snapshot == snapshot and out.committed == ()
    assert node.log.snapshot_ids() == [snapshot]
    assert node.log.read_snapshot(snapshot, 0, 1000) == SNAPSHOT
    assert (node.log.log_start_offset, node.log.end_offset) == (5, 5)
    assert node.log.last_fetched_epoch == 1 and node.high_watermark == 5
    (request,) = sent(out, FetchRequest)
    assert (request.fetch_offset, request.last_fetched_epoch) == (5, 1)
    fetch_response(node, 1, 3, records=[Entry(5, 2, b"next")], high_watermark=6)
    out = node.poll()
    assert out.load_snapshot is None
    assert out.committed == (Entry(5, 2, b"next"),)


def test_follower_drops_a_snapshot_the_leader_no_longer_has_and_asks_again() -> None:
    node = follower(1, 1)
    fetch_response(node, 1, 1, snapshot_id=SnapshotId(5, 1))
    (request,) = sent(node.poll(), FetchSnapshotRequest)
    snapshot_answer(node, request, b"", 2, error=Errors.SNAPSHOT_NOT_FOUND)
    (again,) = sent(node.poll(), FetchRequest)
    assert again.fetch_offset == 2
    assert isinstance(node.state, FollowerState) and node.state.snapshot is None


def test_follower_ignores_a_chunk_it_did_not_ask_for() -> None:
    node = follower(1, 1)
    fetch_response(node, 1, 1, snapshot_id=SnapshotId(5, 1))
    (request,) = sent(node.poll(), FetchSnapshotRequest)
    snapshot_answer(node, request, SNAPSHOT, 2, position=3)
    snapshot_answer(node, request, SNAPSHOT, 2, snapshot_id=SnapshotId(6, 1))
    assert node.poll().messages == ()
    assert isinstance(node.state, FollowerState) and node.state.snapshot_data == b""


def test_a_snapshot_replaces_uncommitted_entries_of_a_later_epoch() -> None:
    # The follower's entries 2-4 are of epoch 3 and were never committed; the leader's
    # committed state up to 5 is the snapshot (epoch 2), so the whole log goes.
    node = follower(1, 1, 3, 3, 3, epoch=4)
    fetch_response(node, 1, 1, snapshot_id=SnapshotId(5, 2))
    (request,) = sent(node.poll(), FetchSnapshotRequest)
    snapshot_answer(node, request, SNAPSHOT, 2)
    assert node.poll().load_snapshot == SnapshotId(5, 2)
    assert (node.log.log_start_offset, node.log.end_offset) == (5, 5)
    assert node.log.entries() == []


def test_a_snapshot_below_the_high_watermark_is_a_bug() -> None:
    node = follower(1, 1, 1)
    fetch_response(node, 1, 1, high_watermark=3)
    node.poll()
    with pytest.raises(RaftInvariantError, match="below its high watermark"):
        fetch_response(node, 1, 2, snapshot_id=SnapshotId(2, 1))


def test_a_node_restarts_from_its_snapshot() -> None:
    log = log_of(1, 1, 1, 2)
    log.create_snapshot(SnapshotId(3, 1), b"s")
    log.delete_before_snapshot(SnapshotId(3, 1))
    with pytest.raises(ValueError, match="outside the log"):
        new_node(1, log=log, applied_offset=0)
    node = new_node(1, voters=[1], log=log, applied_offset=3)
    node.tick(0)
    assert node.is_leader
    out = node.poll()
    # Only what follows the snapshot is handed out: entry 3 and the new leader's own.
    assert [e.offset for e in out.committed] == [3, 4]
    assert out.load_snapshot is None
