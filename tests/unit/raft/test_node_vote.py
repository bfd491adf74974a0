"""Elections: the Vote RPC on both sides, candidacy, backoff, pre-vote, and the single-voter
quorum (Raft §5.2 and §5.4.1, KIP-595 "Vote", KIP-996 "Pre-Vote")."""

from __future__ import annotations

import pytest
from raft_harness import elect, expire, grant, log_of, new_node, sent

from rillet.errors import NotLeaderError
from rillet.raft import (
    BeginQuorumEpochRequest,
    CandidateState,
    ElectionState,
    Errors,
    FollowerState,
    LeaderChangeMessage,
    MemoryQuorumStateStore,
    RaftNode,
    UnattachedState,
    VotedState,
    VoteRequest,
    VoteResponse,
)


def vote_request(
    node: RaftNode,
    candidate: int,
    epoch: int,
    now_ms: int,
    *,
    last: tuple[int, int] = (0, 0),
    pre_vote: bool = False,
) -> VoteResponse:
    node.step(
        VoteRequest(
            source_id=candidate,
            destination_id=node.node_id,
            candidate_epoch=epoch,
            candidate_id=candidate,
            last_offset_epoch=last[0],
            last_offset=last[1],
            pre_vote=pre_vote,
        ),
        now_ms,
    )
    (response,) = sent(node.poll(), VoteResponse)
    return response


# -- candidacy -----------------------------------------------------------------------------


def test_s5_2_election_timeout_makes_a_voter_candidate_that_persists_before_asking() -> None:
    store = MemoryQuorumStateStore(ElectionState(2, None, None))
    node = new_node(log=log_of(1, 1, 2), store=store)
    node.tick(0)
    assert node.poll().quorum_state is None
    deadline = node.next_deadline_ms()
    assert deadline is not None and 1000 <= deadline < 2000
    node.tick(deadline - 1)
    assert node.role == "Unattached"
    node.tick(deadline)
    out = node.poll()
    assert isinstance(node.state, CandidateState) and node.epoch == 3
    # Persist-then-send: the vote for itself comes out together with the requests.
    assert out.quorum_state == ElectionState(3, 1, None)
    requests = sent(out, VoteRequest)
    assert [r.destination_id for r in requests] == [2, 3]
    assert requests[0] == VoteRequest(
        source_id=1,
        destination_id=2,
        candidate_epoch=3,
        candidate_id=1,
        last_offset_epoch=2,
        last_offset=3,
    )


def test_s5_2_majority_elects_a_leader_that_appends_its_leader_change_entry() -> None:
    node = new_node(log=log_of(1, 1), store=MemoryQuorumStateStore(ElectionState(1, 2, None)))
    now = expire(node)
    node.poll()
    grant(node, 3, now)
    out = node.poll()
    assert node.is_leader and node.epoch == 2
    assert out.quorum_state == ElectionState(2, 1, 1)
    assert out.flush_log
    change = node.log.read(2, 1)[0]
    assert (change.offset, change.epoch, change.control) == (2, 2, True)
    assert LeaderChangeMessage.decode(change.payload) == LeaderChangeMessage(
        leader_id=1, leader_epoch=2, voters=(1, 2, 3), granting_voters=(1, 3)
    )
    assert [m.destination_id for m in sent(out, BeginQuorumEpochRequest)] == [2, 3]
    assert out.high_watermark == 0  # nothing of epoch 1 is replicated yet
    assert out.leader_change is not None and out.leader_change.leader_id == 1


def test_candidate_resends_vote_requests_to_voters_that_did_not_answer() -> None:
    node = new_node(voters=(1, 2, 3, 4, 5), request_timeout_ms=300)
    now = expire(node)
    node.poll()
    grant(node, 2, now, granted=False)
    node.tick(now + node.config.request_timeout_ms)
    assert [m.destination_id for m in sent(node.poll(), VoteRequest)] == [3, 4, 5]


def test_lost_election_backs_off_then_stands_in_the_next_epoch() -> None:
    node = new_node()
    now = expire(node)
    grant(node, 2, now, granted=False)
    grant(node, 3, now, granted=False)
    state = node.state
    assert isinstance(state, CandidateState) and state.is_lost()
    assert state.backoff_until_ms is not None
    assert now < state.backoff_until_ms <= now + 2 * node.config.retry_backoff_ms
    node.poll()
    node.tick(state.backoff_until_ms)
    assert isinstance(node.state, CandidateState) and node.epoch == 2
    assert node.poll().quorum_state == ElectionState(2, 1, None)


