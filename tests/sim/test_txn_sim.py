"""The transaction coordinator on the seeded simulator (tier 4 of STYLE.md): transactional
producers and zombies, partition leaders that verify (KIP-890) and write markers, a lossy
network with late and duplicated answers, leaders refusing markers, the coordinator's clock
jumping, and the coordinator moving and crashing. See :mod:`txns` for the world and its
invariants.

Replay one seed with a trace, or soak many::

    RILLET_SIM_SEED=17 RILLET_SIM_TRACE=1 python -m pytest tests/sim/test_txn_sim.py -s
    RILLET_SIM_SEEDS=5000 python -m pytest tests/sim/test_txn_sim.py -q
    RILLET_SIM_FIRST_SEED=1000 RILLET_SIM_SEEDS=2000 python -m pytest tests/sim/test_txn_sim.py -q
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from txns import TxnSimulation

from rillet.coordinator.transaction import coordinator, records, shard
from rillet.coordinator.transaction.results import CoordinatorResult

SEED_COUNT = 500


def _seeds() -> list[int]:
    replay = os.environ.get("RILLET_SIM_SEED")
    if replay:
        return [int(replay)]
    first = int(os.environ.get("RILLET_SIM_FIRST_SEED", "0"))
    return list(range(first, first + int(os.environ.get("RILLET_SIM_SEEDS", SEED_COUNT))))


def _run(seed: int) -> TxnSimulation:
    trace = print if os.environ.get("RILLET_SIM_TRACE") == "1" else None
    sim = TxnSimulation(seed, trace=trace)
    try:
        sim.run()
    except AssertionError as e:
        raise AssertionError(
            f"{sim.summary()}\n{type(e).__name__}: {e}\n"
            f"replay: RILLET_SIM_SEED={seed} RILLET_SIM_TRACE=1 "
            "python -m pytest tests/sim/test_txn_sim.py -s\n"
            f"last events:\n{sim.recent_history()}"
        ) from e
    return sim


@pytest.mark.parametrize("seed", _seeds())
def test_transactions_stay_safe_under_faults_and_complete_after(seed: int) -> None:
    sim = _run(seed)
    assert sum(sim.invariants.spans.values()) > 0, sim.summary()


def test_a_seed_replays_identically() -> None:
    first, second = _run(5), _run(5)
    assert first.recent_history() == second.recent_history()
    assert first.coordinator.committed == second.coordinator.committed


# The checker has teeth: with a planted bug the simulation must fail.


def _first_failure(seeds: int) -> str | None:
    for seed in range(seeds):
        try:
            TxnSimulation(seed).run()
        except AssertionError as e:
            return str(e)
    return None


def test_the_simulation_catches_a_fenced_producer_let_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # AddPartitionsToTxn and its verification take any epoch of the current producer id.
    current = coordinator.TransactionCoordinator._current

    def any_epoch(
        self: coordinator.TransactionCoordinator, tid: str, producer_id: int, epoch: int
    ) -> object:
        metadata = self.state.get(tid)
        if metadata is not None and metadata.producer_id == producer_id:
            epoch = metadata.producer_epoch
        return current(self, tid, producer_id, epoch)

    monkeypatch.setattr(coordinator.TransactionCoordinator, "_current", any_epoch)
    failure = _first_failure(30)
    assert failure is not None, "a fenced producer's requests went unnoticed for 30 seeds"
    assert "got a success for" in failure or "writes into" in failure


def test_the_simulation_catches_a_verification_that_lets_any_partition_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verify = coordinator.TransactionCoordinator.handle_verify_partitions

    def yes(self: coordinator.TransactionCoordinator, request: object) -> object:
        answer = verify(self, request)  # type: ignore[arg-type]
        return dataclasses.replace(answer, errors=dict.fromkeys(answer.errors))

    monkeypatch.setattr(coordinator.TransactionCoordinator, "handle_verify_partitions", yes)
    failure = _first_failure(30)
    assert failure is not None and ("writes into" in failure or "liveness" in failure)


def test_the_simulation_catches_a_record_that_does_not_replay_as_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Written records keep only the first topic of a transaction (the live shard has all).
    encode = records.TransactionRecord.value_bytes

    def lossy(self: records.TransactionRecord) -> bytes | None:
        value = self.value
        if value is not None and value.transaction_partitions:
            value = dataclasses.replace(
                value, transaction_partitions=value.transaction_partitions[:1]
            )
        return encode(records.TransactionRecord(self.key, value, self.version))

    monkeypatch.setattr(records.TransactionRecord, "value_bytes", lossy)
    failure = _first_failure(30)
    assert failure is not None and "rebuilt from the committed records" in failure


def test_the_simulation_catches_a_loaded_shard_that_forgets_its_markers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load = shard.TransactionCoordinatorShard.on_loaded

    def forgetful(self: shard.TransactionCoordinatorShard, now_ms: int) -> CoordinatorResult[None]:
        load(self, now_ms)
        self._markers.pending.clear()
        return CoordinatorResult()

    monkeypatch.setattr(shard.TransactionCoordinatorShard, "on_loaded", forgetful)
    failure = _first_failure(30)
    assert failure is not None and "liveness" in failure


def test_the_simulation_catches_markers_counted_written_when_they_were_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rillet.coordinator.transaction import markers

    monkeypatch.setattr(markers, "_RETRY", frozenset())
    monkeypatch.setattr(markers, "_DROP", markers._DROP | {"NOT_LEADER_OR_FOLLOWER"})
    failure = _first_failure(30)
    assert failure is not None
    assert "writes into" in failure or "closes" in failure or "liveness" in failure
