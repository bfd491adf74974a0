"""AlterPartitionManager: sends the ISR changes this broker's leaders ask for to the
controller (Kafka's AlterPartitionManager, KIP-497).

A leader never changes its own ISR: it asks the controller and applies the answer (or the
resulting PartitionChangeRecord from the metadata log, whichever comes first). One request
per partition is in flight at a time; a change asked for while one is in flight is refused
(the leader asks again on its next follower fetch or ISR-expiry check). A request without a
definite answer (no active controller, a controller that does not answer) is sent again
until it gets one, for as long as the leader still wants it: the controller may have
committed it, and the leader counts the replicas it adds until it knows. Runs on the event
loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from rillet.broker.controller_channel import ControllerChannel
from rillet.controller import AlterPartitionResult, AlterPartitionState
from rillet.errors import KafkaError, UnknownServerError
from rillet.types import TopicPartition

__all__ = ["AlterPartitionManager"]

_log = logging.getLogger(__name__)


class AlterPartitionManager:
    """``broker_epoch`` gives this broker's current registration epoch (-1 while it has
    none, when nothing is sent)."""

    def __init__(
        self,
        broker_id: int,
        channel: ControllerChannel,
        broker_epoch: Callable[[], int],
        retry_backoff_ms: int = 100,
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.in_flight: dict[TopicPartition, asyncio.Task[None]] = {}

    def submit(
        self,
        tp: TopicPartition,
        change: AlterPartitionState,
        on_done: Callable[[AlterPartitionResult], None],
        still_wanted: Callable[[], bool],
    ) -> bool:
        """Send ``change`` unless one is in flight for ``tp``; returns whether it was sent.
        ``on_done`` gets the controller's definite answer; ``still_wanted`` says whether to
        keep trying without one."""
        if tp in self.in_flight or self.broker_epoch() < 0:
            return False
        task = asyncio.get_running_loop().create_task(self._send(tp, change, on_done, still_wanted))
        self.in_flight[tp] = task
        task.add_done_callback(lambda _: self.in_flight.pop(tp, None))
        return True

    async def _send(
        self,
        tp: TopicPartition,
        change: AlterPartitionState,
        on_done: Callable[[AlterPartitionResult], None],
        still_wanted: Callable[[], bool],
    ) -> None:
        while True:
            try:
                results = await self.channel.alter_partition(
                    self.broker_id, self.broker_epoch(), [change]
                )
                result = results[0] if results else _refused(change, "no result")
                break
            except KafkaError as e:
                if not e.retriable:
                    result = AlterPartitionResult(change.topic_id, change.partition, error=e)
                    break
                if not still_wanted():
                    return
                _log.info("AlterPartition for %s failed, retrying: %s", tp, e)
            await asyncio.sleep(self.retry_backoff_s)
        if result.error is not None:
            _log.info("AlterPartition for %s refused: %s", tp, result.error)
        on_done(result)

    async def shutdown(self) -> None:
        for task in list(self.in_flight.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.in_flight.clear()


def _refused(change: AlterPartitionState, why: str) -> AlterPartitionResult:
    return AlterPartitionResult(change.topic_id, change.partition, error=UnknownServerError(why))
