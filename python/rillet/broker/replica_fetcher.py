"""Followers fetching from leaders (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

A follower replica pulls from its leader with a Fetch that carries its ``replica_id`` and
broker epoch, from its log end offset, with the epoch of its last batch
(``last_fetched_epoch``). The leader answers records, its high watermark and log start; or,
when the follower's log diverged from its own, the epoch and end offset where they part
(KIP-320), and the follower truncates there (KIP-279): never by the high watermark alone.

One :class:`ReplicaFetcher` per source broker (``num.replica.fetchers`` of them, partitions
spread by hash) sends one request at a time for all its partitions; the
:class:`ReplicaFetcherManager` moves partitions between fetchers as leadership changes in the
metadata log. Request building and response handling (:meth:`ReplicaFetcher.build_request`,
:meth:`ReplicaFetcher.handle_response`) are synchronous and transport-free; the loop around
them sends over a :class:`ReplicaFetchClient` and sleeps on asyncio. Runs on the broker's
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from rillet import errors
from rillet.broker.partition import Partition
from rillet.errors import KafkaError
from rillet.scheduler import Clock
from rillet.types import TopicPartition

__all__ = [
    "FetcherConfig",
    "LeaderFetchResult",
    "PartitionFetchState",
    "ReplicaFetchClient",
    "ReplicaFetchPartition",
    "ReplicaFetchRequest",
    "ReplicaFetcher",
    "ReplicaFetcherManager",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetcherConfig:
    """The ``replica.fetch.*`` settings."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    partition_max_bytes: int = 1 << 20
    response_max_bytes: int = 10 << 20
    backoff_ms: int = 1000
    request_timeout_ms: int = 30_000
    num_fetchers: int = 1


@dataclass(frozen=True)
class ReplicaFetchPartition:
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int | None
    log_start_offset: int
    max_bytes: int


@dataclass(frozen=True)
class ReplicaFetchRequest:
    replica_id: int
    broker_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: dict[TopicPartition, ReplicaFetchPartition]


@dataclass(frozen=True)
class LeaderFetchResult:
    """One partition of the leader's answer."""

    error: KafkaError | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None
    records: bytes | memoryview = b""


class ReplicaFetchClient(Protocol):
    """A connection to one source broker."""

    async def fetch(
        self, request: ReplicaFetchRequest, timeout_ms: int
    ) -> dict[TopicPartition, LeaderFetchResult]:
        """Raises :class:`~rillet.errors.KafkaError` when no answer came."""
        ...

    async def close(self) -> None: ...


@dataclass
class PartitionFetchState:
    """What a fetcher knows of one partition: the leader epoch it follows, and until when
    it backs off after an error."""

    leader_epoch: int
    delayed_until_ms: int = 0


