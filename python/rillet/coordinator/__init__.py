"""Coordinators: pure state machines over a compacted topic, driven by the broker.

``group/`` is the group coordinator (consumer groups and committed offsets over
``__consumer_offsets``); see :mod:`rillet.coordinator.group` for the driver contract. The
transaction coordinator (``transaction/``) will sit beside it.
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
