"""Seeded simulation of the quorum under faults (tier 4 of STYLE.md; tigerbeetle's VOPR, Kafka's
RaftEventSimulationTest).

Each seed draws a world (3 or 5 voters, 1-2 observers, a fault mix, pre-vote and check quorum
on or off), runs a fault phase with invariants checked after every event, heals, and requires
that a leader is elected and a new entry committed on every node within bounded virtual time.

Replay one seed, with every message printed; or soak many seeds::

    RILLET_SIM_SEED=17 RILLET_SIM_TRACE=1 python -m pytest tests/sim/test_simulation.py -s
    RILLET_SIM_SEEDS=5000 python -m pytest tests/sim/test_simulation.py -q
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from simulator import InvariantViolation, SimOptions, Simulation

from rillet.raft import ElectionState, LeaderState, VotedState

SEED_COUNT = 50


def _seeds() -> list[int]:
    replay = os.environ.get("RILLET_SIM_SEED")
    if replay:
        return [int(replay)]
    return list(range(int(os.environ.get("RILLET_SIM_SEEDS", SEED_COUNT))))


def _run(seed: int) -> Simulation:
    trace = print if os.environ.get("RILLET_SIM_TRACE") == "1" else None
    sim = Simulation(seed, trace=trace)
    try:
        sim.run()
    except Exception as e:
        raise AssertionError(
            f"{sim.summary()}\n{type(e).__name__}: {e}\n"
            f"replay: RILLET_SIM_SEED={seed} RILLET_SIM_TRACE=1 "
            f"python -m pytest tests/sim/test_simulation.py -s\n"
            f"last events:\n{sim.recent_history()}"
        ) from e
    return sim


@pytest.mark.parametrize("seed", _seeds())
def test_random_schedule_is_safe_and_recovers(seed: int) -> None:
    sim = _run(seed)
    # The run exercised something: leaders were elected and entries committed everywhere.
    assert sim.invariants.leader_of_epoch
    assert len(sim.invariants.committed) > 1


def test_a_seed_replays_identically() -> None:
    first, second = Simulation(3), Simulation(3)
    first.run()
    second.run()
    assert first.recent_history() == second.recent_history()
    assert first.invariants.committed == second.invariants.committed


def test_seeds_cover_both_quorum_sizes() -> None:
    sizes = {SimOptions.for_seed(seed).voters for seed in range(SEED_COUNT)}
    assert sizes == {3, 5}


# The checker has teeth: with a planted bug the simulation must fail.


def test_the_simulator_catches_a_leader_that_commits_without_a_majority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        LeaderState,
        "majority_end_offset",
        lambda self: max(s.log_end_offset for s in self.voter_states.values()),
    )
    with pytest.raises(InvariantViolation, match="durable only on"):
        Simulation(0).run()


def test_the_simulator_catches_a_vote_that_is_not_persisted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(VotedState, "election", lambda self: ElectionState(self.epoch, None, None))
    for seed in range(60):
        # Real elections only, and every voter crashes right after it votes.
        options = SimOptions.for_seed(seed)
        options = replace(
            options, crash_after_vote_rate=1.0, raft=replace(options.raft, pre_vote=False)
        )
        try:
            Simulation(seed, options).run()
        except InvariantViolation as e:
            assert "voted for" in str(e) or "two leaders" in str(e)
            return
    pytest.fail("a forgotten vote went unnoticed for 60 seeds")
