"""The producer's sender thread (Kafka's ``Sender``): it drains ready batches from the
accumulator, groups them by leader into one ProduceRequest per broker (up to
``max_in_flight_requests_per_connection`` outstanding), completes the batches' futures from
the answers, and retries what is retriable (refreshing metadata on leadership errors) until
``delivery_timeout_ms``.

With idempotence (the default) every batch carries the producer id, epoch and a sequence
number per partition, and the sender keeps each partition's batches in order across
retries, as Kafka does:
- at most 128 batches of a partition are unacknowledged at once (partition leaders remember a
  producer's last 128 batches, which is how they recognise a retry of any of them), and until
  the first of a partition is acknowledged in an epoch, only one request carries its batches
  (a leader takes an unknown producer at any sequence, so a later request must not overtake
  the first);
- a partition with a batch waiting for its retry takes no new batches, and its retries go
  out, in sequence order, only once none of its batches is still on the wire;
- when a batch's sequence can no longer be followed, the epoch is bumped once nothing is in
  flight, and the batches still to deliver are stamped again (KIP-360).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc

from rillet._core import (
    ClosedBatch,
    RecordAccumulator,
    encode_produce_request,
    kafka_encode_produce_request,
)
from rillet.client.cluster import ClusterMetadata
from rillet.client.futures import ProduceRequestResult
from rillet.client.metrics import Metrics
from rillet.client.producer.idempotence import IdempotentState
from rillet.client.producer.metrics import SenderMetrics
from rillet.client.producer.transactions import TransactionManager
from rillet.client.security import refusal
from rillet.errors import (
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    error_for_code,
)
from rillet.protocol import produce_pb2
from rillet.types import TopicPartition

__all__ = ["Doorbell", "InFlightBatch", "Sender"]

_log = logging.getLogger(__name__)

# Partition leaders keep a producer's last 128 batches to recognise retries (Kafka's keep 5,
# the most a Kafka producer has unacknowledged per partition; this one packs several batches
# of a partition into one request, up to 64 of Kafka's default 16 KiB batches in a 1 MiB
# request, and keeps two such requests in flight).
MAX_UNACKED_BATCHES_PER_PARTITION = 128

PRODUCE_API_KEY = 0
# Produce from v3 (record batches, transactional ids) to v11 (the last that names topics).
PRODUCE_VERSIONS = (3, 11)


class _KafkaPartitionResult(NamedTuple):
    """A partition of a Kafka Produce response, read as gRPC's ``ProduceResponse.Partition``
    is. Kafka's has no offset per batch: a retry goes alone (:meth:`Sender._due_retries`)."""

    error_code: int
    error_message: str
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    batch_base_offsets: tuple[int, ...] = ()


# What acks=0 gets for each partition: no answer, so no offset.
_UNACKNOWLEDGED = _KafkaPartitionResult(0, "", -1, -1, -1)
PartitionResult = _KafkaPartitionResult | produce_pb2.ProduceResponse.Partition


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class InFlightBatch:
    slot: int
    tp: TopicPartition
    result: ProduceRequestResult
    records: ClosedBatch | None  # None: closing the batch failed
    count: int  # records in the batch
    reserved: int
    created_ms: int
    base_sequence: int = -1
    attempts: int = 0
    retry_at: float = 0.0


class Doorbell:
    """How ``send()`` wakes the sender thread when a batch becomes ready to go: only while
    the sender is looking for work or asleep waiting for some (``armed``). The sender arms
    it, under the lock, before it asks the accumulator what is ready, and disarms it when
    it found something, so a busy sender is not notified for every batch; a batch that
    became ready before the bell was armed is seen by that same look."""

    __slots__ = ("_wake", "armed")

    def __init__(self, wake: threading.Condition) -> None:
        self._wake = wake
        self.armed = True

    def ring(self) -> None:
        if self.armed:
            with self._wake:
                self._wake.notify()


