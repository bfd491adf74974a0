"""The transaction markers a shard waits for, and the completion they lead to (the pure part
of Kafka's ``TransactionMarkerChannelManager`` and ``TransactionMarkerRequestCompletionHandler``).

Once a transaction is PrepareCommit or PrepareAbort, a COMMIT or ABORT marker must be written
into every partition of the transaction; when every one is written (or its partition is gone)
the coordinator writes CompleteCommit or CompleteAbort. The shard does not know partition
leaders: it hands out one :class:`TxnMarker` per transaction with the partitions still to
write, the driver splits it by leader into WriteTxnMarkers requests, and reports the answers
back with :meth:`TxnMarkerManager.on_markers_written`, one call per WriteTxnMarkers answer
(for the partitions that request carried) or per marker; a marker is awaited until every one
of its partitions has been answered once, and a second answer for a partition is ignored:

==============================================  =============================================
answer for a partition                          what the coordinator does (as Kafka)
==============================================  =============================================
None (written)                                  the partition is done
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_      retry: a new marker for those partitions (the
FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),   driver looks their leaders up again); also any
REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR          other retriable error, e.g. NETWORK_EXCEPTION
                                                for a request lost with its connection
UNSUPPORTED_FOR_MESSAGE_FORMAT,                 the partition is dropped (its producer could
UNSUPPORTED_VERSION                             not have written to it)
the partition is in ``deleted`` (no leader:     the partition is dropped
its topic is gone)
INVALID_PRODUCER_EPOCH,                         stop sending this transaction's markers: a
TRANSACTION_COORDINATOR_FENCED                  newer producer epoch or coordinator owns it;
                                                it stays Prepare* until the partition is
                                                loaded again
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_     IllegalStateError (fatal, never expected)
LIST_TOO_LARGE, INVALID_REQUIRED_ACKS, others
==============================================  =============================================

This tracking is soft state: a shard loaded from the log sends the markers of every Prepare*
id again (partition leaders take a repeated marker as a no-op), under its own coordinator
epoch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rillet.coordinator.transaction.messages import TxnMarker
from rillet.coordinator.transaction.metadata import TransactionMetadata
from rillet.coordinator.transaction.results import Operation
from rillet.coordinator.transaction.state import TransactionState
from rillet.coordinator.transaction.state_manager import TransactionStateManager
from rillet.errors import IllegalStateError, KafkaError
from rillet.types import TopicPartition

__all__ = ["AwaitedMarker", "PendingCompleteTxn", "TxnMarkerManager"]

_FATAL = frozenset(
    {"CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_REQUIRED_ACKS"}
)
_RETRY = frozenset(
    {
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NOT_LEADER_OR_FOLLOWER",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "KAFKA_STORAGE_ERROR",
    }
)
_STOP = frozenset({"INVALID_PRODUCER_EPOCH", "TRANSACTION_COORDINATOR_FENCED"})
_DROP = frozenset({"UNSUPPORTED_FOR_MESSAGE_FORMAT", "UNSUPPORTED_VERSION"})


@dataclass
class AwaitedMarker:
    """A marker handed out, and its partitions not answered yet."""

    marker: TxnMarker
    unanswered: set[TopicPartition]


@dataclass
class PendingCompleteTxn:
    """A Prepare* transaction whose markers are being written: the partitions still to
    write, the markers handed out and not answered, and whether sending stopped."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    remaining: set[TopicPartition]
    outstanding: dict[int, AwaitedMarker] = field(default_factory=dict)
    stopped: bool = False


class TxnMarkerManager:
    """The Prepare* transactions of one shard and their markers (see the module doc)."""

    def __init__(self, state: TransactionStateManager, coordinator_epoch: int) -> None:
        self.state = state
        self.coordinator_epoch = coordinator_epoch
        self.pending: dict[str, PendingCompleteTxn] = {}
        self._ids = itertools.count()

    def add_txn_markers_to_send(
        self, op: Operation, metadata: TransactionMetadata, now_ms: int
    ) -> None:
        """``metadata`` just became (or was loaded as) PrepareCommit or PrepareAbort: hand out
        its markers, or complete it at once if it has no partitions."""
        if not metadata.state.is_prepare:
            raise IllegalStateError(f"no markers to send in state {metadata.state}")
        pending = PendingCompleteTxn(
            metadata.transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
            metadata.state is TransactionState.PREPARE_COMMIT,
            set(metadata.topic_partitions),
        )
        self.pending[metadata.transactional_id] = pending
        self._send(op, pending, pending.remaining)
        self._maybe_write_txn_completion(op, pending, now_ms)

    def _send(
        self, op: Operation, pending: PendingCompleteTxn, partitions: set[TopicPartition]
    ) -> None:
        if not partitions:
            return
        marker = TxnMarker(
            pending.transactional_id,
            pending.producer_id,
            pending.producer_epoch,
            self.coordinator_epoch,
            pending.committed,
            tuple(sorted(partitions)),
            next(self._ids),
        )
        pending.outstanding[marker.marker_id] = AwaitedMarker(marker, set(marker.partitions))
        op.markers.append(marker)

    def on_markers_written(
        self,
        op: Operation,
        marker: TxnMarker,
        errors: Mapping[TopicPartition, KafkaError | None],
        deleted: Iterable[TopicPartition],
        now_ms: int,
    ) -> bool:
        """Answers for some or all partitions of ``marker`` (see the module doc); the marker
        is awaited until each of its partitions has been answered once. False if none of
        these answers was awaited (repeated, or for another shard's marker): nothing
        changes."""
        pending = self.pending.get(marker.transactional_id)
        awaited = None if pending is None else pending.outstanding.get(marker.marker_id)
        if pending is None or awaited is None or awaited.marker != marker:
            return False
        gone = set(deleted)
        answered = [tp for tp in marker.partitions if tp in awaited.unanswered]
        answered = [tp for tp in answered if tp in errors or tp in gone]
        if not answered:
            return False
        awaited.unanswered.difference_update(answered)
        if not awaited.unanswered:
            del pending.outstanding[marker.marker_id]
        retry: set[TopicPartition] = set()
        for tp in answered:
            error = None if tp in gone else errors[tp]
            if error is None or error.name in _DROP:
                pending.remaining.discard(tp)
            elif error.name in _RETRY:
                retry.add(tp)
            elif error.name in _FATAL:
                raise IllegalStateError(
                    f"Received fatal error {error.name} while sending txn marker for "
                    f"{marker.transactional_id}"
                )
            elif error.name in _STOP:
                pending.stopped = True
            elif error.retriable:
                retry.add(tp)
            else:
                raise IllegalStateError(
                    f"Unexpected error {error.name} while sending txn marker for "
                    f"{marker.transactional_id}"
                )
        if pending.stopped:
            # A newer producer epoch or coordinator owns the transaction: stop, as Kafka's
            # removeMarkersForTxn does; a reload of the partition resumes it.
            pending.outstanding.clear()
            return True
        self._send(op, pending, retry)
        self._maybe_write_txn_completion(op, pending, now_ms)
        return True

    def _maybe_write_txn_completion(
        self, op: Operation, pending: PendingCompleteTxn, now_ms: int
    ) -> None:
        if pending.remaining or pending.outstanding:
            return
        del self.pending[pending.transactional_id]
        metadata = self.state.get(pending.transactional_id)
        if metadata is None or not metadata.state.is_prepare:
            raise IllegalStateError(
                f"markers of {pending.transactional_id} written, but its state is "
                f"{None if metadata is None else metadata.state}"
            )
        self.state.write(op, metadata, metadata.prepare_complete(now_ms))

    def unload(self) -> None:
        self.pending.clear()
