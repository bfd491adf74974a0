"""Coordinators: pure state machines over a compacted topic, driven by the broker.

``group/`` is the group coordinator (consumer groups and committed offsets over
``__consumer_offsets``), ``transaction/`` the transaction coordinator (transactional ids over
``__transaction_state``); each package's docstring states its driver contract. The
COMMIT/ABORT marker batch both write is :mod:`rillet.coordinator.end_txn_marker`.
"""

from __future__ import annotations

from rillet.coordinator.group import (
    GroupCoordinatorConfig,
    GroupCoordinatorShard,
    java_string_hashcode,
    partition_for,
)

__all__ = [
    "GroupCoordinatorConfig",
    "GroupCoordinatorShard",
    "java_string_hashcode",
    "partition_for",
]
