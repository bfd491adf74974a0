"""What every shard operation returns, and how an operation accumulates it.

A :class:`CoordinatorResult` carries the records to append to the shard's
``__consumer_offsets`` partition, the response to the request that caused it (None for a
timer, and for JoinGroup/SyncGroup whose answers always come as completions), and the
:class:`Completion` of parked requests the operation answered. The driver appends the
records and sends the response and the completions once they, and every record any earlier
operation returned, are committed (acks=all): Kafka's coordinator runtime holds a response
until the high watermark passes the operation's last record, and holds a read until the
writes before it are committed.

:class:`Operation` is the accumulator handlers write into. ``append`` replays the record on
the shard at once (so the next step of the handler sees it); ``append_persisted_snapshot``
only lists it, for the classic group's GroupMetadata records, which snapshot in-memory state
the handler already changed (Kafka's ``CoordinatorResult.replayRecords == false``).

Transactions (KIP-98, KIP-447): a TxnOffsetCommit's result names its ``producer``; the
driver writes its records as one transactional batch with that producer id and epoch (no
sequence, the log's coordinator origin), and they stay pending until the producer's marker.
A ``complete_transaction`` result carries no records but the ``marker`` to append as a
control batch. Both come with ``undo``: the shard applied them already, and should the log
refuse the append before writing a byte (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED,
...), the driver calls ``undo()`` before running anything else on the shard, which puts the
shard back as it was (Kafka's runtime reverts its timeline to the last written offset).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rillet.coordinator.group.records import CoordinatorRecord

__all__ = ["Completion", "CoordinatorResult", "EndTxnMarker", "Operation", "ProducerIdAndEpoch"]

R = TypeVar("R")


@dataclass(frozen=True)
class Completion:
    """The answer to a parked JoinGroup or SyncGroup: ``handle`` is what the driver passed
    with the request (its future, its stream, ...), ``response`` what to send on it."""

    handle: Hashable
    response: object


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    """The transactional producer a batch is written for (Kafka's ``ProducerIdAndEpoch``)."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class EndTxnMarker:
    """A COMMIT (``committed``) or ABORT marker to append as a control batch
    (:func:`rillet.coordinator.end_txn_marker.end_txn_marker_batch`)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool


@dataclass(frozen=True)
class CoordinatorResult(Generic[R]):
    """Records to append, the response to send, parked requests to complete (see module).

    ``producer``: the records are one transactional batch of that producer. ``marker``: a
    transaction marker to append (then ``records`` is empty). ``undo``: set with either,
    restores the shard if the log refuses the append (see the module doc)."""

    records: tuple[CoordinatorRecord, ...] = ()
    response: R | None = None
    completions: tuple[Completion, ...] = ()
    producer: ProducerIdAndEpoch | None = None
    marker: EndTxnMarker | None = None
    undo: Callable[[], None] | None = field(default=None, compare=False, repr=False)


@dataclass
class Operation:
    """The records and completions of one operation in progress (see the module doc)."""

    replay: Callable[[CoordinatorRecord], None]
    records: list[CoordinatorRecord] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    # A transactional operation: its records are written for (and replayed as pending
    # offsets of) this producer.
    producer: ProducerIdAndEpoch | None = None

    def append(self, record: CoordinatorRecord) -> None:
        self.records.append(record)
        self.replay(record)

    def append_persisted_snapshot(self, record: CoordinatorRecord) -> None:
        self.records.append(record)

    def complete(self, handle: Hashable | None, response: object) -> None:
        if handle is not None:
            self.completions.append(Completion(handle, response))

    def result(self, response: R | None = None) -> CoordinatorResult[R]:
        return CoordinatorResult(
            tuple(self.records), response, tuple(self.completions), producer=self.producer
        )
