"""Replica placement.

Without racks, partition i leads on broker (start + i) mod n and its replica j sits on
broker (start + i + j) mod n, over the sorted usable brokers, from a random start.

When any broker has a ``broker.rack``, placement is rack-aware (Kafka's
assignReplicasToBrokersRackAware): the brokers are listed alternating between racks, leaders
walk that list from a random start, and each further replica is the next broker (by a shift
that grows every n partitions) whose rack holds no replica of the partition yet, until every
rack has one. So a partition with a replication factor no larger than the number of racks
has every replica on a different rack, and leaders and replicas stay spread evenly. A broker
without a rack counts as a rack of its own (as KRaft's placer treats it).
"""

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
    racks: Mapping[int, str | None] | None = None,
) -> dict[int, tuple[int, ...]]:
    """Replica lists for partitions ``first_partition .. first_partition + num_partitions``;
    ``racks`` gives each broker's rack (rack-aware when any is set)."""
    usable = sorted(brokers)
    n = len(usable)
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{n} broker(s) are registered."
        )
    if racks and any(racks.get(b) is not None for b in usable):
        return _place_rack_aware(
            {b: racks.get(b) for b in usable},
            num_partitions,
            replication_factor,
            rng,
            first_partition,
        )
    start = rng.randrange(n)
    return {
        p: tuple(usable[(start + p + j) % n] for j in range(replication_factor))
        for p in range(first_partition, first_partition + num_partitions)
    }


def _rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """The brokers, one per rack in turn (racks in name order, brokers by id within one):
    racks a: 1 2, b: 3, c: 4 5 give 1 3 4 2 5."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        # A broker without a rack is a rack of its own.
        by_rack.setdefault(racks[b] or f"\0no rack: {b}", []).append(b)
    columns = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max(len(c) for c in columns)):
        out.extend(c[i] for c in columns if i < len(c))
    return out


def _place_rack_aware(
    racks: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
    first_partition: int,
) -> dict[int, tuple[int, ...]]:
    arranged = _rack_alternated(racks)
    n = len(arranged)
    rack_of = {b: racks[b] or f"\0no rack: {b}" for b in arranged}
    num_racks = len(set(rack_of.values()))
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [arranged[first]]
        used_racks = {rack_of[replicas[0]]}
        k = 0
        while len(replicas) < replication_factor:
            # The k-th candidate after the leader, never the leader itself.
            b = arranged[(first + 1 + (shift * num_racks + k) % (n - 1)) % n]
            k += 1
            rack_ok = rack_of[b] not in used_racks or len(used_racks) == num_racks
            if rack_ok and b not in replicas:
                replicas.append(b)
                used_racks.add(rack_of[b])
        out[p] = tuple(replicas)
    return out


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
