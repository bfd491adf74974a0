"""The group coordinator on the seeded simulator (tier 4 of STYLE.md): KIP-848 and classic
members over a lossy network, members dying, leaving and restarting, topics growing, the
coordinator moving and crashing, transactional producers committing offsets in transactions
that commit, abort or are fenced. See :mod:`groups` for the world and its invariants.

Replay one seed with a trace, or soak many::

    RILLET_SIM_SEED=17 RILLET_SIM_TRACE=1 python -m pytest tests/sim/test_group_sim.py -s
    RILLET_SIM_SEEDS=3000 python -m pytest tests/sim/test_group_sim.py -q
    RILLET_SIM_FIRST_SEED=1000 RILLET_SIM_SEEDS=2000 python -m pytest tests/sim/test_group_sim.py -q
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from groups import GroupSimulation

from rillet.coordinator.group import reconciliation, records
from rillet.coordinator.group.offsets import OffsetManager
from rillet.coordinator.group.state import ShardState

SEED_COUNT = 300


def _seeds() -> list[int]:
    replay = os.environ.get("RILLET_SIM_SEED")
    if replay:
        return [int(replay)]
    first = int(os.environ.get("RILLET_SIM_FIRST_SEED", "0"))
    return list(range(first, first + int(os.environ.get("RILLET_SIM_SEEDS", SEED_COUNT))))


def _run(seed: int, sim: GroupSimulation | None = None) -> GroupSimulation:
    trace = print if os.environ.get("RILLET_SIM_TRACE") == "1" else None
    sim = sim or GroupSimulation(seed, trace=trace)
    try:
        sim.run()
    except AssertionError as e:
        raise AssertionError(
            f"{sim.summary()}\n{type(e).__name__}: {e}\n"
            f"replay: RILLET_SIM_SEED={seed} RILLET_SIM_TRACE=1 "
            "python -m pytest tests/sim/test_group_sim.py -s\n"
            f"last events:\n{sim.recent_history()}"
        ) from e
    return sim


@pytest.mark.parametrize("seed", _seeds())
def test_groups_stay_safe_under_faults_and_converge_after(seed: int) -> None:
    sim = _run(seed)
    assert sim.coordinator.committed, sim.summary()


def test_a_seed_replays_identically() -> None:
    first, second = _run(5), _run(5)
    assert first.recent_history() == second.recent_history()
    assert first.coordinator.committed == second.coordinator.committed


def test_transactions_commit_abort_and_fence_zombies() -> None:
    """The seeds exercise what the transactional invariants are about."""
    refused = commits = aborts = 0
    for seed in range(10):
        history: list[str] = []
        sim = _run(seed, GroupSimulation(seed, trace=history.append))
        commits += sum(sim.invariants.decisions.values())
        aborts += sum(not ok for ok in sim.invariants.decisions.values())
        refused += sum("refuses producer" in line for line in history)
    assert commits > 100 and aborts > 50 and refused > 0, (commits, aborts, refused)


# The checker has teeth: with a planted bug the simulation must fail.


def _first_failure(seeds: int) -> str | None:
    for seed in range(seeds):
        try:
            GroupSimulation(seed).run()
        except AssertionError as e:
            return str(e)
    return None


def test_the_simulation_catches_a_partition_given_before_it_is_revoked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The coordinator takes every revocation as acknowledged at once.
    monkeypatch.setattr(reconciliation, "_owns_any", lambda owned, revoked: False)
    failure = _first_failure(30)
    assert failure is not None, "a partition with two owners went unnoticed for 30 seeds"
    assert "owned by" in failure or "does not count as its" in failure


def test_the_simulation_catches_a_record_that_does_not_replay_as_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Written records lose the partitions pending revocation (the live shard keeps them).
    encode = records.CoordinatorRecord.value_bytes

    def lossy(self: records.CoordinatorRecord) -> bytes | None:
        value = self.value
        if isinstance(value, records.ConsumerGroupCurrentMemberAssignmentValue):
            value = dataclasses.replace(value, partitions_pending_revocation=())
        return encode(records.CoordinatorRecord(self.key, value))

    monkeypatch.setattr(records.CoordinatorRecord, "value_bytes", lossy)
    failure = _first_failure(30)
    assert failure is not None and "rebuilt from the committed records" in failure


def test_the_simulation_catches_commits_from_stale_members(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Any member may commit for any partition, whatever its epoch.
    monkeypatch.setattr(OffsetManager, "_validate_commit", lambda self, group, request: None)
    failure = _first_failure(60)
    assert failure is not None and "went back" in failure


def test_the_simulation_catches_transactional_offsets_committed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Offsets of a transactional batch are taken as committed, not pending.
    replay = ShardState.replay
    monkeypatch.setattr(
        ShardState, "replay", lambda self, record, producer_id=-1: replay(self, record)
    )
    failure = _first_failure(10)
    assert failure is not None and "transaction not committed" in failure


def test_the_simulation_catches_a_commit_marker_that_drops_the_offsets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    end = ShardState.replay_end_transaction_marker
    monkeypatch.setattr(
        ShardState,
        "replay_end_transaction_marker",
        lambda self, producer_id, committed: end(self, producer_id, False),
    )
    failure = _first_failure(10)
    assert failure is not None and "not the log's" in failure


def test_the_simulation_catches_a_refused_write_left_in_the_shard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A zombie's TxnOffsetCommit the log refused stays pending in the live shard.
    monkeypatch.setattr(
        ShardState, "save_transaction", lambda self, producer_id, groups=(): lambda: None
    )
    failure = _first_failure(30)
    assert failure is not None and "rebuilt from the committed records" in failure
