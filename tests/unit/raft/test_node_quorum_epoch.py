"""Epoch boundaries: BeginQuorumEpoch, EndQuorumEpoch and resignation, check quorum, restarts,
and the driver's contract (KIP-595 "BeginQuorumEpoch", "EndQuorumEpoch", "Quorum State")."""

from __future__ import annotations

import pytest
from raft_harness import elect, expire, fetch, log_of, new_node, sent

from rillet.errors import NotLeaderError
from rillet.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CandidateState,
    ElectionState,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Errors,
    FetchRequest,
    FetchResponse,
    FollowerState,
    LeaderAndEpoch,
    MemoryQuorumStateStore,
    RaftNode,
    ResignedState,
    UnattachedState,
    VotedState,
    VoteRequest,
    VoteResponse,
)


def begin_quorum_epoch(node: RaftNode, leader: int, epoch: int, now_ms: int) -> None:
    node.step(
        BeginQuorumEpochRequest(
            source_id=leader, destination_id=node.node_id, leader_id=leader, leader_epoch=epoch
        ),
        now_ms,
    )


def end_quorum_epoch(
    node: RaftNode, leader: int, epoch: int, now_ms: int, successors: tuple[int, ...]
) -> None:
    node.step(
        EndQuorumEpochRequest(
            source_id=leader,
            destination_id=node.node_id,
            leader_id=leader,
            leader_epoch=epoch,
            preferred_successors=successors,
        ),
        now_ms,
    )


# -- BeginQuorumEpoch ------------------------------------------------------------------------


def test_kip_595_begin_quorum_epoch_makes_a_voter_follow_the_new_leader() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(3, 1, None)))
    assert isinstance(node.state, VotedState)
    begin_quorum_epoch(node, 3, 3, 10)  # another candidate won: fine, one leader per epoch
    out = node.poll()
    assert isinstance(node.state, FollowerState) and node.leader_id == 3
    assert out.quorum_state == ElectionState(3, None, 3)
    (response,) = sent(out, BeginQuorumEpochResponse)
    assert (response.error, response.leader_id, response.leader_epoch) == (Errors.NONE, 3, 3)
    assert [m.destination_id for m in sent(out, FetchRequest)] == [3]
    assert out.leader_change == LeaderAndEpoch(3, 3)


def test_begin_quorum_epoch_from_a_newer_epoch_is_followed() -> None:
    node = new_node(2)
    begin_quorum_epoch(node, 1, 7, 0)
    assert (node.role, node.epoch, node.leader_id) == ("Follower", 7, 1)


def test_begin_quorum_epoch_from_an_older_epoch_is_fenced() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(5, None, 3)))
    begin_quorum_epoch(node, 1, 4, 0)
    (response,) = sent(node.poll(), BeginQuorumEpochResponse)
    assert response.error == Errors.FENCED_LEADER_EPOCH
    assert (response.leader_id, response.leader_epoch) == (3, 5)
    assert node.leader_id == 3


def test_leader_resends_begin_quorum_epoch_until_acknowledged() -> None:
    node = new_node(1, request_timeout_ms=300)
    now = elect(node)
    assert [m.destination_id for m in sent(node.poll(), BeginQuorumEpochRequest)] == [2, 3]
    node.step(
        BeginQuorumEpochResponse(source_id=2, destination_id=1, leader_id=1, leader_epoch=1), now
    )
    node.tick(now + 300)
    assert [m.destination_id for m in sent(node.poll(), BeginQuorumEpochRequest)] == [3]
    fetch(node, 3, 0, 0, now + 310)  # a fetch of this epoch acknowledges it too
    node.tick(now + 600)
    assert sent(node.poll(), BeginQuorumEpochRequest) == []


# -- resignation and EndQuorumEpoch ----------------------------------------------------------


def test_kip_595_graceful_resignation_names_the_most_caught_up_successors() -> None:
    node = new_node(1, voters=(1, 2, 3, 4))
    now = elect(node)
    node.propose([b"a"], now)
    node.poll()
    fetch(node, 3, 2, 1, now)
    fetch(node, 2, 1, 1, now)
    node.poll()
    node.resign(now + 1)
    out = node.poll()
    state = node.state
    assert isinstance(state, ResignedState) and node.epoch == 1
    requests = sent(out, EndQuorumEpochRequest)
    assert [m.destination_id for m in requests] == [2, 3, 4]
    assert requests[0].preferred_successors == (3, 2, 4)
    assert out.leader_change == LeaderAndEpoch(None, 1)
    with pytest.raises(NotLeaderError):
        node.propose([b"b"], now + 2)


