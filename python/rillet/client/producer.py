"""Producer, shaped like kafka-python's ``KafkaProducer``.

``send()`` serializes the record, picks its partition, and appends it to the Rust
:class:`~rillet._core.RecordAccumulator`, which batches per partition by ``batch_size`` and
``linger_ms`` within ``buffer_memory``; it returns a future at once. A sender thread drains
ready batches, groups them by leader and sends one ProduceRequest per broker, completes the
futures, and retries retriable errors (refreshing metadata on leadership errors) until
``delivery_timeout_ms``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from rillet._core import RecordAccumulator, partition_for_key
from rillet.client.cluster import ClusterMetadata
from rillet.client.configs import merge_configs, parse_bootstrap
from rillet.client.futures import FutureRecordMetadata, ProduceRequestResult
from rillet.errors import (
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from rillet.protocol import produce_pb2, produce_pb2_grpc
from rillet.types import TopicPartition

__all__ = ["Producer"]

_log = logging.getLogger(__name__)

Serializer = Callable[[Any], bytes | None]
Partitioner = Callable[[bytes | None, list[int], list[int]], int]

_BUILTIN_SERIALIZERS: dict[str, Serializer] = {
    "bytes": lambda v: v,
    "str": lambda v: None if v is None else str(v).encode(),
    "string": lambda v: None if v is None else str(v).encode(),
    "json": lambda v: None if v is None else json.dumps(v).encode(),
}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _as_bytes(b: Any, what: str) -> bytes | None:
    if b is None or type(b) is bytes:
        return b
    if isinstance(b, bytes | bytearray | memoryview):
        return bytes(b)
    raise TypeError(f"the record {what} must be bytes (or set a {what}_serializer)")


@dataclass
class _InFlight:
    tp: TopicPartition
    records: bytes
    result: ProduceRequestResult
    reserved: int
    created: float
    batch_id: int
    slot: int
    attempts: int = 0
    retry_at: float = 0.0


@dataclass
class _Slots:
    """Small integers for topic-partitions, as the accumulator wants."""

    ids: dict[TopicPartition, int] = field(default_factory=dict)
    tps: list[TopicPartition] = field(default_factory=list)

    def slot(self, tp: TopicPartition) -> int:
        s = self.ids.get(tp)
        if s is None:
            s = self.ids[tp] = len(self.tps)
            self.tps.append(tp)
        return s


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
        if int(c["max_in_flight_requests_per_connection"]) < 1:
            raise InvalidConfigurationError(
                "Invalid value for configuration max.in.flight.requests.per.connection: "
                "must be at least 1"
            )
        self._max_request_size = int(c["max_request_size"])
        compression = c["compression_type"] or "none"
        self._key_serializer = self._serializer(c["key_serializer"], "key_serializer")
        self._value_serializer = self._serializer(c["value_serializer"], "value_serializer")
        self._partitioner = self._make_partitioner(c["partitioner"])
        self._interceptors = list(c["interceptors"])
        self._accumulator = RecordAccumulator(
            batch_size=int(c["batch_size"]),
            linger_ms=int(c["linger_ms"]),
            buffer_memory=int(c["buffer_memory"]),
            compression=compression,
        )
        self._cluster = ClusterMetadata(
            parse_bootstrap(c["bootstrap_servers"]), int(c["request_timeout_ms"])
        )
        self._slots = _Slots()
        self._topic_cache: dict[
            str, tuple[list[int], dict[int, tuple[TopicPartition, int]], int]
        ] = {}
        self._results: dict[int, ProduceRequestResult] = {}
        self._batch_created: dict[int, float] = {}
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes sent to it]
        self._last_sticky: dict[str, int] = {}
        self._batch_size = int(c["batch_size"])
        self._round_robin: dict[str, int] = defaultdict(int)
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._memory_freed = threading.Condition(threading.Lock())
        self._retries: list[_InFlight] = []
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

    def _make_partitioner(self, value: Any) -> Partitioner | str:
        if callable(value):
            return value  # type: ignore[no-any-return]
        if value in ("default", "murmur2", "sticky", "round_robin", "random"):
            return str(value)
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration partitioner: a callable or one of "
            "default, round_robin, random"
        )

    # -- the public API --------------------------------------------------------------------

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic`` (blocks up to ``max_block_ms`` for metadata)."""
        return set(self._partitions(topic))

    def _cache_topic(
        self, topic: str, now_ms: int
    ) -> tuple[list[int], dict[int, tuple[TopicPartition, int]], int]:
        """The partitions of ``topic`` with their TopicPartition and accumulator slot, kept
        until the metadata is ``metadata_max_age_ms`` old."""
        parts = self._partitions(topic)
        with self._lock:
            slots = {
                p: (TopicPartition(topic, p), self._slots.slot(TopicPartition(topic, p)))
                for p in parts
            }
        expires = now_ms + max(int(self.config["metadata_max_age_ms"]) - self._cluster.age_ms(), 0)
        entry = (parts, slots, expires)
        self._topic_cache[topic] = entry
        return entry

    def _partitions(self, topic: str) -> list[int]:
        parts = self._cluster.partitions_for(topic)
        if parts and self._cluster.age_ms() < self.config["metadata_max_age_ms"]:
            return parts
        return self._cluster.wait_for_topic(
            topic, int(self.config["max_block_ms"]), bool(self.config["allow_auto_create_topics"])
        )

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; the future completes with its :class:`RecordMetadata`."""
        if self._closed:
            raise KafkaError("the producer is closed")
        for interceptor in self._interceptors:
            on_send = getattr(interceptor, "on_send", None)
            if on_send is not None:
                topic, value, key, headers, partition, timestamp_ms = on_send(
                    topic, value, key, headers, partition, timestamp_ms
                )
        key_bytes = _as_bytes(self._key_serializer(key) if self._key_serializer else key, "key")
        value_bytes = _as_bytes(
            self._value_serializer(value) if self._value_serializer else value, "value"
        )
        ksize = -1 if key_bytes is None else len(key_bytes)
        vsize = -1 if value_bytes is None else len(value_bytes)
        if headers:
            hdrs = list(headers)
            hsize = sum(len(k) + len(v or b"") for k, v in hdrs)
        else:
            hdrs, hsize = [], 0
        size = max(ksize, 0) + max(vsize, 0) + hsize
        if size > self._max_request_size:
            raise RecordTooLargeError(
                f"The message is {size} bytes when serialized which is larger than "
                f"max.request.size ({self._max_request_size})"
            )
        now = _now_ms()
        cached = self._topic_cache.get(topic)
        if cached is None or now >= cached[2]:
            cached = self._cache_topic(topic, now)
        parts = cached[0]
        p = self._choose_partition(topic, partition, key_bytes, parts)
        known = cached[1].get(p)
        if known is None:
            raise UnknownTopicOrPartitionError(
                f"the partitioner chose partition {p} of topic {topic}, which has partitions "
                f"{parts}"
            )
        tp, slot = known
        ts = now if timestamp_ms is None else int(timestamp_ms)
        deadline = None
        while True:
            with self._lock:
                placed = self._accumulator.append(
                    slot, ts, key_bytes, value_bytes, hdrs, now_ms=now
                )
                if placed is not None:
                    batch_id, index, full, new_batch = placed
                    if new_batch:
                        result = self._results[batch_id] = ProduceRequestResult(tp)
                        self._batch_created[batch_id] = time.monotonic()
                    else:
                        result = self._results[batch_id]
                    future = FutureRecordMetadata(result, index, ts, ksize, vsize, hsize)
                    result.futures.append(future)
                    sticky = self._sticky.get(topic)
                    if sticky is not None and sticky[0] == p and partition is None:
                        # KIP-794: after batch.size bytes on the sticky partition, the next
                        # record without a key goes to another partition.
                        sticky[1] += size
                        if sticky[1] >= self._batch_size:
                            del self._sticky[topic]
                    if full or new_batch:
                        self._wake.notify()
                    break
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
        return future

    def _choose_partition(
        self, topic: str, partition: int | None, key: bytes | None, parts: list[int]
    ) -> int:
        if partition is not None:
            if partition not in parts:
                raise UnknownTopicOrPartitionError(
                    f"Partition {partition} of topic {topic} with partition count {len(parts)} "
                    "is not present in metadata."
                )
            return partition
        strategy = self._partitioner
        if callable(strategy):
            return int(strategy(key, parts, parts))
        if key is not None and strategy in ("default", "murmur2", "sticky"):
            return parts[partition_for_key(key, len(parts))]
        if strategy == "round_robin":
            n = self._round_robin[topic]
            self._round_robin[topic] = n + 1
            return parts[n % len(parts)]
        if strategy == "random":
            return self._rng.choice(parts)
        # Sticky (KIP-480, KIP-794): stay on one partition for batch.size bytes, then move
        # to another one picked at random.
        with self._lock:
            sticky = self._sticky.get(topic)
            if sticky is None or sticky[0] not in parts:
                previous = self._last_sticky.get(topic)
                choices = [q for q in parts if q != previous] or parts
                sticky = self._sticky[topic] = [self._rng.choice(choices), 0]
                self._last_sticky[topic] = sticky[0]
            return sticky[0]

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until every sent record is acknowledged."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._flushing += 1
            self._wake.notify()
        try:
            while True:
                with self._lock:
                    if not self._results and not self._retries and self._in_flight == 0:
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
            for batch_id in self._accumulator.abort_all():
                result = self._results.pop(batch_id, None)
                if result is not None:
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
                ready, wait_ms = self._accumulator.ready(_now_ms(), flush=self._flushing > 0)
                if self._muted:
                    ready = [slot for slot in ready if slot not in self._muted]
                due = sorted(
                    (b for b in self._retries if b.retry_at <= now), key=lambda b: b.batch_id
                )
                if not ready and not due:
                    timeout = 0.1 if wait_ms is None else max(wait_ms, 0) / 1000
                    if self._retries:
                        timeout = min(timeout, max(min(b.retry_at for b in self._retries) - now, 0))
                    self._wake.wait(timeout)
                    continue
                self._retries = [b for b in self._retries if b.retry_at > now]
                self._in_flight += len(due)
                stale, self._stale_topics = self._stale_topics, set()
            if stale:
                with contextlib.suppress(KafkaError):
                    self._cluster.refresh(stale)
                for topic in stale:
                    self._topic_cache.pop(topic, None)
            # Closing (and compressing) batches happens outside the lock, so send() callers
            # keep appending meanwhile.
            drained = self._accumulator.drain(ready, self._max_request_size) if ready else []
            batches = list(due)
            with self._lock:
                for slot, batch_id, records, _count, reserved in drained:
                    batches.append(
                        _InFlight(
                            self._slots.tps[slot],
                            records,
                            self._results.pop(batch_id),
                            reserved,
                            self._batch_created.pop(batch_id, now),
                            batch_id,
                            slot,
                        )
                    )
                self._in_flight += len(drained)
                if self._guarantee_order:
                    self._muted.update(b.slot for b in batches)
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
        for address, group in by_leader.items():
            request = produce_pb2.ProduceRequest(
                acks=self._acks, timeout_ms=int(self.config["request_timeout_ms"])
            )
            topics: dict[str, produce_pb2.ProduceRequest.Topic] = {}
            for b in group:
                t = topics.get(b.tp.topic)
                if t is None:
                    t = topics[b.tp.topic] = request.topics.add(name=b.tp.topic)
                t.partitions.add(partition=b.tp.partition, record_batches=b.records)
            stub = produce_pb2_grpc.ProduceServiceStub(self._cluster.channel(address))
            with self._lock:
                self._in_flight_requests += 1
            future = stub.Produce.future(
                request, timeout=self.config["request_timeout_ms"] / 1000 + 5
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
                    self._complete(b, r)
        except Exception as e:  # a user callback or interceptor must not wedge the producer
            _log.exception("handling a produce response failed")
            for b in group:
                if not b.result.is_done:
                    self._fail(b, e if isinstance(e, KafkaError) else KafkaError(str(e)))
        finally:
            self._done_with(group, request=True)

    def _complete(self, b: _InFlight, r: produce_pb2.ProduceResponse.Partition) -> None:
        self._accumulator.release(b.reserved)
        self._notify_memory()
        acked = self._acks != 0
        b.result.complete(r.base_offset if acked else -1, r.log_append_time_ms, r.log_start_offset)
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
        elapsed_ms = (time.monotonic() - b.created) * 1000
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