def test_election_timeout_without_a_majority_backs_off_too() -> None:
    node = new_node()
    expire(node)
    state = node.state
    assert isinstance(state, CandidateState)
    node.tick(state.election_deadline_ms)
    assert state.backoff_until_ms is not None
    expire(node)
    assert node.epoch == 2


def test_a_rival_candidate_in_the_same_epoch_splits_the_vote_and_starts_the_backoff() -> None:
    # Voter 3 (the old leader, say) is down: 1 and 2 stood in epoch 1 at once. Each learns
    # of the split from the other's request and backs off briefly instead of waiting out
    # the election timeout for 3.
    node = new_node()
    now = expire(node)
    node.poll()
    state = node.state
    assert isinstance(state, CandidateState) and node.epoch == 1
    response = vote_request(node, 2, 1, now + 3, last=(0, 0))
    assert not response.vote_granted
    assert state.rejected == {2} and not state.is_lost()
    assert state.backoff_until_ms is not None
    assert state.backoff_until_ms <= now + 3 + 2 * node.config.retry_backoff_ms
    assert state.backoff_until_ms < state.election_deadline_ms
    node.tick(state.backoff_until_ms)
    assert isinstance(node.state, CandidateState) and node.epoch == 2


def test_a_grant_arriving_during_the_split_vote_backoff_still_wins() -> None:
    node = new_node()
    now = expire(node)
    vote_request(node, 2, 1, now + 1)
    grant(node, 3, now + 2)
    assert node.is_leader and node.epoch == 1


def test_a_pre_vote_from_a_rival_is_not_a_split() -> None:
    node = new_node()
    now = expire(node)
    vote_request(node, 2, 1, now + 1, pre_vote=True)
    state = node.state
    assert isinstance(state, CandidateState) and not state.is_backing_off
    assert state.rejected == set()


def test_stale_vote_responses_are_ignored() -> None:
    node = new_node()
    now = expire(node)
    node.step(
        VoteResponse(
            source_id=2,
            destination_id=1,
            leader_id=None,
            leader_epoch=1,
            vote_granted=True,
            candidate_epoch=0,  # answers an older candidacy
        ),
        now,
    )
    assert not node.is_leader


def test_vote_response_from_a_newer_epoch_ends_the_candidacy() -> None:
    node = new_node()
    now = expire(node)
    node.step(
        VoteResponse(
            source_id=2,
            destination_id=1,
            leader_id=None,
            leader_epoch=4,
            vote_granted=False,
            candidate_epoch=1,
        ),
        now,
    )
    assert isinstance(node.state, UnattachedState) and node.epoch == 4


def test_vote_response_naming_the_leader_of_the_epoch_makes_a_follower() -> None:
    node = new_node()
    now = expire(node)
    node.step(
        VoteResponse(
            source_id=2,
            destination_id=1,
            leader_id=3,
            leader_epoch=1,
            vote_granted=False,
            candidate_epoch=1,
        ),
        now,
    )
    assert isinstance(node.state, FollowerState) and node.leader_id == 3


# -- granting votes ------------------------------------------------------------------------


def test_s5_2_grants_a_vote_persisted_with_the_response() -> None:
    node = new_node(2, log=log_of(1, 1))
    node.tick(0)
    node.poll()
    node.step(
        VoteRequest(
            source_id=1,
            destination_id=2,
            candidate_epoch=3,
            candidate_id=1,
            last_offset_epoch=1,
            last_offset=2,
        ),
        10,
    )
    out = node.poll()
    assert out.quorum_state == ElectionState(3, 1, None)
    (response,) = sent(out, VoteResponse)
    assert response.vote_granted and response.leader_epoch == 3
    assert isinstance(node.state, VotedState)


@pytest.mark.parametrize(
    ("candidate_last", "granted"),
    [
        ((2, 3), True),  # same last epoch, same length
        ((2, 9), True),
        ((3, 1), True),  # a newer last epoch wins even when shorter
        ((2, 2), False),  # same last epoch, shorter
        ((1, 9), False),  # an older last epoch loses even when longer
    ],
)
def test_s5_4_1_votes_only_for_a_log_at_least_as_up_to_date(
    candidate_last: tuple[int, int], granted: bool
) -> None:
    node = new_node(2, log=log_of(1, 1, 2))
    assert vote_request(node, 1, 5, 0, last=candidate_last).vote_granted is granted


