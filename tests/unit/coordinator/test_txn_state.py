"""TransactionState's legal transitions (Kafka's ``validPreviousStates``), TransactionMetadata
refusing any other loudly, the config with Kafka's keys and defaults, ``partition_for``, and
the version-dependent PRODUCER_FENCED."""

from __future__ import annotations

import pytest

from rillet.coordinator.group import partition_for as group_partition_for
from rillet.coordinator.transaction import (
    TransactionCoordinatorConfig,
    TransactionMetadata,
    TransactionState,
    error_for_version,
    partition_for,
)
from rillet.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    ProducerFencedError,
)
from rillet.types import TopicPartition

S = TransactionState

KAFKA_VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_states_have_kafkas_ids_names_and_previous_states() -> None:
    names = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    assert [(s.id, str(s)) for s in S] == list(enumerate(names))
    for state, previous in KAFKA_VALID_PREVIOUS.items():
        assert state.valid_previous_states == previous
        assert S.from_id(state.id) is state and S.from_name(str(state)) is state
    assert {s for s in S if s.is_expiration_allowed} == {
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    }
    assert S.from_name("Nope") is None
    with pytest.raises(IllegalStateError):
        S.from_id(8)


def metadata(state: TransactionState, epoch: int = 3) -> TransactionMetadata:
    partitions = frozenset() if state is S.EMPTY else frozenset({TopicPartition("t", 0)})
    if state.is_complete:
        partitions = frozenset()
    return TransactionMetadata(
        "tx",
        producer_id=9,
        txn_timeout_ms=1000,
        state=state,
        txn_last_update_timestamp=5,
        producer_epoch=epoch,
        topic_partitions=partitions,
        txn_start_timestamp=-1 if state is S.EMPTY else 4,
    )


_CROSSED = [{S.PREPARE_COMMIT, S.COMPLETE_ABORT}, {S.PREPARE_ABORT, S.COMPLETE_COMMIT}]


def _prepare(m: TransactionMetadata, target: TransactionState) -> object:
    if target is S.EMPTY:
        return m.prepare_increment_producer_epoch(1000, None, 10)
    if target is S.ONGOING:
        return m.prepare_add_partitions([TopicPartition("t", 1)], 10)
    if target in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return m.prepare_abort_or_commit(target, 10)
    if target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return m.prepare_complete(10)
    if target is S.DEAD:
        return m.prepare_dead()
    return m.prepare_fence_producer_epoch()


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (current, target)
        for current in S
        for target in S
        # prepare_complete takes the Complete state that matches the Prepare one
        if current is not S.DEAD and {current, target} not in _CROSSED
    ],
)
def test_every_transition_is_legal_exactly_when_kafka_allows_it(
    current: TransactionState, target: TransactionState
) -> None:
    m = metadata(current)
    if current in target.valid_previous_states:
        transit = _prepare(m, target)
        assert getattr(transit, "txn_state") is target  # noqa: B009
    else:
        with pytest.raises(IllegalStateError, match="not a valid previous state"):
            _prepare(m, target)


def test_a_fence_bumps_the_epoch_and_goes_on_to_prepare_abort_only() -> None:
    m = metadata(S.ONGOING, epoch=3)
    fence = m.prepare_fence_producer_epoch()
    assert (fence.txn_state, fence.producer_epoch, fence.last_producer_epoch) == (
        S.PREPARE_EPOCH_FENCE,
        4,
        -1,
    )
    abort = m.prepare_abort_or_commit(S.PREPARE_ABORT, 10, fence=fence)
    assert (abort.txn_state, abort.producer_epoch) == (S.PREPARE_ABORT, 4)
    with pytest.raises(IllegalStateError):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, 10, fence=fence)
    with pytest.raises(IllegalStateError, match=r"Short\.MaxValue"):
        metadata(S.ONGOING, epoch=2**15 - 1).prepare_fence_producer_epoch()


