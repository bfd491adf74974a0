"""The group coordinator on a broker (Kafka's GroupCoordinatorService with its
CoordinatorRuntime): runs a :class:`~rillet.coordinator.group.shard.GroupCoordinatorShard` for
each partition of ``__consumer_offsets`` this broker leads, and wires it to the log, the
clock and the requests.

- **Where a group lives.** ``partition_for(group id, offsets.topic.num.partitions)``; the
  leader of that partition is the coordinator. FindCoordinator creates ``__consumer_offsets``
  on first use (``offsets.topic.replication.factor``, compacted, 100 MiB segments) and
  answers COORDINATOR_NOT_AVAILABLE until the partition has a leader.
- **Loading.** When this broker becomes a partition's leader, a new shard replays the whole
  partition (read and decoded off the event loop), then serves; meanwhile requests get
  COORDINATOR_LOAD_IN_PROGRESS, and NOT_COORDINATOR once leadership has moved (the shard is
  thrown away, its parked JoinGroup/SyncGroup answered).
- **Writes.** An operation's records are appended to the partition with acks=all as soon as
  the shard returns them (nothing awaits in between, so the log order is the order the shard
  applied them); its response, and the completions of parked requests, are sent once the
  high watermark has passed every record written so far. A read waits the same way. An
  append that fails unloads the shard (the answer names a coordinator error, as Kafka's
  do) and, while this broker still leads, loads it again from the log. The wait is the
  coordinator's own task, not the request's: a request gRPC cancels (its client gone or its
  deadline passed) takes neither the completions of other members nor that reload with it.
- **Timers.** One task per loaded shard sleeps until ``next_deadline_ms()`` (or until an
  operation may have moved it) and ticks the shard.
- **Transactions.** A TxnOffsetCommit's records are one transactional batch with the
  producer's id and epoch and no sequence; :meth:`GroupCoordinator.complete_transaction`
  (WriteTxnMarkers) appends the COMMIT/ABORT marker. Every write goes through one call
  site (:meth:`GroupCoordinator._append_to_log`) with the coordinator's origin (Kafka's
  ``AppendOrigin.COORDINATOR``: the log checks the producer epoch, not sequences), in the
  order the shard applied them. When the log refuses a transactional batch or a marker
  before writing it (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...), the shard
  takes it back (``result.undo``) and stays loaded. Loading replays a transactional batch's
  records as its producer's pending offsets and a marker batch as the end of its
  transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import struct
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from rillet import errors
from rillet._core import BatchBuilder, decode_batches
from rillet.broker.controller_channel import ControllerChannel
from rillet.broker.replica_manager import ReplicaManager
from rillet.controller import CreatableTopic
from rillet.coordinator.end_txn_marker import ABORT, COMMIT, end_txn_marker_batch
from rillet.coordinator.group.config import GroupCoordinatorConfig
from rillet.coordinator.group.consumer_group import TopicInfo
from rillet.coordinator.group.partitioner import partition_for
from rillet.coordinator.group.results import Completion, CoordinatorResult
from rillet.coordinator.group.shard import GroupCoordinatorShard
from rillet.coordinator.group.state import NO_PRODUCER_ID
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.scheduler import Clock
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator"]

_log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsets.topic.segment.bytes and offsets.topic.compression.codec defaults.
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
    "compression.type": "producer",
}

R = TypeVar("R")


@dataclass
class _Loaded:
    """One partition's shard while this broker leads it."""

    shard: GroupCoordinatorShard
    leader_epoch: int
    # The log end after the last append: responses wait for the high watermark to pass it.
    written_end: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    timer_task: asyncio.Task[None] | None = None


