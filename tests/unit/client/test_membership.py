"""The KIP-848 member state machine: joining, reconciling and acknowledging, fencing,
leaving, and the errors that end membership (Kafka's ConsumerMembershipManager)."""

from __future__ import annotations

import uuid

from rillet.client.consumer.membership import (
    ConsumerMembership,
    HeartbeatResponse,
    MemberState,
)
from rillet.errors import (
    CoordinatorLoadInProgressError,
    FencedMemberEpochError,
    NotCoordinatorError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def joined(**kwargs: object) -> ConsumerMembership:
    m = ConsumerMembership("g", rebalance_timeout_ms=300000, **kwargs)  # type: ignore[arg-type]
    m.subscribe(["a", "b"])
    return m


def answer(m: ConsumerMembership, now: int = 0, **fields: object) -> None:
    m.heartbeat_request()
    defaults: dict[str, object] = {
        "error": None,
        "member_id": m.member_id,
        "member_epoch": m.member_epoch or 1,
        "heartbeat_interval_ms": 5000,
    }
    m.on_heartbeat_response(HeartbeatResponse(**{**defaults, **fields}), now, 100)  # type: ignore[arg-type]


def test_joining_sends_epoch_zero_its_own_member_id_and_the_subscription() -> None:
    m = joined(instance_id="i-1", server_assignor="range")
    assert m.state is MemberState.JOINING and m.heartbeat_due(0)
    r = m.heartbeat_request()
    assert r.member_epoch == 0 and len(r.member_id) == 22  # a base64 UUID, made by the client
    assert r.subscribed_topic_names == ("a", "b") and r.subscribed_topic_regex is None
    assert (r.instance_id, r.server_assignor, r.owned) == ("i-1", "range", {})
    assert not m.heartbeat_due(0)  # one heartbeat in flight at a time


def test_a_regex_subscription_is_sent_instead_of_names() -> None:
    m = ConsumerMembership("g", rebalance_timeout_ms=1000)
    m.subscribe(regex="orders-.*")
    r = m.heartbeat_request()
    assert r.subscribed_topic_regex == "orders-.*" and r.subscribed_topic_names is None


def test_an_assignment_is_reconciled_then_acknowledged_at_once() -> None:
    m = joined()
    answer(m, now=10, member_epoch=3, assignment={T1: frozenset({0, 1})})
    assert m.state is MemberState.RECONCILING and m.member_epoch == 3
    assert m.pending_reconciliation() == {T1: frozenset({0, 1})}
    assert not m.heartbeat_due(20)  # the next regular one is 5 s away
    m.reconciled({T1: frozenset({0, 1})})
    assert m.state is MemberState.ACKNOWLEDGING and m.heartbeat_due(20)
    assert m.heartbeat_request().owned == {T1: frozenset({0, 1})}
    m.on_heartbeat_response(HeartbeatResponse(None, m.member_id, 3, 5000), 30, 100)
    assert m.state is MemberState.STABLE and m.pending_reconciliation() is None
    assert m.next_heartbeat_ms() == 5030


def test_a_new_assignment_while_reconciling_is_reconciled_next() -> None:
    m = joined()
    answer(m, member_epoch=3, assignment={T1: frozenset({0, 1})})
    m.reconciled({T1: frozenset({0})})  # it applied part, say, before the target moved
    answer(m, member_epoch=4, assignment={T1: frozenset({0}), T2: frozenset({2})})
    assert m.state is MemberState.RECONCILING
    assert m.pending_reconciliation() == {T1: frozenset({0}), T2: frozenset({2})}


def test_a_fenced_member_loses_its_partitions_and_rejoins_with_epoch_zero() -> None:
    for error in (FencedMemberEpochError("fenced"), UnknownMemberIdError("unknown")):
        m = joined()
        member_id = m.member_id
        answer(m, member_epoch=3, assignment={T1: frozenset({0})})
        m.reconciled({T1: frozenset({0})})
        answer(m, error=error)
        assert m.state is MemberState.FENCED
        assert m.take_lost() == {T1: frozenset({0})} and m.take_lost() is None
        r = m.heartbeat_request()
        assert (r.member_epoch, r.member_id, r.owned) == (0, member_id, {})


def test_coordinator_errors_retry_after_the_backoff_keeping_the_membership() -> None:
    for error in (NotCoordinatorError("moved"), CoordinatorLoadInProgressError("loading")):
        m = joined()
        answer(m, member_epoch=3, assignment={T1: frozenset({0})})
        m.reconciled({T1: frozenset({0})})
        answer(m, now=1000, error=error)
        assert m.member_epoch == 3 and m.owned == {T1: frozenset({0})}
        assert m.next_heartbeat_ms() == 1100


def test_an_unreachable_coordinator_is_retried_after_the_backoff() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_failure(500, 100)
    assert m.next_heartbeat_ms() == 600 and m.state is MemberState.JOINING


def test_a_taken_instance_id_is_fatal() -> None:
    m = joined(instance_id="i-1")
    answer(m, error=UnreleasedInstanceIdError("taken"))
    assert m.state is MemberState.FATAL and isinstance(m.fatal, UnreleasedInstanceIdError)
    assert not m.heartbeat_due(10**9)


def test_leaving_sends_minus_one_or_minus_two_for_a_static_member() -> None:
    for instance_id, epoch in ((None, -1), ("i-1", -2)):
        m = joined(instance_id=instance_id)
        answer(m, member_epoch=3, assignment={T1: frozenset({0})})
        m.leave()
        assert m.heartbeat_due(0)
        r = m.heartbeat_request()
        assert r.member_epoch == epoch and r.owned is None
        m.on_heartbeat_response(HeartbeatResponse(None, m.member_id, epoch), 0, 100)
        assert m.state is MemberState.UNSUBSCRIBED and not m.heartbeat_due(10**9)
