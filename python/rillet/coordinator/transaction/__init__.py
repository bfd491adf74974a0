"""The transaction coordinator as a pure state machine: one
:class:`TransactionCoordinatorShard` per partition of ``__transaction_state`` (Kafka's
``TransactionCoordinator`` with its ``TransactionStateManager`` for one partition; KIP-98,
KIP-360, KIP-890 part 1).

It serves InitProducerId for transactional producers (epochs, fencing, producer id rotation
when the epoch is exhausted), AddPartitionsToTxn (and its ``verify_only`` form, which
partition leaders send before the first transactional write to a partition),
AddOffsetsToTxn, EndTxn with its transaction markers, DescribeTransactions and
ListTransactions, and two periodic scans: ongoing transactions past their timeout are aborted
(their producer fenced), idle transactional ids expire. Its state is the replay of Kafka's
own ``__transaction_state`` records (:mod:`.records`).

Layout::

    config.py         TransactionCoordinatorConfig (Kafka's transaction.* keys), partition_for
    records.py        TransactionLogKey / TransactionLogValue, binary (v0 and flexible v1)
    state.py          TransactionState and its legal transitions
    metadata.py       TransactionMetadata (one id) and TxnTransitMetadata (a change)
    messages.py       requests, responses and TxnMarker, as domain values
    results.py        CoordinatorResult, Operation
    state_manager.py  the ids of a shard, replay, writes, the scans, ListTransactions
    markers.py        markers handed out and their answers, completion
    coordinator.py    the handlers (TransactionCoordinator)
    shard.py          TransactionCoordinatorShard: the facade the driver calls

How a driver runs a shard (the contract)::

    shard = TransactionCoordinatorShard(partition, leader_epoch, config,
                                        producer_ids=broker_producer_id_block.next)
    for key, value in read_partition(partition):     # loading: replay the whole partition
        shard.replay(key, value)                     # value None is a tombstone
    result = shard.on_loaded(clock())                # markers of Prepare* transactions
    while leader_of(partition):
        result = shard.end_txn(request, clock())     # or any request, or
        result = shard.tick(clock())       # when clock() >= shard.next_deadline_ms()
        result = shard.on_markers_written(marker, errors_by_partition, clock(),
                                          deleted=partitions_without_a_topic)
        # 1. append result.records (key_bytes(), value_bytes()) to the partition, acks=all
        # 2. once they and every record appended before them are committed (the high
        #    watermark passed them; at once if nothing is pending), send result.response
        #    to the requester, and write each of result.markers: split its partitions by
        #    leader into WriteTxnMarkers requests (Kafka's TxnMarkerEntry: producer id and
        #    epoch, coordinator epoch, COMMIT if marker.committed else ABORT), then hand
        #    each request's per-partition answers back through on_markers_written (a request
        #    lost with its connection: NETWORK_EXCEPTION for its partitions; a partition
        #    whose topic no longer exists: in ``deleted``). The shard answers with markers to
        #    retry (the driver may wait retry.backoff.ms) and, once every partition is
        #    written, the Complete record
        # 3. if an append fails, or leadership moves: send NOT_COORDINATOR for every
        #    response not yet sent, drop the markers not yet sent, call shard.unload(),
        #    throw the shard away, and load a new one from the log if still leader (with the
        #    new leader epoch): it resends the markers of every Prepare* transaction

An idempotent producer's InitProducerId (no transactional id) is not the coordinator's: any
broker answers it from its producer id block. Requests that name a partition of a topic that
does not exist are refused by the broker before the coordinator (Kafka's ``KafkaApis``:
UNKNOWN_TOPIC_OR_PARTITION, and OPERATION_NOT_ATTEMPTED for the others). The shard applies
its records to itself as it produces them; a shard loaded by replaying the same records has
the same ids (all but ``last_producer_epoch``, which Kafka does not persist either).
"""

from __future__ import annotations

from rillet.coordinator.transaction.config import TransactionCoordinatorConfig, partition_for
from rillet.coordinator.transaction.coordinator import GROUP_METADATA_TOPIC_NAME
from rillet.coordinator.transaction.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribedTransaction,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListedTransaction,
    ListTransactionsResponse,
    TxnMarker,
    error_for_version,
)
from rillet.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from rillet.coordinator.transaction.records import (
    TransactionLogKey,
    TransactionLogPartitions,
    TransactionLogValue,
    TransactionRecord,
    decode_record,
)
from rillet.coordinator.transaction.results import CoordinatorResult
from rillet.coordinator.transaction.shard import TransactionCoordinatorShard
from rillet.coordinator.transaction.state import TransactionState

__all__ = [
    "GROUP_METADATA_TOPIC_NAME",
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "CoordinatorResult",
    "DescribedTransaction",
    "EndTxnRequest",
    "EndTxnResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "ListTransactionsResponse",
    "ListedTransaction",
    "TransactionCoordinatorConfig",
    "TransactionCoordinatorShard",
    "TransactionLogKey",
    "TransactionLogPartitions",
    "TransactionLogValue",
    "TransactionMetadata",
    "TransactionRecord",
    "TransactionState",
    "TxnMarker",
    "TxnTransitMetadata",
    "decode_record",
    "error_for_version",
    "partition_for",
]
