"""The active controller on top of the metadata quorum.

A request (create topics, register a broker, ...) becomes records computed by the pure
:class:`~rillet.controller.quorum_controller.QuorumController`; the records are proposed
through Raft, applied at once to the controller's working image, and the request is answered
when they commit. Committed records are replayed into the controller (so an inactive
controller follows the log) and published to the local broker. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rillet.controller.quorum_controller import ControllerResult, QuorumController
from rillet.errors import NotControllerError
from rillet.metadata.codec import decode_record, encode_record
from rillet.metadata.records import MetadataRecord
from rillet.raft import Entry, LeaderAndEpoch
from rillet.server.quorum import QuorumDriver

__all__ = ["ControllerService"]

T = TypeVar("T")

RecordListener = Callable[[Sequence[tuple[int, MetadataRecord]]], None]


class ControllerService:
    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller
        self.driver: QuorumDriver | None = None
        self.listeners: list[RecordListener] = []
        self.leader = LeaderAndEpoch(None, -1)

    @property
    def is_active(self) -> bool:
        return self.driver is not None and self.driver.is_leader

    async def submit(self, result: ControllerResult[T]) -> T:
        """Propose ``result``'s records and return its response once they commit."""
        if not result.records:
            return result.response
        driver = self.driver
        if driver is None or not driver.is_leader:
            raise NotControllerError(
                f"This node is not the active controller (leader: {self.leader.leader_id})."
            )
        offsets = driver.propose([encode_record(r) for r in result.records])
        self.controller.apply_appended(offsets.start, result.records)
        await driver.wait_committed(offsets.stop - 1)
        return result.response

    def require_active(self) -> QuorumController:
        if not self.is_active:
            raise NotControllerError(
                f"This node is not the active controller (leader: {self.leader.leader_id})."
            )
        return self.controller

    # -- driver callbacks --------------------------------------------------------------------

    def on_commit(self, entries: Sequence[Entry]) -> None:
        records = [(e.offset, decode_record(e.payload)) for e in entries if not e.control]
        if not records:
            return
        self.controller.replay_committed(records)
        for listener in self.listeners:
            listener(records)

    def on_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader
        if not self.is_active:
            self.controller.revert_to_committed()
