"""The idempotent producer's bookkeeping (the idempotent half of Kafka's client-side
``TransactionManager``): its producer id and epoch, each partition's last acknowledged
sequence, and when the epoch must be bumped (KIP-360).

It decides; it does not send. The sender asks it what a response means for a batch
(:meth:`IdempotentState.on_out_of_order`) and tells it what happened (acknowledged, failed),
and bumps the epoch when :attr:`IdempotentState.bump_needed` is set and nothing is in flight.

Why a bump rather than failing forever: the broker checks that each batch's sequence follows
the last one it holds from this producer (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise). When a
batch fails for good after its sequence was handed out (a delivery timeout, a batch the
broker lost with its leader in an unclean election), the producer's later sequences can
never follow. A new epoch starts every partition's sequences at 0, which the broker accepts
from a newer epoch; the batches still to be delivered are stamped again with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NO_PRODUCER_ID", "IdempotentState", "increment_sequence"]

NO_PRODUCER_ID = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MAX_VALUE: past it the producer needs a new id
MAX_SEQUENCE = 2**31 - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past 2^31 - 1 to 0 as Kafka's sequences do."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


@dataclass
class IdempotentState:
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    # Per partition slot: the last sequence the broker acknowledged in this epoch.
    last_acked: dict[int, int] = field(default_factory=dict)
    # Some batch's sequence can no longer be followed: bump the epoch once nothing is in
    # flight.
    bump_needed: bool = False
    # A transactional producer's epoch moves only through its coordinator (InitProducerId
    # after an abort), never by the sender alone.
    transactional: bool = False

    @property
    def has_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def set_id(self, producer_id: int, producer_epoch: int) -> None:
        """A producer id and epoch from InitProducerId."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.last_acked.clear()
        self.bump_needed = False

    def bump_epoch(self) -> bool:
        """Move to the next epoch, every sequence starting again at 0. Returns False when
        the epoch is exhausted and a new producer id is needed instead (KIP-360)."""
        self.last_acked.clear()
        self.bump_needed = False
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            self.producer_id, self.producer_epoch = NO_PRODUCER_ID, -1
            return False
        self.producer_epoch += 1
        return True

    def on_acknowledged(self, slot: int, base_sequence: int, record_count: int) -> None:
        last = increment_sequence(base_sequence, record_count - 1)
        previous = self.last_acked.get(slot)
        # Batches of a partition are acknowledged in order, but a duplicate's answer may
        # come late; the last acknowledged sequence only moves forward (mod 2^31 it is the
        # one fewer steps ahead).
        if previous is None or 0 < (last - previous) % (MAX_SEQUENCE + 1) < 2**30:
            self.last_acked[slot] = last

    def on_failed(self) -> None:
        """A batch with a sequence failed for good: its successors cannot follow it."""
        self.bump_needed = True

    def out_of_order_is_retriable(self, slot: int, base_sequence: int) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch: retriable when the batch is not the
        next one the broker should expect (an earlier batch of the partition is unresolved,
        so the gap may close when it is retried). When it is the next one, the broker lost
        this producer's state for the partition: the batch fails and the epoch is bumped
        (Kafka's ``TransactionManager.canRetry``)."""
        last = self.last_acked.get(slot)
        expected = 0 if last is None else increment_sequence(last, 1)
        return base_sequence != expected
