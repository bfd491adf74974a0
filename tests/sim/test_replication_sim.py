"""The whole cluster on the seeded simulator: controllers, brokers with real logs and
replica fetchers, an acks=all producer and a consumer, under crashes, cuts (one-way too),
message loss and delays. See :mod:`replication` for the invariants.

Replay one seed with a trace, or soak many::

    RILLET_SIM_SEED=3 RILLET_SIM_TRACE=1 python -m pytest tests/sim/test_replication_sim.py -s
    RILLET_SIM_SEEDS=5000 python -m pytest tests/sim/test_replication_sim.py -q
    RILLET_SIM_FIRST_SEED=1000 RILLET_SIM_SEEDS=2000 \
        python -m pytest tests/sim/test_replication_sim.py -q
"""

from __future__ import annotations

import os

import pytest
from cluster import ClusterOptions
from replication import ReplicationOptions, ReplicationSimulation

SEED_COUNT = 1000


def _seeds() -> list[int]:
    replay = os.environ.get("RILLET_SIM_SEED")
    if replay:
        return [int(replay)]
    first = int(os.environ.get("RILLET_SIM_FIRST_SEED", "0"))
    return list(range(first, first + int(os.environ.get("RILLET_SIM_SEEDS", SEED_COUNT))))


def options_for(seed: int) -> ReplicationOptions:
    return ReplicationOptions(
        cluster=ClusterOptions(
            controllers=1 if seed % 5 == 0 else 3,
            brokers=3,
            drop_rate=0.02 * (seed % 3),
            max_delay_ms=5 + 20 * (seed % 4),
        ),
        partitions=1 + seed % 2,
    )


@pytest.mark.parametrize("seed", _seeds())
def test_replication_keeps_every_acknowledged_record(seed: int) -> None:
    trace = print if os.environ.get("RILLET_SIM_TRACE") == "1" else None
    sim = ReplicationSimulation(seed, options_for(seed), trace=trace)
    try:
        sim.run_until(10_000)
        sim.heal_all()
        sim.run_until(sim.now + 200)
        sim.require_liveness(within_ms=40_000)
        assert sum(len(a) for a in sim.acked.values()) > 0, sim.summary()
    except AssertionError as e:
        raise AssertionError(
            f"seed {seed}: {e}\nreplay: RILLET_SIM_SEED={seed} RILLET_SIM_TRACE=1 "
            "python -m pytest tests/sim/test_replication_sim.py -s"
        ) from e
    finally:
        sim.close()
