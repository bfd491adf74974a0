"""A consumer's life in a KIP-848 group (``group_protocol="consumer"``), on the application's
thread: reconciling the assignment the coordinator sends (revoke, then assign, with the
rebalance listener) and leaving on close; commits are :mod:`.member_base`'s. The heartbeats
run on :class:`~rillet.client.consumer.heartbeat.HeartbeatThread`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from rillet.client.cluster import ClusterMetadata
from rillet.client.consumer.heartbeat import HeartbeatThread
from rillet.client.consumer.listener import ConsumerRebalanceListener
from rillet.client.consumer.member_base import GroupMemberBase, show
from rillet.client.consumer.membership import ConsumerMembership, MemberState
from rillet.client.consumer.metrics import ConsumerCoordinatorMetrics
from rillet.client.consumer.subscription import SubscriptionState
from rillet.errors import KafkaError
from rillet.types import TopicPartition

__all__ = ["ConsumerGroupMember"]

_log = logging.getLogger(__name__)


class ConsumerGroupMember(GroupMemberBase):
    """A member speaking KIP-848 (``group_protocol="consumer"``)."""

    def __init__(
        self,
        config: Mapping[str, Any],
        cluster: ClusterMetadata,
        subscriptions: SubscriptionState,
        wakeup: threading.Event,
        sensors: ConsumerCoordinatorMetrics | None = None,
    ) -> None:
        super().__init__(config, cluster, subscriptions, sensors)
        self.membership = ConsumerMembership(
            self.group_id,
            rebalance_timeout_ms=int(config["max_poll_interval_ms"]),
            instance_id=config["group_instance_id"],
            rack_id=config["client_rack"] or None,
            server_assignor=config["group_remote_assignor"],
        )
        self.heartbeat = HeartbeatThread(
            self.membership,
            self.client,
            self.lock,
            int(config["retry_backoff_ms"]),
            wakeup,
            sensors,
        )
        self.heartbeat.start()

    def _identity(self) -> tuple[str, int, str | None]:
        m = self.membership
        if m.in_group:
            return m.member_id, m.member_epoch, m.instance_id
        return "", -1, None  # assign()ed partitions: a commit outside the group protocol

    def _epoch_wait_s(self) -> float:
        return self.membership.heartbeat_interval_ms / 1000 or 0.1

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
        self._after_poll()

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
            show(wanted),
            show(revoked),
            show(added),
        )

    # -- close ---------------------------------------------------------------------------------

    def close(self, autocommit: bool, timeout_s: float) -> None:
        """Commit (if asked), revoke through the listener, leave the group, stop heartbeats."""
        self._commit_owned(autocommit)
        with self.lock:
            self.membership.leave()
        self.heartbeat.stop(timeout_s)