def test_epoch_bumps_follow_kip_360() -> None:
    m = metadata(S.EMPTY, epoch=3)
    assert m.prepare_increment_producer_epoch(1000, None, 10).producer_epoch == 4
    own = m.prepare_increment_producer_epoch(1000, 3, 10)
    assert (own.producer_epoch, own.last_producer_epoch) == (4, 3)
    m.apply(own)
    retry = m.prepare_increment_producer_epoch(1000, 3, 11)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)
    with pytest.raises(ProducerFencedError):
        m.prepare_increment_producer_epoch(1000, 2, 11)
    with pytest.raises(IllegalStateError, match="producer epochs"):
        metadata(S.EMPTY, epoch=2**15 - 2).prepare_increment_producer_epoch(1000, None, 10)
    rotated = metadata(S.COMPLETE_ABORT, epoch=2**15 - 2).prepare_producer_id_rotation(
        77, 1000, 10, True
    )
    assert (rotated.producer_id, rotated.previous_producer_id) == (77, 9)
    assert (rotated.producer_epoch, rotated.last_producer_epoch) == (0, 2**15 - 2)
    with pytest.raises(IllegalStateError, match="pending"):
        metadata(S.ONGOING).prepare_producer_id_rotation(77, 1000, 10, False)


def test_the_config_has_kafkas_keys_and_defaults() -> None:
    config = TransactionCoordinatorConfig()
    assert config.transaction_state_log_num_partitions == 50
    assert config.transaction_max_timeout_ms == 900_000
    assert config.transactional_id_expiration_ms == 604_800_000
    assert config.abort_timed_out_transactions_interval_ms == 10_000
    assert config.remove_expired_transactional_ids_interval_ms == 3_600_000
    assert config.transaction_log_value_version == 1
    parsed = TransactionCoordinatorConfig.from_properties(
        {
            "transaction.state.log.num.partitions": "3",
            "transaction.max.timeout.ms": 5000,
            "transactional.id.expiration.ms": "100",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "7",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "8",
            "offsets.topic.num.partitions": "4",
            "unrelated.key": "x",
        },
        transaction_version=0,
    )
    assert parsed == TransactionCoordinatorConfig(3, 5000, 100, 7, 8, 4, 0)
    assert parsed.transaction_log_value_version == 0
    with pytest.raises(ValueError, match=r"transaction\.max\.timeout\.ms"):
        TransactionCoordinatorConfig(transaction_max_timeout_ms=0)
    with pytest.raises(ValueError, match=r"transaction\.max\.timeout\.ms"):
        TransactionCoordinatorConfig(transaction_max_timeout_ms=2**31)
    with pytest.raises(ValueError, match="epoch bump per transaction"):
        TransactionCoordinatorConfig(transaction_version=2)


@pytest.mark.parametrize(
    ("transactional_id", "expected"),
    # Java: "hello".hashCode() == 99162322; "polygenelubricants" hashes to Integer.MIN_VALUE.
    [("hello", 99162322 % 50), ("polygenelubricants", 0), ("", 0)],
)
def test_partition_for_is_kafkas(transactional_id: str, expected: int) -> None:
    assert partition_for(transactional_id, 50) == expected
    assert partition_for(transactional_id, 50) == group_partition_for(transactional_id, 50)
    with pytest.raises(ValueError, match=r"transaction\.state\.log\.num\.partitions"):
        partition_for(transactional_id, 0)


def test_old_clients_get_invalid_producer_epoch_for_producer_fenced() -> None:
    fenced = ProducerFencedError("fenced")
    for api, first in (
        ("InitProducerId", 4),
        ("AddPartitionsToTxn", 2),
        ("AddOffsetsToTxn", 2),
        ("EndTxn", 2),
    ):
        assert isinstance(error_for_version(fenced, api, first - 1), InvalidProducerEpochError)
        assert error_for_version(fenced, api, first) is fenced
    assert error_for_version(None, "EndTxn", 0) is None
