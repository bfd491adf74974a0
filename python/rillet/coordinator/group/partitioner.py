"""Which ``__consumer_offsets`` partition holds a group: Kafka's
``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``, bit for bit, so a group
lives where a Kafka cluster with the same partition count would put it."""

from __future__ import annotations

__all__ = ["java_string_hashcode", "partition_for"]

_INT_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31 * h + c`` over the UTF-16 code units, as int32."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The partition of ``__consumer_offsets`` that coordinates ``group_id``. Kafka's
    ``Utils.abs`` maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative)."""
    if num_partitions < 1:
        raise ValueError(f"offsets.topic.num.partitions must be positive: {num_partitions}")
    h = java_string_hashcode(group_id)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions
