"""Consumer, shaped like kafka-python's ``KafkaConsumer`` (manual assignment, no group yet).

Positions live in the client. ``poll()`` hands out buffered records first; partitions with
nothing buffered are fetched from their leader, one FetchRequest per broker carrying every
such partition, as a long poll (``fetch_min_bytes``, ``fetch_max_wait_ms``). The next fetch
is sent as soon as records are handed out, so the network round trip overlaps the caller's
processing. Fetched RecordBatch v2 bytes are CRC-checked (``check_crcs``) and decoded into
:class:`ConsumerRecord` objects in Rust.

A partition without a position is reset by ``auto_offset_reset`` (``earliest``, ``latest``,
or ``none``: :class:`~rillet.errors.NoOffsetForPartitionError`); a fetch answered
OFFSET_OUT_OF_RANGE is reset the same way. Leadership errors refresh metadata and retry.

Not thread safe, like kafka-python's consumer: use one thread per consumer.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import grpc

from rillet._core import ConsumerRecord, decode_consumer_records
from rillet.client.cluster import ClusterMetadata
from rillet.client.configs import merge_configs, parse_bootstrap
from rillet.errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidConfigurationError,
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

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndTimestamp"]

_log = logging.getLogger(__name__)

Deserializer = Callable[[bytes | None], Any]

EARLIEST = -2
LATEST = -1

_RESET = {"earliest": EARLIEST, "smallest": EARLIEST, "latest": LATEST, "largest": LATEST}

_BUILTIN_DESERIALIZERS: dict[str, Deserializer] = {
    "bytes": lambda v: v,
    "str": lambda v: None if v is None else v.decode(),
    "string": lambda v: None if v is None else v.decode(),
}


class OffsetAndTimestamp(NamedTuple):
    """The answer of :meth:`Consumer.offsets_for_times` for one partition."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


@dataclass
class _PartitionState:
    """One assigned partition: where the consumer is and what it has buffered.

    Fetches run one response ahead of the position: while one response is being decoded,
    the next is fetched from where it ends (``fetch_offset``), so a partition's reader does
    not wait a round trip each time its buffer drains. ``generation`` changes whenever the
    position moves (seek, reset, error), so a response to an older fetch is dropped."""

    position: int | None = None  # None: reset by auto_offset_reset before fetching
    reset_to: int | None = None  # EARLIEST/LATEST when a reset is pending
    paused: bool = False
    records: list[ConsumerRecord] = field(default_factory=list)
    index: int = 0  # records[index:] are not handed out yet
    # Fetched batch bytes not decoded yet: raw[raw_pos:raw_end] (raw is the whole fetch
    # response, read in place), then each (response, start, end) in `fetched`. Batches are
    # decoded a poll's worth at a time, as highly compressed batches can expand a
    # thousandfold.
    raw: bytes = b""
    raw_pos: int = 0
    raw_end: int = 0
    fetched: deque[tuple[bytes, int, int]] = field(default_factory=deque)
    # Where the next fetch starts: after the last batch buffered (None: at the position).
    fetch_offset: int | None = None
    generation: int = 0
    high_watermark: int = -1
    fetching: bool = False  # a fetch for this partition is in flight
    retry_at: float = 0.0  # after an error: no fetch before this time.monotonic()

    @property
    def buffered(self) -> bool:
        return self.index < len(self.records) or self.raw_pos < self.raw_end or bool(self.fetched)

    @property
    def next_fetch_offset(self) -> int | None:
        return self.position if self.fetch_offset is None else self.fetch_offset

    def clear(self) -> None:
        """Drop everything buffered or in flight (the position moved)."""
        self.records, self.index = [], 0
        self.raw, self.raw_pos, self.raw_end = b"", 0, 0
        self.fetched.clear()
        self.fetch_offset = None
        self.generation += 1

    def add_fetched(self, data: bytes, start: int, end: int, next_offset: int) -> None:
        if self.raw_pos < self.raw_end:
            self.fetched.append((data, start, end))
        else:
            self.raw, self.raw_pos, self.raw_end = data, start, end
        if next_offset >= 0:
            self.fetch_offset = next_offset