def test_s5_2_one_vote_per_epoch_but_the_same_answer_again() -> None:
    node = new_node(2)
    assert vote_request(node, 1, 1, 0).vote_granted
    assert not vote_request(node, 3, 1, 1).vote_granted
    assert vote_request(node, 1, 1, 2).vote_granted  # a retry of the first request


def test_vote_from_an_older_epoch_is_fenced() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(4, None, None)))
    response = vote_request(node, 1, 3, 0)
    assert not response.vote_granted
    assert (response.error, response.leader_epoch) == (Errors.FENCED_LEADER_EPOCH, 4)
    assert node.epoch == 4


def test_a_newer_epoch_unseats_the_leader() -> None:
    node = new_node()
    now = elect(node)
    node.poll()
    response = vote_request(node, 2, 5, now, last=(0, 0))
    assert not response.vote_granted  # its log lacks the leader-change entry
    assert isinstance(node.state, UnattachedState) and node.epoch == 5


def test_s5_2_rejecting_a_newer_candidate_does_not_reset_the_election_timer() -> None:
    # Otherwise a candidate with a stale log that keeps standing holds everyone off.
    node = new_node(2, log=log_of(1, 1, 1))
    node.tick(0)
    deadline = node.next_deadline_ms()
    assert not vote_request(node, 1, 7, 900, last=(1, 1)).vote_granted
    assert node.epoch == 7 and node.next_deadline_ms() == deadline
    assert vote_request(node, 3, 8, 950, last=(1, 3)).vote_granted
    assert node.next_deadline_ms() != deadline  # granting a vote does reset it


def test_an_observer_never_votes_and_never_stands() -> None:
    node = new_node(4)
    node.tick(0)
    response = vote_request(node, 1, 1, 0)
    assert not response.vote_granted and response.error == Errors.INCONSISTENT_VOTER_SET
    assert node.epoch == 0
    node.tick(60_000)
    assert node.role == "Unattached" and node.epoch == 0


def test_a_vote_request_from_a_non_voter_is_refused() -> None:
    node = new_node(2)
    assert vote_request(node, 4, 1, 0).error == Errors.INCONSISTENT_VOTER_SET
    assert node.epoch == 0


# -- pre-vote (KIP-996) ----------------------------------------------------------------------


def test_kip_996_pre_vote_keeps_the_epoch_and_persists_nothing() -> None:
    store = MemoryQuorumStateStore(ElectionState(1, None, None))
    node = new_node(log=log_of(1), store=store, pre_vote=True)
    expire(node)
    out = node.poll()
    state = node.state
    assert isinstance(state, CandidateState) and state.pre_vote and node.epoch == 1
    assert out.quorum_state is None
    requests = sent(out, VoteRequest)
    assert all(r.pre_vote and r.candidate_epoch == 2 for r in requests)


def test_kip_996_winning_the_pre_vote_starts_the_real_election() -> None:
    node = new_node(pre_vote=True)
    now = expire(node)
    node.poll()
    grant(node, 2, now, pre_vote=True)
    out = node.poll()
    state = node.state
    assert isinstance(state, CandidateState) and not state.pre_vote and node.epoch == 1
    assert out.quorum_state == ElectionState(1, 1, None)
    assert all(not r.pre_vote for r in sent(out, VoteRequest))
    grant(node, 3, now)
    assert node.is_leader


def test_kip_996_lost_pre_vote_retries_in_the_same_epoch() -> None:
    node = new_node(pre_vote=True)
    now = expire(node)
    grant(node, 2, now, granted=False, pre_vote=True)
    grant(node, 3, now, granted=False, pre_vote=True)
    expire(node)
    state = node.state
    assert isinstance(state, CandidateState) and state.pre_vote and node.epoch == 0


def test_kip_996_granting_a_pre_vote_changes_nothing() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(3, 3, None)))
    node.tick(0)
    node.poll()
    response = vote_request(node, 1, 4, 0, pre_vote=True)
    assert response.vote_granted and response.pre_vote
    assert node.epoch == 3 and isinstance(node.state, VotedState)
    assert node.poll().quorum_state is None


def test_kip_996_a_follower_that_hears_its_leader_rejects_pre_votes() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(3, None, 3)))
    node.tick(0)
    response = vote_request(node, 1, 4, 100, pre_vote=True)
    assert not response.vote_granted and response.leader_id == 3
    # Once the leader has been silent for the fetch timeout, the same request is granted.
    assert vote_request(node, 1, 4, node.config.fetch_timeout_ms, pre_vote=True).vote_granted


