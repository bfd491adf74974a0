"""Incremental fetch sessions (``rillet.server.kafka.fetch_sessions``, KIP-227) as pure logic:
session epochs and errors, full and incremental contexts, forgotten partitions by name and by
topic id, which partitions an incremental answer carries, and the cache's eviction rules
(Kafka's ``FetchSessionTest`` cases, with time passed in)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rillet.config import BrokerConfig
from rillet.errors import (
    FetchSessionIdNotFoundError,
    FetchSessionTopicIdError,
    InvalidConfigurationError,
    InvalidFetchSessionEpochError,
)
from rillet.server.kafka.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchAnswer,
    FetchContext,
    FetchSessionCache,
    FullContext,
    IncrementalContext,
    PartitionRequest,
    PartitionResult,
    SessionErrorContext,
    SessionlessContext,
    TopicIdPartition,
    next_epoch,
)

ZERO = uuid.UUID(int=0)
FOO_ID = uuid.UUID(int=0xF00)
BAR_ID = uuid.UUID(int=0xBA7)
NAMES = {FOO_ID: "foo", BAR_ID: "bar"}


def named(topic: str, partition: int) -> TopicIdPartition:
    return TopicIdPartition(ZERO, topic, partition)


def by_id(topic_id: uuid.UUID, partition: int) -> TopicIdPartition:
    return TopicIdPartition(topic_id, NAMES.get(topic_id), partition)


def req(offset: int, max_bytes: int = 1000, leader_epoch: int = -1) -> PartitionRequest:
    return PartitionRequest(offset, max_bytes, current_leader_epoch=leader_epoch)


def ok(hw: int = 10, size: int = 0, lso: int = 10, log_start: int = 0) -> PartitionResult:
    return PartitionResult(0, hw, lso, log_start, size)


def cache(slots: int = 10, seed: int = 7) -> FetchSessionCache:
    return FetchSessionCache(slots, rng=random.Random(seed))


def context(
    c: FetchSessionCache,
    session_id: int,
    epoch: int,
    fetch_data: Mapping[TopicIdPartition, PartitionRequest] | None = None,
    forget: Sequence[TopicIdPartition] = (),
    *,
    version: int = 12,
    privileged: bool = False,
    now: int = 0,
    names: Mapping[uuid.UUID, str] = NAMES,
) -> FetchContext:
    return c.new_context(
        version, session_id, epoch, privileged, fetch_data or {}, forget, names.get, now
    )


def respond(
    ctx: FetchContext, results: Mapping[TopicIdPartition, PartitionResult], now: int = 0
) -> FetchAnswer:
    """Answer ``ctx``'s partitions with ``results`` (a partition not in them: unchanged
    since the full fetch, ``ok()``)."""
    return ctx.respond([(tp, results.get(tp, ok())) for tp, _ in ctx.partitions()], now)


def create(
    c: FetchSessionCache,
    partitions: Sequence[TopicIdPartition],
    *,
    now: int = 0,
    privileged: bool = False,
    version: int = 12,
) -> int:
    """A new session of ``partitions`` (each answered ``ok()``): its id (0 if refused)."""
    ctx = context(
        c,
        INVALID_SESSION_ID,
        INITIAL_EPOCH,
        {tp: req(0) for tp in partitions},
        version=version,
        privileged=privileged,
        now=now,
    )
    assert isinstance(ctx, FullContext)
    return respond(ctx, {}, now).session_id


# -- epochs and partition identity --------------------------------------------------------------


def test_next_epoch_is_kafkas() -> None:
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(0x7FFF_FFFF) == 1  # wraps past INITIAL_EPOCH


def test_a_partition_is_its_id_when_it_has_one_else_its_name() -> None:
    assert TopicIdPartition(FOO_ID, None, 0) == TopicIdPartition(FOO_ID, "foo", 0)
    assert hash(TopicIdPartition(FOO_ID, None, 0)) == hash(TopicIdPartition(FOO_ID, "foo", 0))
    assert TopicIdPartition(FOO_ID, "foo", 0) != TopicIdPartition(BAR_ID, "foo", 0)
    assert TopicIdPartition(FOO_ID, "foo", 0) != TopicIdPartition(FOO_ID, "foo", 1)
    assert named("foo", 0) == named("foo", 0) != named("bar", 0)
    assert {named("foo", 0): 1}.get(TopicIdPartition(ZERO, "foo", 0)) == 1


# -- sessionless and full fetches --------------------------------------------------------------


def test_a_sessionless_fetch_answers_every_partition_and_keeps_nothing() -> None:
    c = cache()
    data = {named("foo", 1): req(5), named("bar", 0): req(7)}
    ctx = context(c, INVALID_SESSION_ID, FINAL_EPOCH, data)
    assert isinstance(ctx, SessionlessContext)
    assert ctx.partitions() == list(data.items())
    answer = respond(ctx, {})
    assert answer == FetchAnswer(0, INVALID_SESSION_ID, [named("foo", 1), named("bar", 0)])
    assert len(c) == 0


def test_a_full_fetch_creates_a_session_at_epoch_one_with_what_it_answered() -> None:
    c = cache()
    data = {named("foo", 0): req(5, 100, leader_epoch=3), named("foo", 1): req(7)}
    ctx = context(c, INVALID_SESSION_ID, INITIAL_EPOCH, data, now=50)
    answer = respond(ctx, {named("foo", 0): ok(hw=9, lso=8, log_start=2)}, now=60)
    assert answer.error_code == 0 and answer.session_id > 0
    assert answer.partitions == list(data)
    session = c.get(answer.session_id)
    assert session is not None
    assert (session.epoch, session.creation_ms, session.last_used_ms) == (1, 60, 60)
    assert not session.privileged and not session.uses_topic_ids
    cached = session.partitions[named("foo", 0)]
    assert cached.request == req(5, 100, leader_epoch=3)
    assert (cached.high_watermark, cached.last_stable_offset, cached.local_log_start_offset) == (
        9,
        8,
        2,
    )
    assert (len(c), c.total_partitions) == (1, 2)


def test_a_full_fetch_naming_a_session_closes_it_and_initial_epoch_makes_a_new_one() -> None:
    c = cache()
    first = create(c, [named("foo", 0)])
    ctx = context(c, first, INITIAL_EPOCH, {named("bar", 0): req(0)})
    assert first not in c  # closed before the fetch
    second = respond(ctx, {}).session_id
    assert second not in (first, INVALID_SESSION_ID)
    session = c.get(second)
    assert session is not None and list(session.partitions) == [named("bar", 0)]
    # FINAL_EPOCH with a session id closes it and fetches sessionless.
    ctx = context(c, second, FINAL_EPOCH, {named("bar", 0): req(3)})
    assert isinstance(ctx, SessionlessContext)
    assert respond(ctx, {}).session_id == INVALID_SESSION_ID
    assert (len(c), c.total_partitions) == (0, 0)


def test_closing_a_session_that_is_gone_is_a_plain_full_fetch() -> None:
    c = cache()
    ctx = context(c, 12345, FINAL_EPOCH, {named("foo", 0): req(0)})
    assert respond(ctx, {}) == FetchAnswer(0, INVALID_SESSION_ID, [named("foo", 0)])


# -- incremental fetches ----------------------------------------------------------------------


def test_an_incremental_fetch_adds_updates_and_fetches_every_session_partition() -> None:
    c = cache()
    sid = create(c, [named("foo", 0), named("foo", 1)])
    ctx = context(c, sid, 1, {named("foo", 1): req(40, 500), named("bar", 0): req(3)}, now=9)
    assert isinstance(ctx, IncrementalContext)
    assert ctx.partitions() == [
        (named("foo", 0), req(0)),
        (named("foo", 1), req(40, 500)),
        (named("bar", 0), req(3)),
    ]
    session = c.get(sid)
    assert session is not None
    assert (session.epoch, session.last_used_ms, c.total_partitions) == (2, 9, 3)
    # The new partition had no answer yet: it is answered whatever it says.
    answer = respond(ctx, {})
    assert answer == FetchAnswer(0, sid, [named("bar", 0)])
    # The next epoch: nothing changed, nothing answered.
    assert respond(context(c, sid, 2), {}) == FetchAnswer(0, sid, [])


def test_an_incremental_answer_carries_only_partitions_with_news() -> None:
    c = cache()
    parts = [named("foo", p) for p in range(6)]
    sid = create(c, parts)
    news = {
        parts[1]: ok(size=100),  # records (the high watermark is unchanged)
        parts[2]: ok(hw=11),
        parts[3]: ok(lso=9),
        parts[4]: ok(log_start=4),
        parts[5]: PartitionResult(0, 10, 10, 0, 0, diverging=True),
    }
    assert respond(context(c, sid, 1), news).partitions == parts[1:]
    # What was news is remembered: only records and a diverging epoch come again.
    again = respond(context(c, sid, 2), news).partitions
    assert again == [parts[5], parts[1]]  # parts[1] moved to the end after its records


def test_a_partition_with_records_moves_to_the_end_of_the_fetch_order() -> None:
    c = cache()
    parts = [named("foo", p) for p in range(3)]
    sid = create(c, parts)
    respond(context(c, sid, 1), {parts[0]: ok(size=10)})
    ctx = context(c, sid, 2)
    assert [tp for tp, _ in ctx.partitions()] == [parts[1], parts[2], parts[0]]


def test_an_error_is_answered_every_time_and_its_end_once_more() -> None:
    c = cache()
    tp = named("foo", 0)
    sid = create(c, [tp, named("foo", 1)])
    failed = PartitionResult(6, 10, 10, 0)  # NOT_LEADER_OR_FOLLOWER, same offsets
    for epoch in (1, 2):
        assert respond(context(c, sid, epoch), {tp: failed}).partitions == [tp]
    # The error is gone, the offsets are what they were: answered, since the error reset
    # the cached high watermark.
    assert respond(context(c, sid, 3), {tp: ok()}).partitions == [tp]
    assert respond(context(c, sid, 4), {tp: ok()}).partitions == []


def test_forgotten_partitions_leave_the_session_and_an_empty_one_closes() -> None:
    c = cache()
    sid = create(c, [named("foo", 0), named("foo", 1)])
    ctx = context(c, sid, 1, forget=[named("foo", 0), named("bar", 9)])
    assert [tp for tp, _ in ctx.partitions()] == [named("foo", 1)]
    assert c.total_partitions == 1
    respond(ctx, {})
    # Forgetting the last one closes the session: answered sessionless.
    ctx = context(c, sid, 2, forget=[named("foo", 1)])
    assert isinstance(ctx, SessionlessContext)
    assert respond(ctx, {}) == FetchAnswer(0, INVALID_SESSION_ID, [])
    assert sid not in c and c.total_partitions == 0


def test_a_partition_both_sent_and_forgotten_is_forgotten() -> None:
    c = cache()
    sid = create(c, [named("foo", 0), named("foo", 1)])
    ctx = context(c, sid, 1, {named("bar", 0): req(1)}, forget=[named("bar", 0)])
    assert [tp for tp, _ in ctx.partitions()] == [named("foo", 0), named("foo", 1)]


def test_sessions_by_topic_id_forget_by_id_and_learn_unknown_names() -> None:
    c = cache()
    new_id = uuid.UUID(int=0xD0E)
    unknown = TopicIdPartition(new_id, None, 0)
    sid = create(c, [by_id(FOO_ID, 0), by_id(BAR_ID, 0), unknown], version=13)
    session = c.get(sid)
    assert session is not None and session.uses_topic_ids
    # Forgotten by id (the request does not know the name either), and the unknown id's
    # name is learned once the metadata has it.
    ctx = context(
        c,
        sid,
        1,
        forget=[TopicIdPartition(BAR_ID, None, 0)],
        version=13,
        names={**NAMES, new_id: "new"},
    )
    assert [(tp.topic_id, tp.topic) for tp, _ in ctx.partitions()] == [
        (FOO_ID, "foo"),
        (new_id, "new"),
    ]


# -- session errors ---------------------------------------------------------------------------


def test_an_unknown_session_is_fetch_session_id_not_found() -> None:
    c = cache()
    ctx = context(c, 999, 1, {named("foo", 0): req(0)})
    assert isinstance(ctx, SessionErrorContext)
    assert ctx.partitions() == []
    assert respond(ctx, {}) == FetchAnswer(FetchSessionIdNotFoundError.code, 0, [])


def test_a_wrong_epoch_is_invalid_and_leaves_the_session_as_it_was() -> None:
    c = cache()
    sid = create(c, [named("foo", 0)])
    for wrong in (2, 7, -5):
        ctx = context(c, sid, wrong, {named("bar", 0): req(0)}, now=100)
        assert respond(ctx, {}) == FetchAnswer(InvalidFetchSessionEpochError.code, 0, [])
    session = c.get(sid)
    assert session is not None
    assert (session.epoch, session.last_used_ms, list(session.partitions)) == (
        1,
        0,
        [named("foo", 0)],
    )
    assert respond(context(c, sid, 1), {}).error_code == 0


def test_a_session_keeps_to_names_or_to_topic_ids() -> None:
    c = cache()
    names_session = create(c, [named("foo", 0)], version=12)
    ids_session = create(c, [by_id(FOO_ID, 0)], version=13)
    for sid, version in ((names_session, 13), (ids_session, 12)):
        ctx = context(c, sid, 1, version=version)
        assert respond(ctx, {}) == FetchAnswer(FetchSessionTopicIdError.code, 0, [])
    assert respond(context(c, ids_session, 1, version=17), {}).error_code == 0


def test_a_duplicate_request_is_answered_invalid_epoch_when_another_took_its_epoch() -> None:
    c = cache()
    sid = create(c, [named("foo", 0)])
    slow = context(c, sid, 1)  # e.g. waiting in a long poll...
    fast = context(c, sid, 2)  # ...while the client has moved on
    assert respond(slow, {}) == FetchAnswer(InvalidFetchSessionEpochError.code, sid, [])
    assert respond(fast, {named("foo", 0): ok(hw=20)}).partitions == [named("foo", 0)]


# -- the cache --------------------------------------------------------------------------------


def test_no_slots_means_every_fetch_is_sessionless() -> None:
    c = cache(slots=0)
    assert create(c, [named("foo", 0)]) == INVALID_SESSION_ID
    assert len(c) == 0


def test_a_full_cache_refuses_a_session_while_every_one_is_fresh() -> None:
    c = cache(slots=2)
    a, b = create(c, [named("a", 0)]), create(c, [named("b", 0)], now=10)
    assert create(c, [named("c", p) for p in range(9)], now=20) == INVALID_SESSION_ID
    assert (a in c, b in c, c.evictions) == (True, True, 0)


def test_a_stale_session_is_evicted_by_anyone() -> None:
    c = cache(slots=2)
    a = create(c, [named("a", p) for p in range(9)], now=0, privileged=True)
    b = create(c, [named("b", 0)], now=1000)
    later = EVICTION_MS + 1  # a, last used at 0, is stale; b is not
    new = create(c, [named("c", 0)], now=later)
    assert new != INVALID_SESSION_ID
    assert (a in c, b in c, new in c, c.evictions) == (False, True, True, 1)
    assert c.total_partitions == 2


def test_a_privileged_session_evicts_the_smallest_unprivileged_one() -> None:
    c = cache(slots=3)
    big = create(c, [named("a", p) for p in range(3)], now=0)
    small = create(c, [named("b", 0)], now=1)
    follower = create(c, [named("c", 0)], now=2, privileged=True)
    replica = create(c, [named("d", 0)], now=3, privileged=True)
    assert replica != INVALID_SESSION_ID
    assert (big in c, small in c, follower in c) == (True, False, True)
    # Another follower: evicts the unprivileged one, whatever its size; then no more.
    assert create(c, [named("e", 0)], now=4, privileged=True) != INVALID_SESSION_ID
    assert big not in c
    assert create(c, [named("f", p) for p in range(50)], now=5, privileged=True) == 0
    assert c.evictions == 2


def test_an_old_session_may_be_evicted_by_a_larger_one_only() -> None:
    c = cache(slots=1)
    old = create(c, [named("a", 0), named("a", 1)], now=0)
    # Used recently (not stale), and older than EVICTION_MS as of that use.
    respond(context(c, old, 1, now=EVICTION_MS + 10), {})
    now = EVICTION_MS + 20
    assert create(c, [named("b", 0), named("b", 1)], now=now) == INVALID_SESSION_ID
    assert old in c
    larger = create(c, [named("b", p) for p in range(3)], now=now)
    assert larger != INVALID_SESSION_ID and old not in c
    assert (c.evictions, c.total_partitions) == (1, 3)


def test_evictability_is_judged_when_a_session_is_last_used() -> None:
    """As in Kafka, a session joins the evictable ones when it is touched after it is old
    enough; its age alone does not make it evictable."""
    c = cache(slots=1)
    sid = create(c, [named("a", 0)], now=0)
    respond(context(c, sid, 1, now=100), {})  # used while young
    now = EVICTION_MS + 50  # old, but not stale (last used at 100)
    assert create(c, [named("b", p) for p in range(5)], now=now) == INVALID_SESSION_ID
    respond(context(c, sid, 2, now=now), {})  # used while old
    assert create(c, [named("b", p) for p in range(5)], now=now) != INVALID_SESSION_ID
    assert sid not in c


def test_among_evictable_sessions_the_smallest_then_lowest_id_goes() -> None:
    c = FetchSessionCache(3, rng=random.Random(1))
    ids = [create(c, [named(f"t{i}", p) for p in range(n)], now=0) for i, n in enumerate((2, 1, 1))]
    for sid in ids:
        respond(context(c, sid, 1, now=EVICTION_MS + 1), {})
    victim = min(ids[1:])  # size 1 before size 2; then by id
    assert create(c, [named("x", p) for p in range(4)], now=EVICTION_MS + 2) != 0
    assert [sid in c for sid in ids] == [sid != victim for sid in ids]


def test_session_ids_are_random_positive_and_unique() -> None:
    c = cache(slots=200, seed=3)
    ids = [create(c, [named("t", 0)]) for _ in range(200)]
    assert len(set(ids)) == 200 and all(0 < i < 2**31 for i in ids)


def test_the_cache_size_is_brokers_max_incremental_fetch_session_cache_slots() -> None:
    base = {"process.roles": "broker,controller", "node.id": "1"}
    base["controller.quorum.voters"] = "1@localhost:9093"
    assert BrokerConfig(base)["max.incremental.fetch.session.cache.slots"] == 1000
    assert (
        BrokerConfig({**base, "max.incremental.fetch.session.cache.slots": "0"})[
            "max.incremental.fetch.session.cache.slots"
        ]
        == 0
    )
    with pytest.raises(InvalidConfigurationError, match="at least 0"):
        BrokerConfig({**base, "max.incremental.fetch.session.cache.slots": "-1"})


# -- properties -------------------------------------------------------------------------------

PARTITIONS = [named(t, p) for t in ("a", "b") for p in range(3)]


@st.composite
def broker_changes(draw: st.DrawFn) -> dict[TopicIdPartition, PartitionResult]:
    """What each partition's fetch says this round: mostly the same, sometimes news."""
    out = {}
    for tp in PARTITIONS:
        out[tp] = PartitionResult(
            draw(st.sampled_from([0, 0, 0, 6])),
            draw(st.integers(0, 3)),
            draw(st.integers(0, 3)),
            draw(st.integers(0, 1)),
            draw(st.sampled_from([0, 0, 100])),
        )
    return out


