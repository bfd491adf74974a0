"""The control plane on the virtual clock: a broker registers, is fenced after missing its
heartbeats, and is unfenced when they come back (KIP-631), with the controllers, the
metadata quorum and the broker's lifecycle all running under the seeded simulator.

Replay one seed with a trace::

    RILLET_SIM_SEED=3 RILLET_SIM_TRACE=1 python -m pytest tests/sim/test_broker_lifecycle.py -s
"""

from __future__ import annotations

import os

import pytest
from cluster import ClusterOptions, ClusterSimulation

from rillet.broker.lifecycle import BrokerState

SEED_COUNT = 20


def _seeds() -> list[int]:
    replay = os.environ.get("RILLET_SIM_SEED")
    return [int(replay)] if replay else list(range(SEED_COUNT))


@pytest.mark.parametrize("seed", _seeds())
def test_register_fence_on_missed_heartbeats_then_unfence(seed: int) -> None:
    trace = print if os.environ.get("RILLET_SIM_TRACE") == "1" else None
    options = ClusterOptions(controllers=1 if seed % 4 == 0 else 3, drop_rate=0.01 * (seed % 3))
    sim = ClusterSimulation(seed, options, trace=trace)
    broker = sim.broker_ids[0]
    timeout = options.session_timeout_ms

    # Registers, catches up with the metadata log, and is unfenced.
    sim.run_until_true(
        lambda: (
            sim.fenced_in_committed(broker) is False
            and sim.broker_state(broker) == BrokerState.RUNNING
        ),
        within_ms=15_000,
        what="registered and unfenced",
    )
    epoch = sim.brokers[broker].lifecycle.broker_epoch
    assert epoch >= 0

    # Cut off: its heartbeats stop reaching the controller, which fences it once its session
    # has expired, and not before.
    sim.isolate(broker)
    cut_at = sim.now
    sim.run_until_true(
        lambda: sim.fenced_in_committed(broker) is True,
        within_ms=timeout + 5 * options.heartbeat_interval_ms,
        what="fenced after missed heartbeats",
    )
    assert sim.now - cut_at >= timeout - options.heartbeat_interval_ms - options.max_delay_ms

    # Back: the next heartbeats unfence it, under the same registration.
    sim.heal()
    sim.run_until_true(
        lambda: (
            sim.fenced_in_committed(broker) is False
            and sim.broker_state(broker) == BrokerState.RUNNING
            and not sim.brokers[broker].publisher.image.brokers[broker].fenced
        ),
        within_ms=timeout + 5 * options.heartbeat_interval_ms,
        what="unfenced after heartbeats resume",
    )
    assert sim.brokers[broker].lifecycle.broker_epoch == epoch
