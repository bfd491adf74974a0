"""AlterPartitionManager: sends the ISR changes this broker's leaders ask for to the
controller (Kafka's AlterPartitionManager, KIP-497).

A leader never changes its own ISR: it asks the controller, and applies the new ISR when
the resulting PartitionChangeRecord arrives through the metadata log. One request per
partition is in flight at a time; a change asked for while one is in flight is dropped,
since the leader asks again on its next follower fetch or ISR-expiry check. Runs on the
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from rillet.broker.controller_channel import ControllerChannel
from rillet.controller import AlterPartitionState
from rillet.errors import KafkaError
from rillet.types import TopicPartition

__all__ = ["AlterPartitionManager"]

_log = logging.getLogger(__name__)


class AlterPartitionManager:
    """``broker_epoch`` gives this broker's current registration epoch (-1 while it has
    none, when nothing is sent)."""

    def __init__(
        self, broker_id: int, channel: ControllerChannel, broker_epoch: Callable[[], int]
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.in_flight: dict[TopicPartition, asyncio.Task[None]] = {}

    def submit(self, tp: TopicPartition, change: AlterPartitionState) -> bool:
        """Send ``change`` unless one is in flight for ``tp``; returns whether it was sent."""
        epoch = self.broker_epoch()
        if tp in self.in_flight or epoch < 0:
            return False
        task = asyncio.get_running_loop().create_task(self._send(tp, epoch, change))
        self.in_flight[tp] = task
        task.add_done_callback(lambda _: self.in_flight.pop(tp, None))
        return True

    async def _send(self, tp: TopicPartition, epoch: int, change: AlterPartitionState) -> None:
        try:
            results = await self.channel.alter_partition(self.broker_id, epoch, [change])
        except KafkaError as e:
            _log.info("AlterPartition for %s failed: %s", tp, e)
            return
        for r in results:
            if r.error is not None:
                _log.info("AlterPartition for %s refused: %s", tp, r.error)

    async def shutdown(self) -> None:
        for task in list(self.in_flight.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.in_flight.clear()