@settings(max_examples=200, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(
            broker_changes(),
            st.sets(st.sampled_from(PARTITIONS)),  # to (re)send
            st.sets(st.sampled_from(PARTITIONS)),  # to forget
        ),
        min_size=1,
        max_size=12,
    )
)
def test_a_client_applying_incremental_answers_sees_what_a_full_fetch_would(
    rounds: list[
        tuple[dict[TopicIdPartition, PartitionResult], set[TopicIdPartition], set[TopicIdPartition]]
    ],
) -> None:
    """KIP-227's promise: a partition left out of an answer is unchanged since the client
    last saw it. A client keeps what each answer said per partition; after every round, for
    every partition of the session without an error, that is the round's result (so the end
    of an error is never left out), and errors and records are always answered."""
    c = cache()
    full = context(c, 0, INITIAL_EPOCH, {tp: req(0) for tp in PARTITIONS})
    seen = {tp: ok() for tp in PARTITIONS}
    sid, epoch = respond(full, seen).session_id, 1
    session_parts = set(PARTITIONS)
    for results, send, forget in rounds:
        ctx = context(c, sid, epoch, {tp: req(1) for tp in send}, forget=list(forget))
        if isinstance(ctx, SessionlessContext):  # everything was forgotten
            assert not (session_parts | send) - forget
            return
        assert isinstance(ctx, IncrementalContext)
        session_parts = (session_parts | send) - forget
        fetched = [tp for tp, _ in ctx.partitions()]
        assert set(fetched) == session_parts
        answer = respond(ctx, results)
        assert answer.error_code == 0 and answer.session_id == sid
        for tp in answer.partitions:
            seen[tp] = results[tp]
        for tp in session_parts:
            got, now = seen[tp], results[tp]
            if now.error_code != 0 or now.records_size > 0:
                assert tp in answer.partitions
            if now.error_code == 0:  # the client knows the partition as it is now
                assert (
                    got.error_code,
                    got.high_watermark,
                    got.last_stable_offset,
                    got.log_start_offset,
                ) == (0, now.high_watermark, now.last_stable_offset, now.log_start_offset), tp
        epoch = next_epoch(epoch)


