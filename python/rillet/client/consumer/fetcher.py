"""Fetcher: the consumer's requests to the partition leaders (Kafka's Fetcher and
OffsetFetcher).

Partitions with nothing buffered are fetched from their leader, one FetchRequest per broker
carrying every such partition, as a long poll (``fetch_min_bytes``, ``fetch_max_wait_ms``).
Each partition fetches one response ahead of its position, so the network round trip
overlaps the caller's processing. Fetched RecordBatch v2 bytes are read in place, CRC-checked
(``check_crcs``) and decoded into :class:`~rillet._core.ConsumerRecord` objects in Rust, a
poll's worth at a time; with ``isolation_level`` READ_COMMITTED, fetches stop at the last
stable offset and the records of the aborted transactions each response lists are dropped
as they are decoded. ListOffsets answers position resets and offset lookups.

A fetch answered OFFSET_OUT_OF_RANGE resets the partition by ``auto_offset_reset``;
leadership errors (FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH among them: each fetch names
the leader epoch it expects) refresh metadata and retry. A fetch at the position names the
epoch of the last record read, and a leader whose log diverged from it says where (KIP-320):
records read and then lost to an unclean election are detected, not silently skipped. Not
thread safe: the consumer's thread only (gRPC completes the futures on its own threads; only
``done()`` is read from them).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import grpc

from rillet._core import (
    AbortedTransactionFilter,
    ConsumerRecord,
    decode_consumer_records,
    kafka_decode_fetch_response,
)
from rillet.client.cluster import ClusterMetadata, FetchedResponse
from rillet.client.consumer.metrics import FetchManagerMetrics
from rillet.client.consumer.subscription import PartitionState, SubscriptionState
from rillet.client.security import refusal
from rillet.errors import (
    CorruptRecordError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from rillet.protocol import fetch_pb2, fetch_pb2_grpc
from rillet.protocol.errors import error_from_wire
from rillet.types import TopicPartition

__all__ = ["Deserializer", "Fetcher"]

_log = logging.getLogger(__name__)

FETCH_API_KEY = 1
# Fetch from v4 (isolation levels) to v12 (the last that names topics), sessionless.
FETCH_VERSIONS = (4, 12)
# A fetch in flight: gRPC's future, or one the Kafka connection completes.
FetchFuture = Future[FetchedResponse] | grpc.Future  # type: ignore[type-arg]

Deserializer = Callable[[bytes | None], Any]


@dataclass
class _InFlightFetch:
    fetch_id: int
    address: str
    offsets: dict[TopicPartition, int]
    future: FetchFuture
    # Each partition's generation when the fetch went out.
    generations: dict[TopicPartition, int] = field(default_factory=dict)
    # For fetch-latency, with metrics on.
    timing: _FetchTiming | None = None


class _FetchTiming:
    """When a fetch went out and when its answer came, on the metrics' clock (``done_ms``
    is stamped by the thread completing the future; 0 until then). The future's callback
    holds this and not the fetch, which holds the future: a cycle would keep each response
    alive until the garbage collector ran."""

    __slots__ = ("done_ms", "sent_ms")

    def __init__(self, sent_ms: float) -> None:
        self.sent_ms = sent_ms
        self.done_ms = 0.0


class Fetcher:
    """``config`` is the consumer's (kafka-python names); ``reset_default`` is
    ``auto_offset_reset`` as EARLIEST or LATEST, or None for ``none``."""

    def __init__(
        self,
        config: Mapping[str, Any],
        cluster: ClusterMetadata,
        subscriptions: SubscriptionState,
        *,
        isolation_level: fetch_pb2.IsolationLevel.ValueType,
        reset_default: int | None,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
        metrics: FetchManagerMetrics | None = None,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.subscriptions = subscriptions
        self.isolation_level = isolation_level
        self.reset_default = reset_default
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        # Fetches on the wire, by a sequence number; a partition is in at most one of them.
        self._in_flight: dict[int, _InFlightFetch] = {}
        self._fetch_ids = itertools.count()
        self._next_partition = 0
        self.sensors = metrics
        # A partition's lag is to its last stable offset under read_committed (Kafka's
        # SubscriptionState.partitionLag).
        self._lag_to_lso = isolation_level == fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED

    def _retry_backoff_s(self) -> float:
        return float(self.config["retry_backoff_ms"]) / 1000

    # -- positions and offsets -------------------------------------------------------------

    def reset_positions(self, partitions: Iterable[TopicPartition]) -> None:
        """Give each partition without a position one: its pending reset, else
        ``auto_offset_reset`` (NoOffsetForPartitionError for ``none``)."""
        pending: dict[TopicPartition, int] = {}
        for tp in partitions:
            state = self.subscriptions.assignment[tp]
            target = state.reset_to if state.reset_to is not None else self.reset_default
            if target is None:
                raise NoOffsetForPartitionError(
                    f"Undefined offset with no reset policy for partitions: [{tp}]"
                )
            pending[tp] = target
        if not pending:
            return
        found = self.list_offsets(pending)
        for tp, (offset, _ts, _epoch) in found.items():
            reset = self.subscriptions.assignment.get(tp)
            if reset is not None and reset.position is None:
                reset.position = offset
                reset.reset_to = None

    def list_offsets(
        self, wanted: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int, int | None]]:
        """ListOffsets at each partition's leader, retrying leadership errors until
        ``request_timeout_ms``: (offset, timestamp, leader epoch) per partition."""
        timeout_s = self.config["request_timeout_ms"] / 1000
        deadline = time.monotonic() + timeout_s
        remaining = dict(wanted)
        out: dict[TopicPartition, tuple[int, int, int | None]] = {}
        while remaining:
            by_leader: dict[str, dict[TopicPartition, int]] = {}
            missing: list[TopicPartition] = []
            for tp, ts in remaining.items():
                address = self.leader_address(tp)
                if address is None:
                    missing.append(tp)
                else:
                    by_leader.setdefault(address, {})[tp] = ts
            last_error: KafkaError | None = None
            for address, group in by_leader.items():
                request = fetch_pb2.ListOffsetsRequest(
                    isolation_level=self.isolation_level,
                    timeout_ms=int(self.config["request_timeout_ms"]),
                )
                for topic, parts in _by_topic(group).items():
                    request.topics.add(
                        name=topic,
                        partitions=[
                            fetch_pb2.ListOffsetsRequest.Partition(partition=p, timestamp_ms=ts)
                            for p, ts in parts
                        ],
                    )
                stub = fetch_pb2_grpc.FetchServiceStub(self.cluster.channel(address))
                try:
                    response = stub.ListOffsets(
                        request, timeout=max(deadline - time.monotonic(), 0.001)
                    )
                except grpc.RpcError as e:
                    refused = refusal(e)
                    if refused is not None:
                        raise refused from None
                    last_error = KafkaTimeoutError(f"ListOffsets to {address} failed: {e}")
                    continue
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition)
                        if p.error_code:
                            err = error_for_code(p.error_code)(p.error_message)
                            if not err.retriable:
                                raise err
                            last_error = err
                            continue
                        epoch = p.leader_epoch if p.leader_epoch >= 0 else None
                        out[tp] = (p.offset, p.timestamp_ms, epoch)
                        remaining.pop(tp, None)
            if not remaining:
                break
            if time.monotonic() >= deadline:
                raise last_error or KafkaTimeoutError(
                    f"Failed to get offsets by times in {self.config['request_timeout_ms']}ms"
                )
            if missing:
                for tp in missing:
                    topic_error = self.cluster.topic_error(tp.topic)
                    if topic_error is not None and not topic_error.retriable:
                        raise topic_error
            time.sleep(self._retry_backoff_s())
            with contextlib.suppress(KafkaError):
                self.cluster.refresh({tp.topic for tp in remaining})
        return out

    def leader_address(self, tp: TopicPartition) -> str | None:
        address = self.cluster.leader_address(tp)
        if address is None:
            with contextlib.suppress(KafkaError):
                self.cluster.refresh([tp.topic])
            address = self.cluster.leader_address(tp)
            parts = self.cluster.partitions_for(tp.topic)
            err = self.cluster.topic_error(tp.topic)
            if err is not None and not err.retriable:
                raise err
            if parts is not None and tp.partition not in parts:
                raise UnknownTopicOrPartitionError(
                    f"Partition {tp.partition} of topic {tp.topic} does not exist"
                )
        return address

    # -- records ---------------------------------------------------------------------------

    def collect(self, limit: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``limit`` buffered records, deserialized, advancing the positions. Each
        call starts at the partition after the one the last call started at, so no
        partition starves the others."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        assignment = self.subscriptions.assignment
        tps = [tp for tp, s in assignment.items() if s.buffered and not s.paused]
        if not tps:
            return out
        start = self._next_partition % len(tps)
        self._next_partition += 1
        wanted = limit
        sensors = self.sensors
        lag_to_lso = self._lag_to_lso
        lag = -1
        for tp in tps[start:] + tps[:start]:
            if limit <= 0:
                break
            state = assignment[tp]
            if state.index >= len(state.records) and not self._decode_more(tp, state, limit):
                continue
            taken = state.records[state.index : state.index + limit]
            state.index += len(taken)
            state.position = taken[-1].offset + 1
            if state.index >= len(state.records):
                # Past the decoded batches' skipped tail too (control batches, aborted
                # transactions): the next fetch starts after it, so must the position.
                state.position = max(state.position, state.records_next_offset)
                state.records = []
                state.index = 0
            if taken[-1].leader_epoch is not None:
                state.last_epoch = taken[-1].leader_epoch
            limit -= len(taken)
            if sensors is not None:  # the lag (inline: this is the hot path)
                end = state.high_watermark
                if lag_to_lso and state.last_stable_offset >= 0:
                    end = state.last_stable_offset
                if end >= 0 and end - state.position > lag:
                    lag = end - state.position
            if self.key_deserializer is not None or self.value_deserializer is not None:
                for r in taken:
                    if self.key_deserializer is not None:
                        r.key = self.key_deserializer(r.key)
                    if self.value_deserializer is not None:
                        r.value = self.value_deserializer(r.value)
            out[tp] = taken
        if sensors is not None and limit < wanted:
            # Counted only: FetchManagerMetrics.flush records them.
            sensors.consumed += wanted - limit
            if lag > sensors.lag:
                sensors.lag = lag
        return out

    def _lag(self, state: PartitionState) -> int:
        """How far the position is behind the end of what can be read (-1: not known)."""
        assert state.position is not None
        end = state.high_watermark
        if self._lag_to_lso and state.last_stable_offset >= 0:
            end = state.last_stable_offset
        return end - state.position if end >= 0 else -1

    def _decode_more(self, tp: TopicPartition, state: PartitionState, limit: int) -> bool:
        """Decode buffered batch bytes until some records are at or past the position
        (``limit`` or a little more: whole batches); False when none are left."""
        assert state.position is not None
        while True:
            if state.raw_pos >= state.raw_end:
                if not state.fetched:
                    break
                state.raw, state.raw_pos, state.raw_end, state.raw_aborted = state.fetched.popleft()
            try:
                decoded = decode_consumer_records(
                    state.raw,
                    tp.topic,
                    tp.partition,
                    state.position,
                    verify_crc=bool(self.config["check_crcs"]),
                    start=state.raw_pos,
                    end=state.raw_end,
                    max_records=limit,
                    aborted=state.raw_aborted,
                )
            except CorruptRecordError as e:
                state.clear()
                raise CorruptRecordError(
                    f"Record batch for partition {tp} at offset {state.position} is invalid: {e}"
                ) from e
            if decoded.end <= state.raw_pos:
                # Only a partial batch is left; the next response starts with it whole.
                state.raw_pos = state.raw_end
                continue
            state.raw_pos = decoded.end
            records = decoded.records
            if records:
                state.records, state.index = records, 0
                state.records_next_offset = decoded.next_offset
                return True
            # Only control batches (or records below the position): skip past them.
            state.position = max(state.position, decoded.next_offset)
        state.raw, state.raw_pos, state.raw_end, state.raw_aborted = b"", 0, 0, None
        return False

    # -- fetches ---------------------------------------------------------------------------

    def send_fetches(self) -> None:
        """One FetchRequest per leader, for partitions with a position, no fetch in flight
        and at most the response being decoded buffered (each fetches one response ahead). A
        broker may have several fetches out for different partitions: a long poll on idle
        partitions must not hold back one whose buffer just drained."""
        now = time.monotonic()
        by_leader: dict[str, dict[TopicPartition, int]] = {}
        for tp, state in self.subscriptions.assignment.items():
            fetch_offset = state.next_fetch_offset
            if (
                fetch_offset is None
                or state.fetched
                or state.fetching
                or state.paused
                or state.retry_at > now
            ):
                continue
            address = self.cluster.leader_address(tp)
            if address is None:
                state.retry_at = now + self._retry_backoff_s()
                with contextlib.suppress(KafkaError):
                    self.cluster.refresh([tp.topic])
                continue
            by_leader.setdefault(address, {})[tp] = fetch_offset
        for address, offsets in by_leader.items():
            future: FetchFuture
            if self.cluster.transport == "kafka":
                future = self._kafka_fetch(address, offsets)
            else:
                request = fetch_pb2.FetchRequest(
                    max_wait_ms=int(self.config["fetch_max_wait_ms"]),
                    min_bytes=int(self.config["fetch_min_bytes"]),
                    max_bytes=int(self.config["fetch_max_bytes"]),
                    isolation_level=self.isolation_level,
                    rack_id=str(self.config["client_rack"] or ""),
                )
                for topic, parts in _by_topic(offsets).items():
                    request.topics.add(
                        name=topic,
                        partitions=[
                            self._fetch_partition(TopicPartition(topic, p), o) for p, o in parts
                        ],
                    )
                timeout = (
                    self.config["request_timeout_ms"] + self.config["fetch_max_wait_ms"]
                ) / 1000
                future = self.cluster.fetch_call(address).future(
                    request, timeout=timeout, metadata=self.cluster.call_metadata
                )
            generations = {}
            for tp in offsets:
                state = self.subscriptions.assignment[tp]
                state.fetching = True
                generations[tp] = state.generation
            fetch_id = next(self._fetch_ids)
            f = self._in_flight[fetch_id] = _InFlightFetch(
                fetch_id, address, offsets, future, generations
            )
            if self.sensors is not None:
                f.timing = _FetchTiming(self.sensors.metrics.clock())
                future.add_done_callback(functools.partial(_stamp_done, f.timing, self.sensors))

    def _fetch_partition(self, tp: TopicPartition, offset: int) -> fetch_pb2.FetchRequest.Partition:
        out = fetch_pb2.FetchRequest.Partition(
            partition=tp.partition,
            fetch_offset=offset,
            partition_max_bytes=int(self.config["max_partition_fetch_bytes"]),
        )
        leader_epoch, last_fetched_epoch = self._epochs(tp, offset)
        if leader_epoch is not None:
            out.current_leader_epoch = leader_epoch
        if last_fetched_epoch is not None:
            out.last_fetched_epoch = last_fetched_epoch
        return out

    def _epochs(self, tp: TopicPartition, offset: int) -> tuple[int | None, int | None]:
        """A fetch's leader epoch from metadata (a deposed or newer leader refuses the fetch)
        and, at the position, the epoch of the record before it (the leader answers where its
        log diverged, KIP-320)."""
        state = self.subscriptions.assignment[tp]
        last = state.last_epoch if offset == state.position else None
        return self.cluster.leader_epoch(tp), last

    def _kafka_fetch(self, address: str, offsets: dict[TopicPartition, int]) -> FetchFuture:
        """A Fetch request in Kafka's protocol (sessionless: each names its partitions),
        answered as gRPC's are: the response bytes, and its batches located in them."""
        partition_max_bytes = int(self.config["max_partition_fetch_bytes"])
        topics = []
        for topic, parts in _by_topic(offsets).items():
            partitions = []
            for p, offset in parts:
                leader_epoch, last_fetched_epoch = self._epochs(TopicPartition(topic, p), offset)
                partitions.append(
                    {
                        "partition": p,
                        "current_leader_epoch": -1 if leader_epoch is None else leader_epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1
                        if last_fetched_epoch is None
                        else last_fetched_epoch,
                        "partition_max_bytes": partition_max_bytes,
                    }
                )
            topics.append({"topic": topic, "partitions": partitions})
        body = {
            "replica_id": -1,
            "max_wait_ms": int(self.config["fetch_max_wait_ms"]),
            "min_bytes": int(self.config["fetch_min_bytes"]),
            "max_bytes": int(self.config["fetch_max_bytes"]),
            "isolation_level": int(self.isolation_level),
            "topics": topics,
            "rack_id": str(self.config["client_rack"] or ""),
        }

        return self.cluster.kafka_connection(address).submit(
            FETCH_API_KEY,
            FETCH_VERSIONS,
            body,
            decode=lambda version, frame: (frame, kafka_decode_fetch_response(version, frame)),
        )

    def await_fetches(self, timeout_s: float, wakeup: threading.Event) -> bool:
        """Wait up to ``timeout_s`` for an in-flight fetch and handle every finished one;
        False when the time ran out (or ``wakeup`` was set) with nothing finished."""
        if not self._in_flight:
            if timeout_s > 0:
                time.sleep(min(timeout_s, self._retry_backoff_s()))
            return timeout_s > 0
        done = [f for f in self._in_flight.values() if f.future.done()]
        if not done:
            if timeout_s <= 0:
                return False
            event = threading.Event()
            for f in self._in_flight.values():
                f.future.add_done_callback(lambda _f: event.set())
            # Also wake for wakeup(): poll in short slices.
            end = time.monotonic() + timeout_s
            while not event.wait(min(0.05, max(end - time.monotonic(), 0))):
                if wakeup.is_set() or time.monotonic() >= end:
                    return False
            done = [f for f in self._in_flight.values() if f.future.done()]
        for f in done:
            del self._in_flight[f.fetch_id]
            self._handle_fetch(f)
        return True

    def _handle_fetch(self, f: _InFlightFetch) -> None:
        assignment = self.subscriptions.assignment
        for tp in f.offsets:
            state = assignment.get(tp)
            if state is not None:
                state.fetching = False
        try:
            data, view = f.future.result()
        except (grpc.RpcError, KafkaError) as e:
            refused = refusal(e) if isinstance(e, grpc.RpcError) else None
            if refused is not None:
                raise refused from None
            _log.debug("fetch from %s failed: %s", f.address, e)
            backoff = time.monotonic() + self._retry_backoff_s()
            for tp in f.offsets:
                state = assignment.get(tp)
                if state is not None:
                    state.retry_at = backoff
            with contextlib.suppress(KafkaError):
                self.cluster.refresh({tp.topic for tp in f.offsets})
            return
        sensors = self.sensors
        if sensors is not None:
            now = sensors.metrics.clock()
            if f.timing is not None:
                sensors.fetch_latency.record((f.timing.done_ms or now) - f.timing.sent_ms, now)
            sensors.throttle_time.record(view.throttle_time_ms, now)
        err = error_from_wire(view.error_code, view.error_message)
        if err is not None:
            raise err
        stale_metadata: set[str] = set()
        fetched_bytes = 0
        lag = -1
        for p in view.partitions:
            tp = TopicPartition(p.topic, p.partition)
            state = assignment.get(tp)
            fetched_at = f.offsets.get(tp)
            if state is None or fetched_at is None or state.generation != f.generations[tp]:
                continue  # unassigned, or the position moved while the fetch was out
            err = error_from_wire(p.error_code, p.error_message)
            if err is not None:
                if fetched_at != state.position:
                    # A fetch ahead of the position failed: try it again later; once the
                    # position gets there, the error is handled as for any fetch.
                    state.retry_at = time.monotonic() + self._retry_backoff_s()
                    continue
                self._fetch_error(tp, state, err, stale_metadata)
                continue
            if p.diverging_epoch is not None:
                if fetched_at == state.position:
                    self._diverged(tp, state, *p.diverging_epoch)
                continue
            state.high_watermark = p.high_watermark
            state.last_stable_offset = p.last_stable_offset
            fetched_bytes += p.records_end - p.records_start
            if p.records_end == p.records_start and fetched_at == state.position:
                lag = max(lag, self._lag(state))  # nothing more to read: caught up, or not
            if p.records_end > p.records_start:
                # read_committed: the aborted transactions the batches overlap (Kafka's
                # CompletedFetch), dropped in Rust as they are decoded.
                aborted = (
                    AbortedTransactionFilter(p.aborted_transactions)
                    if p.aborted_transactions
                    else None
                )
                state.add_fetched(data, p.records_start, p.records_end, p.next_offset, aborted)
        if sensors is not None:
            sensors.bytes_fetched.record(fetched_bytes, now)
            if lag > sensors.lag:
                sensors.lag = lag
            sensors.flush(now)
        if stale_metadata:
            with contextlib.suppress(KafkaError):
                self.cluster.refresh(stale_metadata)

    def _diverged(self, tp: TopicPartition, state: PartitionState, epoch: int, end: int) -> None:
        """The leader's log ends ``last_epoch`` (its largest epoch at or below it is
        ``epoch``) at ``end``. Below the position: records this consumer read were truncated
        (an unclean election): reset to where the logs agree, or fail without a reset policy,
        as Kafka's consumer does. Otherwise the position stands under the leader's epoch."""
        assert state.position is not None
        if end < state.position:
            if self.reset_default is None:
                raise OffsetOutOfRangeError(
                    f"Truncation detected for partition {tp} at offset {state.position} (the "
                    f"leader's log ends epoch {epoch} at {end}), and auto.offset.reset is none"
                )
            _log.warning(
                "Truncation detected for partition %s at offset %d, resetting offset to the "
                "first offset known to diverge %d",
                tp,
                state.position,
                end,
            )
            state.move(end, None)
        else:
            state.last_epoch = epoch

    def _fetch_error(
        self,
        tp: TopicPartition,
        state: PartitionState,
        err: KafkaError,
        stale_metadata: set[str],
    ) -> None:
        if isinstance(err, OffsetOutOfRangeError):
            if self.reset_default is None:
                raise OffsetOutOfRangeError(
                    f"Fetch position {state.position} is out of range for partition {tp}, "
                    "and auto.offset.reset is none"
                )
            _log.info("fetch offset %s is out of range for %s; resetting", state.position, tp)
            state.move(None, self.reset_default)
            return
        if err.retriable:
            state.retry_at = time.monotonic() + self._retry_backoff_s()
            stale_metadata.add(tp.topic)
            return
        raise err

    def close(self) -> None:
        for f in self._in_flight.values():
            f.future.cancel()
        self._in_flight.clear()


def _stamp_done(timing: _FetchTiming, sensors: FetchManagerMetrics, _future: object) -> None:
    """When a fetch's answer came (on the thread completing its future)."""
    timing.done_ms = sensors.metrics.clock()


def _by_topic(offsets: Mapping[TopicPartition, int]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for tp, value in offsets.items():
        out.setdefault(tp.topic, []).append((tp.partition, value))
    return out
