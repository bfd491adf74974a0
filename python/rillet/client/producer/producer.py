"""Producer, shaped like kafka-python's ``KafkaProducer``.

``send()`` serializes the record and hands it to the Rust
:class:`~rillet._core.RecordAccumulator` in one call, which picks its partition (Kafka's
partitioners), appends it to that partition's batch (closed by ``batch_size`` and
``linger_ms``, within ``buffer_memory``) and makes its future. The
:class:`~rillet.client.producer.sender.Sender` thread sends the batches and retries them.

Idempotence is on by default (Kafka 3.0+): the producer gets a producer id from a broker
(InitProducerId) and every batch carries it with an epoch and a per-partition sequence, so
a retried batch is written once and in order. As in Kafka, it needs ``acks=all``,
``retries`` > 0 and ``max_in_flight_requests_per_connection`` <= 5; when those are set
otherwise and ``enable_idempotence`` is not set explicitly, idempotence is turned off.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, overload

import grpc

from rillet._core import RecordAccumulator
from rillet.client.cluster import ClusterMetadata
from rillet.client.configs import merge_configs, parse_bootstrap
from rillet.client.futures import FutureRecordMetadata, ProduceRequestResult
from rillet.client.metrics import METRICS_DEFAULTS, KafkaMetric, MetricName, metrics_from_config
from rillet.client.producer.idempotence import IdempotentState
from rillet.client.producer.sender import Doorbell, Sender
from rillet.client.producer.transactions import TransactionManager
from rillet.client.security import SECURITY_DEFAULTS, client_sasl, client_tls, refusal
from rillet.errors import (
    IllegalStateError,
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)
from rillet.protocol.gen.v1 import transaction_pb2_grpc
from rillet.protocol.transaction import init_producer_id_request, read_init_producer_id_response
from rillet.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

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


class Producer:
    """Publish records to Rillet. Thread safe; call :meth:`close` when done."""

    DEFAULT_CONFIG: Mapping[str, Any] = {
        "bootstrap_servers": "localhost:9092",
        "client_id": "rillet-producer",
        "key_serializer": None,
        "value_serializer": None,
        "acks": "all",
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
        "enable_idempotence": True,
        "max_in_flight_requests_per_connection": 5,
        "transactional_id": None,
        "transaction_timeout_ms": 60000,
        # How records travel (Rillet's own config): "auto" speaks whatever bootstrap_servers
        # serve, Kafka's protocol on a Kafka listener (faster: bench/README.md) and gRPC on a
        # gRPC listener; "kafka" or "grpc" insist on one.
        "transport": "auto",
        # metrics(): metrics_enabled, metrics_num_samples, metrics_sample_window_ms.
        **METRICS_DEFAULTS,
        **SECURITY_DEFAULTS,
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
        transactional_id = c["transactional_id"]
        if transactional_id is not None and not c["enable_idempotence"]:
            raise InvalidConfigurationError(
                "Cannot set a transactional.id without also enabling idempotence."
            )
        self._idempotent = _idempotence(
            c,
            acks,
            transactional_id is not None or _given(configs, kwargs, "enable_idempotence"),
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
        self._metrics = metrics_from_config(c)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        doorbell = Doorbell(self._wake)
        self._accumulator = RecordAccumulator(
            batch_result=ProduceRequestResult,
            on_batch_ready=doorbell.ring,
            batch_size=int(c["batch_size"]),
            linger_ms=int(c["linger_ms"]),
            buffer_memory=int(c["buffer_memory"]),
            compression=c["compression_type"] or "none",
            partitioner="default" if self._partitioner_fn else str(partitioner),
            max_request_size=self._max_request_size,
        )
        self._append = self._accumulator.send
        self._cluster = ClusterMetadata(
            parse_bootstrap(c["bootstrap_servers"]),
            int(c["request_timeout_ms"]),
            str(c["transport"]),
            str(c["client_id"]),
            client_tls(c),
            client_sasl(c),
        )
        self._txn = (
            None
            if transactional_id is None
            else TransactionManager(
                self._cluster,
                str(transactional_id),
                int(c["transaction_timeout_ms"]),
                int(c["request_timeout_ms"]),
                int(c["retry_backoff_ms"]),
                int(c["max_block_ms"]),
                str(c["client_id"]),
            )
        )
        self._sender = Sender(
            c,
            acks,
            self._accumulator,
            self._cluster,
            self._lock,
            self._wake,
            self._interceptors,
            IdempotentState(transactional=self._txn is not None) if self._idempotent else None,
            self._init_producer_id if self._idempotent and self._txn is None else None,
            self._txn,
            doorbell,
            self._metrics,
        )
        self._closed = False
        self._sender_thread = threading.Thread(
            target=self._sender.run, name="rillet-producer-sender", daemon=True
        )
        self._sender_thread.start()

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
        if self._sender.fatal is not None:
            raise self._sender.fatal
        if self._txn is not None:
            self._txn.check_send()
        if self._python_steps:
            topic, value, key, headers, partition, timestamp_ms = self._before_send(
                topic, value, key, headers, partition, timestamp_ms
            )
        elif timestamp_ms is not None:
            timestamp_ms = int(timestamp_ms)
        while True:
            outcome = self._append(topic, key, value, headers, partition, timestamp_ms)
            if type(outcome) is FutureRecordMetadata:
                if self._interceptors:
                    outcome.produce_result.futures.append(outcome)
                return outcome
            if outcome == RecordAccumulator.NEEDS_METADATA:
                self._load_topic(topic)
                continue
            return self._send_when_memory(topic, key, value, headers, partition, timestamp_ms)

    def _send_when_memory(
        self,
        topic: str,
        key: Any,
        value: Any,
        headers: Sequence[tuple[str, bytes | None]] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> FutureRecordMetadata:
        """The buffer is full: wait for sent batches to give memory back, up to
        ``max_block_ms`` (the wait is ``bufferpool-wait-time-ns-total``)."""
        started_ns = time.monotonic_ns()
        deadline = time.monotonic() + self.config["max_block_ms"] / 1000
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"Failed to allocate memory within the configured max blocking time "
                        f"{self.config['max_block_ms']} ms."
                    )
                self._sender.wait_for_memory(min(remaining, 0.05))
                outcome = self._append(topic, key, value, headers, partition, timestamp_ms)
                if type(outcome) is FutureRecordMetadata:
                    if self._interceptors:
                        outcome.produce_result.futures.append(outcome)
                    return outcome
                if outcome == RecordAccumulator.NEEDS_METADATA:
                    self._load_topic(topic)
        finally:
            sensors = self._sender.sensors
            if sensors is not None:
                sensors.bufferpool_wait.record(time.monotonic_ns() - started_ns)

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
            self._sender.flushing += 1
            self._wake.notify()
        try:
            self._wait_until_idle(timeout, deadline)
        finally:
            with self._lock:
                self._sender.flushing -= 1

    def _wait_until_idle(self, timeout: float | None, deadline: float | None = None) -> None:
        while True:
            with self._lock:
                if self._sender.idle():
                    return
                self._wake.notify()
            if deadline is not None and time.monotonic() > deadline:
                raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
            time.sleep(0.001)

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds), stop the sender and release connections."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            with self._lock:
                self._closed = self._sender.closed = True
                self._wake.notify()
            self._sender_thread.join(timeout)
            for result in self._accumulator.abort_all():
                result.complete(
                    -1, -1, -1, KafkaError("the producer was closed before the record was sent")
                )
            self._cluster.close()

    @overload
    def metrics(self, raw: Literal[False] = False) -> dict[str, dict[str, float]] | None: ...
    @overload
    def metrics(self, raw: Literal[True]) -> dict[MetricName, KafkaMetric] | None: ...
    def metrics(self, raw: bool = False) -> Any:
        """The producer's metrics now, as kafka-python's ``metrics()``: by group
        (``producer-metrics``, ``producer-topic-metrics.<topic>``,
        ``producer-node-metrics.node-<id>``) and name (Kafka's: ``record-send-rate``,
        ``record-send-total``, ``request-latency-avg``, ...;
        :mod:`rillet.client.producer.metrics` lists them). Rates are per second over
        ``metrics_num_samples`` windows of ``metrics_sample_window_ms``. With ``raw``, each
        metric object by name; None with ``metrics_enabled=False``."""
        if self._metrics is None:
            return None
        return self._metrics.metrics if raw else self._metrics.snapshot()

    # -- transactions ----------------------------------------------------------------------

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError(
                "Transactional method invoked on a non-transactional producer: set "
                "transactional_id."
            )
        return self._txn

    def init_transactions(self) -> None:
        """Get this transactional id's producer id and a new epoch from its coordinator,
        fencing older producers with the same id (their open transaction is aborted).
        Call once, before the first transaction."""
        txn = self._transactions()
        pid, epoch = txn.init()
        self._sender.set_producer(pid, epoch)

    @property
    def transport(self) -> str:
        """The protocol this producer speaks to brokers: ``"kafka"`` or ``"grpc"``; with
        ``transport="auto"``, ``"auto"`` until it first reaches a broker and learns which
        its bootstrap listener serves."""
        return self._cluster.transport

    @property
    def producer_id_and_epoch(self) -> tuple[int, int] | None:
        """The producer id and epoch a transactional producer got from init_transactions
        (None before), for a two-phase write that ends the transaction elsewhere
        (:func:`~rillet.client.producer.transactions.end_transaction`)."""
        txn = self._txn
        if txn is None or txn.producer_id < 0:
            return None
        return txn.producer_id, txn.producer_epoch

    def begin_transaction(self) -> None:
        """Start a transaction: what is sent until commit or abort is in it."""
        self._transactions().begin()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        consumer_group_id: str | ConsumerGroupMetadata,
    ) -> None:
        """Commit a consumer group's ``offsets`` as part of the transaction (for
        consume-transform-produce): they count only if the transaction commits. Pass
        ``consumer.group_metadata()`` so a zombie member is fenced (KIP-447), or a group id."""
        group = (
            consumer_group_id
            if isinstance(consumer_group_id, ConsumerGroupMetadata)
            else ConsumerGroupMetadata(str(consumer_group_id))
        )
        normalized = {
            tp: o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
            for tp, o in offsets.items()
        }
        self._transactions().send_offsets(normalized, group)

    def commit_transaction(self) -> None:
        """Send everything of the transaction, then commit it. Raises the error of a send
        that failed (then only :meth:`abort_transaction` is possible)."""
        txn = self._transactions()
        if txn.send_error() is not None:
            txn.end(committed=True)  # raises why the transaction can only be aborted
        self.flush()
        txn.end(committed=True)

    def abort_transaction(self) -> None:
        """Drop what is not sent yet, wait for what is in flight, and abort: a
        read_committed consumer never sees the transaction's records."""
        txn = self._transactions()
        aborted = KafkaError(
            f"TransactionalId {txn.transactional_id}: the transaction was aborted before the "
            "record was sent"
        )
        for result in self._accumulator.abort_all():
            result.complete(-1, -1, -1, aborted)
        self._wait_until_idle(None)
        txn.end(committed=False)
        if self._sender.bump_needed():
            # A sequence can no longer be followed: bump the epoch through the coordinator
            # (KIP-360) and start every partition's sequences again.
            pid, epoch = txn.init(bump_from=(txn.producer_id, txn.producer_epoch))
            self._sender.set_producer(pid, epoch)

    def _init_producer_id(self) -> tuple[int, int]:
        """A producer id and epoch from InitProducerId, asked of any broker (on the sender
        thread, before its first batch)."""
        brokers = list(self._cluster.brokers().values()) or self._cluster.bootstrap
        timeout = int(self.config["request_timeout_ms"]) / 1000
        last: KafkaError | None = None
        for address in brokers:
            stub = transaction_pb2_grpc.TransactionServiceStub(self._cluster.channel(address))
            try:
                response = stub.InitProducerId(init_producer_id_request(), timeout=timeout)
            except grpc.RpcError as e:
                refused = refusal(e)
                if refused is not None:
                    raise refused from None
                last = KafkaTimeoutError(f"InitProducerId to {address} failed: {e.code()}")
                continue
            return read_init_producer_id_response(response)
        raise last or KafkaTimeoutError("no broker to ask for a producer id")

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _given(configs: Mapping[str, Any] | None, kwargs: Mapping[str, Any], name: str) -> bool:
    """Whether the user set config ``name`` (either spelling)."""
    dotted = name.replace("_", ".")
    return any(k in (name, dotted) for source in (configs or {}, kwargs) for k in source)


def _idempotence(c: Mapping[str, Any], acks: int, explicit: bool) -> bool:
    """Whether the producer is idempotent (Kafka's ``ProducerConfig`` rules): on by default,
    silently off when the user set an incompatible config without asking for idempotence,
    refused when they asked for both."""
    if not c["enable_idempotence"]:
        return False
    conflict = None
    if acks != -1:
        conflict = (
            "Must set acks to all in order to use the idempotent producer. Otherwise we "
            "cannot guarantee idempotence."
        )
    elif int(c["max_in_flight_requests_per_connection"]) > 5:
        conflict = (
            "Must set max.in.flight.requests.per.connection to at most 5 to use the "
            "idempotent producer."
        )
    elif int(c["retries"]) == 0:
        conflict = "Must set retries to non-zero when using the idempotent producer."
    if conflict is None:
        return True
    if explicit:
        raise InvalidConfigurationError(conflict)
    _log.info("idempotence is off: %s", conflict)
    return False