@settings(max_examples=100, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.integers(0, 3),  # full fetch, incremental, close, time passes
            st.integers(0, 5),  # partitions / which session
            st.booleans(),  # privileged
            st.integers(0, EVICTION_MS),  # time step
        ),
        max_size=60,
    )
)
def test_the_cache_never_overflows_and_counts_its_partitions(
    ops: list[tuple[int, int, bool, int]],
) -> None:
    c = FetchSessionCache(3, rng=random.Random(0))
    now = 0
    epochs: dict[int, int] = {}
    for op, n, privileged, step in ops:
        now += step
        if op == 0:
            sid = create(c, [named("t", p) for p in range(n)], now=now, privileged=privileged)
            if sid:
                epochs[sid] = 1
        elif epochs and op in (1, 2):
            sid = sorted(epochs)[n % len(epochs)]
            if op == 1:
                ctx = context(c, sid, epochs[sid], {named("u", n): req(0)}, now=now)
                assert isinstance(ctx, IncrementalContext)
                epochs[sid] = next_epoch(epochs[sid])
                assert respond(ctx, {}, now).session_id == sid
            else:
                context(c, sid, FINAL_EPOCH, now=now)
                del epochs[sid]
        epochs = {sid: e for sid, e in epochs.items() if sid in c}
        assert len(c) <= 3
        sessions = [c.get(sid) for sid in epochs]
        assert c.total_partitions == sum(len(s) for s in sessions if s is not None)
        assert len(epochs) == len(c)
