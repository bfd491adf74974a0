"""Replication: the Fetch RPC on the leader and on followers and observers, the high watermark,
divergence and truncation (KIP-595 "Fetch", Raft §5.3 and §5.4.2)."""

from __future__ import annotations

import pytest
from raft_harness import elect, expire, fetch, fetch_response, log_of, new_node, sent

from rillet.raft import (
    ElectionState,
    Entry,
    EpochEndOffset,
    Errors,
    FetchRequest,
    FetchResponse,
    FollowerState,
    MemoryQuorumStateStore,
    RaftInvariantError,
    RaftNode,
    UnattachedState,
)


def leader_with(*payloads: bytes, **config: object) -> tuple[RaftNode, int]:
    """Leader 1 of epoch 1 (voters 1, 2, 3) holding its leader-change entry and ``payloads``."""
    node = new_node(1, **config)
    now = elect(node)
    if payloads:
        node.propose(list(payloads), now)
    node.poll()
    return node, now


def follower_of(
    leader_id: int, epoch: int, *epochs: int, node_id: int = 2, **config: object
) -> RaftNode:
    store = MemoryQuorumStateStore(ElectionState(epoch, None, leader_id))
    node = new_node(node_id, log=log_of(*epochs), store=store, **config)
    node.tick(0)
    return node


def responses(node: RaftNode) -> list[FetchResponse]:
    return sent(node.poll(), FetchResponse)


def caught_up_leader() -> tuple[RaftNode, int]:
    """A leader whose high watermark covers its whole log, with follower 2 caught up."""
    leader, now = leader_with()
    fetch(leader, 2, 1, 1, now)  # acknowledges the leader-change entry: answered at once
    (response,) = responses(leader)
    assert response.high_watermark == 1
    return leader, now


# -- leader side ---------------------------------------------------------------------------


def test_kip_595_leader_answers_with_entries_from_the_fetch_offset() -> None:
    leader, now = leader_with(b"a", b"b")
    fetch(leader, 2, 1, 1, now)
    (response,) = responses(leader)
    assert response.records == (Entry(1, 1, b"a"), Entry(2, 1, b"b"))
    assert (response.leader_id, response.leader_epoch, response.error) == (1, 1, Errors.NONE)
    assert (response.fetch_offset, response.last_fetched_epoch) == (1, 1)
    assert response.diverging_epoch is None


def test_leader_sends_at_most_fetch_max_entries() -> None:
    leader, now = leader_with(b"a", b"b", b"c", fetch_max_entries=2)
    fetch(leader, 2, 0, 0, now)
    (response,) = responses(leader)
    assert [e.offset for e in response.records] == [0, 1]


def test_fetch_offsets_are_acknowledgements_that_move_the_high_watermark() -> None:
    leader, now = leader_with(b"a", b"b")
    fetch(leader, 2, 0, 0, now)
    assert responses(leader)[0].high_watermark == 0
    # Follower 2 now holds offsets 0-2: with the leader that is a majority of three.
    fetch(leader, 2, 3, 1, now + 1)
    out = leader.poll()
    (response,) = sent(out, FetchResponse)  # the parked fetch completes on the HW move
    assert response.high_watermark == 3 and response.records == ()
    assert out.high_watermark == 3
    assert [e.offset for e in out.committed] == [0, 1, 2]
    assert leader.poll().committed == ()  # each committed entry is handed out once


def test_s5_4_2_leader_commits_older_epochs_only_with_an_entry_of_its_own() -> None:
    store = MemoryQuorumStateStore(ElectionState(1, None, None))
    leader = new_node(1, log=log_of(1, 1, 1), store=store)
    now = elect(leader)  # epoch 2; its leader-change entry goes at offset 3
    leader.poll()
    fetch(leader, 2, 3, 1, now)  # a majority holds the epoch-1 entries...
    assert leader.high_watermark == 0  # ...which is not enough (Raft Figure 8)
    fetch(leader, 2, 4, 2, now + 1)  # a majority holds the epoch-2 entry
    assert leader.high_watermark == 4