def test_kip_996_the_leader_rejects_pre_votes() -> None:
    node = new_node()
    now = elect(node)
    node.poll()
    response = vote_request(node, 2, 2, now, last=(9, 9), pre_vote=True)
    assert not response.vote_granted and response.leader_id == 1
    assert node.is_leader


def test_kip_996_a_rejected_pre_candidate_follows_the_leader_it_learns_of() -> None:
    # Knowing no leader of epoch 3, it stands (pre-vote) when its election timeout passes.
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(3, None, None)), pre_vote=True)
    node.tick(0)
    now = expire(node)
    assert isinstance(node.state, CandidateState) and node.state.pre_vote
    node.step(
        VoteResponse(
            source_id=1,
            destination_id=2,
            leader_id=3,
            leader_epoch=3,
            vote_granted=False,
            candidate_epoch=4,
            pre_vote=True,
        ),
        now,
    )
    assert isinstance(node.state, FollowerState) and node.leader_id == 3 and node.epoch == 3


# -- the single-voter quorum -----------------------------------------------------------------


@pytest.mark.parametrize("pre_vote", [False, True])
def test_single_voter_elects_itself_at_once_and_commits_on_its_own_append(
    pre_vote: bool,
) -> None:
    # The same code path as a larger quorum: its own vote is a majority, its own log end is
    # the majority's replicated offset (DESIGN.md: single-node is not a special case).
    node = new_node(1, voters=(1,), pre_vote=pre_vote)
    node.tick(0)
    assert node.is_leader and node.epoch == 1
    out = node.poll()
    assert out.quorum_state == ElectionState(1, 1, 1)
    assert out.high_watermark == 1 and [e.control for e in out.committed] == [True]
    assert out.messages == ()
    offsets = node.propose([b"a", b"b"], 5)
    assert offsets == range(1, 3)
    out = node.poll()
    assert out.flush_log and out.high_watermark == 3
    assert [e.payload for e in out.committed] == [b"a", b"b"]
    assert node.next_deadline_ms() is not None  # check quorum keeps ticking, harmlessly
    node.tick(1_000_000)
    assert node.is_leader


def test_single_voter_restart_resigns_and_is_leader_again_in_the_next_epoch() -> None:
    store = MemoryQuorumStateStore(ElectionState(4, 1, 1))
    node = new_node(1, voters=(1,), log=log_of(4, 4), store=store)
    assert node.role == "Resigned"
    node.tick(0)
    assert node.is_leader and node.epoch == 5
    assert node.poll().high_watermark == 3


def test_propose_on_a_follower_names_the_leader() -> None:
    node = new_node(2, store=MemoryQuorumStateStore(ElectionState(3, None, 3)))
    with pytest.raises(NotLeaderError) as info:
        node.propose([b"x"], 0)
    assert (info.value.leader_id, info.value.leader_epoch) == (3, 3)
    assert info.value.name == "NOT_LEADER_OR_FOLLOWER" and info.value.retriable


def test_a_pre_vote_candidate_is_not_sent_back_to_the_leader_it_lost() -> None:
    """Two followers of a dead leader time out in turn: each one's pre-vote is refused by the
    other, which still follows that leader and says so. Going back to it would restart the
    fetch timeout and the two would send each other back for ever (a livelock the cluster
    benchmark found); only the leader itself can call the candidate back."""
    node = new_node(2, pre_vote=True)
    node.step(
        BeginQuorumEpochRequest(source_id=1, destination_id=2, leader_id=1, leader_epoch=5), 0
    )
    now = expire(node)  # the fetch timeout passes: a pre-vote candidate
    node.poll()
    refusal = dict(destination_id=2, leader_epoch=5, vote_granted=False, candidate_epoch=6,
                   pre_vote=True)  # fmt: skip
    node.step(VoteResponse(source_id=3, leader_id=1, **refusal), now + 2)  # type: ignore[arg-type]
    assert isinstance(node.state, CandidateState) and node.state.pre_vote
    # The leader's own word still counts.
    node.step(
        BeginQuorumEpochRequest(source_id=1, destination_id=2, leader_id=1, leader_epoch=5), now + 3
    )
    assert isinstance(node.state, FollowerState) and node.state.leader_id == 1
