"""A shard rebuilt from the records a live shard wrote has the same transactional ids: after
every step of random histories of requests, marker answers, ticks and reloads, in both record
versions. DescribeTransactions and ListTransactions are checked here too, since they show
that state."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_txn_harness import BAR0, FOO0, FOO1, TxnHarness, persisted_view

from rillet.coordinator.transaction import (
    TransactionCoordinatorConfig,
    TransactionCoordinatorShard,
    TransactionState,
)
from rillet.errors import (
    CoordinatorLoadInProgressError,
    InvalidRequestError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    TransactionalIdNotFoundError,
)
from rillet.types import TopicPartition

S = TransactionState
IDS = ("a", "b", "c")
PARTITIONS = (FOO0, FOO1, BAR0)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("init"), st.sampled_from(IDS), st.booleans()),
        st.tuples(st.just("add"), st.sampled_from(IDS), st.sets(st.sampled_from(PARTITIONS))),
        st.tuples(st.just("end"), st.sampled_from(IDS), st.booleans()),
        st.tuples(st.just("ack"), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("tick"), st.sampled_from([0, 5_000, 70_000, 700_000_000]), st.none()),
        st.tuples(st.just("reload"), st.none(), st.none()),
    ),
    max_size=40,
)


def _run(h: TxnHarness, ops: list[tuple[str, Any, Any]], check: Any) -> None:
    producers: dict[str, tuple[int, int]] = {}
    for kind, a, b in ops:
        if kind == "init":
            expected = producers.get(a, (-1, -1)) if b else (-1, -1)
            response = h.init(a, producer_id=expected[0], producer_epoch=expected[1])
            if response.error is None:
                producers[a] = (response.producer_id, response.producer_epoch)
        elif kind == "add" and a in producers:
            h.add(a, *producers[a], *sorted(b))
        elif kind == "end" and a in producers:
            h.end(a, *producers[a], committed=b)
        elif kind == "ack" and h.handed_out:
            marker = h.handed_out[a % len(h.handed_out)]
            errors: dict[TopicPartition, Any] = dict.fromkeys(marker.partitions)
            if b and marker.partitions:
                errors[marker.partitions[0]] = NotLeaderOrFollowerError()
            h.ack(marker, errors)
        elif kind == "tick":
            h.tick(a)
        elif kind == "reload":
            h.load(h.shard.coordinator_epoch + 1)
        check(h)


def _same_as_replayed(h: TxnHarness, drop: tuple[str, ...] = ()) -> None:
    def view(shard: TransactionCoordinatorShard) -> dict[str, Any]:
        return {
            tid: {k: v for k, v in fields.items() if k not in drop}
            for tid, fields in persisted_view(shard).items()
        }

    assert view(h.new_shard(0)) == view(h.shard)


@settings(deadline=None, max_examples=150)
@given(OPS)
def test_a_replayed_shard_equals_the_live_one(ops: list[tuple[str, Any, Any]]) -> None:
    _run(TxnHarness(), ops, _same_as_replayed)


@settings(deadline=None, max_examples=50)
@given(OPS)
def test_with_version_0_records_only_the_tagged_fields_are_lost(
    ops: list[tuple[str, Any, Any]],
) -> None:
    config = TransactionCoordinatorConfig(
        transaction_state_log_num_partitions=1, transaction_version=0
    )
    tagged = ("previous_producer_id", "next_producer_id", "client_transaction_version")
    _run(TxnHarness(config=config), ops, lambda h: _same_as_replayed(h, tagged))


def test_a_whole_transaction_replays_step_by_step() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0, BAR0)
    _same_as_replayed(h)
    h.end("t", pid, epoch)
    _same_as_replayed(h)
    h.ack()
    _same_as_replayed(h)
    assert h.new_shard(0).state.get("t") is not None
    assert h.new_shard(0).state.transactions["t"].state is S.COMPLETE_COMMIT


def test_describe_transactions_shows_each_id_or_its_error() -> None:
    h = TxnHarness()
    pid, epoch = h.begin("t", FOO0, BAR0)
    described = h.shard.describe_transactions(["t", "nobody", ""]).response
    assert described is not None
    t, nobody, empty = described
    assert t.error is None and t.transaction_state == "Ongoing"
    assert (t.producer_id, t.producer_epoch, t.transaction_timeout_ms) == (pid, epoch, 60_000)
    assert t.transaction_start_time_ms == h.now and t.topic_partitions == (BAR0, FOO0)
    assert isinstance(nobody.error, TransactionalIdNotFoundError)
    assert isinstance(empty.error, InvalidRequestError)
    loading = h.new_shard(3).describe_transactions(["t"]).response
    assert loading is not None and isinstance(loading[0].error, CoordinatorLoadInProgressError)
    config = TransactionCoordinatorConfig(transaction_state_log_num_partitions=50)
    other = TransactionCoordinatorShard(0, 0, config, producer_ids=lambda: 1)
    other.on_loaded(0)
    elsewhere = other.describe_transactions(["t"]).response
    assert elsewhere is not None and isinstance(elsewhere[0].error, NotCoordinatorError)


def test_list_transactions_filters_by_state_producer_id_and_duration() -> None:
    h = TxnHarness()
    h.init("empty")
    h.now += 1_000
    pid, _ = h.begin("ongoing", FOO0)
    h.now += 1_000
    h.begin("young", BAR0)

    def listed(**filters: Any) -> list[tuple[str, str]]:
        response = h.shard.list_transactions(now_ms=h.now, **filters).response
        assert response is not None and response.error is None
        return [(t.transactional_id, t.transaction_state) for t in response.transaction_states]

    everything = [("empty", "Empty"), ("ongoing", "Ongoing"), ("young", "Ongoing")]
    assert listed() == everything
    assert listed(state_filters=["Ongoing"]) == everything[1:]
    assert listed(producer_id_filters=[pid]) == [("ongoing", "Ongoing")]
    # Started more than 500 ms ago (an Empty id's start is -1: long ago).
    assert listed(duration_filter_ms=500) == everything[:2]
    response = h.shard.list_transactions(["Ongoing", "Bogus"], now_ms=h.now).response
    assert response is not None and response.unknown_state_filters == ("Bogus",)
    loading = h.new_shard(3).list_transactions(now_ms=h.now).response
    assert loading is not None and isinstance(loading.error, CoordinatorLoadInProgressError)


@pytest.mark.parametrize("version", [0, 1])
def test_records_are_written_at_the_configured_version(version: int) -> None:
    config = TransactionCoordinatorConfig(
        transaction_state_log_num_partitions=1, transaction_version=version
    )
    h = TxnHarness(config=config)
    h.init("t")
    assert [r.version for r in h.last.records] == [version]
    assert h.log[-1][1] is not None and h.log[-1][1][:2] == version.to_bytes(2, "big")
