"""QuorumState and the role classes: every transition of the table in QuorumState's docstring,
legal or refused, plus restart, persistence and the per-role bookkeeping (KIP-595 "Leader
Election", Raft §5.2, KIP-996)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from rillet.raft import (
    CandidateState,
    ElectionState,
    FollowerState,
    IllegalTransitionError,
    LeaderState,
    QuorumState,
    RaftConfig,
    ResignedState,
    UnattachedState,
    VotedState,
)

CONFIG = RaftConfig()


def quorum(
    persisted: ElectionState | None = None,
    *,
    local_id: int = 1,
    voters: tuple[int, ...] = (1, 2, 3),
    log_last_epoch: int = 0,
    seed: int = 0,
) -> QuorumState:
    return QuorumState(
        local_id=local_id,
        voters=voters,
        config=CONFIG,
        rng=random.Random(seed),
        persisted=persisted,
        log_last_epoch=log_last_epoch,
        now_ms=0,
    )


# Each role at epoch 5, as restart (or one transition) produces it.
def unattached() -> QuorumState:
    return quorum(ElectionState(5, None, None))


def voted() -> QuorumState:
    return quorum(ElectionState(5, 2, None))


def candidate() -> QuorumState:
    q = quorum(ElectionState(5, 1, None))
    assert isinstance(q.state, CandidateState)
    q.state.record_vote(2, True)  # it holds a majority
    return q


def pre_vote_candidate() -> QuorumState:
    q = unattached()
    q.transition_to_candidate(0, pre_vote=True)
    return q


def leader() -> QuorumState:
    q = candidate()
    q.transition_to_leader(10, 0)
    return q


def follower() -> QuorumState:
    return quorum(ElectionState(5, None, 2))


def resigned() -> QuorumState:
    return quorum(ElectionState(5, 1, 1))


def observer_unattached() -> QuorumState:
    return quorum(ElectionState(5, None, None), local_id=4)


def observer_follower() -> QuorumState:
    return quorum(ElectionState(5, None, 2), local_id=4)


ROLES: dict[str, Callable[[], QuorumState]] = {
    "Unattached": unattached,
    "Voted": voted,
    "Candidate": candidate,
    "PreVoteCandidate": pre_vote_candidate,
    "Leader": leader,
    "Follower": follower,
    "Resigned": resigned,
    "ObserverUnattached": observer_unattached,
    "ObserverFollower": observer_follower,
}

TRANSITIONS: dict[str, Callable[[QuorumState], object]] = {
    "Unattached(5)": lambda q: q.transition_to_unattached(5, 0),
    "Unattached(6)": lambda q: q.transition_to_unattached(6, 0),
    "Voted(5)": lambda q: q.transition_to_voted(5, 2, 0),
    "Voted(6)": lambda q: q.transition_to_voted(6, 2, 0),
    "Candidate": lambda q: q.transition_to_candidate(0, pre_vote=False),
    "PreVoteCandidate": lambda q: q.transition_to_candidate(0, pre_vote=True),
    "Leader": lambda q: q.transition_to_leader(0, 0),
    "Follower(5)": lambda q: q.transition_to_follower(5, 2, 0),
    "Follower(6)": lambda q: q.transition_to_follower(6, 2, 0),
    "Resigned": lambda q: q.transition_to_resigned((), 0),
}

# The table of QuorumState's docstring, one row per role: the targets it may move to.
LEGAL = {
    "Unattached": {
        "Unattached(6)", "Voted(5)", "Candidate", "PreVoteCandidate", "Follower(5)",
        "Follower(6)",
    },
    "Voted": {"Unattached(6)", "Candidate", "PreVoteCandidate", "Follower(5)", "Follower(6)"},
    "Candidate": {
        "Unattached(6)", "Candidate", "PreVoteCandidate", "Leader", "Follower(5)", "Follower(6)",
    },
    "PreVoteCandidate": {
        "Unattached(6)", "Candidate", "PreVoteCandidate", "Follower(5)", "Follower(6)",
    },
    "Leader": {"Unattached(6)", "Follower(6)", "Resigned"},
    "Follower": {"Unattached(6)", "Candidate", "PreVoteCandidate", "Follower(6)"},
    "Resigned": {"Unattached(6)", "Candidate", "PreVoteCandidate", "Follower(6)"},
    "ObserverUnattached": {"Unattached(6)", "Follower(5)", "Follower(6)"},
    "ObserverFollower": {"Unattached(5)", "Unattached(6)", "Follower(6)"},
}  # fmt: skip


@pytest.mark.parametrize("target", sorted(TRANSITIONS))
@pytest.mark.parametrize("role", sorted(ROLES))
def test_transition_table(role: str, target: str) -> None:
    q = ROLES[role]()
    if target in LEGAL[role]:
        state = TRANSITIONS[target](q)
        assert q.state is state
        expected = {
            "Unattached(5)": (UnattachedState, 5),
            "Unattached(6)": (UnattachedState, 6),
            "Voted(5)": (VotedState, 5),
            "Candidate": (CandidateState, 6),
            "PreVoteCandidate": (CandidateState, 5),
            "Leader": (LeaderState, 5),
            "Follower(5)": (FollowerState, 5),
            "Follower(6)": (FollowerState, 6),
            "Resigned": (ResignedState, 5),
        }[target]
        assert isinstance(q.state, expected[0])
        assert q.epoch == expected[1]
    else:
        before = q.state
        with pytest.raises(IllegalTransitionError):
            TRANSITIONS[target](q)
        assert q.state is before


def test_only_a_candidate_with_a_majority_becomes_leader() -> None:
    q = quorum(ElectionState(5, 1, None))
    with pytest.raises(IllegalTransitionError):
        q.transition_to_leader(0, 0)
    q = pre_vote_candidate()
    assert isinstance(q.state, CandidateState)
    q.state.record_vote(2, True)
    assert q.state.is_won()
    with pytest.raises(IllegalTransitionError, match="Leader"):
        q.transition_to_leader(0, 0)  # KIP-996: a pre-vote elects nobody


@pytest.mark.parametrize("leader_id", [1, 4])
def test_only_another_voter_can_be_followed(leader_id: int) -> None:
    with pytest.raises(IllegalTransitionError):
        unattached().transition_to_follower(6, leader_id, 0)


@pytest.mark.parametrize("candidate_id", [1, 4])
def test_a_vote_goes_only_to_another_voter(candidate_id: int) -> None:
    with pytest.raises(IllegalTransitionError):
        unattached().transition_to_voted(5, candidate_id, 0)


def test_real_candidacy_bumps_the_epoch_and_votes_for_itself() -> None:
    q = follower()
    q.take_unpersisted()
    state = q.transition_to_candidate(0, pre_vote=False)
    assert (state.epoch, state.target_epoch, state.granted) == (6, 6, {1})
    assert q.take_unpersisted() == ElectionState(6, 1, None)
    assert q.take_unpersisted() is None


def test_pre_vote_candidacy_keeps_the_epoch_and_persists_nothing() -> None:
    # KIP-996: a pre-vote changes no durable state, so the vote and leader of the epoch stay.
    q = voted()
    state = q.transition_to_candidate(0, pre_vote=True)
    assert (state.epoch, state.target_epoch) == (5, 6)
    assert q.take_unpersisted() is None
    assert state.election() == ElectionState(5, 2, None)
    assert state.can_grant_vote(2) and not state.can_grant_vote(3)


@pytest.mark.parametrize(
    ("persisted", "log_last_epoch", "role", "epoch"),
    [
        (None, 0, UnattachedState, 0),
        (ElectionState(5, None, None), 0, UnattachedState, 5),
        (ElectionState(5, 2, None), 0, VotedState, 5),  # the vote survives the restart
        (ElectionState(5, 1, None), 0, CandidateState, 5),  # so does the vote for itself
        (ElectionState(5, None, 2), 0, FollowerState, 5),
        (ElectionState(5, 1, 1), 0, ResignedState, 5),  # leadership does not survive
        (ElectionState(5, 2, None), 7, UnattachedState, 7),  # the log saw a newer epoch
    ],
)
def test_restart_derives_the_role_from_the_persisted_state(
    persisted: ElectionState | None, log_last_epoch: int, role: type, epoch: int
) -> None:
    q = quorum(persisted, log_last_epoch=log_last_epoch)
    assert isinstance(q.state, role)
    assert q.epoch == epoch
    expect_persist = log_last_epoch > 0
    assert (q.take_unpersisted() is not None) == expect_persist


def test_an_observer_restarts_without_a_vote() -> None:
    assert isinstance(quorum(ElectionState(5, 2, None), local_id=4).state, UnattachedState)
    assert isinstance(quorum(ElectionState(5, None, 2), local_id=4).state, FollowerState)
    assert observer_unattached().state.election_deadline_ms is None  # type: ignore[union-attr]


def test_unpersisted_state_is_reported_once_per_change() -> None:
    q = unattached()
    assert q.take_unpersisted() is None
    q.transition_to_unattached(6, 0)
    q.transition_to_voted(6, 3, 0)
    assert q.take_unpersisted() == ElectionState(6, 3, None)  # only the latest matters
    assert q.take_unpersisted() is None
    q.transition_to_follower(6, 3, 0)
    assert q.take_unpersisted() == ElectionState(6, None, 3)


def test_election_timeout_is_jittered_between_one_and_two_timeouts() -> None:
    q = unattached()
    timeouts = {q.random_election_timeout_ms() for _ in range(200)}
    assert min(timeouts) >= 1000 and max(timeouts) < 2000 and len(timeouts) > 50


def test_the_only_voter_does_not_wait() -> None:
    q = quorum(voters=(1,))
    assert q.is_only_voter
    assert q.random_election_timeout_ms() == 0
    assert q.election_backoff_ms(3) == 0


def test_election_backoff_grows_and_is_capped() -> None:
    q = unattached()
    first = {q.election_backoff_ms(1) for _ in range(100)}
    later = {q.election_backoff_ms(8) for _ in range(100)}
    assert max(first) <= 2 * CONFIG.retry_backoff_ms
    assert max(later) <= CONFIG.election_backoff_max_ms and max(later) > max(first)


def test_end_quorum_backoff_favours_the_first_preferred_successor() -> None:
    q = follower()
    assert q.end_quorum_backoff_ms(0) == 0
    assert 0 < q.end_quorum_backoff_ms(1) < q.end_quorum_backoff_ms(3)
    assert q.end_quorum_backoff_ms(None) >= CONFIG.election_backoff_max_ms


def test_keep_election_timer_carries_the_current_deadline() -> None:
    q = follower()
    assert isinstance(q.state, FollowerState)
    deadline = q.state.fetch_deadline_ms
    state = q.transition_to_unattached(6, 500, keep_election_timer=True)
    assert state.election_deadline_ms == deadline
    state = q.transition_to_unattached(7, 500)
    assert state.election_deadline_ms is not None and state.election_deadline_ms >= 1500


def test_candidate_counts_each_voter_once() -> None:
    q = quorum(ElectionState(5, 1, None), voters=(1, 2, 3, 4, 5))
    state = q.state
    assert isinstance(state, CandidateState)
    assert state.majority == 3
    state.record_vote(2, True)
    state.record_vote(2, False)  # the first answer stands
    state.record_vote(9, True)  # not a voter
    assert state.granted == {1, 2} and not state.is_won()
    state.record_vote(3, False)
    state.record_vote(4, False)
    assert not state.is_lost()
    state.record_vote(5, False)
    assert state.is_lost() and state.unrecorded_voters() == []


def test_leader_high_watermark_needs_a_majority_past_its_epoch_start() -> None:
    # Raft §5.4.2: entries of earlier epochs commit only with one of the leader's own.
    q = candidate()
    state = q.transition_to_leader(epoch_start_offset=10, now_ms=0)
    state.update_local_end_offset(11, 0)
    state.update_replica(2, 10, 11, 0)
    assert state.majority_end_offset() == 10
    assert state.high_watermark_candidate() is None
    state.update_replica(4, 11, 11, 0)  # an observer does not count
    assert state.high_watermark_candidate() is None
    state.update_replica(3, 11, 11, 0)
    assert state.high_watermark_candidate() == 11
    assert state.preferred_successors() == (3, 2)
    assert [o.replica_id for o in state.observer_states.values()] == [4]


def test_check_quorum_needs_fetches_from_a_majority_each_period() -> None:
    q = candidate()
    state = q.transition_to_leader(0, now_ms=0)
    timeout = CONFIG.check_quorum_timeout_ms
    assert state.check_quorum(timeout - 1)
    state.update_replica(2, 0, 1, timeout - 1)
    assert state.check_quorum(timeout)  # a majority fetched: a new period starts
    assert state.check_quorum(2 * timeout - 2)
    assert not state.check_quorum(2 * timeout)
