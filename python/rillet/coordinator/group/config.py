"""The group coordinator's settings, typed, each named after the Kafka broker config it takes.

The composition root reads ``server.properties`` and builds one of these
(:meth:`GroupCoordinatorConfig.from_properties` takes Kafka's dotted keys); the shard never
reads configuration itself. Defaults are Kafka 4.0's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from rillet.coordinator.group.assignors import ASSIGNORS

__all__ = ["GroupCoordinatorConfig"]

INT_MAX = 2**31 - 1

# Attribute -> Kafka key. Keys Kafka keeps internal have no entry.
_KEYS = {
    "offsets_topic_num_partitions": "offsets.topic.num.partitions",
    "offsets_retention_ms": "offsets.retention.minutes",
    "offsets_retention_check_interval_ms": "offsets.retention.check.interval.ms",
    "offset_metadata_max_bytes": "offset.metadata.max.bytes",
    "consumer_group_session_timeout_ms": "group.consumer.session.timeout.ms",
    "consumer_group_heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "consumer_group_max_size": "group.consumer.max.size",
    "consumer_group_assignors": "group.consumer.assignors",
    "classic_group_initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
    "classic_group_min_session_timeout_ms": "group.min.session.timeout.ms",
    "classic_group_max_session_timeout_ms": "group.max.session.timeout.ms",
    "classic_group_max_size": "group.max.size",
}


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """Settings of every :class:`~rillet.coordinator.group.shard.GroupCoordinatorShard`.

    - ``offsets_topic_num_partitions`` (``offsets.topic.num.partitions``, 50): a group lives
      in partition ``partition_for(group_id, n)``; a shard refuses other groups with
      NOT_COORDINATOR.
    - ``offsets_retention_ms`` (``offsets.retention.minutes``, 7 days) and
      ``offsets_retention_check_interval_ms`` (``offsets.retention.check.interval.ms``,
      10 minutes): committed offsets of groups without members (and of topics a group no
      longer subscribes to) expire after the retention; the check runs at that interval.
    - ``offset_metadata_max_bytes`` (``offset.metadata.max.bytes``, 4096).
    - ``consumer_group_session_timeout_ms`` (``group.consumer.session.timeout.ms``, 45 s),
      ``consumer_group_heartbeat_interval_ms`` (``group.consumer.heartbeat.interval.ms``,
      5 s), ``consumer_group_max_size`` (``group.consumer.max.size``): KIP-848 groups.
    - ``consumer_group_assignors`` (``group.consumer.assignors``, ``uniform,range``): the
      server-side assignors members may name; the first is the default.
    - ``classic_group_initial_rebalance_delay_ms`` (``group.initial.rebalance.delay.ms``,
      3 s), ``classic_group_min_session_timeout_ms`` / ``..._max_...``
      (``group.min.session.timeout.ms`` 6 s, ``group.max.session.timeout.ms`` 30 min),
      ``classic_group_max_size`` (``group.max.size``): classic groups.
    - ``classic_group_new_member_join_timeout_ms`` (5 min, internal in Kafka): how long a new
      member's JoinGroup may wait in a rebalance before it is dropped.
    """

    offsets_topic_num_partitions: int = 50
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    consumer_group_session_timeout_ms: int = 45_000
    consumer_group_heartbeat_interval_ms: int = 5_000
    consumer_group_max_size: int = INT_MAX
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")
    classic_group_initial_rebalance_delay_ms: int = 3_000
    classic_group_min_session_timeout_ms: int = 6_000
    classic_group_max_session_timeout_ms: int = 1_800_000
    classic_group_max_size: int = INT_MAX
    classic_group_new_member_join_timeout_ms: int = 300_000

    def __post_init__(self) -> None:
        if not self.consumer_group_assignors:
            raise ValueError("group.consumer.assignors must name at least one assignor")
        unknown = [a for a in self.consumer_group_assignors if a not in ASSIGNORS]
        if unknown:
            raise ValueError(
                f"group.consumer.assignors: unknown assignor(s) {unknown}; "
                f"known: {sorted(ASSIGNORS)}"
            )
        if self.consumer_group_heartbeat_interval_ms >= self.consumer_group_session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be smaller than "
                "group.consumer.session.timeout.ms"
            )
        if self.classic_group_min_session_timeout_ms > self.classic_group_max_session_timeout_ms:
            raise ValueError("group.max.session.timeout.ms must be >= group.min.session.timeout.ms")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and value < (0 if "delay" in f.name else 1):
                raise ValueError(f"{_KEYS.get(f.name, f.name)} must be positive: {value}")

    @property
    def default_assignor(self) -> str:
        return self.consumer_group_assignors[0]

    @classmethod
    def from_properties(cls, values: Mapping[str, object]) -> GroupCoordinatorConfig:
        """A config from Kafka's keys (``offsets.retention.minutes`` in minutes, the
        assignors a comma-separated list or a sequence); keys not given keep the defaults,
        other keys are ignored (the broker config validates them)."""
        kwargs: dict[str, object] = {}
        for attr, key in _KEYS.items():
            if key not in values:
                continue
            value = values[key]
            if attr == "consumer_group_assignors":
                names = value.split(",") if isinstance(value, str) else value
                assert isinstance(names, list | tuple)
                kwargs[attr] = tuple(str(n).strip() for n in names if str(n).strip())
            elif attr == "offsets_retention_ms":
                kwargs[attr] = int(str(value)) * 60_000
            else:
                kwargs[attr] = int(str(value))
        return cls(**kwargs)  # type: ignore[arg-type]
