"""The transaction coordinator's settings, typed, each named after the Kafka broker config it
takes, and which ``__transaction_state`` partition owns a transactional id.

The composition root reads ``server.properties`` and builds one of these
(:meth:`TransactionCoordinatorConfig.from_properties` takes Kafka's dotted keys); the shard
never reads configuration itself. Defaults are Kafka 4.0's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from rillet.coordinator.group.partitioner import java_string_hashcode

__all__ = ["TransactionCoordinatorConfig", "partition_for"]

_INT_MIN = -(2**31)
_INT_MAX = 2**31 - 1  # every setting is an int in Kafka

# Attribute -> Kafka key. ``transaction_version`` is a cluster feature, not a broker config.
_KEYS = {
    "transaction_state_log_num_partitions": "transaction.state.log.num.partitions",
    "transaction_max_timeout_ms": "transaction.max.timeout.ms",
    "transactional_id_expiration_ms": "transactional.id.expiration.ms",
    "abort_timed_out_transactions_interval_ms": (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    ),
    "remove_expired_transactional_ids_interval_ms": (
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    ),
    "offsets_topic_num_partitions": "offsets.topic.num.partitions",
}


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The partition of ``__transaction_state`` that coordinates ``transactional_id``:
    Kafka's ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``, bit for
    bit (``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    if num_partitions < 1:
        raise ValueError(f"transaction.state.log.num.partitions must be positive: {num_partitions}")
    h = java_string_hashcode(transactional_id)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions


@dataclass(frozen=True)
class TransactionCoordinatorConfig:
    """Settings of every
    :class:`~rillet.coordinator.transaction.shard.TransactionCoordinatorShard`.

    - ``transaction_state_log_num_partitions`` (``transaction.state.log.num.partitions``,
      50): a transactional id lives in partition ``partition_for(transactional_id, n)``; a
      shard refuses other ids with NOT_COORDINATOR.
    - ``transaction_max_timeout_ms`` (``transaction.max.timeout.ms``, 15 minutes): the
      largest ``transaction.timeout.ms`` a producer may ask for (else
      INVALID_TRANSACTION_TIMEOUT).
    - ``transactional_id_expiration_ms`` (``transactional.id.expiration.ms``, 7 days): an id
      with no transaction in progress (Empty, CompleteCommit, CompleteAbort) that has not been
      updated for this long is removed (a tombstone).
    - ``abort_timed_out_transactions_interval_ms``
      (``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s): how often
      ongoing transactions past their timeout are looked for and aborted.
    - ``remove_expired_transactional_ids_interval_ms``
      (``transaction.remove.expired.transaction.cleanup.interval.ms``, 1 hour): how often
      expired transactional ids are looked for.
    - ``offsets_topic_num_partitions`` (``offsets.topic.num.partitions``, 50):
      AddOffsetsToTxn adds partition ``partition_for(group_id, n)`` of ``__consumer_offsets``.
    - ``transaction_version`` (the cluster's finalized ``transaction.version`` feature, 1):
      0 writes TransactionLogValue version 0, 1 writes the flexible version 1 (KIP-890) with
      its tagged fields. Version 2 (an epoch bump with every transaction, KIP-890 part 2) is
      not built and is refused.
    """

    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000
    offsets_topic_num_partitions: int = 50
    transaction_version: int = 1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "transaction_version":
                if value not in (0, 1):
                    raise ValueError(
                        f"transaction.version {value} is not supported: 0 and 1 are "
                        "(version 2, an epoch bump per transaction, is not built)"
                    )
            elif not 1 <= value <= _INT_MAX:
                raise ValueError(f"{_KEYS[f.name]} must be between 1 and {_INT_MAX}: {value}")

    @property
    def transaction_log_value_version(self) -> int:
        """The TransactionLogValue version written (Kafka's
        ``TransactionVersion.transactionLogValueVersion``)."""
        return 1 if self.transaction_version >= 1 else 0

    @classmethod
    def from_properties(
        cls, values: Mapping[str, object], *, transaction_version: int = 1
    ) -> TransactionCoordinatorConfig:
        """A config from Kafka's keys; keys not given keep the defaults, other keys are
        ignored (the broker config validates them)."""
        kwargs: dict[str, int] = {
            attr: int(str(values[key])) for attr, key in _KEYS.items() if key in values
        }
        return cls(**kwargs, transaction_version=transaction_version)
