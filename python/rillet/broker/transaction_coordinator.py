"""The transaction coordinator on a broker (Kafka's ``TransactionCoordinator`` with its
``TransactionStateManager`` I/O): runs a
:class:`~rillet.coordinator.transaction.TransactionCoordinatorShard` for each partition of
``__transaction_state`` this broker leads, and wires it to the log, the clock, the marker
channel and the requests. Its shape is the group coordinator's driver
(:mod:`rillet.broker.group_coordinator`), whose rules it follows:

- **Where a transactional id lives.** ``partition_for(transactional id,
  transaction.state.log.num.partitions)``; the leader of that partition is the coordinator.
  FindCoordinator(TRANSACTION) creates ``__transaction_state`` on first use
  (``transaction.state.log.replication.factor``, waiting until that many brokers are up;
  ``transaction.state.log.min.isr``; compacted, uncompressed,
  ``transaction.state.log.segment.bytes``; no unclean election) and answers
  COORDINATOR_NOT_AVAILABLE until the partition has a leader.
- **Loading.** When this broker becomes a partition's leader, a new shard replays the whole
  partition (read and decoded off the event loop), then serves, and sends again the markers
  of every PrepareCommit/PrepareAbort transaction; meanwhile requests get
  COORDINATOR_LOAD_IN_PROGRESS, and NOT_COORDINATOR once leadership has moved (the shard is
  thrown away with its markers in flight).
- **Writes.** An operation's records are appended to the partition (acks=all) in the same
  step as the shard applies them, so the log order is the order the shard applied them; its
  response and its markers go out once the high watermark has passed every record written so
  far (a marker must never reach a partition before the decision it carries is durable). An
  append that fails unloads the shard (the answer names a coordinator error, as Kafka's
  ``TransactionStateManager`` does) and, while this broker still leads, loads it again.
  That wait runs as a task of the driver, not of the request: gRPC cancels a handler whose
  client went away or whose deadline passed (a producer killed while its EndTxn waits), and
  the markers of a decision already in the log, or the reload after a failed write, must
  not go with it (Kafka's append callback does not depend on the client's connection
  either); a transaction would stay Prepare* until its coordinator moved.
- **Markers.** Sent by the :class:`~rillet.broker.txn_marker_channel.TxnMarkerChannel`;
  their answers go back to the shard that made them, whose retries are sent after
  ``retry.backoff.ms``.
- **Timers.** One task per loaded shard sleeps until ``next_deadline_ms()`` (or until an
  operation may have moved it) and ticks the shard: timed-out transactions are aborted,
  expired transactional ids removed.
- **Producer ids** come from the broker's
  :class:`~rillet.broker.producer_id_manager.ProducerIdManager`, the one idempotent
  producers get theirs from: one id is kept in reserve so that the shard, which takes ids
  synchronously, never waits for the controller.

The loading, appending and timer code is a copy of the group driver's (adapted: appends go
through the Partition synchronously); the two should become one coordinator runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from rillet import errors
from rillet._core import BatchBuilder, decode_batches
from rillet.broker.controller_channel import ControllerChannel
from rillet.broker.producer_id_manager import InitProducerIdRequest as BrokerInitProducerId
from rillet.broker.producer_id_manager import InitProducerIdResult
from rillet.broker.replica_manager import ReplicaManager
from rillet.broker.txn_marker_channel import TxnMarkerChannel
from rillet.broker.txn_verification import TRANSACTION_STATE_TOPIC
from rillet.controller import CreatableTopic
from rillet.coordinator.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    CoordinatorResult,
    DescribedTransaction,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListedTransaction,
    ListTransactionsResponse,
    TransactionCoordinatorConfig,
    TransactionCoordinatorShard,
    TransactionState,
    TxnMarker,
    partition_for,
)
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.scheduler import Clock
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinator"]

_log = logging.getLogger(__name__)

R = TypeVar("R")


class ProducerIds(Protocol):
    async def generate_producer_id(self) -> int: ...


@dataclass
class _Loaded:
    """One partition's shard while this broker leads it."""

    shard: TransactionCoordinatorShard
    leader_epoch: int
    # The log end after the last append: responses wait for the high watermark to pass it.
    written_end: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    timer_task: asyncio.Task[None] | None = None