def test_observers_do_not_count_toward_the_high_watermark() -> None:
    leader, now = leader_with(b"a")
    fetch(leader, 4, 2, 1, now)
    assert leader.high_watermark == 0
    info = leader.describe_quorum()
    assert info is not None
    assert [(o.replica_id, o.log_end_offset) for o in info.observers] == [(4, 2)]
    fetch(leader, 3, 2, 1, now)
    assert leader.high_watermark == 2


def test_a_fetch_with_nothing_new_is_parked_until_an_append() -> None:
    leader, now = caught_up_leader()
    fetch(leader, 2, 1, 1, now)
    assert responses(leader) == []
    leader.propose([b"x"], now + 100)
    (response,) = responses(leader)
    assert [e.payload for e in response.records] == [b"x"]


def test_a_parked_fetch_is_answered_empty_at_its_max_wait() -> None:
    leader, now = caught_up_leader()
    fetch(leader, 2, 1, 1, now, max_wait_ms=300)
    assert leader.next_deadline_ms() == now + 300
    leader.tick(now + 299)
    assert responses(leader) == []
    leader.tick(now + 300)
    (response,) = responses(leader)
    assert response.records == () and response.error == Errors.NONE


def test_a_newer_parked_fetch_replaces_the_older_one() -> None:
    leader, now = caught_up_leader()
    fetch(leader, 2, 1, 1, now)
    fetch(leader, 2, 1, 1, now + 10)
    leader.propose([b"x"], now + 20)
    assert len(responses(leader)) == 1


def test_a_fetch_without_max_wait_is_answered_at_once() -> None:
    leader, now = leader_with()
    fetch(leader, 2, 1, 1, now, max_wait_ms=0)
    assert len(responses(leader)) == 1


def test_kip_595_leader_answers_a_diverging_fetch_with_where_the_epoch_ends() -> None:
    store = MemoryQuorumStateStore(ElectionState(3, None, None))
    leader = new_node(1, log=log_of(1, 1, 3, 3), store=store)
    now = elect(leader)  # epoch 4, its leader-change entry at offset 4
    leader.poll()
    # The follower's log is 1 1 2 2 2: the leader never had epoch 2; epoch 1 ends at 2 here.
    fetch(leader, 2, 5, 2, now)
    (response,) = responses(leader)
    assert response.diverging_epoch == EpochEndOffset(1, 2)
    assert response.records == ()
    info = leader.describe_quorum()
    assert info is not None and info.voters[1].log_end_offset == 0  # not an acknowledgement


@pytest.mark.parametrize(
    ("epoch", "error"),
    [(0, Errors.FENCED_LEADER_EPOCH), (2, Errors.UNKNOWN_LEADER_EPOCH)],
)
def test_kip_595_a_fetch_from_another_epoch_is_refused(epoch: int, error: Errors) -> None:
    leader, now = leader_with(b"a")
    fetch(leader, 2, 0, 0, now, epoch=epoch)
    (response,) = responses(leader)
    assert response.error == error
    assert (response.leader_id, response.leader_epoch, response.records) == (1, 1, ())


def test_a_non_leader_refuses_fetches_and_names_the_leader() -> None:
    follower = follower_of(3, 2, 1)
    follower.poll()
    fetch(follower, 4, 0, 0, 0)
    (response,) = responses(follower)
    assert response.error == Errors.NOT_LEADER_OR_FOLLOWER
    assert (response.leader_id, response.leader_epoch) == (3, 2)


def test_a_malformed_fetch_is_invalid() -> None:
    leader, now = leader_with()
    fetch(leader, 2, -1, 0, now)
    assert responses(leader)[0].error == Errors.INVALID_REQUEST


# -- follower side -------------------------------------------------------------------------


def test_kip_595_a_follower_fetches_from_its_leader_at_its_log_end() -> None:
    follower = follower_of(3, 2, 1, 1)
    (request,) = sent(follower.poll(), FetchRequest)
    assert request == FetchRequest(
        source_id=2,
        destination_id=3,
        replica_id=2,
        current_leader_epoch=2,
        fetch_offset=2,
        last_fetched_epoch=1,
        max_wait_ms=500,
    )