class ReplicaFetcher:
    """Fetches every partition this broker follows from one source broker. ``partition``
    finds this broker's replica of a partition (None once it is gone)."""

    def __init__(
        self,
        name: str,
        broker_id: int,
        source_broker: int,
        client: ReplicaFetchClient,
        partition: Callable[[TopicPartition], Partition | None],
        broker_epoch: Callable[[], int],
        clock: Clock,
        config: FetcherConfig,
    ) -> None:
        self.name = name
        self.broker_id = broker_id
        self.source_broker = source_broker
        self.client = client
        self.partition = partition
        self.broker_epoch = broker_epoch
        self.clock = clock
        self.config = config
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- partitions ------------------------------------------------------------------------

    def add_partitions(self, wanted: Mapping[TopicPartition, int]) -> None:
        """Follow these partitions at these leader epochs (from the log end)."""
        for tp, epoch in wanted.items():
            self.partitions[tp] = PartitionFetchState(epoch)
        self._wake()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    def _delay(self, tp: TopicPartition, now_ms: int) -> None:
        state = self.partitions.get(tp)
        if state is not None:
            state.delayed_until_ms = now_ms + self.config.backoff_ms

    # -- one round, transport-free ---------------------------------------------------------

    def build_request(self, now_ms: int) -> ReplicaFetchRequest | None:
        """A fetch for every partition not backing off, from each one's log end; None when
        there is nothing to fetch."""
        parts: dict[TopicPartition, ReplicaFetchPartition] = {}
        for tp, state in self.partitions.items():
            if state.delayed_until_ms > now_ms:
                continue
            p = self.partition(tp)
            if p is None:
                continue
            log = p.log
            parts[tp] = ReplicaFetchPartition(
                fetch_offset=log.log_end_offset,
                current_leader_epoch=state.leader_epoch,
                last_fetched_epoch=log.latest_epoch(),
                log_start_offset=log.log_start_offset,
                max_bytes=self.config.partition_max_bytes,
            )
        if not parts:
            return None
        return ReplicaFetchRequest(
            replica_id=self.broker_id,
            broker_epoch=self.broker_epoch(),
            max_wait_ms=self.config.max_wait_ms,
            min_bytes=self.config.min_bytes,
            max_bytes=self.config.response_max_bytes,
            partitions=parts,
        )

    def handle_response(
        self,
        request: ReplicaFetchRequest,
        results: Mapping[TopicPartition, LeaderFetchResult],
        now_ms: int,
    ) -> None:
        """Apply the leader's answer to each partition still followed at the epoch it was
        asked for: append, truncate, start over, or back off."""
        for tp, asked in request.partitions.items():
            state = self.partitions.get(tp)
            p = self.partition(tp)
            r = results.get(tp)
            if (
                state is None
                or p is None
                or r is None
                or state.leader_epoch != asked.current_leader_epoch
                or p.is_leader
                or p.leader_epoch != asked.current_leader_epoch
                or p.log.log_end_offset != asked.fetch_offset
            ):
                continue  # the partition moved on while the request was out
            try:
                self._handle_partition(tp, p, asked, r, now_ms)
            except KafkaError as e:
                _log.warning(
                    "[%s] %s: could not apply the leader's data, backing off: %s", self.name, tp, e
                )
                self._delay(tp, now_ms)

    def _handle_partition(
        self,
        tp: TopicPartition,
        p: Partition,
        asked: ReplicaFetchPartition,
        r: LeaderFetchResult,
        now_ms: int,
    ) -> None:
        if r.error is None:
            if r.diverging_epoch is not None:
                epoch, end = r.diverging_epoch
                before = p.log.log_end_offset
                after = p.truncate_on_divergence(epoch, end)
                _log.info(
                    "[%s] %s: log diverged from leader %d after epoch %d (ends at %d there); "
                    "truncated from %d to %d",
                    self.name,
                    tp,
                    self.source_broker,
                    epoch,
                    end,
                    before,
                    after,
                )
                return
            p.append_records_to_follower(r.records, r.high_watermark, r.log_start_offset)
            return
        if isinstance(r.error, errors.OffsetOutOfRangeError):
            if 0 <= asked.fetch_offset < r.log_start_offset:
                _log.info(
                    "[%s] %s: the leader's log starts at %d, after this log's end %d; "
                    "starting over there",
                    self.name,
                    tp,
                    r.log_start_offset,
                    asked.fetch_offset,
                )
                p.reset_to_leader_log_start(r.log_start_offset)
            else:
                # Past the leader's end with no epoch to compare: back to the high
                # watermark, which the leader has.
                p.truncate_on_divergence(-1, -1)
            return
        if isinstance(r.error, (errors.FencedLeaderEpochError, errors.UnknownLeaderEpochError)):
            # The leader or this broker has not seen the newest metadata yet.
            _log.debug("[%s] %s: %s", self.name, tp, r.error)
        else:
            _log.info("[%s] %s: leader %d answered %s", self.name, tp, self.source_broker, r.error)
        self._delay(tp, now_ms)

    # -- the loop --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def _wake(self) -> None:
        self._wakeup.set()

    async def _run(self) -> None:
        wakeup = self._wakeup
        while True:
            now = self.clock()
            request = self.build_request(now)
            if request is None:
                delays = [s.delayed_until_ms - now for s in self.partitions.values()]
                wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    timeout = min(delays) / 1000 if delays else None
                    await asyncio.wait_for(wakeup.wait(), timeout)
                continue
            timeout_ms = self.config.request_timeout_ms + request.max_wait_ms
            try:
                results = await self.client.fetch(request, timeout_ms)
            except KafkaError as e:
                _log.info(
                    "[%s] fetching from broker %d failed, backing off %d ms: %s",
                    self.name,
                    self.source_broker,
                    self.config.backoff_ms,
                    e,
                )
                now = self.clock()
                for tp in request.partitions:
                    self._delay(tp, now)
                continue
            self.handle_response(request, results, self.clock())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.client.close()


class ReplicaFetcherManager:
    """The fetchers of one broker, keyed by source broker and fetcher number.
    ``connect(broker_id)`` opens a client to a broker's inter-broker listener (None while
    its address is unknown)."""

    def __init__(
        self,
        broker_id: int,
        partition: Callable[[TopicPartition], Partition | None],
        connect: Callable[[int], ReplicaFetchClient | None],
        broker_epoch: Callable[[], int],
        clock: Clock,
        config: FetcherConfig,
    ) -> None:
        self.broker_id = broker_id
        self.partition = partition
        self.connect = connect
        self.broker_epoch = broker_epoch
        self.clock = clock
        self.config = config
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[TopicPartition, tuple[int, int]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def _fetcher_id(self, tp: TopicPartition) -> int:
        return abs(31 * hash(tp.topic) + tp.partition) % max(self.config.num_fetchers, 1)

    def add_partitions(self, wanted: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """Follow each partition from ``(leader, leader_epoch)``."""
        self.remove_partitions(wanted)
        for tp, (leader, epoch) in wanted.items():
            key = (leader, self._fetcher_id(tp))
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                client = self.connect(leader)
                if client is None:
                    _log.warning("%s: no address for leader %d; not fetching", tp, leader)
                    continue
                fetcher = ReplicaFetcher(
                    f"ReplicaFetcher replicaId={self.broker_id}, leaderId={leader}, "
                    f"fetcherId={key[1]}",
                    self.broker_id,
                    leader,
                    client,
                    self.partition,
                    self.broker_epoch,
                    self.clock,
                    self.config,
                )
                fetcher.start()
                self.fetchers[key] = fetcher
            fetcher.add_partitions({tp: epoch})
            self._where[tp] = key

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            key = self._where.pop(tp, None)
            if key is not None:
                self.fetchers[key].remove_partitions([tp])
        self._close_idle()

    def _close_idle(self) -> None:
        for key in [k for k, f in self.fetchers.items() if not f.partitions]:
            task = asyncio.get_running_loop().create_task(self.fetchers.pop(key).shutdown())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def is_following(self, tp: TopicPartition) -> bool:
        return tp in self._where

    def following(self) -> dict[TopicPartition, int]:
        """Each followed partition and the broker it fetches from."""
        return {tp: key[0] for tp, key in self._where.items()}

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._where.clear()
        for f in fetchers:
            await f.shutdown()
        for task in list(self._closing):
            with contextlib.suppress(asyncio.CancelledError):
                await task
