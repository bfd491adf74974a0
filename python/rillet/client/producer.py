"""Producer, shaped like kafka-python's ``KafkaProducer``.

``send()`` serializes the record and hands it to the Rust
:class:`~rillet._core.RecordAccumulator` in one call, which picks its partition (Kafka's
partitioners), appends it to that partition's batch (closed by ``batch_size`` and
``linger_ms``, within ``buffer_memory``) and makes its future. A sender thread drains
ready batches, groups them by leader and sends one ProduceRequest per broker, completes the
futures, and retries retriable errors (refreshing metadata on leadership errors) until
``delivery_timeout_ms``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from rillet._core import ClosedBatch, RecordAccumulator, encode_produce_request
from rillet.client.cluster import ClusterMetadata
from rillet.client.configs import merge_configs, parse_bootstrap
from rillet.client.futures import FutureRecordMetadata, ProduceRequestResult
from rillet.errors import (
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from rillet.protocol import produce_pb2
from rillet.types import TopicPartition

__all__ = ["Producer"]

_log = logging.getLogger(__name__)

Serializer = Callable[[Any], bytes | None]
Partitioner = Callable[[bytes | None, list[int], list[int]], int]


_PARTITIONERS = ("default", "murmur2", "sticky", "round_robin", "random")

_BUILTIN_SERIALIZERS: dict[str, Serializer] = {
    "bytes": lambda v: v,
    "str": lambda v: None if v is None else str(v).encode(),
    "string": lambda v: None if v is None else str(v).encode(),
    "json": lambda v: None if v is None else json.dumps(v).encode(),
}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _notify(condition: threading.Condition) -> None:
    with condition:
        condition.notify()


@dataclass
class _InFlight:
    slot: int
    tp: TopicPartition
    result: ProduceRequestResult
    records: ClosedBatch | None  # None: closing the batch failed
    count: int  # records in the batch
    reserved: int
    created_ms: int
    attempts: int = 0
    retry_at: float = 0.0


class Producer:
    """Publish records to Rillet. Thread safe; call :meth:`close` when done."""

    DEFAULT_CONFIG: Mapping[str, Any] = {
        "bootstrap_servers": "localhost:9092",
        "client_id": "rillet-producer",
        "key_serializer": None,
        "value_serializer": None,
        "acks": 1,
        "compression_type": None,
        "retries": 2147483647,
        "batch_size": 16384,
        "linger_ms": 5,
        "partitioner": "default",
        "buffer_memory": 33554432,
        "max_block_ms": 60000,
        "max_request_size": 1048576,
        "request_timeout_ms": 30000,
        "delivery_timeout_ms": 120000,
        "retry_backoff_ms": 100,
        "metadata_max_age_ms": 300000,
        "allow_auto_create_topics": True,
        "interceptors": (),
        "enable_idempotence": False,
        "max_in_flight_requests_per_connection": 5,
    }

    def __init__(self, configs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        c = merge_configs(self.DEFAULT_CONFIG, configs, kwargs, "producer")
        self.config = c
        acks = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(str(c["acks"]))
        if acks is None:
            raise InvalidConfigurationError(f"Invalid value {c['acks']} for configuration acks")
        self._acks = acks
        if c["enable_idempotence"]:
            raise InvalidConfigurationError(
                f"Invalid value {c['enable_idempotence']} for configuration enable.idempotence: "
                "the idempotent producer is not supported yet, so a retried batch could be "
                "written twice; set enable_idempotence=False"
            )
        if int(c["max_in_flight_requests_per_connection"]) < 1:
            raise InvalidConfigurationError(
                "Invalid value for configuration max.in.flight.requests.per.connection: "
                "must be at least 1"
            )
        self._max_request_size = int(c["max_request_size"])
        self._key_serializer = self._serializer(c["key_serializer"], "key_serializer")
        self._value_serializer = self._serializer(c["value_serializer"], "value_serializer")
        partitioner = c["partitioner"]
        if not callable(partitioner) and partitioner not in _PARTITIONERS:
            raise InvalidConfigurationError(
                f"Invalid value {partitioner!r} for configuration partitioner: a callable or "
                "one of default, round_robin, random"
            )
        # A callable picks the partition in Python; the built-in strategies run in Rust.
        self._partitioner_fn: Partitioner | None = partitioner if callable(partitioner) else None
        self._interceptors = list(c["interceptors"])
        self._python_steps = bool(
            self._interceptors
            or self._key_serializer
            or self._value_serializer
            or self._partitioner_fn
        )
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._accumulator = RecordAccumulator(
            batch_result=ProduceRequestResult,
            on_batch_ready=functools.partial(_notify, self._wake),
            batch_size=int(c["batch_size"]),
            linger_ms=int(c["linger_ms"]),
            buffer_memory=int(c["buffer_memory"]),
            compression=c["compression_type"] or "none",
            partitioner="default" if self._partitioner_fn else str(partitioner),
            max_request_size=self._max_request_size,
        )
        self._append = self._accumulator.send
        self._cluster = ClusterMetadata(
            parse_bootstrap(c["bootstrap_servers"]), int(c["request_timeout_ms"])
        )
        self._memory_freed = threading.Condition(threading.Lock())
        self._retries: list[_InFlight] = []
        self._draining = False  # the sender is closing batches it took from the accumulator
        self._in_flight = 0  # batches taken from the accumulator and not yet completed
        self._in_flight_requests = 0
        # With one request in flight, Kafka keeps order by sending one batch per partition at
        # a time (a muted partition has a batch in flight).
        self._guarantee_order = int(c["max_in_flight_requests_per_connection"]) == 1
        self._muted: set[int] = set()
        self._stale_topics: set[str] = set()
        self._flushing = 0
        self._closed = False
        self._sender = threading.Thread(
            target=self._run, name="rillet-producer-sender", daemon=True
        )
        self._sender.start()

    # -- configuration helpers -------------------------------------------------------------

    @staticmethod
    def _serializer(value: Any, name: str) -> Serializer | None:
        if value is None or callable(value):
            return value  # type: ignore[no-any-return]
        if isinstance(value, str) and value.lower() in _BUILTIN_SERIALIZERS:
            return _BUILTIN_SERIALIZERS[value.lower()]
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration {name}: a callable or one of "
            f"{sorted(_BUILTIN_SERIALIZERS)}"
        )

    # -- the public API --------------------------------------------------------------------

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic`` (blocks up to ``max_block_ms`` for metadata)."""
        return set(self._partitions(topic))

    def _partitions(self, topic: str) -> list[int]:
        """``topic``'s partitions, refreshed when metadata is ``metadata_max_age_ms`` old."""
        parts = self._cluster.partitions_for(topic)
        if parts and self._cluster.age_ms() >= self.config["metadata_max_age_ms"]:
            with contextlib.suppress(KafkaError):
                self._cluster.refresh([topic])
            parts = self._cluster.partitions_for(topic)
        if parts:
            return parts
        return self._cluster.wait_for_topic(
            topic, int(self.config["max_block_ms"]), bool(self.config["allow_auto_create_topics"])
        )

    def _load_topic(self, topic: str) -> None:
        """Give the accumulator ``topic``'s partitions, valid until the metadata is
        ``metadata_max_age_ms`` old (and for at least ``retry_backoff_ms``, so an
        unreachable cluster is not asked again on every send)."""
        parts = self._partitions(topic)
        fresh_for = int(self.config["metadata_max_age_ms"]) - self._cluster.age_ms()
        expires = _now_ms() + max(fresh_for, int(self.config["retry_backoff_ms"]))
        self._accumulator.set_topic(topic, [(p, TopicPartition(topic, p)) for p in parts], expires)

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; the future completes with its :class:`RecordMetadata`.

        Partitioning, batching and the future are made in Rust (one call); Python runs
        only the interceptors, serializers and a callable partitioner, when configured."""
        if self._closed:
            raise KafkaError("the producer is closed")
        if self._python_steps:
            topic, value, key, headers, partition, timestamp_ms = self._before_send(
                topic, value, key, headers, partition, timestamp_ms
            )
        elif timestamp_ms is not None:
            timestamp_ms = int(timestamp_ms)
        deadline = None
        while True:
            outcome = self._append(topic, key, value, headers, partition, timestamp_ms)
            if type(outcome) is FutureRecordMetadata:
                if self._interceptors:
                    outcome.produce_result.futures.append(outcome)
                return outcome
            if outcome == RecordAccumulator.NEEDS_METADATA:
                self._load_topic(topic)
                continue
            # BUFFER_FULL: wait for sent batches to give memory back, up to max.block.ms.
            if deadline is None:
                deadline = time.monotonic() + self.config["max_block_ms"] / 1000
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"Failed to allocate memory within the configured max blocking time "
                    f"{self.config['max_block_ms']} ms."
                )
            with self._memory_freed:
                self._memory_freed.wait(min(remaining, 0.05))

    def _before_send(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Sequence[tuple[str, bytes | None]] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> tuple[str, Any, Any, Sequence[tuple[str, bytes | None]] | None, int | None, int | None]:
        """The configured Python steps of a send: interceptors, serializers, a callable
        partitioner."""
        for interceptor in self._interceptors:
            on_send = getattr(interceptor, "on_send", None)
            if on_send is not None:
                topic, value, key, headers, partition, timestamp_ms = on_send(
                    topic, value, key, headers, partition, timestamp_ms
                )
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        if partition is None and self._partitioner_fn is not None:
            partition = self._custom_partition(topic, key)
        if timestamp_ms is not None:
            timestamp_ms = int(timestamp_ms)
        return topic, value, key, headers, partition, timestamp_ms

    def _custom_partition(self, topic: str, key: bytes | None) -> int:
        assert self._partitioner_fn is not None
        parts = self._partitions(topic)
        p = int(self._partitioner_fn(key, parts, parts))
        if p not in parts:
            raise UnknownTopicOrPartitionError(
                f"the partitioner chose partition {p} of topic {topic}, which has partitions "
                f"{parts}"
            )
        return p

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until every sent record is acknowledged."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._flushing += 1
            self._wake.notify()
        try:
            while True:
                with self._lock:
                    if (
                        self._accumulator.pending_batches == 0
                        and not self._draining
                        and not self._retries
                        and self._in_flight == 0
                    ):
                        return
                    self._wake.notify()
                if deadline is not None and time.monotonic() > deadline:
                    raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
                time.sleep(0.001)
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds), stop the sender and release connections."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            with self._lock:
                self._closed = True
                self._wake.notify()
            self._sender.join(timeout)
            for result in self._accumulator.abort_all():
                result.complete(
                    -1, -1, -1, KafkaError("the producer was closed before the record was sent")
                )
            self._cluster.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the sender thread -----------------------------------------------------------------

    def _run(self) -> None:
        max_in_flight = int(self.config["max_in_flight_requests_per_connection"])
        while True:
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                if self._in_flight_requests >= max_in_flight:
                    self._wake.wait(0.1)
                    continue
                found = self._accumulator.ready(flush=self._flushing > 0)
                ready, wait_ms = found.slots, found.next_ready_ms
                if self._muted:
                    ready = [slot for slot in ready if slot not in self._muted]
                due = sorted(
                    (b for b in self._retries if b.retry_at <= now), key=lambda b: b.created_ms
                )
                if not ready and not due:
                    timeout = 0.1 if wait_ms is None else max(wait_ms, 0) / 1000
                    if self._retries:
                        timeout = min(timeout, max(min(b.retry_at for b in self._retries) - now, 0))
                    self._wake.wait(timeout)
                    continue
                self._retries = [b for b in self._retries if b.retry_at > now]
                self._in_flight += len(due)
                self._draining = bool(ready)
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
                drained = self._accumulator.drain(ready, self._max_request_size) if ready else []
            except Exception:
                _log.exception("closing batches failed")
                drained = []
            batches = list(due)
            broken: list[tuple[_InFlight, BaseException]] = []
            for d in drained:
                closed = None if isinstance(d.batch, BaseException) else d.batch
                b = _InFlight(
                    d.slot,
                    d.topic_partition,
                    d.result,
                    closed,
                    d.record_count,
                    d.reserved_bytes,
                    d.created_ms,
                )
                if isinstance(d.batch, BaseException):
                    broken.append((b, d.batch))
                else:
                    batches.append(b)
            with self._lock:
                self._in_flight += len(drained)
                self._draining = False
                if self._guarantee_order:
                    self._muted.update(b.slot for b in batches)
            for b, err in broken:
                self._fail(b, err)
            if broken:
                self._done_with([b for b, _ in broken], request=False)
            try:
                self._send(batches)
            except Exception as e:  # never let the sender thread die
                _log.exception("producer sender failed")
                for b in batches:
                    self._fail(b, e if isinstance(e, KafkaError) else KafkaError(str(e)))
                self._done_with(batches, request=False)

    def _done_with(self, batches: list[_InFlight], request: bool) -> None:
        with self._lock:
            self._in_flight -= len(batches)
            if request:
                self._in_flight_requests -= 1
            for b in batches:
                if b.result.is_done:  # a batch waiting for its retry keeps the partition muted
                    self._muted.discard(b.slot)
            self._wake.notify()

    def _send(self, batches: list[_InFlight]) -> None:
        """One ProduceRequest per leader, sent without waiting: up to
        ``max_in_flight_requests_per_connection`` are outstanding at once."""
        by_leader: dict[str, list[_InFlight]] = defaultdict(list)
        for b in batches:
            address = self._cluster.leader_address(b.tp)
            if address is None:
                self._retry(b, NotLeaderOrFollowerError(f"no leader known for {b.tp}"))
                self._done_with([b], request=False)
                continue
            by_leader[address].append(b)
        timeout_ms = int(self.config["request_timeout_ms"])
        for address, group in by_leader.items():
            # A partition's batches (a retry first, then newer ones) go one after the other
            # in its one entry: a request names each partition once.
            topics: dict[str, dict[int, list[ClosedBatch]]] = {}
            for b in group:
                assert b.records is not None  # batches that failed to close are not sent
                topics.setdefault(b.tp.topic, {}).setdefault(b.tp.partition, []).append(b.records)
            # The request's wire bytes come from Rust, one copy of each batch; the call sends
            # them as they are.
            request = encode_produce_request(
                self._acks,
                timeout_ms,
                [(topic, list(parts.items())) for topic, parts in topics.items()],
            )
            with self._lock:
                self._in_flight_requests += 1
            future = self._cluster.produce_call(address).future(
                request, timeout=timeout_ms / 1000 + 5
            )
            future.add_done_callback(functools.partial(self._on_response, address, group))

    def _on_response(self, address: str, group: list[_InFlight], future: Any) -> None:
        """Runs on a gRPC thread when a ProduceRequest is answered (or fails)."""
        try:
            try:
                response = future.result()
            except grpc.RpcError as e:
                for b in group:
                    self._retry(b, KafkaTimeoutError(f"produce to {address} failed: {e.code()}"))
                return
            results = {
                TopicPartition(t.name, p.partition): p
                for t in response.topics
                for p in t.partitions
            }
            # A partition's batches were appended together: each starts where the one before
            # it in the request ended.
            offset_delta: dict[TopicPartition, int] = {}
            for b in group:
                r = results.get(b.tp)
                if r is None:
                    self._retry(b, KafkaError(f"no result for {b.tp}"))
                elif r.error_code:
                    err = error_for_code(r.error_code)(r.error_message)
                    if err.retriable:
                        self._retry(b, err)
                    else:
                        self._fail(b, err)
                else:
                    delta = offset_delta.get(b.tp, 0)
                    offset_delta[b.tp] = delta + b.count
                    self._complete(b, r, delta)
        except Exception as e:  # a user callback or interceptor must not wedge the producer
            _log.exception("handling a produce response failed")
            for b in group:
                if not b.result.is_done:
                    self._fail(b, e if isinstance(e, KafkaError) else KafkaError(str(e)))
        finally:
            self._done_with(group, request=True)

    def _complete(
        self, b: _InFlight, r: produce_pb2.ProduceResponse.Partition, offset_delta: int
    ) -> None:
        self._accumulator.release(b.reserved)
        self._notify_memory()
        acked = self._acks != 0 and r.base_offset >= 0
        b.result.complete(
            r.base_offset + offset_delta if acked else -1, r.log_append_time_ms, r.log_start_offset
        )
        for interceptor in self._interceptors:
            on_ack = getattr(interceptor, "on_acknowledgement", None)
            if on_ack is not None:
                for fut in b.result.futures:
                    on_ack(fut.value, None)

    def _fail(self, b: _InFlight, err: BaseException) -> None:
        self._accumulator.release(b.reserved)
        self._notify_memory()
        b.result.complete(-1, -1, -1, err)
        for interceptor in self._interceptors:
            on_ack = getattr(interceptor, "on_acknowledgement", None)
            if on_ack is not None:
                for _ in b.result.futures:
                    on_ack(None, err)

    def _retry(self, b: _InFlight, err: KafkaError) -> None:
        b.attempts += 1
        elapsed_ms = _now_ms() - b.created_ms
        if b.attempts > self.config["retries"] or elapsed_ms > self.config["delivery_timeout_ms"]:
            self._fail(b, err)
            return
        # Leadership may have moved (or the leader died): the sender thread learns the
        # current leader before the retry goes out.
        b.retry_at = time.monotonic() + self.config["retry_backoff_ms"] / 1000
        with self._lock:
            self._retries.append(b)
            self._stale_topics.add(b.tp.topic)

    def _notify_memory(self) -> None:
        with self._memory_freed:
            self._memory_freed.notify_all()
