"""Replica placement: partition i leads on broker (start + i) mod n and its replica j sits
on broker (start + i + j) mod n, over the sorted usable brokers, from a random start."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from rillet.errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError

__all__ = ["place_replicas", "validate_assignment"]


def place_replicas(
    brokers: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Replica lists for partitions ``first_partition .. first_partition + num_partitions``."""
    usable = sorted(brokers)
    n = len(usable)
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{n} broker(s) are registered."
        )
    start = rng.randrange(n)
    return {
        p: tuple(usable[(start + p + j) % n] for j in range(replication_factor))
        for p in range(first_partition, first_partition + num_partitions)
    }


def validate_assignment(
    assignment: Mapping[int, Sequence[int]],
    registered: Sequence[int],
    first_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Check a manual assignment: contiguous partitions from ``first_partition``, the same
    non-zero replica count everywhere, no duplicates, only registered brokers."""
    want = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != want:
        raise InvalidReplicaAssignmentError(
            f"partitions in the assignment must be {want[0] if want else first_partition}.."
            f"{want[-1] if want else first_partition}, got {sorted(assignment)}"
        )
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidReplicaAssignmentError(
            "every partition in the assignment needs the same, non-zero number of replicas"
        )
    known = set(registered)
    out: dict[int, tuple[int, ...]] = {}
    for p, replicas in assignment.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"duplicate brokers in the assignment of partition {p}: {list(replicas)}"
            )
        unknown = [b for b in replicas if b not in known]
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"the assignment of partition {p} names unregistered broker(s) {unknown}"
            )
        out[p] = tuple(replicas)
    return out
