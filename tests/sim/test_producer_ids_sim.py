"""Producer id blocks (KIP-730) on the virtual clock: brokers hand out ids from blocks the
active controller gives them (the real ProducerIdBlocks and QuorumController), over a lossy
network, while the active controller is cut off and another takes over. After every event
no two committed ProducerIdsRecords overlap and no two blocks brokers took do.

Replay one seed with a trace::

    RILLET_SIM_SEED=3 RILLET_SIM_TRACE=1 python -m pytest tests/sim/test_producer_ids_sim.py -s
"""

from __future__ import annotations

import os

import pytest
from cluster import ClusterOptions, ClusterSimulation, InvariantViolation

from rillet.controller import ProducerIdsBlock, producer_ids
from rillet.controller.results import ControllerResult
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ProducerIdsRecord

SEED_COUNT = 10


def _seeds() -> list[int]:
    replay = os.environ.get("RILLET_SIM_SEED")
    return [int(replay)] if replay else list(range(SEED_COUNT))


def _sim(seed: int) -> ClusterSimulation:
    trace = print if os.environ.get("RILLET_SIM_TRACE") == "1" else None
    options = ClusterOptions(
        controllers=3, brokers=2, drop_rate=0.01 * (seed % 3), producer_ids_interval_ms=50
    )
    return ClusterSimulation(seed, options, trace=trace)


def _taken(sim: ClusterSimulation) -> int:
    return len(sim.producer_id_blocks)


@pytest.mark.parametrize("seed", _seeds())
def test_blocks_never_overlap_across_a_controller_failover(seed: int) -> None:
    sim = _sim(seed)
    sim.run_until_true(lambda: _taken(sim) >= 4, within_ms=20_000, what="blocks taken")
    active = sim.active_controller()
    assert active is not None
    sim.isolate(active.node_id)
    before = _taken(sim)
    sim.run_until_true(
        lambda: (c := sim.active_controller()) is not None and c.node_id != active.node_id,
        within_ms=10_000,
        what="another controller active",
    )
    sim.run_until_true(
        lambda: _taken(sim) >= before + 4, within_ms=20_000, what="blocks from the new controller"
    )
    sim.heal()
    sim.run_until(sim.now + 3_000)
    blocks = sim.producer_id_blocks
    assert all(b.size == 1000 for b in blocks)
    assert {b.assigned_broker_id for b in blocks} == set(sim.broker_ids)
    assert len(blocks) >= before + 4


def test_the_simulator_catches_a_block_answered_before_it_commits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = _sim(1)
    original = sim._write

    def answer_at_once(c, result, reply):  # type: ignore[no-untyped-def]
        original(c, result, None)
        if reply is not None:
            sim._send(reply)

    monkeypatch.setattr(sim, "_write", answer_at_once)
    with pytest.raises(InvariantViolation, match="never committed"):
        sim.run_until(20_000)


def test_the_simulator_catches_overlapping_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    def overlapping(
        image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> ControllerResult[ProducerIdsBlock]:
        first = max(image.producer_ids.next_producer_id - 1, 0)  # off by one
        block = ProducerIdsBlock(broker_id, first, 1000)
        return ControllerResult(
            [ProducerIdsRecord(broker_id, broker_epoch, block.next_block_first_id)], block
        )

    monkeypatch.setattr(producer_ids, "generate_next_producer_id", overlapping)
    sim = _sim(0)
    with pytest.raises(InvariantViolation, match=r"ProducerIdsRecord at \d+ gives ids from"):
        sim.run_until(20_000)