class Sender:
    """Runs :meth:`run` on its own thread. ``lock`` guards the state it shares with the
    producer's ``flush`` and ``close``; ``wake`` (a condition on it) is notified when batches
    are ready or the sender should look again."""

    def __init__(
        self,
        config: dict[str, Any],
        acks: int,
        accumulator: RecordAccumulator,
        cluster: ClusterMetadata,
        lock: threading.Lock,
        wake: threading.Condition,
        interceptors: list[Any],
        idempotence: IdempotentState | None,
        init_producer_id: Callable[[], tuple[int, int]] | None,
        transactions: TransactionManager | None,
        doorbell: Doorbell,
        metrics: Metrics | None = None,
    ) -> None:
        self.config = config
        self._doorbell = doorbell
        self._acks = acks
        self._accumulator = accumulator
        self._cluster = cluster
        self._lock = lock
        self._wake = wake
        self._interceptors = interceptors
        self._idem = idempotence
        self._init_producer_id = init_producer_id
        self._txn = transactions
        self._max_request_size = int(config["max_request_size"])
        self._memory_freed = threading.Condition(threading.Lock())
        self.retries: list[InFlightBatch] = []
        self.draining = False  # closing batches taken from the accumulator
        self.in_flight = 0  # batches taken from the accumulator and not yet completed
        self._in_flight_requests = 0
        # Per slot: batches taken and not completed (idempotence), and batches of it in a
        # request on the wire.
        self._unresolved: dict[int, int] = defaultdict(int)
        self._on_wire: dict[int, int] = defaultdict(int)
        # With one request in flight, Kafka keeps order by sending one batch per partition at
        # a time (a muted partition has a batch in flight).
        self._guarantee_order = (
            idempotence is None and int(config["max_in_flight_requests_per_connection"]) == 1
        )
        self._muted: set[int] = set()
        self._stale_topics: set[str] = set()
        self.flushing = 0
        self.closed = False
        # A fatal error (InitProducerId refused): every batch fails with it.
        self.fatal: KafkaError | None = None
        self.sensors = (
            None
            if metrics is None
            else SenderMetrics(
                metrics,
                accumulator,
                cluster,
                int(config["buffer_memory"]),
                lambda: self._in_flight_requests,
            )
        )

    # -- memory ----------------------------------------------------------------------------

    def wait_for_memory(self, timeout: float) -> None:
        with self._memory_freed:
            self._memory_freed.wait(timeout)

    def _notify_memory(self) -> None:
        with self._memory_freed:
            self._memory_freed.notify_all()

    def idle(self) -> bool:
        """Nothing queued, being closed, waiting for a retry or in flight (call under
        ``lock``)."""
        return (
            self._accumulator.pending_batches == 0
            and not self.draining
            and not self.retries
            and self.in_flight == 0
        )

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        max_in_flight = int(self.config["max_in_flight_requests_per_connection"])
        while True:
            if self.fatal is not None:
                self._fail_everything(self.fatal)
                with self._lock:
                    if self.closed:
                        return
                    self._wake.wait(0.1)
                continue
            if self._txn is not None:
                # The transaction can only be aborted (or the producer was fenced): what
                # it still has queued fails at once rather than being sent (Kafka's Sender
                # aborts undrained batches), so a commit or flush does not wait for it.
                txn_error = self._txn.send_error()
                if txn_error is not None:
                    self._fail_everything(txn_error)
            if self._idem is not None and not self._idem.has_id:
                if self.closed:
                    return
                if self._init_producer_id is None:
                    # Transactional: init_transactions() sets the id; nothing can be sent
                    # before it.
                    with self._lock:
                        self._wake.wait(0.1)
                else:
                    self._get_producer_id()
                continue
            with self._lock:
                if self.closed:
                    return
                now = time.monotonic()
                if self._in_flight_requests >= max_in_flight:
                    self._wake.wait(0.1)
                    continue
                if (
                    self._idem is not None
                    and self._idem.bump_needed
                    and not self._idem.transactional
                ):
                    if self._in_flight_requests:
                        self._wake.wait(0.1)
                        continue
                    if not self._bump_epoch():
                        continue  # a new producer id is needed first
                self._doorbell.armed = True
                found = self._accumulator.ready(flush=self.flushing > 0)
                ready, wait_ms = found.slots, found.next_ready_ms
                due = self._due_retries(now)
                ready, limits = self._drainable(ready)
                if not ready and not due:
                    timeout = 0.1 if wait_ms is None else max(wait_ms, 0) / 1000
                    if self.retries:
                        timeout = min(timeout, max(min(b.retry_at for b in self.retries) - now, 0))
                    self._wake.wait(timeout)
                    continue
                self._doorbell.armed = False
                due_ids = {id(b) for b in due}
                self.retries = [b for b in self.retries if id(b) not in due_ids]
                self.in_flight += len(due)
                self.draining = bool(ready)
                stale, self._stale_topics = self._stale_topics, set()
            if stale:
                with contextlib.suppress(KafkaError):
                    self._cluster.refresh(stale)
                for topic in stale:
                    self._accumulator.forget_topic(topic)
            # Batches are closed (and compressed) by the accumulator without its lock, so
            # send() callers keep appending meanwhile. A batch that fails to close comes back
            # as its exception; drain itself only fails when memory runs out.
            try:
                drained = (
                    self._accumulator.drain(ready, self._max_request_size, limits) if ready else []
                )
            except Exception:
                _log.exception("closing batches failed")
                drained = []
            batches = list(due)
            broken: list[tuple[InFlightBatch, BaseException]] = []
            for d in drained:
                closed = None if isinstance(d.batch, BaseException) else d.batch
                b = InFlightBatch(
                    d.slot,
                    d.topic_partition,
                    d.result,
                    closed,
                    d.record_count,
                    d.reserved_bytes,
                    d.created_ms,
                    d.base_sequence,
                )
                if isinstance(d.batch, BaseException):
                    broken.append((b, d.batch))
                else:
                    batches.append(b)
            with self._lock:
                self.in_flight += len(drained)
                self.draining = False
                for d in drained:
                    self._unresolved[d.slot] += 1
                if self._guarantee_order:
                    self._muted.update(b.slot for b in batches)
            for b, err in broken:
                self._fail(b, err)
            if broken:
                self._done_with([b for b, _ in broken], request=False)
            if self._txn is not None and batches:
                batches = self._add_to_transaction(batches)
            try:
                self._send(batches)
            except Exception as e:  # never let the sender thread die
                _log.exception("producer sender failed")
                for b in batches:
                    self._fail(b, e if isinstance(e, KafkaError) else KafkaError(str(e)))
                self._done_with(batches, request=False)

    def _due_retries(self, now: float) -> list[InFlightBatch]:
        """Retries to send now (call under ``lock``). With idempotence a partition's retries
        go together, in sequence order, once none of its batches is on the wire."""
        if self._idem is None:
            return sorted(
                (b for b in self.retries if b.retry_at <= now), key=lambda b: b.created_ms
            )
        by_slot: dict[int, list[InFlightBatch]] = defaultdict(list)
        for b in self.retries:
            by_slot[b.slot].append(b)
        due: list[InFlightBatch] = []
        for slot, waiting in by_slot.items():
            if self._on_wire[slot] == 0 and min(b.retry_at for b in waiting) <= now:
                waiting.sort(key=lambda b: b.created_ms)
                # Kafka's Produce response has one offset per partition, so where a retry
                # may be a duplicate, each batch needs its own answer.
                due.extend(waiting[:1] if self._cluster.transport == "kafka" else waiting)
        return due

    def _drainable(self, ready: list[int]) -> tuple[list[int], list[int] | None]:
        """The ready slots that may take new batches, and how many each (call under
        ``lock``)."""
        if self._muted:
            ready = [slot for slot in ready if slot not in self._muted]
        if self._idem is None:
            return ready, None
        retrying = {b.slot for b in self.retries}
        slots, limits = [], []
        for slot in ready:
            if slot in self._idem.last_acked:
                room = MAX_UNACKED_BATCHES_PER_PARTITION - self._unresolved[slot]
            else:
                # Nothing of this partition acknowledged in this epoch yet: one request at a
                # time. A broker takes an unknown producer at any sequence, so a later batch
                # landing while the first is refused (say, the leader not knowing the new
                # topic yet) would leave a gap no retry could fill.
                room = 0 if self._unresolved[slot] else MAX_UNACKED_BATCHES_PER_PARTITION
            if room > 0 and slot not in retrying:
                slots.append(slot)
                limits.append(room)
        return slots, limits

    # -- producer id and epoch -------------------------------------------------------------

    def _get_producer_id(self) -> None:
        """One InitProducerId attempt (the sender drains nothing until it has an id); a
        retriable failure waits ``retry_backoff_ms``, any other is fatal."""
        assert self._idem is not None and self._init_producer_id is not None
        try:
            producer_id, epoch = self._init_producer_id()
        except KafkaError as e:
            if not e.retriable:
                self._set_fatal(e)
                return
            _log.debug("InitProducerId failed, retrying: %s", e)
            with self._lock:
                self._wake.wait(int(self.config["retry_backoff_ms"]) / 1000)
            return
        with self._lock:
            self._idem.set_id(producer_id, epoch)
            self._accumulator.set_producer(producer_id, epoch, self._idem.transactional)
            self._restamp_retries()

    def _bump_epoch(self) -> bool:
        """KIP-360: bump the epoch (call under ``lock``, nothing in flight) and stamp the
        batches still to deliver with it. False when the epoch is exhausted: the next loop
        gets a new producer id, and stamps them with that."""
        assert self._idem is not None
        old = (self._idem.producer_id, self._idem.producer_epoch)
        if not self._idem.bump_epoch():
            _log.info("producer %d exhausted its epochs; asking for a new producer id", old[0])
            return False
        pid, epoch = self._idem.producer_id, self._idem.producer_epoch
        _log.info("producer %d bumps its epoch from %d to %d", pid, old[1], epoch)
        self._accumulator.set_producer(pid, epoch)
        self._restamp_retries()
        return True

    def _restamp_retries(self) -> None:
        """Give the batches waiting for a retry the current producer id and epoch and fresh
        sequences, each partition's in the order they were made (call under ``lock``)."""
        assert self._idem is not None
        pid, epoch = self._idem.producer_id, self._idem.producer_epoch
        for b in sorted(self.retries, key=lambda b: (b.slot, b.created_ms)):
            if b.records is not None:
                b.base_sequence = self._accumulator.reserve_sequence(b.slot, b.count)
                b.records = b.records.restamp(pid, epoch, b.base_sequence)

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A transactional producer's id and epoch from its coordinator (init_transactions,
        or the bump after an abort): sequences start again at 0."""
        assert self._idem is not None
        with self._lock:
            self._idem.set_id(producer_id, producer_epoch)
            self._accumulator.set_producer(producer_id, producer_epoch, self._idem.transactional)
            self._restamp_retries()
            self._wake.notify()

    def bump_needed(self) -> bool:
        with self._lock:
            return self._idem is not None and self._idem.bump_needed

    def _add_to_transaction(self, batches: list[InFlightBatch]) -> list[InFlightBatch]:
        """Add the batches' partitions that are new to the transaction before sending them
        (AddPartitionsToTxn); batches whose partition could not be added fail with why."""
        assert self._txn is not None
        err = self._txn.add_partitions({b.tp for b in batches})
        if err is None:
            return batches
        failed = [b for b in batches if b.tp not in self._txn.partitions]
        for b in failed:
            self._fail(b, err)
        self._done_with(failed, request=False)
        return [b for b in batches if b.tp in self._txn.partitions]

    def _set_fatal(self, err: KafkaError) -> None:
        _log.error("the idempotent producer cannot get a producer id: %s", err)
        self.fatal = err

    def _fail_everything(self, err: KafkaError) -> None:
        """Fail what is queued and waiting for a retry with ``err``: none of it can be
        sent."""
        with self._lock:
            waiting, self.retries = self.retries, []
            self.in_flight += len(waiting)  # taken again, as a due retry is
        for b in waiting:
            self._fail(b, err)
        if waiting:
            self._done_with(waiting, request=False)
        for result in self._accumulator.abort_all():
            result.complete(-1, -1, -1, err)

    # -- requests and answers --------------------------------------------------------------

    def _done_with(self, batches: list[InFlightBatch], request: bool) -> None:
        with self._lock:
            self.in_flight -= len(batches)
            if request:
                self._in_flight_requests -= 1
            for b in batches:
                if request:
                    self._on_wire[b.slot] -= 1
                if b.result.is_done:  # a batch waiting for its retry keeps the partition muted
                    self._muted.discard(b.slot)
                    self._unresolved[b.slot] -= 1
            self._wake.notify()

    def _send(self, batches: list[InFlightBatch]) -> None:
        """One ProduceRequest per leader, sent without waiting: up to
        ``max_in_flight_requests_per_connection`` are outstanding at once."""
        by_leader: dict[str, list[InFlightBatch]] = defaultdict(list)
        for b in batches:
            address = self._cluster.leader_address(b.tp)
            if address is None:
                self._retry(b, NotLeaderOrFollowerError(f"no leader known for {b.tp}"))
                self._done_with([b], request=False)
                continue
            by_leader[address].append(b)
        timeout_ms = int(self.config["request_timeout_ms"])
        transactional_id = None if self._txn is None else self._txn.transactional_id
        sensors = self.sensors
        for address, group in by_leader.items():
            # A partition's batches (a retry first, then newer ones) go one after the other
            # in its one entry: a request names each partition once.
            topics: dict[str, dict[int, list[ClosedBatch]]] = {}
            for b in group:
                assert b.records is not None  # batches that failed to close are not sent
                topics.setdefault(b.tp.topic, {}).setdefault(b.tp.partition, []).append(b.records)
            entries = [(topic, list(parts.items())) for topic, parts in topics.items()]
            with self._lock:
                self._in_flight_requests += 1
                for b in group:
                    self._on_wire[b.slot] += 1
            sent_ms = -1.0
            if sensors is not None:
                sent_ms = sensors.metrics.clock()
                sensors.record_request(sensors.node(address), group, now_ms(), sent_ms)
            # The request's wire bytes come from Rust, one copy of each batch, and are sent
            # as they are. A transactional producer names its transactional id, so that a
            # partition leader can verify with the coordinator before the transaction's
            # first write to it (KIP-890).
            if self._cluster.transport == "kafka":
                self._cluster.kafka_connection(address).request(
                    PRODUCE_API_KEY,
                    PRODUCE_VERSIONS,
                    functools.partial(
                        self._encode_kafka, self._acks, timeout_ms, entries, transactional_id
                    ),
                    functools.partial(self._on_kafka_response, address, group, sent_ms),
                    expect_response=self._acks != 0,
                )
                continue
            request = encode_produce_request(self._acks, timeout_ms, entries, transactional_id)
            future = self._cluster.produce_call(address).future(
                request, timeout=timeout_ms / 1000 + 5, metadata=self._cluster.call_metadata
            )
            future.add_done_callback(
                functools.partial(self._on_grpc_response, address, group, sent_ms)
            )

    def _encode_kafka(
        self,
        acks: int,
        timeout_ms: int,
        entries: list[tuple[str, list[tuple[int, list[ClosedBatch]]]]],
        transactional_id: str | None,
        version: int,
        correlation_id: int,
    ) -> bytes:
        return kafka_encode_produce_request(
            version,
            correlation_id,
            self._cluster.client_id,
            acks,
            timeout_ms,
            entries,
            transactional_id,
        )

    def _on_grpc_response(
        self, address: str, group: list[InFlightBatch], sent_ms: float, future: Any
    ) -> None:
        """Runs on a gRPC thread when a ProduceRequest is answered (or fails)."""
        try:
            response = future.result()
        except grpc.RpcError as e:
            error = refusal(e) or KafkaTimeoutError(f"produce to {address} failed: {e.code()}")
            self._on_results(group, {}, error)
            return
        self._record_response(address, sent_ms, response.throttle_time_ms)
        results: dict[TopicPartition, PartitionResult] = {
            TopicPartition(t.name, p.partition): p for t in response.topics for p in t.partitions
        }
        self._on_results(group, results, None)

    def _on_kafka_response(
        self,
        address: str,
        group: list[InFlightBatch],
        sent_ms: float,
        body: dict[str, Any] | None,
        error: KafkaError | None,
    ) -> None:
        """Runs on the connection's reader thread when a Produce request is answered (or
        fails), or at once for acks=0, which has no answer."""
        results: dict[TopicPartition, PartitionResult] = {}
        if error is None and body is None:
            results = {b.tp: _UNACKNOWLEDGED for b in group}
        elif body is not None:
            self._record_response(address, sent_ms, body.get("throttle_time_ms", 0))
            results = {
                TopicPartition(t["name"], p["index"]): _KafkaPartitionResult(
                    p["error_code"],
                    p.get("error_message") or "",
                    p["base_offset"],
                    p.get("log_append_time_ms", -1),
                    p.get("log_start_offset", -1),
                )
                for t in body["responses"]
                for p in t["partition_responses"]
            }
        self._on_results(group, results, error)

    def _record_response(self, address: str, sent_ms: float, throttle_ms: int) -> None:
        sensors = self.sensors
        if sensors is not None:
            now = sensors.metrics.clock()
            sensors.record_response(sensors.node(address), now - sent_ms, throttle_ms, now)

    def _on_results(
        self,
        group: list[InFlightBatch],
        results: dict[TopicPartition, PartitionResult],
        error: KafkaError | None,
    ) -> None:
        """Complete, retry or fail a request's batches from its partitions' results, or all
        of them with ``error`` when the request failed."""
        try:
            if error is not None:
                for b in group:
                    self._on_error(b, error)
                return
            # A partition's batches were appended together: each starts where the one before
            # it in the request ended, unless the broker lists each batch's offset (some were
            # retries it already had).
            offset_delta: dict[TopicPartition, int] = {}
            index: dict[TopicPartition, int] = {}
            acked: list[tuple[InFlightBatch, PartitionResult, int]] = []
            for b in group:
                r = results.get(b.tp)
                if r is None:
                    self._retry(b, KafkaError(f"no result for {b.tp}"))
                elif r.error_code:
                    self._on_error(b, error_for_code(r.error_code)(r.error_message))
                elif r.batch_base_offsets:
                    i = index.get(b.tp, 0)
                    index[b.tp] = i + 1
                    acked.append((b, r, r.batch_base_offsets[i] - r.base_offset))
                else:
                    delta = offset_delta.get(b.tp, 0)
                    offset_delta[b.tp] = delta + b.count
                    acked.append((b, r, delta))
            if acked:
                self._complete(acked)
        except Exception as e:  # a user callback or interceptor must not wedge the producer
            _log.exception("handling a produce response failed")
            for b in group:
                if not b.result.is_done:
                    self._fail(b, e if isinstance(e, KafkaError) else KafkaError(str(e)))
        finally:
            self._done_with(group, request=True)

    def _on_error(self, b: InFlightBatch, err: KafkaError) -> None:
        if (
            self._idem is not None
            and isinstance(err, OutOfOrderSequenceNumberError)
            and self._idem.out_of_order_is_retriable(b.slot, b.base_sequence)
        ):
            # An earlier batch of the partition is unresolved; the gap may close once it
            # is retried.
            self._retry(b, err)
        elif err.retriable:
            self._retry(b, err)
        else:
            self._fail(b, err)

    def _complete(self, acked: list[tuple[InFlightBatch, PartitionResult, int]]) -> None:
        """Complete a response's acknowledged batches, each with its offset from the
        partition's base: their memory goes back and their sequences are recorded at once,
        then each batch's callbacks run, in request order."""
        self._accumulator.release(sum(b.reserved for b, _, _ in acked))
        self._notify_memory()
        if self._idem is not None:
            with self._lock:
                for b, _, _ in acked:
                    if b.base_sequence >= 0:
                        self._idem.on_acknowledged(b.slot, b.base_sequence, b.count)
        for b, r, offset_delta in acked:
            base_offset = (
                r.base_offset + offset_delta if self._acks != 0 and r.base_offset >= 0 else -1
            )
            b.result.complete(base_offset, r.log_append_time_ms, r.log_start_offset)
            for interceptor in self._interceptors:
                on_ack = getattr(interceptor, "on_acknowledgement", None)
                if on_ack is not None:
                    for fut in b.result.futures:
                        on_ack(fut.value, None)

    def _fail(self, b: InFlightBatch, err: BaseException) -> None:
        self._accumulator.release(b.reserved)
        self._notify_memory()
        if self.sensors is not None:
            self.sensors.record_errors(b.tp.topic, b.count)
        if self._idem is not None and b.base_sequence >= 0:
            with self._lock:
                self._idem.on_failed()
        if self._txn is not None:
            self._txn.fail(err)
        b.result.complete(-1, -1, -1, err)
        for interceptor in self._interceptors:
            on_ack = getattr(interceptor, "on_acknowledgement", None)
            if on_ack is not None:
                for _ in b.result.futures:
                    on_ack(None, err)

    def _retry(self, b: InFlightBatch, err: KafkaError) -> None:
        b.attempts += 1
        elapsed_ms = now_ms() - b.created_ms
        if b.attempts > self.config["retries"] or elapsed_ms > self.config["delivery_timeout_ms"]:
            self._fail(b, err)
            return
        if self._txn is not None and self._txn.send_error() is not None:
            # Another batch of the transaction failed for good: this one's sequence may
            # never follow it, and the transaction can only be aborted.
            self._fail(b, err)
            return
        if self.sensors is not None:
            self.sensors.record_retries(b.tp.topic, b.count)
        # Leadership may have moved (or the leader died): the sender thread learns the
        # current leader before the retry goes out.
        b.retry_at = time.monotonic() + self.config["retry_backoff_ms"] / 1000
        with self._lock:
            self.retries.append(b)
            self._stale_topics.add(b.tp.topic)
