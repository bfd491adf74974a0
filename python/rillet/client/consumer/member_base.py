"""What a consumer in a group does on the application's thread, whichever group protocol
it speaks: the rebalance listener, starting new partitions at the group's committed
offsets, commits (sync, async with callbacks run in ``poll()``, auto-commit), revoking with a
commit first. :class:`~rillet.client.consumer.group.ConsumerGroupMember` (KIP-848) and
:class:`~rillet.client.consumer.classic.ClassicGroupMember` add their membership."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rillet.client.cluster import ClusterMetadata
from rillet.client.consumer.group_client import GroupClient
from rillet.client.consumer.listener import ConsumerRebalanceListener
from rillet.client.consumer.metrics import ConsumerCoordinatorMetrics
from rillet.client.consumer.offsets import OffsetsClient
from rillet.client.consumer.subscription import SubscriptionState
from rillet.errors import KafkaError, StaleMemberEpochError
from rillet.types import OffsetAndMetadata, TopicPartition

__all__ = ["CommitCallback", "GroupMemberBase", "show"]

_log = logging.getLogger("rillet.client.consumer.group")

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], Any]


class GroupMemberBase(ABC):
    """The shared part; a subclass says who commits (:meth:`_identity`) and runs its
    membership in :meth:`poll`, :meth:`subscribe`, :meth:`unsubscribe` and :meth:`close`."""

    def __init__(
        self,
        config: Mapping[str, Any],
        cluster: ClusterMetadata,
        subscriptions: SubscriptionState,
        sensors: ConsumerCoordinatorMetrics | None = None,
    ) -> None:
        self.group_id = str(config["group_id"])
        self.sensors = sensors
        self.cluster = cluster
        self.subscriptions = subscriptions
        self.client = GroupClient(
            cluster, self.group_id, int(config["request_timeout_ms"]), str(config["client_id"])
        )
        self.offsets = OffsetsClient(
            self.client,
            int(config["retry_backoff_ms"]),
            int(config["default_api_timeout_ms"]),
            # A read_committed consumer waits for offsets an open transaction will commit
            # (KIP-447's require_stable) rather than reading past them.
            require_stable=config.get("isolation_level") == "read_committed",
            sensors=sensors,
        )
        self.auto_commit = bool(config["enable_auto_commit"])
        self.auto_commit_interval_s = int(config["auto_commit_interval_ms"]) / 1000
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self.listener: ConsumerRebalanceListener | None = None
        self.lock = threading.Condition()
        self._pending_callbacks: list[tuple[CommitCallback, Any, Exception | None]] = []
        self._async_lock = threading.Lock()

    # -- the membership (a subclass's) ---------------------------------------------------------

    @abstractmethod
    def subscribe(
        self,
        topics: Iterable[str] | None,
        pattern: str | None,
        listener: ConsumerRebalanceListener | None,
    ) -> None:
        """Join with this subscription (or change it)."""

    @abstractmethod
    def unsubscribe(self) -> None:
        """Revoke everything and leave the group."""

    @abstractmethod
    def poll(self) -> None:
        """In every ``poll()``, before fetching: act on the membership; raise what is fatal."""

    @abstractmethod
    def close(self, autocommit: bool, timeout_s: float) -> None:
        """Commit (when asked), revoke, leave the group, stop the background thread."""

    def identity(self) -> tuple[str, int, str | None]:
        """(member id, member epoch or generation, group instance id) as of now."""
        return self._identity()

    # -- for subclasses ----------------------------------------------------------------------

    @abstractmethod
    def _identity(self) -> tuple[str, int, str | None]:
        """(member id, member epoch or generation, group instance id) to commit with; ("",
        -1, None) outside the group protocol."""

    def _epoch_wait_s(self) -> float:
        """How long to wait for a newer epoch after STALE_MEMBER_EPOCH."""
        return 0.1

    def _after_poll(self) -> None:
        """Commit callbacks and auto-commit, at the end of every ``poll()``."""
        self._run_callbacks()
        if self.auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
            self.commit_async(None, None)

    def _revoke(self, partitions: set[TopicPartition], *, lost: bool) -> None:
        if not partitions:
            return
        if not lost and self.auto_commit:
            try:
                self.commit(self._positions(partitions))
            except KafkaError as e:
                _log.warning("group %s: commit before revoking failed: %s", self.group_id, e)
        if self.listener is not None:
            self._listen("on_partitions_lost" if lost else "on_partitions_revoked", partitions)
        self.subscriptions.set_assignment(
            tp for tp in self.subscriptions.assignment if tp not in partitions
        )

    def _listen(self, callback: str, partitions: set[TopicPartition]) -> None:
        try:
            getattr(self.listener, callback)(sorted(partitions))
        except Exception:
            _log.exception("group %s: the rebalance listener's %s raised", self.group_id, callback)

    def _start_positions(self, partitions: set[TopicPartition]) -> None:
        """Start newly assigned partitions at the group's committed offsets; the others are
        reset by auto_offset_reset."""
        try:
            committed = self.offsets.fetch(partitions)
        except KafkaError as e:
            _log.warning("group %s: committed offsets unavailable: %s", self.group_id, e)
            committed = {}
        for tp, om in committed.items():
            state = self.subscriptions.assignment.get(tp)
            if state is not None and state.position is None:
                state.move(om.offset, None)
                state.last_epoch = om.leader_epoch

    # -- commits -------------------------------------------------------------------------------

    def _positions(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for tp in partitions:
            state = self.subscriptions.assignment.get(tp)
            if state is not None and state.position is not None:
                out[tp] = OffsetAndMetadata(state.position, "", state.last_epoch)
        return out

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None) -> None:
        if offsets is None:
            offsets = self._positions(self.subscriptions.assignment)
        for attempt in range(3):
            with self.lock:
                member_id, epoch, instance_id = self._identity()
            try:
                self.offsets.commit(offsets, member_id, epoch, instance_id)
                return
            except StaleMemberEpochError:
                # The epoch moved on while the commit was in flight (KIP-848): commit again
                # with the new one, once the heartbeat has it.
                if attempt == 2:
                    raise
                time.sleep(self._epoch_wait_s())

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
        callback: CommitCallback | None,
    ) -> None:
        """Commit on a background thread; ``callback(offsets, exception)`` runs in a later
        ``poll()`` (or ``close()``) on the application's thread, as in Kafka."""
        if offsets is None:
            offsets = self._positions(self.subscriptions.assignment)
        chosen = dict(offsets)

        def run() -> None:
            error: Exception | None = None
            try:
                self.commit(chosen)
            except KafkaError as e:
                error = e
                if callback is None:
                    _log.warning("group %s: asynchronous commit failed: %s", self.group_id, e)
            if callback is not None:
                with self._async_lock:
                    self._pending_callbacks.append((callback, chosen, error))

        threading.Thread(target=run, name=f"rillet-commit-{self.group_id}", daemon=True).start()

    def _run_callbacks(self) -> None:
        with self._async_lock:
            pending, self._pending_callbacks = self._pending_callbacks, []
        for callback, offsets, error in pending:
            callback(offsets, error)

    def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.offsets.fetch(list(partitions))

    def _commit_owned(self, autocommit: bool) -> set[TopicPartition]:
        """On close: commit what is owned (with auto-commit on) and revoke it through the
        listener; returns it."""
        owned = set(self.subscriptions.assignment)
        if autocommit and self.auto_commit and owned:
            try:
                self.commit(self._positions(owned))
            except KafkaError as e:
                _log.warning("group %s: commit on close failed: %s", self.group_id, e)
        if self.listener is not None and owned:
            self._listen("on_partitions_revoked", owned)
        self._run_callbacks()
        return owned


def show(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(partitions)) + "]"
