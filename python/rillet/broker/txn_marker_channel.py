"""Sends the transaction coordinator's markers to partition leaders (Kafka's
``TransactionMarkerChannelManager`` and ``TransactionMarkerRequestCompletionHandler``, the
transport half; the pure half is :mod:`rillet.coordinator.transaction.markers`).

A :class:`~rillet.coordinator.transaction.TxnMarker` names partitions of many leaders. The
channel splits it by the leader the current metadata names for each partition and queues a
:class:`~rillet.broker.txn_broker_clients.TxnMarkerEntry` per leader. Each leader gets one
WriteTxnMarkers request at a time, carrying every entry queued for it meanwhile; this
broker's own partitions are written in-process. Each request's answers go back to the
shard, one call per request (``on_answer(marker, errors, deleted)``):

- a partition whose topic or partition the metadata no longer has is *deleted* (the shard
  drops it);
- a partition with no leader, or whose leader has no inter-broker endpoint, is answered
  NOT_LEADER_OR_FOLLOWER at once, and a request that gets no answer (a lost connection,
  ``request.timeout.ms`` passed) NETWORK_EXCEPTION for its partitions: the shard retries
  both, and the driver sends retries after ``retry.backoff.ms``, looking the leaders up
  again.

A marker whose shard was unloaded meanwhile (``is_current()`` false) is dropped before it is
sent, and its answers are not delivered: the shard loaded next resends what is pending.
Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from rillet import errors
from rillet.broker.txn_broker_clients import BrokerClients, MarkerErrors, TxnMarkerEntry
from rillet.coordinator.transaction import TxnMarker
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.types import TopicPartition

__all__ = ["MarkerAnswer", "TxnMarkerChannel"]

_log = logging.getLogger(__name__)

# on_answer(marker, errors by partition, deleted partitions): one call per request answered.
MarkerAnswer = Callable[[TxnMarker, MarkerErrors, frozenset[TopicPartition]], None]
LocalWrite = Callable[[Sequence[TxnMarkerEntry]], Awaitable[list[MarkerErrors]]]


@dataclass
class _Queued:
    marker: TxnMarker
    entry: TxnMarkerEntry
    on_answer: MarkerAnswer
    is_current: Callable[[], bool]


@dataclass
class _BrokerQueue:
    queued: list[_Queued] = field(default_factory=list)
    sender: asyncio.Task[None] | None = None


class TxnMarkerChannel:
    """See the module doc. ``local`` writes markers to this broker's own partitions."""

    def __init__(
        self,
        broker_id: int,
        image: Callable[[], MetadataImage],
        clients: BrokerClients,
        local: LocalWrite | None,
        *,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.broker_id = broker_id
        self.image = image
        self.clients = clients
        self.local = local
        self.request_timeout_ms = request_timeout_ms
        self._queues: dict[int, _BrokerQueue] = {}
        self._delayed: set[asyncio.TimerHandle] = set()
        self._closed = False

    def send(
        self,
        marker: TxnMarker,
        on_answer: MarkerAnswer,
        is_current: Callable[[], bool],
        *,
        delay_ms: int = 0,
    ) -> None:
        """Queue ``marker`` for its partitions' leaders (after ``delay_ms``)."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        if delay_ms > 0:
            handle: asyncio.TimerHandle

            def later() -> None:
                self._delayed.discard(handle)
                self.send(marker, on_answer, is_current)

            handle = loop.call_later(delay_ms / 1000, later)
            self._delayed.add(handle)
            return
        if not is_current():
            return
        image = self.image()
        deleted: list[TopicPartition] = []
        leaderless: list[TopicPartition] = []
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in marker.partitions:
            reg = image.partition(tp.topic, tp.partition)
            if reg is None:
                deleted.append(tp)
            elif not reg.has_leader or (
                reg.leader != self.broker_id and self.clients.address(reg.leader) is None
            ):
                leaderless.append(tp)
            else:
                by_leader.setdefault(reg.leader, []).append(tp)
        if deleted or leaderless:
            err = errors.NotLeaderOrFollowerError("the partition has no leader to write to")
            answer: MarkerErrors = dict.fromkeys(leaderless, err)
            # Not from inside the caller's own step: the answer may write records.
            loop.call_soon(self._deliver, marker, on_answer, is_current, answer, deleted)
        for leader, tps in by_leader.items():
            entry = TxnMarkerEntry(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.committed,
                tuple(tps),
            )
            queue = self._queues.setdefault(leader, _BrokerQueue())
            queue.queued.append(_Queued(marker, entry, on_answer, is_current))
            if queue.sender is None or queue.sender.done():
                queue.sender = loop.create_task(
                    self._send_loop(leader, queue), name=f"txn-markers-to-{leader}"
                )

    def _deliver(
        self,
        marker: TxnMarker,
        on_answer: MarkerAnswer,
        is_current: Callable[[], bool],
        answer: MarkerErrors,
        deleted: Sequence[TopicPartition] = (),
    ) -> None:
        if self._closed or not is_current():
            return
        try:
            on_answer(marker, answer, frozenset(deleted))
        except Exception:
            _log.exception("handling the answer to the markers of %s failed", marker)

    async def _send_loop(self, leader: int, queue: _BrokerQueue) -> None:
        while queue.queued and not self._closed:
            batch = [q for q in queue.queued if q.is_current()]
            queue.queued.clear()
            if not batch:
                continue
            entries = [q.entry for q in batch]
            try:
                answers = await asyncio.wait_for(
                    self._write(leader, entries), 2 * self.request_timeout_ms / 1000
                )
            except (KafkaError, TimeoutError) as e:
                # No answer (or a malformed one): every partition of the request is retried.
                lost = (
                    e
                    if isinstance(e, KafkaError) and e.retriable
                    else errors.NetworkError(str(e) or "no answer in time")
                )
                _log.info("WriteTxnMarkers to broker %d failed, will retry: %s", leader, lost)
                answers = [dict.fromkeys(entry.partitions, lost) for entry in entries]
            except Exception as e:
                # Never let this loop die with markers in hand: a transaction would stay
                # Prepare* until its coordinator moves.
                _log.exception("WriteTxnMarkers to broker %d failed, will retry", leader)
                lost = errors.NetworkError(f"writing the markers failed: {e!r}")
                answers = [dict.fromkeys(entry.partitions, lost) for entry in entries]
            for q, answer in zip(batch, answers, strict=True):
                unanswered = errors.NetworkError(f"broker {leader} did not answer for it")
                complete = {tp: answer.get(tp, unanswered) for tp in q.entry.partitions}
                self._deliver(q.marker, q.on_answer, q.is_current, complete)

    async def _write(self, leader: int, entries: list[TxnMarkerEntry]) -> list[MarkerErrors]:
        if leader == self.broker_id and self.local is not None:
            answers = await self.local(entries)
        else:
            client = self.clients.get(leader)
            if client is None:
                raise errors.NetworkError(f"broker {leader} has no inter-broker endpoint")
            answers = await client.write_txn_markers(entries, self.request_timeout_ms)
        if len(answers) != len(entries):
            raise errors.NetworkError(
                f"broker {leader} answered {len(answers)} of {len(entries)} markers"
            )
        return answers

    def pending(self) -> int:
        """Marker entries queued and not yet sent (for tests and metrics)."""
        return sum(len(q.queued) for q in self._queues.values())

    async def close(self) -> None:
        self._closed = True
        for handle in self._delayed:
            handle.cancel()
        self._delayed.clear()
        for queue in self._queues.values():
            queue.queued.clear()
            if queue.sender is not None:
                queue.sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await queue.sender
        self._queues.clear()
