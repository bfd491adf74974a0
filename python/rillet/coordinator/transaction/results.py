"""What every shard operation returns, and how an operation accumulates it.

A :class:`CoordinatorResult` carries the records to append to the shard's
``__transaction_state`` partition, the response to the request that caused it (None for a
timer or a marker answer), and the transaction markers to write. The driver appends the
records and, once they and every record any earlier operation returned are committed
(acks=all), sends the response and the markers: a marker must never reach a partition
before the PrepareCommit or PrepareAbort record that decided its outcome is committed, or a
coordinator failover could decide the other way.

This is the group coordinator's :class:`~rillet.coordinator.group.results.CoordinatorResult`
with markers in place of parked completions (the transaction APIs park nothing); the records
are ``__transaction_state`` records, applied to the shard as the operation writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rillet.coordinator.transaction.messages import TxnMarker
from rillet.coordinator.transaction.records import TransactionRecord

__all__ = ["CoordinatorResult", "Operation"]

R = TypeVar("R")


@dataclass(frozen=True)
class CoordinatorResult(Generic[R]):
    """Records to append, then (once committed) the response and the markers to send."""

    records: tuple[TransactionRecord, ...] = ()
    response: R | None = None
    markers: tuple[TxnMarker, ...] = ()


@dataclass
class Operation:
    """The records and markers of one operation in progress."""

    records: list[TransactionRecord] = field(default_factory=list)
    markers: list[TxnMarker] = field(default_factory=list)

    def result(self, response: R | None = None) -> CoordinatorResult[R]:
        return CoordinatorResult(tuple(self.records), response, tuple(self.markers))
