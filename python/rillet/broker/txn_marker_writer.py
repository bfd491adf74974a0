"""The partition leader's side of transactions: WriteTxnMarkers (Kafka's
``KafkaApis.handleWriteTxnMarkersRequest``) and DescribeProducers (KIP-664).

**WriteTxnMarkers.** For each marker entry, each partition gets an error or None:

- a partition of ``__consumer_offsets`` is the group coordinator's
  (``GroupCoordinator.complete_transaction``): it appends the marker itself and makes the
  transaction's offsets visible or drops them. Its coordinator errors
  (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) are answered
  NOT_LEADER_OR_FOLLOWER, which the transaction coordinator retries;
- a partition this broker does not host: UNKNOWN_TOPIC_OR_PARTITION;
- otherwise the COMMIT/ABORT control batch is appended as leader
  (:meth:`~rillet.broker.partition.Partition.append_txn_marker`) and answered once every
  in-sync replica has it (acks=all, within ``request.timeout.ms``): NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, INVALID_PRODUCER_EPOCH and
  TRANSACTION_COORDINATOR_FENCED come from there. A written marker removes the producer's
  KIP-890 verification guard on the partition.

**DescribeProducers.** The active producers of each partition from its leader's log
(UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the metadata does not have,
INVALID_TOPIC_EXCEPTION for a bad name, NOT_LEADER_OR_FOLLOWER elsewhere than the leader).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rillet import errors
from rillet._core import ProducerStateEntry
from rillet.broker.replica_manager import ReplicaManager
from rillet.broker.txn_broker_clients import MarkerErrors, TxnMarkerEntry
from rillet.broker.txn_verification import VerificationGuards
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.metadata.topic_names import validate_topic_name
from rillet.scheduler import Clock
from rillet.types import TopicPartition

__all__ = ["OFFSETS_TOPIC", "CompletesTransactions", "DescribedProducers", "TxnMarkerWriter"]

OFFSETS_TOPIC = "__consumer_offsets"


class CompletesTransactions(Protocol):
    """The group coordinator's part (``GroupCoordinator.complete_transaction``): the error
    to answer, or None once the marker is written and applied."""

    async def complete_transaction(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> KafkaError | None: ...


_NOT_READY = (
    errors.CoordinatorNotAvailableError,
    errors.CoordinatorLoadInProgressError,
    errors.NotCoordinatorError,
)


@dataclass(frozen=True)
class DescribedProducers:
    """One partition of a DescribeProducers answer: an error, or its active producers."""

    error: KafkaError | None = None
    active_producers: tuple[ProducerStateEntry, ...] = ()


class TxnMarkerWriter:
    """See the module doc. ``groups`` is the broker's group coordinator, ``guards`` the
    verification guards of the produce path."""

    def __init__(
        self,
        replicas: ReplicaManager,
        clock: Clock,
        *,
        groups: CompletesTransactions | None = None,
        guards: VerificationGuards | None = None,
        timeout_ms: int = 30_000,
    ) -> None:
        self.replicas = replicas
        self.clock = clock
        self.guards = guards
        self.timeout_ms = timeout_ms
        self.groups = groups

    async def write_txn_markers(self, markers: Sequence[TxnMarkerEntry]) -> list[MarkerErrors]:
        """Every entry's answer, in order, once each partition is answered."""
        return list(await asyncio.gather(*(self._write(m) for m in markers)))

    async def _write(self, marker: TxnMarkerEntry) -> MarkerErrors:
        results: MarkerErrors = {}
        waiting: dict[TopicPartition, tuple[int, int]] = {}
        offsets: dict[TopicPartition, Awaitable[KafkaError | None]] = {}
        now = self.clock()
        for tp in dict.fromkeys(marker.partitions):
            if tp.topic == OFFSETS_TOPIC:
                offsets[tp] = self._complete_offsets(tp, marker)
                continue
            p = self.replicas.partitions.get(tp)
            if p is None:
                results[tp] = errors.UnknownTopicOrPartitionError(
                    f"This server does not host this topic-partition: {tp}."
                )
                continue
            try:
                info = p.append_txn_marker(
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.coordinator_epoch,
                    marker.committed,
                    now,
                )
            except KafkaError as e:
                results[tp] = e
                continue
            if self.guards is not None:
                self.guards.clear(tp, marker.producer_id)
            self.replicas.fetch_purgatory.check_and_complete(tp)
            self.replicas.produce_purgatory.check_and_complete(tp)
            waiting[tp] = (info.last_offset + 1, p.leader_epoch)
        if offsets:
            answers = await asyncio.gather(*offsets.values())
            results.update(zip(offsets, answers, strict=True))
        if waiting:
            results.update(await self._await_replicated(waiting))
        return {tp: results[tp] for tp in dict.fromkeys(marker.partitions)}

    async def _complete_offsets(
        self, tp: TopicPartition, marker: TxnMarkerEntry
    ) -> KafkaError | None:
        if self.groups is None:
            return errors.UnknownServerError(f"{tp}: this broker runs no group coordinator")
        try:
            err = await self.groups.complete_transaction(
                tp,
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.committed,
            )
        except KafkaError as e:
            err = e
        if isinstance(err, _NOT_READY):
            # The transaction coordinator does not expect coordinator errors: it retries
            # NOT_LEADER_OR_FOLLOWER.
            return errors.NotLeaderOrFollowerError(f"{tp}: {err.message}")
        return err

    async def _await_replicated(
        self, waiting: dict[TopicPartition, tuple[int, int]]
    ) -> MarkerErrors:
        """acks=all: each partition's answer once its in-sync replicas have everything up to
        its end offset, or the failure (as ``ReplicaManager.append_records`` waits)."""
        failed: dict[TopicPartition, KafkaError] = {}

        def replicated() -> bool:
            done = True
            for tp, (end, epoch) in waiting.items():
                if tp in failed:
                    continue
                try:
                    done &= self._replicated(tp, end, epoch)
                except KafkaError as e:
                    failed[tp] = e
            return done

        await self.replicas.produce_purgatory.wait(waiting, replicated, self.timeout_ms)
        replicated()
        out: MarkerErrors = {}
        for tp, (end, epoch) in waiting.items():
            if tp in failed:
                out[tp] = failed[tp]
            elif not self._replicated(tp, end, epoch):
                out[tp] = errors.RequestTimedOutError(
                    f"{tp}: the in-sync replicas did not all get the marker within "
                    f"{self.timeout_ms} ms"
                )
            else:
                out[tp] = None
        return out

    def _replicated(self, tp: TopicPartition, end: int, leader_epoch: int) -> bool:
        p = self.replicas.partitions.get(tp)
        if p is None:
            raise errors.NotLeaderOrFollowerError(f"{tp} left this broker before it was replicated")
        return p.check_enough_replicas_reach_offset(end, leader_epoch)

    # -- DescribeProducers -----------------------------------------------------------------

    def describe_producers(
        self, image: MetadataImage, partitions: Sequence[TopicPartition]
    ) -> list[DescribedProducers]:
        """One answer per partition asked for, in order (Kafka's
        ``handleDescribeProducersRequest``)."""
        out = []
        for tp in partitions:
            try:
                validate_topic_name(tp.topic)
            except KafkaError as e:
                out.append(DescribedProducers(e))
                continue
            topic = image.topic(tp.topic)
            p = self.replicas.partitions.get(tp)
            if topic is None or tp.partition not in topic.partitions or p is None:
                out.append(
                    DescribedProducers(
                        errors.UnknownTopicOrPartitionError(
                            f"This server does not host this topic-partition: {tp}."
                        )
                    )
                )
            elif not p.is_leader:
                out.append(
                    DescribedProducers(
                        errors.NotLeaderOrFollowerError(
                            f"This server is not the leader for {tp} (leader: {p.leader_id})."
                        )
                    )
                )
            else:
                entries = sorted(p.log.producer_state(), key=lambda e: e.producer_id)
                out.append(DescribedProducers(None, tuple(entries)))
        return out
