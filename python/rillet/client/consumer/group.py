"""A consumer's life in a KIP-848 group (``group_protocol="consumer"``), on the application's
thread: reconciling the assignment the coordinator sends (revoke, then assign, with the
rebalance listener), the offsets a newly assigned partition starts from, auto-commit, and
leaving on close. The heartbeats run on :class:`~rillet.client.consumer.heartbeat.HeartbeatThread`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rillet.client.cluster import ClusterMetadata
from rillet.client.consumer.group_client import GroupClient
from rillet.client.consumer.heartbeat import HeartbeatThread
from rillet.client.consumer.listener import ConsumerRebalanceListener
from rillet.client.consumer.membership import ConsumerMembership, MemberState
from rillet.client.consumer.offsets import OffsetsClient
from rillet.client.consumer.subscription import SubscriptionState
from rillet.errors import KafkaError, StaleMemberEpochError
from rillet.types import OffsetAndMetadata, TopicPartition

__all__ = ["GroupMember"]

_log = logging.getLogger(__name__)

CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], Any]


class GroupMember:
    def __init__(
        self,
        config: Mapping[str, Any],
        cluster: ClusterMetadata,
        subscriptions: SubscriptionState,
        wakeup: threading.Event,
    ) -> None:
        self.group_id = str(config["group_id"])
        self.cluster = cluster
        self.subscriptions = subscriptions
        self.client = GroupClient(
            cluster, self.group_id, int(config["request_timeout_ms"]), str(config["client_id"])
        )
        self.offsets = OffsetsClient(
            self.client, int(config["retry_backoff_ms"]), int(config["default_api_timeout_ms"])
        )
        self.membership = ConsumerMembership(
            self.group_id,
            rebalance_timeout_ms=int(config["max_poll_interval_ms"]),
            instance_id=config["group_instance_id"],
            rack_id=config["client_rack"] or None,
            server_assignor=config["group_remote_assignor"],
        )
        self.auto_commit = bool(config["enable_auto_commit"])
        self.auto_commit_interval_s = int(config["auto_commit_interval_ms"]) / 1000
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self.listener: ConsumerRebalanceListener | None = None
        self.lock = threading.Condition()
        self.heartbeat = HeartbeatThread(
            self.membership, self.client, self.lock, int(config["retry_backoff_ms"]), wakeup
        )
        self.heartbeat.start()
        self._pending_callbacks: list[tuple[CommitCallback, Any, Exception | None]] = []
        self._async_lock = threading.Lock()

    # -- subscription ------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | None,
        pattern: str | None,
        listener: ConsumerRebalanceListener | None,
    ) -> None:
        self.listener = listener
        with self.lock:
            self.membership.subscribe(topics, pattern)
        self.heartbeat.poke()

    def unsubscribe(self) -> None:
        self._revoke(set(self.subscriptions.assignment), lost=False)
        with self.lock:
            self.membership.leave()
        self.heartbeat.poke()

    # -- the application's poll ----------------------------------------------------------------

    def poll(self) -> None:
        """Reconcile, run commit callbacks, auto-commit when due; raise a fatal error."""
        with self.lock:
            if self.membership.state is MemberState.FATAL:
                assert self.membership.fatal is not None
                raise self.membership.fatal
            lost = self.membership.take_lost()
            target = self.membership.pending_reconciliation()
        if lost:
            self._revoke(self._names(lost), lost=True)
        if target is not None:
            self._reconcile(target)
        self._run_callbacks()
        if self.auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
            self.commit_async(None, None)

    def _names(self, assignment: Mapping[uuid.UUID, frozenset[int]]) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for topic_id, partitions in assignment.items():
            name = self.cluster.topic_name(topic_id)
            if name is not None:
                out.update(TopicPartition(name, p) for p in partitions)
        return out

    def _reconcile(self, target: Mapping[uuid.UUID, frozenset[int]]) -> None:
        if any(self.cluster.topic_name(t) is None for t in target):
            try:
                self.cluster.refresh(None)
            except KafkaError:
                return  # reconcile on a later poll
        # Topics still unknown (just created) wait for a later poll: not owned meanwhile.
        resolved = {t: ps for t, ps in target.items() if self.cluster.topic_name(t) is not None}
        wanted = self._names(resolved)
        owned = set(self.subscriptions.assignment)
        revoked = owned - wanted
        if revoked:
            self._revoke(revoked, lost=False)
        added = wanted - owned
        self.subscriptions.set_assignment(sorted(wanted))
        if added:
            with contextlib.suppress(KafkaError):  # the leaders of the new partitions
                self.cluster.refresh(sorted({tp.topic for tp in added}))
            self._start_positions(added)
            if self.listener is not None:
                self._listen("on_partitions_assigned", added)
        with self.lock:
            self.membership.reconciled(resolved)
        self.heartbeat.poke()
        _log.info(
            "group %s: member %s (epoch %d) owns %s; revoked %s, assigned %s",
            self.group_id,
            self.membership.member_id,
            self.membership.member_epoch,
            _show(wanted),
            _show(revoked),
            _show(added),
        )

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
                if self.membership.in_group:
                    member_id, epoch = self.membership.member_id, self.membership.member_epoch
                    instance_id = self.membership.instance_id
                else:  # assign()ed partitions: a commit outside the group protocol
                    member_id, epoch, instance_id = "", -1, None
            try:
                self.offsets.commit(offsets, member_id, epoch, instance_id)
                return
            except StaleMemberEpochError:
                # The epoch moved on while the commit was in flight (KIP-848): commit again
                # with the new one, once the heartbeat has it.
                if attempt == 2:
                    raise
                time.sleep(self.membership.heartbeat_interval_ms / 1000 or 0.1)

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

    # -- close ---------------------------------------------------------------------------------

    def close(self, autocommit: bool, timeout_s: float) -> None:
        """Commit (if asked), revoke through the listener, leave the group, stop heartbeats."""
        owned = set(self.subscriptions.assignment)
        if autocommit and self.auto_commit and owned:
            try:
                self.commit(self._positions(owned))
            except KafkaError as e:
                _log.warning("group %s: commit on close failed: %s", self.group_id, e)
        if self.listener is not None and owned:
            self._listen("on_partitions_revoked", owned)
        self._run_callbacks()
        with self.lock:
            self.membership.leave()
        self.heartbeat.stop(timeout_s)


def _show(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(partitions)) + "]"