class TransactionCoordinator:
    """See the module doc."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        log_manager: LogManager,
        channel: ControllerChannel,
        config: TransactionCoordinatorConfig,
        clock: Clock,
        *,
        producer_ids: ProducerIds,
        markers: TxnMarkerChannel | None = None,
        replication_factor: int = 3,
        min_isr: int = 2,
        segment_bytes: int = 100 << 20,
        commit_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.log_manager = log_manager
        self.channel = channel
        self.config = config
        self.clock = clock
        self.producer_ids = producer_ids
        self.markers = markers
        self.replication_factor = replication_factor
        self.topic_configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(min_isr),
            "segment.bytes": str(segment_bytes),
            "unclean.leader.election.enable": "false",
        }
        self.commit_timeout_ms = commit_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.image = MetadataImage()
        self._loaded: dict[int, _Loaded] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._creating: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._spare_producer_ids: list[int] = []
        self._warned_at = -(10**9)
        self._closed = False

    @property
    def num_partitions(self) -> int:
        return self.config.transaction_state_log_num_partitions

    # -- metadata ------------------------------------------------------------------------------

    def on_metadata(self, image: MetadataImage) -> None:
        """A new metadata image (after the ReplicaManager acted on it): load the partitions
        of ``__transaction_state`` this broker now leads, unload the others."""
        self.image = image
        led: dict[int, int] = {}
        for index in range(self.num_partitions):
            p = self.replicas.partitions.get(TopicPartition(TRANSACTION_STATE_TOPIC, index))
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
                    self._load(index, epoch), name=f"load {TRANSACTION_STATE_TOPIC}-{index}"
                )

    async def _load(self, index: int, leader_epoch: int) -> None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, index)
        log = self.log_manager.get_log(*tp)
        assert log is not None
        started = self.clock()
        try:
            records = await asyncio.to_thread(_read_records, log)
        except Exception:
            # Not left loading forever: the next metadata change tries again.
            _log.exception("could not read %s", tp)
            self._loading.pop(index, None)
            return
        self._loading.pop(index, None)
        p = self.replicas.partitions.get(tp)
        if p is None or not p.is_leader or p.leader_epoch != leader_epoch or self._closed:
            self.on_metadata(self.image)  # leadership moved while reading: start over
            return
        shard = TransactionCoordinatorShard(
            index, leader_epoch, self.config, producer_ids=self._take_producer_id
        )
        for key, value in records:
            try:
                shard.replay(key, value)
            except (KafkaError, ValueError) as e:  # a record this version cannot read
                _log.warning("%s: skipped an unreadable record: %s", tp, e)
        loaded = _Loaded(shard, leader_epoch, written_end=log.log_end_offset)
        self._loaded[index] = loaded
        result = shard.on_loaded(self.clock())
        loaded.timer_task = asyncio.get_running_loop().create_task(
            self._run_timers(index, loaded), name=f"timers {TRANSACTION_STATE_TOPIC}-{index}"
        )
        self._submit(index, loaded, result)
        _log.info(
            "loaded %d transactional ids of %s (coordinator epoch %d) from %d records in %d "
            "ms; %d transactions to complete",
            len(shard.state.transactions),
            tp,
            leader_epoch,
            len(records),
            self.clock() - started,
            len(shard.pending_markers),
        )

    def _unload(self, index: int, why: str) -> None:
        loaded = self._loaded.pop(index, None)
        if loaded is None:
            return
        if loaded.timer_task is not None:
            loaded.timer_task.cancel()
        loaded.shard.unload()
        _log.info("unloaded %s-%d: %s", TRANSACTION_STATE_TOPIC, index, why)

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
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def coordinated_partitions(self) -> Sequence[int]:
        return sorted(self._loaded)

    # -- FindCoordinator -----------------------------------------------------------------------

    async def find_coordinator(self, key: str) -> int | KafkaError:
        """The node id of ``key``'s coordinator, creating ``__transaction_state`` first."""
        if not key:
            return errors.InvalidRequestError("the transactional id must not be empty")
        topic = self.image.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            await self._create_topic()
            return errors.CoordinatorNotAvailableError(
                f"{TRANSACTION_STATE_TOPIC} is being created; retry shortly"
            )
        reg = topic.partitions.get(partition_for(key, self.num_partitions))
        if reg is None or not reg.has_leader:
            return errors.CoordinatorNotAvailableError(
                f"the {TRANSACTION_STATE_TOPIC} partition of {key!r} has no leader"
            )
        return reg.leader

    async def _create_topic(self) -> None:
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
                "%s needs %d live brokers (transaction.state.log.replication.factor) and "
                "there are %d: transactions wait until enough brokers are up",
                TRANSACTION_STATE_TOPIC,
                self.replication_factor,
                live,
            )
            return
        topic = CreatableTopic(
            TRANSACTION_STATE_TOPIC,
            self.num_partitions,
            self.replication_factor,
            configs=self.topic_configs,
        )
        try:
            (result,) = await self.channel.create_topics([topic])
        except KafkaError as e:
            _log.warning("could not create %s: %s", TRANSACTION_STATE_TOPIC, e)
            return
        if result.error is not None and not isinstance(
            result.error, errors.TopicAlreadyExistsError
        ):
            _log.warning("could not create %s: %s", TRANSACTION_STATE_TOPIC, result.error)
        else:
            _log.info(
                "created %s with %d partitions, replication factor %d",
                TRANSACTION_STATE_TOPIC,
                self.num_partitions,
                self.replication_factor,
            )

    # -- the requests --------------------------------------------------------------------------

    async def init_producer_id(self, request: BrokerInitProducerId) -> InitProducerIdResult:
        """InitProducerId of a transactional producer (the broker checked the request's
        shape: :func:`~rillet.broker.producer_id_manager.handle_init_producer_id`). Raises
        the error to answer with."""
        tid = request.transactional_id
        assert tid is not None
        found = self._shard_for(tid)
        if isinstance(found, KafkaError):
            raise found
        if not self._spare_producer_ids:
            self._spare_producer_ids.append(await self.producer_ids.generate_producer_id())
        r = InitProducerIdRequest(
            tid, request.transaction_timeout_ms, request.producer_id, request.producer_epoch
        )
        response = await self.run(
            tid,
            lambda shard, now: shard.init_producer_id(r, now),
            lambda e: InitProducerIdResponse(error=e),
        )
        if response.error is not None:
            raise response.error
        return InitProducerIdResult(response.producer_id, response.producer_epoch)

    def _take_producer_id(self) -> int:
        if not self._spare_producer_ids:
            raise errors.CoordinatorLoadInProgressError("no producer id in reserve; retry")
        return self._spare_producer_ids.pop()

    async def add_partitions_to_txn(
        self, requests: Sequence[AddPartitionsToTxnRequest]
    ) -> list[AddPartitionsToTxnResponse]:
        """AddPartitionsToTxn: one answer per transaction, in order. A partition the metadata
        does not have fails its transaction: UNKNOWN_TOPIC_OR_PARTITION for it,
        OPERATION_NOT_ATTEMPTED for the others (as Kafka's ``KafkaApis``)."""
        return list(await asyncio.gather(*(self._add_partitions(r) for r in requests)))

    async def _add_partitions(self, r: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
        unknown = {tp for tp in r.partitions if self.image.partition(*tp) is None}
        if unknown:
            errs: dict[TopicPartition, KafkaError | None] = {
                tp: (
                    errors.UnknownTopicOrPartitionError(f"{tp} does not exist")
                    if tp in unknown
                    else errors.OperationNotAttemptedError(
                        "another partition of the transaction does not exist"
                    )
                )
                for tp in r.partitions
            }
            return AddPartitionsToTxnResponse(r.transactional_id, errs)
        return await self.run(
            r.transactional_id,
            lambda shard, now: shard.add_partitions_to_txn(r, now),
            lambda e: AddPartitionsToTxnResponse(
                r.transactional_id, dict.fromkeys(r.partitions, e)
            ),
        )

    async def add_offsets_to_txn(self, r: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
        return await self.run(
            r.transactional_id,
            lambda shard, now: shard.add_offsets_to_txn(r, now),
            lambda e: AddOffsetsToTxnResponse(error=e),
        )

    async def end_txn(self, r: EndTxnRequest) -> EndTxnResponse:
        return await self.run(
            r.transactional_id,
            lambda shard, now: shard.end_txn(r, now),
            lambda e: EndTxnResponse(error=e),
        )

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[DescribedTransaction]:
        """Each id's state as committed, from its shard (NOT_COORDINATOR and
        COORDINATOR_LOAD_IN_PROGRESS for ids of partitions not served here)."""

        async def describe(tid: str) -> DescribedTransaction:
            described = await self.run(
                tid,
                lambda shard, now: shard.describe_transactions([tid]),
                lambda e: [DescribedTransaction(tid, e)],
            )
            return described[0]

        return [await describe(tid) for tid in transactional_ids]

    async def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> ListTransactionsResponse:
        """The transactions of every partition this broker coordinates, sorted by id;
        COORDINATOR_LOAD_IN_PROGRESS while one of them is loading (as Kafka)."""
        states = list(dict.fromkeys(state_filters))
        pids = list(producer_id_filters)
        unknown = tuple(n for n in states if TransactionState.from_name(n) is None)
        if self._loading:
            return ListTransactionsResponse(
                errors.CoordinatorLoadInProgressError(
                    f"{len(self._loading)} {TRANSACTION_STATE_TOPIC} partitions are loading"
                ),
                unknown,
            )
        listed: list[ListedTransaction] = []
        for index, loaded in list(self._loaded.items()):
            result = loaded.shard.list_transactions(
                states, pids, duration_filter_ms, now_ms=self.clock()
            )
            err = await asyncio.shield(self._submit(index, loaded, result))
            response = result.response
            if err is None and response is not None and response.error is None:
                listed.extend(response.transaction_states)
        listed.sort(key=lambda t: t.transactional_id)
        return ListTransactionsResponse(None, unknown, tuple(listed))

    # -- running operations --------------------------------------------------------------------

    def _shard_for(self, transactional_id: str) -> tuple[int, _Loaded] | KafkaError:
        index = partition_for(transactional_id, self.num_partitions)
        loaded = self._loaded.get(index)
        if loaded is not None:
            return index, loaded
        if index in self._loading:
            return errors.CoordinatorLoadInProgressError(
                f"{TRANSACTION_STATE_TOPIC}-{index} is loading; retry shortly"
            )
        return errors.NotCoordinatorError(
            f"this broker ({self.broker_id}) does not coordinate transactional id "
            f"{transactional_id!r}"
        )

    async def run(
        self,
        transactional_id: str,
        operation: Callable[[TransactionCoordinatorShard, int], CoordinatorResult[R]],
        on_error: Callable[[KafkaError], R],
    ) -> R:
        """Run one operation on ``transactional_id``'s shard; its response once committed.
        An empty id is INVALID_REQUEST wherever it is sent (Kafka checks it first)."""
        if not transactional_id:
            return on_error(errors.InvalidRequestError("the transactional id must not be empty"))
        found = self._shard_for(transactional_id)
        if isinstance(found, KafkaError):
            return on_error(found)
        index, loaded = found
        result = operation(loaded.shard, self.clock())
        # Shielded: this request being cancelled must not cancel sending the markers.
        err = await asyncio.shield(self._submit(index, loaded, result))
        if err is not None:
            return on_error(err)
        assert result.response is not None
        return result.response

    def _submit(
        self, index: int, loaded: _Loaded, result: CoordinatorResult[Any], marker_delay_ms: int = 0
    ) -> asyncio.Task[KafkaError | None]:
        """Append ``result``'s records now, in the step the shard applied them; the returned
        task (the driver's own: see the module doc) waits until everything written so far is
        committed, then sends the markers, and gives the error (a coordinator error) if that
        failed. A caller that waits for it shields it."""
        loaded.wake.set()  # the operation may have moved the shard's next deadline
        err = self._append(index, loaded, result) if result.records else None
        return self._spawn(
            self._finish(index, loaded, result, loaded.written_end, err, marker_delay_ms)
        )

    def _append(
        self, index: int, loaded: _Loaded, result: CoordinatorResult[Any]
    ) -> KafkaError | None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, index)
        p = self.replicas.partitions.get(tp)
        if (
            self._loaded.get(index) is not loaded
            or p is None
            or not p.is_leader
            or p.leader_epoch != loaded.leader_epoch
        ):
            return errors.NotCoordinatorError(f"this broker no longer leads {tp}")
        builder = BatchBuilder("none")
        now = self.clock()
        for record in result.records:
            builder.append(now, record.key_bytes(), record.value_bytes())
        try:
            info = p.append_records_to_leader(builder.build(), -1)
        except KafkaError as e:
            return _coordinator_error(e)
        loaded.written_end = info.last_offset + 1
        self.replicas.fetch_purgatory.check_and_complete(tp)
        self.replicas.produce_purgatory.check_and_complete(tp)
        return None

    async def _finish(
        self,
        index: int,
        loaded: _Loaded,
        result: CoordinatorResult[Any],
        end: int,
        err: KafkaError | None,
        marker_delay_ms: int,
    ) -> KafkaError | None:
        if err is None:
            err = await self._await_committed(index, loaded, end)
        if err is None and self._loaded.get(index) is not loaded:
            err = errors.NotCoordinatorError(
                f"{TRANSACTION_STATE_TOPIC}-{index} moved before the write was committed"
            )
        if err is not None:
            # The shard applied records the log may not keep: rebuild it from the log.
            if self._loaded.get(index) is loaded:
                self._unload(index, f"a write failed: {err}")
                self.on_metadata(self.image)
            return err
        for marker in result.markers:
            self._send_marker(index, loaded, marker, marker_delay_ms)
        return None

    async def _await_committed(self, index: int, loaded: _Loaded, end: int) -> KafkaError | None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, index)
        p = self.replicas.partitions.get(tp)
        if p is None or not p.is_leader or p.leader_epoch != loaded.leader_epoch:
            return errors.NotCoordinatorError(f"this broker no longer leads {tp}")
        epoch = loaded.leader_epoch
        try:
            ok = await self.replicas.produce_purgatory.wait(
                [tp],
                lambda: p.check_enough_replicas_reach_offset(end, epoch),
                self.commit_timeout_ms,
            )
        except KafkaError as e:
            return _coordinator_error(e)
        if not ok:
            return errors.CoordinatorNotAvailableError(
                f"{tp}: the writes were not replicated within {self.commit_timeout_ms} ms"
            )
        return None

    # -- markers -------------------------------------------------------------------------------

    def _send_marker(self, index: int, loaded: _Loaded, marker: TxnMarker, delay_ms: int) -> None:
        if self.markers is None:
            _log.error("no marker channel: the markers of %s are not sent", marker)
            return

        def on_answer(
            m: TxnMarker,
            errs: dict[TopicPartition, KafkaError | None],
            deleted: frozenset[TopicPartition],
        ) -> None:
            self._on_marker_answer(index, loaded, m, errs, deleted)

        self.markers.send(
            marker, on_answer, lambda: self._loaded.get(index) is loaded, delay_ms=delay_ms
        )

    def _on_marker_answer(
        self,
        index: int,
        loaded: _Loaded,
        marker: TxnMarker,
        errs: dict[TopicPartition, KafkaError | None],
        deleted: frozenset[TopicPartition],
    ) -> None:
        if self._loaded.get(index) is not loaded:
            return
        failed = {tp: e for tp, e in errs.items() if e is not None}
        if failed:
            _log.info(
                "markers of %s (producer %d, epoch %d) not written to %s; retrying",
                marker.transactional_id,
                marker.producer_id,
                marker.producer_epoch,
                ", ".join(f"{tp}: {e}" for tp, e in sorted(failed.items())),
            )
        try:
            result = loaded.shard.on_markers_written(marker, errs, self.clock(), deleted=deleted)
        except errors.IllegalStateError:
            # A fatal answer (never expected): the transaction stays Prepare* until the
            # partition is loaded again, as in Kafka.
            _log.exception("markers of %s answered %s", marker.transactional_id, errs)
            return
        if result.records or result.markers:
            # Retries wait retry.backoff.ms; the Complete record is appended at once.
            self._submit(index, loaded, result, self.retry_backoff_ms)

    def _spawn(self, coro: Coroutine[Any, Any, R]) -> asyncio.Task[R]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        # A bug, not an error to answer: said at once, not when the task is collected.
        if not task.cancelled() and (e := task.exception()) is not None:
            _log.error("a task of the transaction coordinator failed", exc_info=e)

    # -- timers --------------------------------------------------------------------------------

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
            if result.records or result.markers:
                await asyncio.shield(self._submit(index, loaded, result))


def _read_records(log: Any) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of a ``__transaction_state`` partition, in offset order (off the
    event loop: Rust reads and decodes). A copy of the group driver's."""
    out: list[tuple[bytes, bytes | None]] = []
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
            if not batch.is_control:
                for record in batch.records:
                    if record.key is not None and record.offset >= offset:
                        out.append((record.key, record.value))
            offset = batch.last_offset + 1
    return out


def _coordinator_error(err: KafkaError | None) -> KafkaError | None:
    """An append's error as the coordinator reports it (Kafka's
    ``TransactionStateManager.appendTransactionToLog``)."""
    if err is None:
        return None
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
