"""ReplicaManager: the partitions this broker hosts, and the produce, fetch and list-offsets
work on them.

Transport-agnostic: handlers take and return domain values (records as RecordBatch bytes in,
:class:`~rillet._core.FetchDataInfo` file regions out) and per-partition errors as
:class:`~rillet.errors.KafkaError` instances; the gRPC layer (or any other transport) maps
them onto its wire format. Long polls and ``acks=all`` waits are delayed operations in a
:class:`~rillet.broker.purgatory.Purgatory`, completed by appends and high-watermark moves.

Which partitions exist and who leads them comes only from the metadata log:
:meth:`ReplicaManager.apply_partition_changes` turns a metadata delta into become-leader /
become-follower / delete actions; a leader's ISR changes go to the controller through the
:class:`~rillet.broker.alter_partition.AlterPartitionManager`. Its background work (ISR
expiry, the high-watermark checkpoint) runs on the injected scheduler. Runs on the broker's
event loop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rillet import errors
from rillet._core import AbortedTransaction, FetchDataInfo
from rillet.broker.alter_partition import AlterPartitionManager
from rillet.broker.partition import NO_TOPIC_ID, Partition
from rillet.broker.purgatory import Purgatory
from rillet.broker.replica_fetcher import ReplicaFetcherManager
from rillet.controller import AlterPartitionResult, AlterPartitionState
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage, PartitionChange
from rillet.scheduler import Clock, Scheduler
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

_log = logging.getLogger(__name__)

__all__ = [
    "FetchPartition",
    "FetchedPartition",
    "ListOffsetsPartitions",
    "ListedOffset",
    "ProducedPartition",
    "ReplicaManager",
]


@dataclass(frozen=True)
class ProducedPartition:
    error: KafkaError | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    # Each batch's base offset when an idempotent retry's batches were not all appended
    # one after the other (some were duplicates, answered with their original offsets).
    batch_base_offsets: tuple[int, ...] = ()


@dataclass(frozen=True)
class FetchPartition:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int | None = None
    last_fetched_epoch: int | None = None
    # The request's isolation level is READ_COMMITTED (Kafka's FetchIsolation.TXN_COMMITTED):
    # a consumer reads below the last stable offset and is told the aborted transactions.
    # Ignored for followers, which read to the log end.
    read_committed: bool = False


@dataclass(frozen=True)
class FetchedPartition:
    error: KafkaError | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # With read_committed, ``data.aborted_transactions`` lists the aborted transactions
    # overlapping its batches.
    data: FetchDataInfo | None = None
    diverging_epoch: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return self.data.size if self.data is not None else 0

    @property
    def aborted_transactions(self) -> list[AbortedTransaction] | None:
        """read_committed only: what the consumer must drop (None otherwise)."""
        return self.data.aborted_transactions if self.data is not None else None


class ListOffsetsPartitions(dict[TopicPartition, int]):
    """A ListOffsets request's partitions, each with its wanted timestamp, and the request's
    isolation level: with ``read_committed`` the latest offset is the last stable offset, and
    no timestamp lookup answers an offset at or past it (Kafka's ``fetchOffsetForTimestamp``).
    A plain mapping reads uncommitted."""

    def __init__(
        self, wanted: Mapping[TopicPartition, int] | None = None, *, read_committed: bool = False
    ) -> None:
        super().__init__(wanted or {})
        self.read_committed = read_committed


@dataclass(frozen=True)
class ListedOffset:
    error: KafkaError | None = None
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


def _unknown(tp: TopicPartition) -> KafkaError:
    return errors.UnknownTopicOrPartitionError(
        f"This server does not host this topic-partition: {tp}."
    )


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        clock: Clock,
        alter_partition: AlterPartitionManager | None = None,
        fetchers: ReplicaFetcherManager | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.clock = clock
        self.alter_partition = alter_partition
        self.fetchers = fetchers
        self.partitions: dict[TopicPartition, Partition] = {}
        self.image = MetadataImage()
        self.produce_purgatory = Purgatory("Produce")
        self.fetch_purgatory = Purgatory("Fetch")

    # -- metadata --------------------------------------------------------------------------

    def apply_partition_changes(
        self, changes: Iterable[PartitionChange], image: MetadataImage
    ) -> None:
        """Act on a metadata delta: create logs for new replicas here, change roles, delete
        logs of partitions that left this broker."""
        self.image = image
        now = self.clock()
        follow: dict[TopicPartition, tuple[int, int]] = {}
        unfollow: list[TopicPartition] = []
        changed: list[TopicPartition] = []
        for change in changes:
            tp = TopicPartition(change.topic, change.partition)
            after = change.after
            if after is None or self.broker_id not in after.replicas:
                if self.fetchers is not None:
                    self.fetchers.remove_partitions([tp])
                self._remove(tp)
                continue
            p = self.partitions.get(tp)
            if p is None:
                topic = image.topic(change.topic)
                topic_id = topic.topic_id if topic is not None else None
                if self._is_stray(tp, topic_id):
                    self._delete_stray(tp)
                overrides = dict(image.topic_config(change.topic))
                log = self.log_manager.get_or_create_log(
                    tp.topic, tp.partition, overrides, topic_id
                )
                min_isr = int(self.log_manager.topic_config(tp.topic)["min.insync.replicas"])
                p = Partition(
                    tp,
                    log,
                    self.broker_id,
                    topic_id=topic.topic_id if topic is not None else NO_TOPIC_ID,
                    min_insync_replicas=min_isr,
                    alter_isr=self._alter_isr if self.alter_partition is not None else None,
                    high_watermark=self.log_manager.checkpointed_high_watermark(*tp),
                )
                self.partitions[tp] = p
            new_leadership = p.apply_registration(after, now)
            if p.is_leader or not after.has_leader:
                unfollow.append(tp)
            elif new_leadership or (
                self.fetchers is not None and not self.fetchers.is_following(tp)
            ):
                follow[tp] = (after.leader, after.leader_epoch)
            changed.append(tp)
        if self.fetchers is not None:
            self.fetchers.remove_partitions(unfollow)
            self.fetchers.add_partitions(follow)
        for tp in changed:
            self._changed(tp)

    def topic_config_changed(self, topic: str) -> None:
        """A topic's configs changed: its partitions take the new min.insync.replicas (the
        high watermark may move, and acks=all appends waiting on it finish)."""
        min_isr = int(self.log_manager.topic_config(topic)["min.insync.replicas"])
        for tp, p in self.partitions.items():
            if tp.topic == topic and p.min_insync_replicas != min_isr:
                p.min_insync_replicas = min_isr
                p.maybe_increment_high_watermark()
                self._changed(tp)

    def remove_stray_logs(self, image: MetadataImage) -> None:
        """Delete the local logs ``image`` does not place on this broker: their topic is gone,
        was recreated under a new id, or the partition moved away. Called once this broker's
        image jumped past records it never saw (a snapshot fetched from the leader), when the
        deletions and reassignments among them could not be acted on one by one."""
        self.image = image
        for tp, _ in list(self.log_manager.all_logs()):
            if tp in self.partitions:
                continue
            topic = image.topic(tp.topic)
            reg = topic.partitions.get(tp.partition) if topic is not None else None
            topic_id = topic.topic_id if topic is not None else None
            if reg is None or self.broker_id not in reg.replicas or self._is_stray(tp, topic_id):
                self._delete_stray(tp)

    def _is_stray(self, tp: TopicPartition, topic_id: uuid.UUID | None) -> bool:
        recorded = self.log_manager.topic_id_of(tp.topic, tp.partition)
        return recorded is not None and topic_id is not None and recorded != topic_id

    def _delete_stray(self, tp: TopicPartition) -> None:
        recorded = self.log_manager.topic_id_of(tp.topic, tp.partition)
        if self.log_manager.delete_log(tp.topic, tp.partition):
            _log.warning(
                "deleted the stray log of %s (topic id %s): the metadata does not place that "
                "replica on this broker",
                tp,
                recorded,
            )

    def _alter_isr(self, tp: TopicPartition, new_isr: tuple[int, ...]) -> bool:
        p = self.partitions.get(tp)
        if p is None or self.alter_partition is None:
            return False
        added = [r for r in new_isr if r not in p.isr]
        if any(not self._eligible(r) for r in added):
            # KIP-841: a fenced or unregistered broker cannot join; asking would only be
            # refused (INELIGIBLE_REPLICA), again at each of its fetches.
            return False
        leader_epoch = p.leader_epoch

        def still_wanted() -> bool:
            return (
                self.partitions.get(tp) is p
                and p.is_leader
                and p.leader_epoch == leader_epoch
                and p.pending_isr == new_isr
            )

        def on_done(result: AlterPartitionResult) -> None:
            if self.partitions.get(tp) is p and p.alter_isr_completed(new_isr, result):
                self._changed(tp)

        return self.alter_partition.submit(
            tp,
            AlterPartitionState(p.topic_id, tp.partition, leader_epoch, p.partition_epoch, new_isr),
            on_done,
            still_wanted,
        )

    def _eligible(self, broker_id: int) -> bool:
        b = self.image.brokers.get(broker_id)
        return b is not None and not b.fenced

    def _remove(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None:
            self.log_manager.delete_log(tp.topic, tp.partition)
            self._changed(tp)

    def _changed(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def _leader(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            raise _unknown(tp)
        if not p.is_leader:
            raise errors.NotLeaderOrFollowerError(
                f"This server is not the leader for {tp} (leader: {p.leader_id})."
            )
        return p

    # -- produce ---------------------------------------------------------------------------

    async def append_records(
        self,
        entries: Mapping[TopicPartition, bytes | memoryview],
        required_acks: int,
        timeout_ms: int,
    ) -> dict[TopicPartition, ProducedPartition]:
        """Append each partition's batches on this leader. With ``acks=-1`` wait (up to
        ``timeout_ms``) until every in-sync replica has them."""
        if required_acks not in (-1, 0, 1):
            err = errors.InvalidRequiredAcksError(f"Invalid required acks value {required_acks}.")
            return {tp: ProducedPartition(err) for tp in entries}
        results: dict[TopicPartition, ProducedPartition] = {}
        # acks=all appends still waiting: the offset after each one's last record, and the
        # leader epoch it was written in.
        waiting: dict[TopicPartition, tuple[int, int]] = {}
        for tp, records in entries.items():
            try:
                p = self._leader(tp)
                info = p.append_records_to_leader(records, required_acks)
            except KafkaError as e:
                results[tp] = ProducedPartition(e)
                continue
            results[tp] = ProducedPartition(
                None,
                info.first_offset,
                info.log_append_time,
                info.log_start_offset,
                tuple(info.batch_base_offsets or ()),
            )
            self.fetch_purgatory.check_and_complete(tp)
            self.produce_purgatory.check_and_complete(tp)
            if required_acks == -1:
                waiting[tp] = (info.last_offset + 1, p.leader_epoch)

        if waiting:
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

            await self.produce_purgatory.wait(waiting, replicated, timeout_ms)
            replicated()
            for tp, (end, epoch) in waiting.items():
                if tp in failed:
                    results[tp] = ProducedPartition(failed[tp])
                elif not self._replicated(tp, end, epoch):
                    results[tp] = ProducedPartition(
                        errors.RequestTimedOutError(
                            f"{tp}: the in-sync replicas did not all get the records "
                            f"within {timeout_ms} ms"
                        )
                    )
        return results

    def _replicated(self, tp: TopicPartition, end_offset: int, leader_epoch: int) -> bool:
        p = self.partitions.get(tp)
        if p is None:
            raise errors.NotLeaderOrFollowerError(f"{tp} left this broker before it was replicated")
        return p.check_enough_replicas_reach_offset(end_offset, leader_epoch)

    # -- fetch -----------------------------------------------------------------------------

    async def fetch(
        self,
        requests: Mapping[TopicPartition, FetchPartition],
        *,
        replica_id: int = -1,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 50 << 20,
    ) -> dict[TopicPartition, FetchedPartition]:
        """Read each partition (whole batches; the first partition with data gets at least
        one batch even past ``max_bytes``). Waits up to ``max_wait_ms`` for ``min_bytes``."""
        results = self.read(requests, replica_id, max_bytes)

        def enough() -> bool:
            nonlocal results
            if any(r.error is not None or r.diverging_epoch for r in results.values()):
                return True
            if sum(r.size for r in results.values()) >= min_bytes:
                return True
            results = self.read(requests, replica_id, max_bytes, record_follower=False)
            return sum(r.size for r in results.values()) >= min_bytes

        if max_wait_ms > 0 and not enough():
            await self.fetch_purgatory.wait(requests, enough, max_wait_ms)
        return results

    def read(
        self,
        requests: Mapping[TopicPartition, FetchPartition],
        replica_id: int,
        max_bytes: int,
        record_follower: bool = True,
    ) -> dict[TopicPartition, FetchedPartition]:
        """One fetch's reads, now, without waiting (what :meth:`fetch` does before and while
        it long-polls). A follower's fetch (``replica_id`` >= 0) records its position unless
        ``record_follower`` is false. A consumer's read_committed fetch reads below the last
        stable offset, with the aborted transactions overlapping what it returns; every
        answer reports the partition's last stable offset."""
        now = self.clock()
        out: dict[TopicPartition, FetchedPartition] = {}
        budget = max_bytes
        for tp, req in requests.items():
            try:
                p = self._leader(tp)
                read_committed = req.read_committed and replica_id < 0
                limit = min(req.max_bytes, max(budget, 0))
                min_one_batch = budget == max_bytes
                # The partition checks leadership, epochs and divergence and reads below the
                # high watermark; a read_committed read is bounded by the LSO instead, so
                # the partition reads nothing here and the log is read below.
                r = p.fetch(
                    req.fetch_offset,
                    0 if read_committed else limit,
                    replica_id=replica_id,
                    current_leader_epoch=req.current_leader_epoch,
                    last_fetched_epoch=req.last_fetched_epoch,
                    min_one_batch=min_one_batch and not read_committed,
                )
                follower = replica_id >= 0 and record_follower and r.diverging_epoch is None
                if follower and p.update_follower_fetch_state(replica_id, req.fetch_offset, now):
                    self.produce_purgatory.check_and_complete(tp)
                    self.fetch_purgatory.check_and_complete(tp)
                data = r.data
                # After a follower's fetch moved it: the newest HW, and the LSO below it.
                hw = p.high_watermark
                lso = p.log.last_stable_offset(hw)
                if read_committed and r.diverging_epoch is None:
                    data = p.log.read(
                        req.fetch_offset,
                        limit,
                        max_offset=lso,
                        min_one_batch=min_one_batch,
                        read_committed=True,
                    )
            except KafkaError as e:
                p_any = self.partitions.get(tp)
                out[tp] = FetchedPartition(
                    e,
                    high_watermark=p_any.high_watermark if p_any else -1,
                    log_start_offset=p_any.log.log_start_offset if p_any else -1,
                )
                continue
            fetched = FetchedPartition(
                None,
                hw,
                lso,
                r.log_start_offset,
                data,
                r.diverging_epoch,
            )
            budget -= fetched.size
            out[tp] = fetched
        return out

    # -- list offsets ----------------------------------------------------------------------

    def list_offsets(
        self, requests: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ListedOffset]:
        """ListOffsets: -2 earliest, -1 latest (the high watermark; the last stable offset
        for a read_committed :class:`ListOffsetsPartitions`), -3 the max timestamp, or the
        first offset whose timestamp is at or after the given one (read_committed: none at
        or past the last stable offset)."""
        read_committed = isinstance(requests, ListOffsetsPartitions) and requests.read_committed
        out: dict[TopicPartition, ListedOffset] = {}
        for tp, timestamp in requests.items():
            try:
                p = self._leader(tp)
                if timestamp < -3:
                    raise errors.InvalidRequestError(f"invalid timestamp {timestamp}")
                found = p.offset_for_timestamp(timestamp, isolation_committed=read_committed)
                if found is not None and read_committed:
                    lso = p.log.last_stable_offset(p.high_watermark)
                    ts, offset, epoch = found
                    if timestamp == -1:
                        found = (ts, min(offset, lso), epoch)
                    elif timestamp != -2 and offset >= lso:
                        found = None
            except KafkaError as e:
                out[tp] = ListedOffset(e)
                continue
            if found is None:
                out[tp] = ListedOffset(None)
            else:
                ts, offset, epoch = found
                out[tp] = ListedOffset(None, ts, offset, -1 if epoch is None else epoch)
        return out

    # -- housekeeping ----------------------------------------------------------------------

    def schedule(
        self, scheduler: Scheduler, *, replica_lag_time_max_ms: int, hw_checkpoint_ms: int
    ) -> None:
        """ISR expiry every half ``replica.lag.time.max.ms`` (Kafka's isr-expiration) and
        the high-watermark checkpoint every
        ``replica.high.watermark.checkpoint.interval.ms``."""
        scheduler.schedule(
            "isr-expiration",
            lambda: self.maybe_shrink_isrs(replica_lag_time_max_ms),
            replica_lag_time_max_ms // 2,
        )
        scheduler.schedule(
            "highwatermark-checkpoint", self.checkpoint_high_watermarks, hw_checkpoint_ms
        )

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.checkpoint_high_watermarks(self.high_watermarks())

    def maybe_shrink_isrs(self, replica_lag_time_max_ms: int) -> None:
        now = self.clock()
        for p in self.partitions.values():
            p.maybe_shrink_isr(now, replica_lag_time_max_ms)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    async def stop_fetchers(self) -> None:
        """Stop following leaders (before the logs close)."""
        if self.fetchers is not None:
            await self.fetchers.shutdown()

    def shutdown(self) -> None:
        """Complete every waiting request, then checkpoint the high watermarks."""
        self.produce_purgatory.cancel_all()
        self.fetch_purgatory.cancel_all()
        self.checkpoint_high_watermarks()
