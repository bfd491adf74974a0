"""Requests and responses of the transaction APIs, and the transaction markers the coordinator
asks the driver to write, as domain values.

Field names follow Kafka's schemas (``InitProducerIdRequest``, ``AddPartitionsToTxnRequest``,
``AddOffsetsToTxnRequest``, ``EndTxnRequest``, ``WriteTxnMarkersRequest``,
``DescribeTransactionsResponse``, ``ListTransactionsResponse``) in snake case. Errors are
:class:`~rillet.errors.KafkaError` instances (Kafka's names), None for success. The
coordinator answers PRODUCER_FENCED where Kafka's does; a transport serving an old request
version (InitProducerId < 4, AddPartitionsToTxn < 2, AddOffsetsToTxn < 2, EndTxn < 2) turns it
into INVALID_PRODUCER_EPOCH, as Kafka's ``KafkaApis`` does (:func:`error_for_version`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rillet.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError
from rillet.types import TopicPartition

__all__ = [
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "DescribedTransaction",
    "EndTxnRequest",
    "EndTxnResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "ListTransactionsResponse",
    "ListedTransaction",
    "TxnMarker",
    "error_for_version",
]

# API -> the first version whose clients understand PRODUCER_FENCED.
_PRODUCER_FENCED_SINCE = {
    "InitProducerId": 4,
    "AddPartitionsToTxn": 2,
    "AddOffsetsToTxn": 2,
    "EndTxn": 2,
}


def error_for_version(error: KafkaError | None, api: str, version: int) -> KafkaError | None:
    """``error`` as a client of ``api`` at ``version`` understands it: PRODUCER_FENCED is
    INVALID_PRODUCER_EPOCH before it existed (Kafka's ``KafkaApis``)."""
    if isinstance(error, ProducerFencedError) and version < _PRODUCER_FENCED_SINCE[api]:
        return InvalidProducerEpochError(error.message)
    return error


@dataclass(frozen=True)
class InitProducerIdRequest:
    """A transactional producer's InitProducerId. ``producer_id`` and ``producer_epoch`` are
    -1 for a new producer instance, or the id and epoch it has when it asks for a bump
    (KIP-360). An idempotent producer (no transactional id) is answered by any broker from
    its producer id block, not by a coordinator."""

    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class InitProducerIdResponse:
    error: KafkaError | None = None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class AddPartitionsToTxnRequest:
    """One transaction of an AddPartitionsToTxn request. ``verify_only`` (KIP-890, sent by a
    partition leader before the first transactional write to a partition): only answer
    whether each partition is already in the ongoing transaction, writing nothing."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    verify_only: bool = False


@dataclass(frozen=True)
class AddPartitionsToTxnResponse:
    """Kafka's ``AddPartitionsToTxnResult``: an error (or None) per partition. A coordinator
    error is the same for every partition; a verification answers TRANSACTION_ABORTABLE for
    a partition not in the transaction."""

    transactional_id: str
    errors: Mapping[TopicPartition, KafkaError | None] = field(default_factory=dict)

    @property
    def error(self) -> KafkaError | None:
        """The first error of any partition (None if every partition succeeded)."""
        return next((e for _, e in sorted(self.errors.items()) if e is not None), None)


@dataclass(frozen=True)
class AddOffsetsToTxnRequest:
    """Adds the ``__consumer_offsets`` partition of ``group_id`` to the transaction, so that
    offsets committed with TxnOffsetCommit become visible with it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True)
class AddOffsetsToTxnResponse:
    error: KafkaError | None = None


@dataclass(frozen=True)
class EndTxnRequest:
    """Commits (``committed``) or aborts the ongoing transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True)
class EndTxnResponse:
    """On success, the producer id and epoch to go on with (EndTxn v5+ carries them)."""

    error: KafkaError | None = None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class TxnMarker:
    """A transaction marker to write (Kafka's ``TxnMarkerEntry`` of a WriteTxnMarkers
    request): a COMMIT (``committed``) or ABORT control record for ``producer_id`` at
    ``producer_epoch`` into each of ``partitions``, stamped with the coordinator epoch so
    that a partition leader refuses a deposed coordinator's markers
    (TRANSACTION_COORDINATOR_FENCED).

    ``marker_id`` is unique within the shard that made it; the driver hands the marker back
    with the answers (:meth:`TransactionCoordinatorShard.on_markers_written`), and an answer
    to a marker the shard no longer waits for (a duplicate, a deposed shard's) is ignored.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]
    marker_id: int


@dataclass(frozen=True)
class DescribedTransaction:
    """One transactional id in a DescribeTransactions answer; with an error, only the id."""

    transactional_id: str
    error: KafkaError | None = None
    transaction_state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topic_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    transaction_state: str


@dataclass(frozen=True)
class ListTransactionsResponse:
    """The transactions of one shard; ``unknown_state_filters`` are state names asked for
    that Kafka does not know."""

    error: KafkaError | None = None
    unknown_state_filters: tuple[str, ...] = ()
    transaction_states: tuple[ListedTransaction, ...] = ()