def test_follower_appends_takes_the_high_watermark_and_fetches_again() -> None:
    follower = follower_of(3, 2, 1, 1)
    follower.poll()
    records = [Entry(2, 2, b"c", control=True), Entry(3, 2, b"d")]
    fetch_response(follower, 3, 10, records=records, high_watermark=3)
    out = follower.poll()
    assert out.flush_log
    assert follower.log.end_offset == 4
    assert out.high_watermark == 3 and [e.offset for e in out.committed] == [0, 1, 2]
    (request,) = sent(out, FetchRequest)
    assert (request.fetch_offset, request.last_fetched_epoch) == (4, 2)


def test_follower_high_watermark_is_capped_by_its_own_log() -> None:
    follower = follower_of(3, 2, 1, 1)
    fetch_response(follower, 3, 10, high_watermark=10)
    assert follower.high_watermark == 2


def test_kip_595_follower_truncates_to_the_diverging_epoch_and_fetches_again() -> None:
    follower = follower_of(1, 4, 1, 1, 2, 2, 2)
    follower.poll()
    fetch_response(follower, 1, 10, diverging_epoch=EpochEndOffset(1, 2))
    out = follower.poll()
    assert follower.log.end_offset == 2 and out.flush_log
    (request,) = sent(out, FetchRequest)
    assert (request.fetch_offset, request.last_fetched_epoch) == (2, 1)


def test_follower_truncates_to_the_earlier_of_both_epoch_ends() -> None:
    # The leader says its epoch 3 ends at 6; our epoch 3 already ends at 4.
    follower = follower_of(1, 5, 1, 3, 3, 3, 4, 4)
    follower.poll()
    fetch_response(follower, 1, 10, diverging_epoch=EpochEndOffset(3, 6))
    assert follower.log.end_offset == 4


def test_divergence_converges_over_rounds_between_real_nodes() -> None:
    # Leader log 1 1 3 3 (+ its epoch-4 leader change); follower log 1 2 2 2 2.
    leader = new_node(
        1, log=log_of(1, 1, 3, 3), store=MemoryQuorumStateStore(ElectionState(3, None, None))
    )
    now = elect(leader)
    leader.poll()
    follower = follower_of(1, 4, 1, 2, 2, 2, 2)
    for _ in range(5):
        for request in sent(follower.poll(), FetchRequest):
            leader.step(request, now)
        for response in sent(leader.poll(), FetchResponse):
            follower.step(response, now)
    assert follower.log.entries() == leader.log.entries()


def test_s5_4_follower_refuses_to_truncate_committed_entries() -> None:
    follower = follower_of(3, 2, 1, 1, 1, 1)
    fetch_response(follower, 3, 10, high_watermark=3)
    with pytest.raises(RaftInvariantError, match="below its high watermark"):
        fetch_response(follower, 3, 20, diverging_epoch=EpochEndOffset(1, 1))


def test_a_response_to_an_earlier_position_is_ignored() -> None:
    follower = follower_of(3, 2, 1, 1)
    follower.poll()
    stale = [Entry(1, 1, b"dup")]
    fetch_response(follower, 3, 10, records=stale, fetch_offset=1, last_fetched_epoch=1)
    assert follower.log.end_offset == 2 and not follower.poll().flush_log
    fetch_response(follower, 3, 10, diverging_epoch=EpochEndOffset(0, 0), fetch_offset=9)
    assert follower.log.end_offset == 2


def test_a_response_from_a_newer_epoch_moves_the_follower_to_its_leader() -> None:
    follower = follower_of(3, 2, 1, 1)
    follower.poll()
    fetch_response(follower, 3, 10, error=Errors.FENCED_LEADER_EPOCH, leader_id=1, leader_epoch=5)
    assert isinstance(follower.state, FollowerState)
    assert (follower.leader_id, follower.epoch) == (1, 5)
    out = follower.poll()
    assert out.quorum_state == ElectionState(5, None, 1)
    assert [m.destination_id for m in sent(out, FetchRequest)] == [1]


def test_a_follower_whose_leader_stepped_down_stops_fetching_from_it() -> None:
    follower = follower_of(3, 2, 1)
    follower.poll()
    fetch_response(follower, 3, 10, error=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=None)
    state = follower.state
    assert isinstance(state, FollowerState) and state.leader_resigned
    assert follower.next_deadline_ms() == state.fetch_deadline_ms
    assert sent(follower.poll(), FetchRequest) == []