def test_a_resigned_leader_refuses_fetches_and_resends_until_acknowledged() -> None:
    node = new_node(1, request_timeout_ms=300)
    now = elect(node)
    node.poll()
    node.resign(now)
    node.poll()
    fetch(node, 2, 1, 1, now + 1)
    (response,) = sent(node.poll(), FetchResponse)
    assert response.error == Errors.NOT_LEADER_OR_FOLLOWER and response.leader_id is None
    node.step(
        EndQuorumEpochResponse(source_id=3, destination_id=1, leader_id=None, leader_epoch=1),
        now + 2,
    )
    node.tick(now + 300)
    assert [m.destination_id for m in sent(node.poll(), EndQuorumEpochRequest)] == [2]


def test_resignation_answers_parked_fetches() -> None:
    node = new_node(1)
    now = elect(node)
    fetch(node, 2, 1, 1, now)
    node.poll()
    fetch(node, 2, 1, 1, now)  # parked
    assert sent(node.poll(), FetchResponse) == []
    node.resign(now)
    (response,) = sent(node.poll(), FetchResponse)
    assert response.error == Errors.NOT_LEADER_OR_FOLLOWER


def test_a_resigned_leader_stands_again_at_its_election_deadline() -> None:
    node = new_node(1)
    now = elect(node)
    node.resign(now)
    expire(node)  # the first EndQuorumEpoch round
    expire(node)
    assert isinstance(node.state, CandidateState) and node.epoch == 2


def test_kip_595_the_first_preferred_successor_stands_at_once() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(4, None, 1)))
    node.tick(0)
    node.poll()
    end_quorum_epoch(node, 1, 4, 100, (2, 3))
    out = node.poll()
    (response,) = sent(out, EndQuorumEpochResponse)
    assert response.error == Errors.NONE
    state = node.state
    assert isinstance(state, CandidateState) and node.epoch == 5
    assert sent(out, VoteRequest)


def test_later_successors_wait_longer_and_count_the_leader_as_gone() -> None:
    node = new_node(3, store=MemoryQuorumStateStore(ElectionState(4, None, 1)), pre_vote=True)
    node.tick(0)
    end_quorum_epoch(node, 1, 4, 100, (2, 3))
    state = node.state
    assert isinstance(state, FollowerState) and state.leader_resigned
    assert state.fetch_deadline_ms == 100 + node.config.retry_backoff_ms
    assert not state.has_live_leader(101)  # so it grants pre-votes (KIP-996)


def test_end_quorum_epoch_pulls_in_an_unattached_voters_election() -> None:
    node = new_node(3)
    node.tick(0)
    end_quorum_epoch(node, 1, 2, 100, (3,))
    assert node.role == "Candidate" and node.epoch == 3


def test_end_quorum_epoch_from_an_older_epoch_is_fenced() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(4, None, 1)))
    end_quorum_epoch(node, 3, 3, 0, (2,))
    (response,) = sent(node.poll(), EndQuorumEpochResponse)
    assert response.error == Errors.FENCED_LEADER_EPOCH
    assert node.role == "Follower"


# -- check quorum ----------------------------------------------------------------------------


def test_a_leader_without_fetches_from_a_majority_resigns() -> None:
    node = new_node(1)
    now = elect(node)
    timeout = node.config.check_quorum_timeout_ms
    node.tick(now + timeout - 1)
    assert node.is_leader
    node.tick(now + timeout)
    assert isinstance(node.state, ResignedState)
    assert sent(node.poll(), EndQuorumEpochRequest)


def test_a_leader_with_fetches_from_a_majority_stays() -> None:
    node = new_node(1)
    now = elect(node)
    timeout = node.config.check_quorum_timeout_ms
    for t in range(now, now + 5 * timeout, 1000):
        fetch(node, 2, 1, 1, t, max_wait_ms=0)
        node.tick(t)
    assert node.is_leader


