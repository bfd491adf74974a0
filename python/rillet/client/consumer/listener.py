"""ConsumerRebalanceListener, as kafka-python's (``kafka.ConsumerRebalanceListener``) with
Kafka's ``on_partitions_lost`` (KIP-429): called on the consumer's thread inside ``poll()``."""

from __future__ import annotations

from collections.abc import Sequence

from rillet.types import TopicPartition

__all__ = ["ConsumerRebalanceListener"]


class ConsumerRebalanceListener:
    """Subclass and override what you need; the defaults do nothing, except that
    ``on_partitions_lost`` calls ``on_partitions_revoked`` as Kafka's default does."""

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        """Before these partitions go to another member: commit what was processed. With
        auto-commit on, the consumer has committed their positions already."""

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """These partitions are this member's now; their positions are the group's committed
        offsets (or ``auto_offset_reset`` where there is none)."""

    def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> None:
        """The membership was fenced: these partitions may already be another member's, so
        nothing can be committed for them."""
        self.on_partitions_revoked(lost)