@dataclass
class _InFlightFetch:
    fetch_id: int
    address: str
    offsets: dict[TopicPartition, int]
    future: grpc.Future  # type: ignore[type-arg]
    # Each partition's generation when the fetch went out.
    generations: dict[TopicPartition, int] = field(default_factory=dict)


class Consumer:
    """Read records from Rillet by manual assignment, or by subscribing with no group
    (every partition of the subscribed topics). Call :meth:`close` when done."""

    DEFAULT_CONFIG: Mapping[str, Any] = {
        "bootstrap_servers": "localhost:9092",
        "client_id": "rillet-consumer",
        "group_id": None,
        "key_deserializer": None,
        "value_deserializer": None,
        "fetch_min_bytes": 1,
        "fetch_max_wait_ms": 500,
        "fetch_max_bytes": 52428800,
        "max_partition_fetch_bytes": 1048576,
        "request_timeout_ms": 30500,
        "retry_backoff_ms": 100,
        "auto_offset_reset": "latest",
        "enable_auto_commit": False,
        "check_crcs": True,
        "max_poll_records": 500,
        "consumer_timeout_ms": float("inf"),
        "metadata_max_age_ms": 300000,
        "isolation_level": "read_uncommitted",
        "client_rack": "",
    }

    def __init__(self, *topics: str | Mapping[str, Any], **kwargs: Any) -> None:
        """``Consumer("t1", "t2", bootstrap_servers=...)`` as in kafka-python; a dict of
        Kafka's dotted names may come first: ``Consumer({"bootstrap.servers": ...}, "t1")``."""
        configs: Mapping[str, Any] | None = None
        if topics and isinstance(topics[0], Mapping):
            configs, topics = topics[0], topics[1:]
        names: list[str] = []
        for t in topics:
            if not isinstance(t, str):
                raise TypeError(f"topics must be strings, got {t!r}")
            names.append(t)
        c = merge_configs(self.DEFAULT_CONFIG, configs, kwargs, "consumer")
        self.config = c
        if c["group_id"] is not None:
            raise InvalidConfigurationError(
                "group.id is not supported yet: Rillet has no group coordinator, so consumers "
                "use assign() (or subscribe() without a group, which reads every partition)"
            )
        if c["enable_auto_commit"]:
            raise InvalidConfigurationError(
                "enable.auto.commit needs a group.id; Rillet has no group coordinator yet"
            )
        reset = str(c["auto_offset_reset"]).lower()
        if reset not in (*_RESET, "none"):
            raise InvalidConfigurationError(
                f"Invalid value {c['auto_offset_reset']} for configuration auto.offset.reset: "
                "String must be one of: latest, earliest, none"
            )
        self._reset_default = _RESET.get(reset)
        isolation = str(c["isolation_level"]).lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigurationError(
                f"Invalid value {c['isolation_level']} for configuration isolation.level: "
                "String must be one of: read_uncommitted, read_committed"
            )
        self._isolation = (
            fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED
            if isolation == "read_committed"
            else fetch_pb2.ISOLATION_LEVEL_READ_UNCOMMITTED
        )
        for name in (
            "fetch_min_bytes",
            "fetch_max_wait_ms",
            "fetch_max_bytes",
            "max_partition_fetch_bytes",
            "max_poll_records",
            "request_timeout_ms",
        ):
            value = c[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidConfigurationError(
                    f"Invalid value {value!r} for configuration {name.replace('_', '.')}: "
                    "must be a non-negative integer"
                )
        if c["max_poll_records"] < 1:
            raise InvalidConfigurationError("max.poll.records must be at least 1")
        self._key_deserializer = self._deserializer(c["key_deserializer"], "key_deserializer")
        self._value_deserializer = self._deserializer(c["value_deserializer"], "value_deserializer")
        self._cluster = ClusterMetadata(
            parse_bootstrap(c["bootstrap_servers"]), int(c["request_timeout_ms"])
        )
        self._assignment: dict[TopicPartition, _PartitionState] = {}
        self._subscription: set[str] = set()
        self._manual = False
        # Fetches on the wire, by a sequence number; a partition is in at most one of them.
        self._in_flight: dict[int, _InFlightFetch] = {}
        self._fetch_ids = itertools.count()
        self._wakeup = threading.Event()
        self._next_partition = 0
        self._closed = False
        if names:
            self.subscribe(names)

    @staticmethod
    def _deserializer(value: Any, name: str) -> Deserializer | None:
        if value is None or callable(value):
            return value  # type: ignore[no-any-return]
        if isinstance(value, str) and value.lower() in _BUILTIN_DESERIALIZERS:
            return _BUILTIN_DESERIALIZERS[value.lower()]
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration {name}: a callable or one of "
            f"{sorted(_BUILTIN_DESERIALIZERS)}"
        )

    # -- assignment ------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replacing any earlier assignment)."""
        if self._subscription:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        wanted = [TopicPartition(*tp) for tp in partitions]
        for tp in wanted:
            if not isinstance(tp.topic, str) or not isinstance(tp.partition, int):
                raise TypeError(f"not a TopicPartition: {tp!r}")
        self._manual = bool(wanted)
        self._set_assignment(wanted)

    def subscribe(self, topics: Iterable[str]) -> None:
        """Read every partition of ``topics`` (no group: each consumer reads them all);
        partitions added later are picked up when metadata is refreshed."""
        if self._manual:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        if isinstance(topics, str):
            topics = [topics]
        self._subscription = set(topics)
        self._update_subscribed_assignment(force=True)

    def unsubscribe(self) -> None:
        """Drop every subscription and assignment."""
        self._subscription = set()
        self._manual = False
        self._set_assignment([])

    def subscription(self) -> set[str] | None:
        return set(self._subscription) if self._subscription else None

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        new: dict[TopicPartition, _PartitionState] = {}
        for tp in partitions:
            new[tp] = self._assignment.get(tp) or _PartitionState()
        self._assignment = new

    def _update_subscribed_assignment(self, force: bool = False) -> None:
        if not self._subscription:
            return
        if not force and self._cluster.age_ms() < self.config["metadata_max_age_ms"]:
            return
        with contextlib.suppress(KafkaError):
            self._cluster.refresh(self._subscription)
        wanted = [
            TopicPartition(topic, p)
            for topic in sorted(self._subscription)
            for p in self._cluster.partitions_for(topic) or []
        ]
        self._set_assignment(wanted)

    def _state(self, tp: TopicPartition) -> _PartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return state

    # -- positions -------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on the next poll."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"seek offset must be a non-negative integer, got {offset!r}")
        self._move(self._state(partition), offset, None)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Read these (default: all assigned) partitions from their log start offset."""
        for tp in partitions or tuple(self._assignment):
            self._move(self._state(tp), None, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Read these (default: all assigned) partitions from their high watermark."""
        for tp in partitions or tuple(self._assignment):
            self._move(self._state(tp), None, LATEST)

    @staticmethod
    def _move(state: _PartitionState, offset: int | None, reset_to: int | None) -> None:
        state.position = offset
        state.reset_to = reset_to
        state.clear()

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record that will be returned for ``partition``."""
        state = self._state(partition)
        if state.position is None:
            self._reset_positions([partition])
        assert state.position is not None
        return state.position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark last seen in a fetch of ``partition`` (None before one)."""
        hw = self._state(partition).high_watermark
        return hw if hw >= 0 else None

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._assignment.items() if s.paused}

    def _reset_positions(self, partitions: Iterable[TopicPartition]) -> None:
        pending: dict[TopicPartition, int] = {}
        for tp in partitions:
            state = self._assignment[tp]
            target = state.reset_to if state.reset_to is not None else self._reset_default
            if target is None:
                raise NoOffsetForPartitionError(
                    f"Undefined offset with no reset policy for partitions: [{tp}]"
                )
            pending[tp] = target
        if not pending:
            return
        found = self._list_offsets(pending)
        for tp, (offset, _ts, _epoch) in found.items():
            reset = self._assignment.get(tp)
            if reset is not None and reset.position is None:
                reset.position = offset
                reset.reset_to = None

    # -- offsets lookups -------------------------------------------------------------------

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        found = self._list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions})
        return {tp: r[0] for tp, r in found.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark (the offset after the last committed record) of each."""
        found = self._list_offsets({TopicPartition(*tp): LATEST for tp in partitions})
        return {tp: r[0] for tp, r in found.items()}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is at or after the given
        milliseconds, or None when every record is older."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. It must be >= 0")
        found = self._list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()})
        return {
            tp: None if offset < 0 else OffsetAndTimestamp(offset, ts, epoch)
            for tp, (offset, ts, epoch) in found.items()
        }

    def _list_offsets(
        self, wanted: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int, int | None]]:
        """ListOffsets at each partition's leader, retrying leadership errors until
        ``request_timeout_ms``."""
        timeout_s = self.config["request_timeout_ms"] / 1000
        deadline = time.monotonic() + timeout_s
        remaining = dict(wanted)
        out: dict[TopicPartition, tuple[int, int, int | None]] = {}
        while remaining:
            by_leader: dict[str, dict[TopicPartition, int]] = {}
            missing: list[TopicPartition] = []
            for tp, ts in remaining.items():
                address = self._leader_address(tp)
                if address is None:
                    missing.append(tp)
                else:
                    by_leader.setdefault(address, {})[tp] = ts
            last_error: KafkaError | None = None
            for address, group in by_leader.items():
                request = fetch_pb2.ListOffsetsRequest(
                    isolation_level=self._isolation,
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
                stub = fetch_pb2_grpc.FetchServiceStub(self._cluster.channel(address))
                try:
                    response = stub.ListOffsets(
                        request, timeout=max(deadline - time.monotonic(), 0.001)
                    )
                except grpc.RpcError as e:
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
                    topic_error = self._cluster.topic_error(tp.topic)
                    if topic_error is not None and not topic_error.retriable:
                        raise topic_error
            time.sleep(self.config["retry_backoff_ms"] / 1000)
            with contextlib.suppress(KafkaError):
                self._cluster.refresh({tp.topic for tp in remaining})
        return out

    def _leader_address(self, tp: TopicPartition) -> str | None:
        address = self._cluster.leader_address(tp)
        if address is None:
            with contextlib.suppress(KafkaError):
                self._cluster.refresh([tp.topic])
            address = self._cluster.leader_address(tp)
            parts = self._cluster.partitions_for(tp.topic)
            err = self._cluster.topic_error(tp.topic)
            if err is not None and not err.retriable:
                raise err
            if parts is not None and tp.partition not in parts:
                raise UnknownTopicOrPartitionError(
                    f"Partition {tp.partition} of topic {tp.topic} does not exist"
                )
        return address

    # -- metadata --------------------------------------------------------------------------

    def topics(self) -> set[str]:
        """Every topic the cluster has."""
        self._cluster.refresh(None)
        return set(self._cluster.topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition numbers of ``topic``, or None when it does not exist."""
        with contextlib.suppress(KafkaError):
            self._cluster.refresh([topic])
        parts = self._cluster.partitions_for(topic)
        return set(parts) if parts is not None else None

    # -- polling ---------------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None, update_offsets: bool = True
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max_poll_records``), waiting up to ``timeout_ms`` for some to arrive."""
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        if not self._assignment and not self._subscription:
            raise IllegalStateError(
                "Consumer is not subscribed to any topics or assigned any partitions"
            )
        limit = int(max_records or self.config["max_poll_records"])
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        self._wakeup.clear()
        while True:
            self._update_subscribed_assignment()
            self._reset_positions(
                tp for tp, s in self._assignment.items() if s.position is None and not s.paused
            )
            out = self._drain(limit)
            if out:
                self._send_fetches()  # prefetch while the caller works on these
                return out
            self._send_fetches()
            remaining = deadline - time.monotonic()
            if not self._await_fetches(remaining):
                return {}
            if self._wakeup.is_set():
                return {}

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record; StopIteration after ``consumer_timeout_ms`` without one."""
        timeout = self.config["consumer_timeout_ms"]
        deadline = time.monotonic() + timeout / 1000 if timeout != float("inf") else None
        while True:
            records = self.poll(
                timeout_ms=int(min(1000, max((deadline - time.monotonic()) * 1000, 0)))
                if deadline is not None
                else 1000,
                max_records=1,
            )
            for batch in records.values():
                return batch[0]
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration

    def wakeup(self) -> None:
        """Make a blocked :meth:`poll` return early (from another thread)."""
        self._wakeup.set()

    def _drain(self, limit: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        tps = [tp for tp, s in self._assignment.items() if s.buffered and not s.paused]
        if not tps:
            return out
        # Start where the last poll stopped, so no partition starves the others.
        start = self._next_partition % len(tps)
        self._next_partition += 1
        for tp in tps[start:] + tps[:start]:
            if limit <= 0:
                break
            state = self._assignment[tp]
            if state.index >= len(state.records) and not self._decode_more(tp, state, limit):
                continue
            taken = state.records[state.index : state.index + limit]
            state.index += len(taken)
            if state.index >= len(state.records):
                state.records = []
                state.index = 0
            state.position = taken[-1].offset + 1
            limit -= len(taken)
            if self._key_deserializer is not None or self._value_deserializer is not None:
                for r in taken:
                    if self._key_deserializer is not None:
                        r.key = self._key_deserializer(r.key)
                    if self._value_deserializer is not None:
                        r.value = self._value_deserializer(r.value)
            out[tp] = taken
        return out

    def _decode_more(self, tp: TopicPartition, state: _PartitionState, limit: int) -> bool:
        """Decode buffered batch bytes until some records are at or past the position
        (``limit`` or a little more: whole batches); False when none are left."""
        assert state.position is not None
        while True:
            if state.raw_pos >= state.raw_end:
                if not state.fetched:
                    break
                state.raw, state.raw_pos, state.raw_end = state.fetched.popleft()
            try:
                records, next_offset, end = decode_consumer_records(
                    state.raw,
                    tp.topic,
                    tp.partition,
                    state.position,
                    verify_crc=bool(self.config["check_crcs"]),
                    start=state.raw_pos,
                    end=state.raw_end,
                    max_records=limit,
                )
            except CorruptRecordError as e:
                state.clear()
                raise CorruptRecordError(
                    f"Record batch for partition {tp} at offset {state.position} is invalid: {e}"
                ) from e
            if end <= state.raw_pos:
                # Only a partial batch is left; the next response starts with it whole.
                state.raw_pos = state.raw_end
                continue
            state.raw_pos = end
            if records:
                state.records, state.index = records, 0
                return True
            # Only control batches (or records below the position): skip past them.
            state.position = max(state.position, next_offset)
        state.raw, state.raw_pos, state.raw_end = b"", 0, 0
        return False

    def _send_fetches(self) -> None:
        """One FetchRequest per leader, for partitions with a position, no fetch in flight
        and at most the response being decoded buffered (each fetches one response ahead). A
        broker may have several fetches out for different partitions: a long poll on idle
        partitions must not hold back one whose buffer just drained."""
        now = time.monotonic()
        by_leader: dict[str, dict[TopicPartition, int]] = {}
        for tp, state in self._assignment.items():
            fetch_offset = state.next_fetch_offset
            if (
                fetch_offset is None
                or state.fetched
                or state.fetching
                or state.paused
                or state.retry_at > now
            ):
                continue
            address = self._cluster.leader_address(tp)
            if address is None:
                state.retry_at = now + self.config["retry_backoff_ms"] / 1000
                with contextlib.suppress(KafkaError):
                    self._cluster.refresh([tp.topic])
                continue
            by_leader.setdefault(address, {})[tp] = fetch_offset
        for address, offsets in by_leader.items():
            request = fetch_pb2.FetchRequest(
                max_wait_ms=int(self.config["fetch_max_wait_ms"]),
                min_bytes=int(self.config["fetch_min_bytes"]),
                max_bytes=int(self.config["fetch_max_bytes"]),
                isolation_level=self._isolation,
                rack_id=str(self.config["client_rack"] or ""),
            )
            max_partition = int(self.config["max_partition_fetch_bytes"])
            for topic, parts in _by_topic(offsets).items():
                request.topics.add(
                    name=topic,
                    partitions=[
                        fetch_pb2.FetchRequest.Partition(
                            partition=p, fetch_offset=offset, partition_max_bytes=max_partition
                        )
                        for p, offset in parts
                    ],
                )
            timeout = (self.config["request_timeout_ms"] + self.config["fetch_max_wait_ms"]) / 1000
            future = self._cluster.fetch_call(address).future(request, timeout=timeout)
            generations = {}
            for tp in offsets:
                state = self._assignment[tp]
                state.fetching = True
                generations[tp] = state.generation
            fetch_id = next(self._fetch_ids)
            self._in_flight[fetch_id] = _InFlightFetch(
                fetch_id, address, offsets, future, generations
            )

    def _await_fetches(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for an in-flight fetch and handle every finished one;
        False when the time ran out with nothing finished."""
        if not self._in_flight:
            if timeout_s > 0:
                time.sleep(min(timeout_s, self.config["retry_backoff_ms"] / 1000))
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
                if self._wakeup.is_set() or time.monotonic() >= end:
                    return False
            done = [f for f in self._in_flight.values() if f.future.done()]
        for f in done:
            del self._in_flight[f.fetch_id]
            self._handle_fetch(f)
        return True

    def _handle_fetch(self, f: _InFlightFetch) -> None:
        for tp in f.offsets:
            state = self._assignment.get(tp)
            if state is not None:
                state.fetching = False
        try:
            data, (error_code, error_message, partitions) = f.future.result()
        except grpc.RpcError as e:
            _log.debug("fetch from %s failed: %s", f.address, e)
            backoff = time.monotonic() + self.config["retry_backoff_ms"] / 1000
            for tp in f.offsets:
                state = self._assignment.get(tp)
                if state is not None:
                    state.retry_at = backoff
            with contextlib.suppress(KafkaError):
                self._cluster.refresh({tp.topic for tp in f.offsets})
            return
        err = error_from_wire(error_code, error_message)
        if err is not None:
            raise err
        stale_metadata: set[str] = set()
        for (
            topic,
            partition,
            p_error,
            p_message,
            high_watermark,
            _,
            _,
            start,
            end,
            next_offset,
        ) in partitions:
            tp = TopicPartition(topic, partition)
            state = self._assignment.get(tp)
            fetched_at = f.offsets.get(tp)
            if state is None or fetched_at is None or state.generation != f.generations[tp]:
                continue  # unassigned, or the position moved while the fetch was out
            err = error_from_wire(p_error, p_message)
            if err is not None:
                if fetched_at != state.position:
                    # A fetch ahead of the position failed: try it again later; once the
                    # position gets there, the error is handled as for any fetch.
                    state.retry_at = time.monotonic() + self.config["retry_backoff_ms"] / 1000
                    continue
                self._fetch_error(tp, state, err, stale_metadata)
                continue
            state.high_watermark = high_watermark
            if end > start:
                state.add_fetched(data, start, end, next_offset)
        if stale_metadata:
            with contextlib.suppress(KafkaError):
                self._cluster.refresh(stale_metadata)

    def _fetch_error(
        self,
        tp: TopicPartition,
        state: _PartitionState,
        err: KafkaError,
        stale_metadata: set[str],
    ) -> None:
        if isinstance(err, OffsetOutOfRangeError):
            if self._reset_default is None:
                raise OffsetOutOfRangeError(
                    f"Fetch position {state.position} is out of range for partition {tp}, "
                    "and auto.offset.reset is none"
                )
            _log.info("fetch offset %s is out of range for %s; resetting", state.position, tp)
            self._move(state, None, self._reset_default)
            return
        if err.retriable:
            state.retry_at = time.monotonic() + self.config["retry_backoff_ms"] / 1000
            stale_metadata.add(tp.topic)
            return
        raise err

    # -- lifecycle -------------------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Stop fetching and release connections."""
        if self._closed:
            return
        self._closed = True
        for f in self._in_flight.values():
            f.future.cancel()
        self._in_flight.clear()
        self._cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _by_topic(offsets: Mapping[TopicPartition, int]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for tp, value in offsets.items():
        out.setdefault(tp.topic, []).append((tp.partition, value))
    return out