def test_an_unanswered_fetch_is_sent_again_after_the_request_timeout() -> None:
    follower = follower_of(3, 2, 1, request_timeout_ms=300)
    follower.poll()
    follower.tick(799)
    assert sent(follower.poll(), FetchRequest) == []
    follower.tick(800)  # max wait (500) plus request timeout (300)
    assert len(sent(follower.poll(), FetchRequest)) == 1


def test_kip_595_a_voter_that_hears_nothing_for_the_fetch_timeout_stands() -> None:
    follower = follower_of(3, 2, 1)
    follower.tick(1999)
    assert follower.role == "Follower"
    follower.tick(2000)
    assert follower.role == "Candidate" and follower.epoch == 3


def test_a_successful_fetch_pushes_the_fetch_timeout_back() -> None:
    follower = follower_of(3, 2, 1)
    fetch_response(follower, 3, 1500, high_watermark=0)
    follower.tick(3000)
    assert follower.role == "Follower"


def test_committed_entries_start_after_the_applied_offset() -> None:
    store = MemoryQuorumStateStore(ElectionState(1, None, 3))
    follower = new_node(2, log=log_of(1, 1, 1), store=store, applied_offset=2)
    follower.tick(0)
    assert follower.high_watermark == 2
    fetch_response(follower, 3, 10, high_watermark=3)
    assert [e.offset for e in follower.poll().committed] == [2]


# -- observers -----------------------------------------------------------------------------


def test_an_observer_asks_a_voter_for_the_leader_and_follows_it() -> None:
    observer = new_node(4)
    observer.tick(0)
    (request,) = sent(observer.poll(), FetchRequest)
    assert request.destination_id in (1, 2, 3) and request.max_wait_ms == 0
    observer.step(
        FetchResponse(
            source_id=1,
            destination_id=4,
            error=Errors.NOT_LEADER_OR_FOLLOWER,
            leader_id=2,
            leader_epoch=3,
            fetch_offset=0,
            last_fetched_epoch=0,
        ),
        5,
    )
    assert isinstance(observer.state, FollowerState) and observer.leader_id == 2
    (request,) = sent(observer.poll(), FetchRequest)
    assert (request.destination_id, request.current_leader_epoch) == (2, 3)


def test_an_observer_that_loses_its_leader_looks_for_one_again() -> None:
    observer = follower_of(3, 2, 1, node_id=4)
    observer.poll()
    observer.tick(2000)
    assert isinstance(observer.state, UnattachedState) and observer.epoch == 2
    (request,) = sent(observer.poll(), FetchRequest)
    assert request.max_wait_ms == 0  # a discovery request
    fetch_response(observer, 3, 2010, error=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=None)
    assert observer.role == "Unattached"


def test_an_observer_follower_told_its_leader_is_gone_looks_for_another_at_once() -> None:
    observer = follower_of(3, 2, 1, node_id=4)
    observer.poll()
    fetch_response(observer, 3, 10, error=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=None)
    assert observer.role == "Unattached"
    assert len(sent(observer.poll(), FetchRequest)) == 1


def test_an_observer_catches_up_but_is_never_a_candidate() -> None:
    observer = follower_of(3, 2, 1, node_id=4)
    fetch_response(observer, 3, 10, records=[Entry(1, 2, b"x")], high_watermark=2)
    assert observer.high_watermark == 2
    observer.tick(100_000)
    assert observer.role in ("Unattached", "Follower")
    assert expire(observer) > 0


def test_a_new_leader_is_ready_only_once_earlier_epochs_are_handed_out() -> None:
    """The controller above may act as leader only after it has applied every entry of
    earlier epochs: they commit with the leader's LeaderChange entry, not before."""
    node = new_node(log=log_of(1, 1), store=MemoryQuorumStateStore(ElectionState(1, 2, None)))
    now = elect(node)
    node.poll()
    assert node.is_leader and not node.leader_ready  # offsets 0-1 (epoch 1) not committed
    fetch(node, 2, 3, node.epoch, now)  # voter 2 has everything, LeaderChange included
    out = node.poll()
    assert [e.offset for e in out.committed] == [0, 1, 2]
    assert node.leader_ready