def test_check_quorum_can_be_turned_off() -> None:
    node = new_node(1, check_quorum=False)
    now = elect(node)
    node.tick(now + 100_000)
    assert node.is_leader


# -- restarts and the driver contract ------------------------------------------------------


def test_a_restarted_voter_keeps_its_vote() -> None:
    store = MemoryQuorumStateStore()
    node = new_node(2, store=store)
    node.step(
        VoteRequest(
            source_id=1,
            destination_id=2,
            candidate_epoch=1,
            candidate_id=1,
            last_offset_epoch=0,
            last_offset=0,
        ),
        0,
    )
    out = node.poll()
    assert out.quorum_state is not None
    store.persist(*out.quorum_state)  # the driver persists before it sends the vote
    restarted = new_node(2, store=store)
    assert isinstance(restarted.state, VotedState) and restarted.state.voted_id == 1
    restarted.step(
        VoteRequest(
            source_id=3,
            destination_id=2,
            candidate_epoch=1,
            candidate_id=3,
            last_offset_epoch=0,
            last_offset=0,
        ),
        0,
    )
    (response,) = sent(restarted.poll(), VoteResponse)
    assert not response.vote_granted


def test_a_restarted_leader_comes_back_resigned_and_says_so() -> None:
    store = MemoryQuorumStateStore(ElectionState(3, 1, 1))
    node = new_node(1, log=log_of(3), store=store)
    assert isinstance(node.state, ResignedState)
    node.tick(0)
    requests = sent(node.poll(), EndQuorumEpochRequest)
    assert [m.destination_id for m in requests] == [2, 3]


def test_outputs_report_the_leader_once_per_change() -> None:
    node = new_node(2)
    node.tick(0)
    assert node.poll().leader_change == LeaderAndEpoch(None, 0)
    assert node.poll().leader_change is None
    begin_quorum_epoch(node, 1, 1, 1)
    assert node.poll().leader_change == LeaderAndEpoch(1, 1)


def test_outputs_are_empty_when_nothing_happened() -> None:
    node = new_node(2)
    node.tick(0)
    node.poll()
    node.tick(1)
    out = node.poll()
    assert not out and out.high_watermark == 0


def test_time_must_not_go_backwards() -> None:
    node = new_node(2, now_ms=100)
    with pytest.raises(ValueError, match="backwards"):
        node.tick(99)


def test_a_message_for_another_node_is_refused() -> None:
    node = new_node(2)
    with pytest.raises(ValueError, match="message for 3"):
        node.step(
            BeginQuorumEpochRequest(source_id=1, destination_id=3, leader_id=1, leader_epoch=1),
            0,
        )


def test_applied_offset_must_be_inside_the_log() -> None:
    with pytest.raises(ValueError, match="applied_offset"):
        new_node(2, log=log_of(1), applied_offset=2)


def test_higher_epoch_without_a_leader_leaves_the_replica_unattached() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(2, None, 1)))
    node.step(
        EndQuorumEpochResponse(source_id=3, destination_id=2, leader_id=None, leader_epoch=6), 0
    )
    assert isinstance(node.state, UnattachedState) and node.epoch == 6


def test_describe_quorum_only_on_the_leader() -> None:
    node = new_node(1)
    assert node.describe_quorum() is None
    now = elect(node)
    fetch(node, 2, 1, 1, now)
    info = node.describe_quorum()
    assert info is not None
    assert (info.leader_id, info.leader_epoch, info.high_watermark) == (1, 1, 1)
    assert [(v.replica_id, v.log_end_offset) for v in info.voters] == [(1, 1), (2, 1), (3, 0)]
    # The leader reports itself fetched and caught up now, never behind a follower.
    node.tick(now + 500)
    info = node.describe_quorum()
    assert info is not None
    assert (info.voters[0].last_fetch_ms, info.voters[0].last_caught_up_ms) == (now + 500,) * 2
    assert info.voters[1].last_caught_up_ms == now


def test_step_refuses_what_is_not_a_quorum_message() -> None:
    node = new_node(2)
    with pytest.raises(TypeError, match="not a quorum message"):
        node.step(object(), 0)  # type: ignore[arg-type]
