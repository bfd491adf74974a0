"""A consumer in a CLASSIC group (``group_protocol="classic"``): Kafka's ConsumerCoordinator
over JoinGroup, SyncGroup, Heartbeat and LeaveGroup, with client-side assignment.

The application's thread (inside ``poll()``) joins: under the EAGER protocol it first revokes
everything it owns (committing with auto-commit on); the group's leader assigns with the
assignor the coordinator chose (``partition_assignment_strategy``, Kafka's default
``range, cooperative-sticky``) and sends every member's share in its SyncGroup. Under
COOPERATIVE (KIP-429: ``cooperative-sticky`` alone) a member keeps what stays its own,
revokes only what moves, and rejoins at once so the moved partitions can be given out. A
background thread heartbeats every ``heartbeat_interval_ms`` while the member is stable;
REBALANCE_IN_PROGRESS makes the next ``poll()`` rejoin, and a fenced generation or unknown
member loses its partitions (``on_partitions_lost``) before rejoining.

JoinGroup is answered when the rebalance completes, so a ``poll()`` that joins blocks until
then (``group.initial.rebalance.delay.ms`` for a new group), whatever its timeout.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from rillet.client.cluster import ClusterMetadata
from rillet.client.consumer.assignors import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    ConsumerPartitionAssignor,
    GroupMember,
    RebalanceProtocol,
    all_subscribed_topics,
    choose_rebalance_protocol,
    create_assignors,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    join_group_protocols,
    lookup_assignor,
    perform_assignment,
)
from rillet.client.consumer.group_client import top_level_error
from rillet.client.consumer.listener import ConsumerRebalanceListener
from rillet.client.consumer.member_base import GroupMemberBase, show
from rillet.client.consumer.metrics import ConsumerCoordinatorMetrics
from rillet.client.consumer.subscription import SubscriptionState
from rillet.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    KafkaTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from rillet.protocol.gen.v1 import group_pb2, group_pb2_grpc

__all__ = ["ClassicGroupMember"]

_log = logging.getLogger("rillet.client.consumer.group")

_RETRY = (
    NotCoordinatorError,
    CoordinatorNotAvailableError,
    CoordinatorLoadInProgressError,
    RebalanceInProgressError,
)


class ClassicGroupMember(GroupMemberBase):
    def __init__(
        self,
        config: Mapping[str, Any],
        cluster: ClusterMetadata,
        subscriptions: SubscriptionState,
        wakeup: threading.Event,
        sensors: ConsumerCoordinatorMetrics | None = None,
    ) -> None:
        super().__init__(config, cluster, subscriptions, sensors)
        if sensors is not None:
            sensors.add_classic()
        strategy = config["partition_assignment_strategy"]
        self.assignors = create_assignors(
            strategy.split(",") if isinstance(strategy, str) else strategy
        )
        self.protocol = choose_rebalance_protocol(self.assignors)
        self.session_timeout_ms = int(config["session_timeout_ms"])
        self.rebalance_timeout_ms = int(config["max_poll_interval_ms"])
        self.heartbeat_interval_s = int(config["heartbeat_interval_ms"]) / 1000
        self.retry_backoff_s = int(config["retry_backoff_ms"]) / 1000
        self.join_timeout_s = int(config["default_api_timeout_ms"]) / 1000
        self.instance_id: str | None = config["group_instance_id"]
        self.rack_id: str | None = config["client_rack"] or None
        self.member_id = ""
        self.generation = -1
        self.stable = False
        self.rejoin_needed = False
        self.lost = False
        self.topics: list[str] = []
        self.pattern: str | None = None
        self.wakeup = wakeup
        self._stop = threading.Event()
        self._heartbeats = threading.Thread(
            target=self._heartbeat_loop, name=f"rillet-heartbeat-{self.group_id}", daemon=True
        )
        self._heartbeats.start()

    def _identity(self) -> tuple[str, int, str | None]:
        if self.member_id:
            return self.member_id, self.generation, self.instance_id
        return "", -1, None

    # -- subscription ------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | None,
        pattern: str | None,
        listener: ConsumerRebalanceListener | None,
    ) -> None:
        self.listener = listener
        self.topics = sorted(set(topics or ()))
        self.pattern = pattern
        with self.lock:
            self.rejoin_needed = True

    def unsubscribe(self) -> None:
        self._revoke(set(self.subscriptions.assignment), lost=False)
        self._leave("the consumer unsubscribed")

    def _subscribed_topics(self) -> list[str]:
        if self.pattern is None:
            return self.topics
        try:
            self.cluster.refresh(None)
        except KafkaError as e:
            _log.warning("group %s: metadata for the pattern unavailable: %s", self.group_id, e)
        return sorted(t for t in self.cluster.topics() if re.fullmatch(self.pattern, t))

    # -- the application's poll ----------------------------------------------------------------

    def poll(self) -> None:
        with self.lock:
            lost, self.lost = self.lost, False
            join = self.rejoin_needed
        if lost:
            self._revoke(set(self.subscriptions.assignment), lost=True)
        if join:
            self._join()
        self._after_poll()

    def _join(self) -> None:
        """One rebalance, as Kafka's ensureActiveGroup: prepare, JoinGroup, (assign,)
        SyncGroup, then take the assignment. Retriable errors start it over."""
        deadline = time.monotonic() + self.join_timeout_s
        with self.lock:
            self.stable = False
        if self.protocol is RebalanceProtocol.EAGER:
            self._revoke(set(self.subscriptions.assignment), lost=False)
        while True:
            try:
                assignor, assignment = self._join_and_sync()
            except (*_RETRY, UnknownMemberIdError, IllegalGenerationError) as e:
                with self.lock:
                    if isinstance(e, UnknownMemberIdError):
                        self.member_id = ""
                    if isinstance(e, UnknownMemberIdError | IllegalGenerationError):
                        self.generation = -1
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(
                        f"group {self.group_id}: no rebalance completed within "
                        f"{self.join_timeout_s:.0f} s: {e}"
                    ) from None
                self.client.forget_coordinator()
                time.sleep(self.retry_backoff_s)
                continue
            self._take(assignor, assignment)
            return

    def _join_and_sync(self) -> tuple[ConsumerPartitionAssignor, bytes]:
        topics = self._subscribed_topics()
        owned = (
            sorted(self.subscriptions.assignment)
            if self.protocol is RebalanceProtocol.COOPERATIVE
            else []
        )
        protocols = join_group_protocols(
            self.assignors, topics, owned, self.generation, self.rack_id
        )
        # JoinGroup waits for the rebalance: up to the rebalance timeout, and then some.
        wait_s = self.rebalance_timeout_ms / 1000 + 5
        while True:
            join = group_pb2.JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                member_id=self.member_id,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=[group_pb2.JoinGroupRequest.Protocol(name=p.name, metadata=p.metadata)
                           for p in protocols],
            )  # fmt: skip
            if self.instance_id is not None:
                join.group_instance_id = self.instance_id
            sent_ms = self._now_ms()
            response = self._send("JoinGroup", join, wait_s)
            err = top_level_error(response)
            if isinstance(err, MemberIdRequiredError):
                self.member_id = response.member_id  # Kafka >= 2.2: join again with it
                continue
            if err is not None:
                raise err
            if self.sensors is not None:
                self.sensors.record_latency(self.sensors.join_latency, sent_ms)
            break
        with self.lock:
            self.member_id = response.member_id
            self.generation = response.generation_id
        assignor = lookup_assignor(self.assignors, response.protocol_name)
        sync = group_pb2.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=response.generation_id,
            member_id=response.member_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=response.protocol_name,
        )
        if self.instance_id is not None:
            sync.group_instance_id = self.instance_id
        if response.leader == response.member_id and not response.skip_assignment:
            members = [
                GroupMember(
                    m.member_id,
                    decode_subscription(bytes(m.metadata)),
                    m.group_instance_id if m.HasField("group_instance_id") else None,
                )
                for m in response.members
            ]
            counts = self._partition_counts(all_subscribed_topics(members))
            shares = perform_assignment(assignor, self.protocol, members, counts)
            for member_id, share in sorted(shares.items()):
                sync.assignments.add(member_id=member_id, assignment=encode_assignment(share))
        sent_ms = self._now_ms()
        synced = self._send("SyncGroup", sync, wait_s)
        err = top_level_error(synced)
        if err is not None:
            raise err
        if self.sensors is not None:
            self.sensors.record_latency(self.sensors.sync_latency, sent_ms)
        return assignor, bytes(synced.assignment)

    def _send(self, method: str, request: Any, wait_s: float = 0) -> Any:
        """``method`` on the coordinator, waiting at least ``wait_s`` for its answer."""

        def send(stub: group_pb2_grpc.GroupServiceStub, timeout_s: float, metadata: Any) -> Any:
            call = getattr(stub, method)
            return call(request, timeout=max(timeout_s, wait_s), metadata=metadata)

        return self.client.call(send, top_level_error)

    def _now_ms(self) -> float:
        """The metrics' clock (0 with metrics off)."""
        return self.sensors.metrics.clock() if self.sensors is not None else 0.0

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        wanted = sorted(topics)
        if wanted:
            self.cluster.refresh(wanted)
        counts = {}
        for t in wanted:
            parts = self.cluster.partitions_for(t)
            if parts:
                counts[t] = len(parts)
        return counts

    def _take(self, assignor: ConsumerPartitionAssignor, data: bytes) -> None:
        """onJoinComplete: the new assignment; under COOPERATIVE, revoke what moved and
        rejoin at once so it can be given to its new owner."""
        assignment = decode_assignment(data) if data else Assignment()
        assignor.on_assignment(assignment, self.generation)  # the sticky ones remember it
        assigned = set(assignment.partitions)
        owned = set(self.subscriptions.assignment)
        revoked = owned - assigned
        if revoked:
            self._revoke(revoked, lost=False)
        added = assigned - owned
        self.subscriptions.set_assignment(sorted(assigned))
        if added:
            self._start_positions(added)
        if self.listener is not None:
            self._listen("on_partitions_assigned", added)
        with self.lock:
            self.stable = True
            self.rejoin_needed = bool(revoked) and self.protocol is RebalanceProtocol.COOPERATIVE
        _log.info(
            "group %s: member %s (generation %d) owns %s; revoked %s, assigned %s",
            self.group_id,
            self.member_id,
            self.generation,
            show(assigned),
            show(revoked),
            show(added),
        )

    # -- heartbeats ----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval_s):
            with self.lock:
                if not self.stable or not self.member_id:
                    continue
                request = group_pb2.HeartbeatRequest(
                    group_id=self.group_id, generation_id=self.generation, member_id=self.member_id
                )
                if self.instance_id is not None:
                    request.group_instance_id = self.instance_id
            sent_ms = self.sensors.heartbeat_sent() if self.sensors is not None else 0.0
            try:
                response = self._send("Heartbeat", request)
            except KafkaError:
                continue  # the coordinator is found again on the next one
            if self.sensors is not None:
                self.sensors.record_latency(self.sensors.heartbeat_latency, sent_ms)
            err = top_level_error(response)
            if err is None:
                continue
            with self.lock:
                if isinstance(err, RebalanceInProgressError):
                    self.rejoin_needed = True
                elif isinstance(
                    err, IllegalGenerationError | UnknownMemberIdError | FencedInstanceIdError
                ):
                    # Fenced: the partitions may be someone else's already.
                    self.lost, self.rejoin_needed, self.stable = True, True, False
                    self.generation = -1
                    if isinstance(err, UnknownMemberIdError):
                        self.member_id = ""
                else:
                    continue
            self.wakeup.set()

    # -- leaving -------------------------------------------------------------------------------

    def _leave(self, reason: str) -> None:
        with self.lock:
            member_id, self.member_id = self.member_id, ""
            self.generation, self.stable, self.rejoin_needed = -1, False, False
        if not member_id or self.instance_id is not None:
            return  # a static member keeps its place for its session timeout (KIP-345)
        request = group_pb2.LeaveGroupRequest(
            group_id=self.group_id,
            members=[group_pb2.LeaveGroupRequest.Member(member_id=member_id, reason=reason)],
        )
        try:
            self._send("LeaveGroup", request)
        except KafkaError as e:
            _log.warning("group %s: LeaveGroup failed: %s", self.group_id, e)

    def close(self, autocommit: bool, timeout_s: float) -> None:
        self._commit_owned(autocommit)
        self._leave("the consumer is being closed")
        self._stop.set()
        self._heartbeats.join(timeout_s)