class GroupCoordinator:
    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        log_manager: LogManager,
        channel: ControllerChannel,
        config: GroupCoordinatorConfig,
        clock: Clock,
        *,
        replication_factor: int,
        commit_timeout_ms: int = 5000,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.log_manager = log_manager
        self.channel = channel
        self.config = config
        self.clock = clock
        self.replication_factor = replication_factor
        self.commit_timeout_ms = commit_timeout_ms
        self.image = MetadataImage()
        self._loaded: dict[int, _Loaded] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._parked: dict[Hashable, asyncio.Future[Any]] = {}
        self._creating: asyncio.Task[None] | None = None
        # Writes waiting for the high watermark: the coordinator's own tasks (see _submit).
        self._tasks: set[asyncio.Task[Any]] = set()
        self._rng = random.Random()
        self._warned_at = -(10**9)  # when too few brokers for __consumer_offsets was last said
        self._closed = False

    @property
    def num_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    # -- metadata ------------------------------------------------------------------------------

    def on_metadata(self, image: MetadataImage) -> None:
        """A new metadata image (after the ReplicaManager acted on it): load the partitions
        of ``__consumer_offsets`` this broker now leads, unload the others."""
        self.image = image
        topics = {t.name: TopicInfo(t.topic_id, len(t.partitions)) for t in image.topics()}
        if topics != self._topics:
            self._topics = topics
            for loaded in self._loaded.values():
                loaded.shard.on_metadata(topics)
        led: dict[int, int] = {}
        for index in range(self.num_partitions):
            p = self.replicas.partitions.get(TopicPartition(OFFSETS_TOPIC, index))
            if p is not None and p.is_leader:
                led[index] = p.leader_epoch
        for index, loaded in list(self._loaded.items()):
            if led.get(index) != loaded.leader_epoch:
                self._unload(index, "leadership moved")
        for index, task in list(self._loading.items()):
            if index not in led:
                task.cancel()
                del self._loading[index]
        for index, epoch in led.items():
            if index not in self._loaded and index not in self._loading and not self._closed:
                self._loading[index] = asyncio.get_running_loop().create_task(
                    self._load(index, epoch), name=f"load {OFFSETS_TOPIC}-{index}"
                )

    async def _load(self, index: int, leader_epoch: int) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, index)
        log = self.log_manager.get_log(*tp)
        assert log is not None
        started = self.clock()
        records = await asyncio.to_thread(_read_records, log)
        shard = GroupCoordinatorShard(index, self.config, rng=self._rng, topics=self._topics)
        _replay(shard, records, tp)
        shard.on_loaded(self.clock())
        loaded = _Loaded(shard, leader_epoch, written_end=log.log_end_offset)
        self._loading.pop(index, None)
        self._loaded[index] = loaded
        loaded.timer_task = asyncio.get_running_loop().create_task(
            self._run_timers(index, loaded), name=f"timers {OFFSETS_TOPIC}-{index}"
        )
        _log.info(
            "loaded %d groups of %s from %d records in %d ms",
            len(shard.state.groups),
            tp,
            len(records),
            self.clock() - started,
        )

    def _unload(self, index: int, why: str) -> None:
        loaded = self._loaded.pop(index, None)
        if loaded is None:
            return
        if loaded.timer_task is not None:
            loaded.timer_task.cancel()
        for c in loaded.shard.unload():
            self._resolve(c)
        _log.info("unloaded %s-%d: %s", OFFSETS_TOPIC, index, why)

    async def close(self) -> None:
        self._closed = True
        for task in self._loading.values():
            task.cancel()
        for index in list(self._loaded):
            self._unload(index, "shutting down")
        if self._creating is not None:
            self._creating.cancel()
        for task in list(self._tasks):
            task.cancel()

    # -- FindCoordinator -----------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> int | KafkaError:
        """The node id of ``key``'s coordinator, creating ``__consumer_offsets`` first."""
        if not key:
            return errors.InvalidRequestError("the group id must not be empty")
        topic = self.image.topic(OFFSETS_TOPIC)
        if topic is None:
            await self._create_offsets_topic()
            return errors.CoordinatorNotAvailableError(
                f"{OFFSETS_TOPIC} is being created; retry shortly"
            )
        reg = topic.partitions.get(partition_for(key, len(topic.partitions)))
        if reg is None or not reg.has_leader:
            return errors.CoordinatorNotAvailableError(
                f"the {OFFSETS_TOPIC} partition of {key!r} has no leader"
            )
        return reg.leader

    async def _create_offsets_topic(self) -> None:
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(self._create())
        await asyncio.shield(self._creating)

    async def _create(self) -> None:
        live = sum(1 for b in self.image.brokers.values() if not b.fenced)
        if live < self.replication_factor:
            now = self.clock()
            if now < self._warned_at + 10_000:
                return
            self._warned_at = now
            _log.warning(
                "%s needs %d live brokers (offsets.topic.replication.factor) and there are "
                "%d: groups wait until enough brokers are up",
                OFFSETS_TOPIC,
                self.replication_factor,
                live,
            )
            return
        try:
            (result,) = await self.channel.create_topics(
                [
                    CreatableTopic(
                        OFFSETS_TOPIC,
                        self.num_partitions,
                        self.replication_factor,
                        configs=OFFSETS_TOPIC_CONFIGS,
                    )
                ]
            )
        except KafkaError as e:
            _log.warning("could not create %s: %s", OFFSETS_TOPIC, e)
            return
        if result.error is not None and not isinstance(
            result.error, errors.TopicAlreadyExistsError
        ):
            _log.warning("could not create %s: %s", OFFSETS_TOPIC, result.error)
        else:
            _log.info(
                "created %s with %d partitions, replication factor %d",
                OFFSETS_TOPIC,
                self.num_partitions,
                self.replication_factor,
            )

    # -- running operations --------------------------------------------------------------------

    def _shard_for(self, group_id: str) -> tuple[int, _Loaded] | KafkaError:
        index = partition_for(group_id, self.num_partitions)
        loaded = self._loaded.get(index)
        if loaded is not None:
            return index, loaded
        if index in self._loading:
            return errors.CoordinatorLoadInProgressError(
                f"{OFFSETS_TOPIC}-{index} is loading; retry shortly"
            )
        return errors.NotCoordinatorError(
            f"this broker ({self.broker_id}) does not coordinate group {group_id!r}"
        )

    async def run(
        self,
        group_id: str,
        operation: Callable[[GroupCoordinatorShard, int], CoordinatorResult[R]],
        on_error: Callable[[KafkaError], R],
    ) -> R:
        """Run one operation on ``group_id``'s shard; its response once committed."""
        found = self._shard_for(group_id)
        if isinstance(found, KafkaError):
            return on_error(found)
        index, loaded = found
        result = operation(loaded.shard, self.clock())
        err = await self._complete(index, loaded, result)
        if err is not None:
            return on_error(err)
        assert result.response is not None
        return result.response

    async def run_per_group(
        self,
        group_ids: Iterable[str],
        operation: Callable[[GroupCoordinatorShard, str], CoordinatorResult[list[R]]],
        on_error: Callable[[str, KafkaError], R],
    ) -> list[R]:
        """A request naming several groups (DescribeGroups, DeleteGroups): each group is
        run on its own shard, in the order given; answers concatenated."""
        out: list[R] = []
        for g in group_ids:
            answer: list[R] = await self.run(
                g, _for_group(operation, g), _for_group_error(on_error, g)
            )
            out.extend(answer)
        return out

    async def run_parked(
        self,
        group_id: str,
        operation: Callable[[GroupCoordinatorShard, Hashable, int], CoordinatorResult[None]],
        on_error: Callable[[KafkaError], R],
    ) -> R:
        """Run a JoinGroup or SyncGroup: its answer comes as a completion, now or later."""
        found = self._shard_for(group_id)
        if isinstance(found, KafkaError):
            return on_error(found)
        index, loaded = found
        handle = object()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._parked[handle] = future
        try:
            result = operation(loaded.shard, handle, self.clock())
            err = await self._complete(index, loaded, result)
            if err is not None and not future.done():
                return on_error(err)
            response: R = await future
            return response
        finally:
            self._parked.pop(handle, None)

    async def run_on_all(
        self, operation: Callable[[GroupCoordinatorShard, int], CoordinatorResult[R]]
    ) -> list[R]:
        """A read over every loaded shard (ListGroups)."""
        out = []
        for index, loaded in list(self._loaded.items()):
            result = operation(loaded.shard, self.clock())
            err = await self._complete(index, loaded, result)
            if err is None and result.response is not None:
                out.append(result.response)
        return out

    async def _complete(
        self, index: int, loaded: _Loaded, result: CoordinatorResult[Any]
    ) -> KafkaError | None:
        """Write ``result`` and answer its completions (:meth:`_submit`); the error as the
        coordinator reports it if that failed."""
        return _coordinator_error(await asyncio.shield(self._submit(index, loaded, result)))

    def _submit(
        self, index: int, loaded: _Loaded, result: CoordinatorResult[Any]
    ) -> asyncio.Task[KafkaError | None]:
        """Append ``result``'s records (or marker) now; the returned task waits until
        everything written so far is committed, answers the result's completions, and gives
        the log's or the partition's error if that failed.

        Nothing awaits between the shard's operation and the append, so the log holds the
        records in the order the shard applied them. A refused transactional write is taken
        back from the shard (``result.undo``); any other failure leaves the shard with records
        the log may not keep, so it is thrown away and loaded again.

        The wait is the coordinator's own task, not the request's: gRPC cancels a handler
        whose client went away or whose deadline passed, and the completions of other
        members (a leader's SyncGroup answers its followers') or the reload after a failed
        write must not go with it. A caller waits for it shielded."""
        loaded.wake.set()  # the operation may have moved the shard's next deadline
        tp = TopicPartition(OFFSETS_TOPIC, index)
        err: KafkaError | None = None
        batch = self._batch_of(result)
        if batch is not None:
            try:
                loaded.written_end = self._append_to_log(
                    tp, batch, allow_control=result.marker is not None
                )
            except KafkaError as e:
                err = e
                if result.undo is not None:
                    result.undo()  # nothing was written: the shard takes it back
                else:
                    self._reload(index, loaded, e)
        task = asyncio.get_running_loop().create_task(
            self._finish(index, loaded, result, loaded.written_end, err)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _finish(
        self,
        index: int,
        loaded: _Loaded,
        result: CoordinatorResult[Any],
        written_end: int,
        err: KafkaError | None,
    ) -> KafkaError | None:
        if err is None:
            err = await self._await_committed(TopicPartition(OFFSETS_TOPIC, index), written_end)
            if err is not None:
                self._reload(index, loaded, err)
        answered = _coordinator_error(err)
        for c in result.completions:
            self._resolve(c, answered)
        return err

    def _batch_of(self, result: CoordinatorResult[Any]) -> bytes | None:
        """The batch that writes ``result``: its marker, its records (transactional when it
        names a producer), or None for a read."""
        now = self.clock()
        if result.marker is not None:
            m = result.marker
            return end_txn_marker_batch(
                m.producer_id, m.producer_epoch, m.coordinator_epoch, m.committed, now
            )
        if not result.records:
            return None
        if result.producer is None:
            builder = BatchBuilder("none")
        else:
            builder = BatchBuilder(
                "none",
                producer_id=result.producer.producer_id,
                producer_epoch=result.producer.producer_epoch,
                base_sequence=-1,
                is_transactional=True,
            )
        for record in result.records:
            builder.append(now, record.key_bytes(), record.value_bytes())
        return builder.build()

    def _append_to_log(self, tp: TopicPartition, batch: bytes, *, allow_control: bool) -> int:
        """Appends one batch to ``tp`` as its leader; the log end offset after it. Raises what
        the partition or the log refuses, and then nothing was written.

        The coordinator's only write to its partition (Kafka's CoordinatorPartitionWriter,
        acks=1 here; :meth:`_await_committed` waits for the in-sync replicas)."""
        p = self.replicas.partitions.get(tp)
        if p is None or not p.is_leader:
            raise errors.NotLeaderOrFollowerError(f"this broker no longer leads {tp}")
        if len(p.isr) < p.min_insync_replicas:
            raise errors.NotEnoughReplicasError(
                f"{tp}: the ISR {list(p.isr)} is smaller than min.insync.replicas "
                f"{p.min_insync_replicas}"
            )
        # AppendOrigin.COORDINATOR: the log checks a transactional batch's producer epoch but
        # not its sequence (the batches carry none).
        info = p.log.append_as_leader(
            batch, p.leader_epoch, allow_control=allow_control, origin="coordinator"
        )
        p.maybe_increment_high_watermark()
        self.replicas.fetch_purgatory.check_and_complete(tp)
        self.replicas.produce_purgatory.check_and_complete(tp)
        return int(info.last_offset) + 1

    def _reload(self, index: int, loaded: _Loaded, err: KafkaError) -> None:
        """The shard applied records the log may not keep: rebuild it from the log."""
        if self._loaded.get(index) is loaded:
            self._unload(index, f"a write failed: {err}")
            self.on_metadata(self.image)

    async def _await_committed(self, tp: TopicPartition, end: int) -> KafkaError | None:
        p = self.replicas.partitions.get(tp)
        if p is None or not p.is_leader:
            return errors.NotLeaderOrFollowerError(f"this broker no longer leads {tp}")
        epoch = p.leader_epoch
        try:
            ok = await self.replicas.produce_purgatory.wait(
                [tp],
                lambda: p.check_enough_replicas_reach_offset(end, epoch),
                self.commit_timeout_ms,
            )
        except KafkaError as e:
            return e
        if not ok:
            return errors.RequestTimedOutError(
                f"{tp}: earlier writes were not replicated within {self.commit_timeout_ms} ms"
            )
        return None

    # -- transactions --------------------------------------------------------------------------

    async def complete_transaction(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> KafkaError | None:
        """Ends ``producer_id``'s transaction on partition ``tp`` of ``__consumer_offsets``
        (WriteTxnMarkers; Kafka's GroupCoordinatorService.completeTransaction): appends the
        COMMIT (``committed``) or ABORT marker after everything the shard wrote before, waits
        until it is committed, and applies it to the shard. None once done, else Kafka's error
        as is: COORDINATOR_LOAD_IN_PROGRESS while the partition loads, NOT_COORDINATOR or
        NOT_LEADER_OR_FOLLOWER when this broker does not lead it (Kafka's WriteTxnMarkers
        handler answers NOT_LEADER_OR_FOLLOWER for the coordinator errors), the log's
        TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS,
        REQUEST_TIMED_OUT."""
        if tp.topic != OFFSETS_TOPIC:
            return errors.InvalidRequestError(f"the group coordinator does not write to {tp}")
        loaded = self._loaded.get(tp.partition)
        if loaded is None:
            if tp.partition in self._loading:
                return errors.CoordinatorLoadInProgressError(f"{tp} is loading; retry shortly")
            return errors.NotCoordinatorError(f"this broker ({self.broker_id}) does not lead {tp}")
        result = loaded.shard.complete_transaction(
            producer_id, producer_epoch, coordinator_epoch, committed
        )
        if result.marker is None:
            return result.response
        return await asyncio.shield(self._submit(tp.partition, loaded, result))

    def _resolve(self, completion: Completion, error: KafkaError | None = None) -> None:
        future = self._parked.get(completion.handle)
        if future is None or future.done():
            return
        response = completion.response
        if error is not None and dataclasses.is_dataclass(response):
            response = dataclasses.replace(response, error=error)  # type: ignore[type-var]
        future.set_result(response)

    async def _run_timers(self, index: int, loaded: _Loaded) -> None:
        while self._loaded.get(index) is loaded:
            deadline = loaded.shard.next_deadline_ms()
            loaded.wake.clear()
            delay = None if deadline is None else max(deadline - self.clock(), 0) / 1000
            if delay is None or delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(loaded.wake.wait(), delay)
                continue
            result = loaded.shard.tick(self.clock())
            if result.records or result.completions:
                await self._complete(index, loaded, result)

    # -- reads that need no shard ----------------------------------------------------------------

    def coordinated_groups(self) -> Sequence[int]:
        return sorted(self._loaded)

    def committed_offsets(self) -> Iterator[tuple[str, TopicPartition, int]]:
        """(group, partition, committed offset) of every group this broker coordinates (for
        the consumer-group lag at a metrics scrape)."""
        for loaded in self._loaded.values():
            for group, topics in loaded.shard.state.offsets.items():
                for topic, partitions in topics.items():
                    for partition, committed in partitions.items():
                        yield group, TopicPartition(topic, partition), committed.committed_offset


class _Record(NamedTuple):
    """A record of ``__consumer_offsets``; ``producer_id`` that of its batch if transactional."""

    key: bytes
    value: bytes | None
    producer_id: int


class _Marker(NamedTuple):
    """A COMMIT (``committed``) or ABORT marker of ``__consumer_offsets``."""

    producer_id: int
    producer_epoch: int
    committed: bool


_CONTROL_KEY = struct.Struct(">hh")  # version, type (Kafka's ControlRecordType)


def _read_records(log: Any) -> list[_Record | _Marker]:
    """Every record and transaction marker of a ``__consumer_offsets`` partition, in offset
    order (off the event loop: Rust reads and decodes)."""
    out: list[_Record | _Marker] = []
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, 1 << 20).read_all()
        if not data:
            break
        batches = decode_batches(data, allow_partial=True)
        if not batches:
            break
        for batch in batches:
            pid = batch.producer_id if batch.is_transactional else NO_PRODUCER_ID
            for record in batch.records:
                key = record.key
                if key is None or record.offset < offset:
                    continue
                if not batch.is_control:
                    out.append(_Record(key, record.value, pid))
                elif len(key) >= _CONTROL_KEY.size:
                    _, kind = _CONTROL_KEY.unpack_from(key)
                    if kind in (ABORT, COMMIT):
                        out.append(_Marker(batch.producer_id, batch.producer_epoch, kind == COMMIT))
            offset = batch.last_offset + 1
    return out


def _replay(
    shard: GroupCoordinatorShard, entries: Sequence[_Record | _Marker], tp: TopicPartition
) -> None:
    """Loads ``shard`` with what :func:`_read_records` read from ``tp``."""
    for entry in entries:
        try:
            if isinstance(entry, _Marker):
                shard.replay_end_transaction_marker(
                    entry.producer_id, entry.committed, producer_epoch=entry.producer_epoch
                )
            else:
                shard.replay(entry.key, entry.value, producer_id=entry.producer_id)
        except KafkaError as e:  # a record this version cannot read: skip, say so
            _log.warning("%s: skipped an unreadable record: %s", tp, e)


def _for_group(
    operation: Callable[[GroupCoordinatorShard, str], CoordinatorResult[list[R]]], group_id: str
) -> Callable[[GroupCoordinatorShard, int], CoordinatorResult[list[R]]]:
    return lambda shard, now: operation(shard, group_id)


def _for_group_error(
    on_error: Callable[[str, KafkaError], R], group_id: str
) -> Callable[[KafkaError], list[R]]:
    return lambda e: [on_error(group_id, e)]


def _coordinator_error(err: KafkaError | None) -> KafkaError | None:
    """An append's error as the coordinator reports it (Kafka's GroupCoordinatorService and
    its handleOperationException): the log's verdicts on a transactional producer pass as
    they are."""
    if err is None:
        return None
    if isinstance(
        err,
        errors.InvalidProducerEpochError
        | errors.ProducerFencedError
        | errors.InvalidTxnStateError
        | errors.InvalidProducerIdMappingError
        | errors.TransactionCoordinatorFencedError
        | errors.CoordinatorNotAvailableError
        | errors.CoordinatorLoadInProgressError
        | errors.NotCoordinatorError,
    ):
        return err
    if isinstance(
        err,
        errors.NotEnoughReplicasError
        | errors.NotEnoughReplicasAfterAppendError
        | errors.RequestTimedOutError
        | errors.UnknownTopicOrPartitionError,
    ):
        return errors.CoordinatorNotAvailableError(str(err))
    if isinstance(err, errors.NotLeaderOrFollowerError | errors.KafkaStorageError):
        return errors.NotCoordinatorError(str(err))
    return errors.UnknownServerError(str(err))
