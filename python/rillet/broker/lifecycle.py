"""The broker's lifecycle with the controller (Kafka's BrokerLifecycleManager, KIP-631):
register, heartbeat, get unfenced once caught up with the metadata log, and shut down in a
controlled way.

:class:`BrokerLifecycle` is the pure state machine (requests and times in, the next
request out); :class:`BrokerLifecycleManager` drives it on the event loop over a
:class:`~rillet.broker.controller_channel.ControllerChannel`. The simulator drives the same
state machine over its virtual network and clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TypeVar

from rillet.broker.controller_channel import ControllerChannel
from rillet.controller import HeartbeatResult
from rillet.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from rillet.errors import IllegalStateError, KafkaError
from rillet.metadata.records import BrokerEndpoint
from rillet.scheduler import Clock

__all__ = ["BrokerLifecycle", "BrokerLifecycleManager", "BrokerState"]

_log = logging.getLogger(__name__)

# How soon a broker retries a registration that failed (no controller yet, say); the wait
# doubles with each failure in a row up to REGISTRATION_RETRY_MAX_MS, as Kafka's broker backs
# off, so one refused while its previous incarnation's session lasts does not hammer the
# controller.
REGISTRATION_RETRY_MS = 50
REGISTRATION_RETRY_MAX_MS = 1_000

LifecycleRequest = BrokerRegistrationRequest | BrokerHeartbeatRequest
R = TypeVar("R", BrokerRegistrationRequest, BrokerHeartbeatRequest)


class BrokerState(StrEnum):
    """Kafka's BrokerState names."""

    STARTING = "STARTING"  # not registered
    RECOVERY = "RECOVERY"  # registered, fenced (catching up with the metadata log)
    RUNNING = "RUNNING"  # registered and unfenced
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"  # the controller released the broker


class BrokerLifecycle:
    """One broker's side of registration and heartbeats. Pure: no clock, sockets or threads.

    At most one request is in flight: :meth:`poll` hands out the next request when it is due
    (and none is outstanding), and the answer (or the error that replaced it) comes back
    through :meth:`on_registered` or :meth:`on_heartbeat`. Legal transitions:

    - STARTING -> RECOVERY when a registration is answered with an epoch;
    - RECOVERY <-> RUNNING as heartbeats are answered fenced or unfenced;
    - RECOVERY/RUNNING -> STARTING when a heartbeat is refused with a non-retriable error
      (a stale epoch, an unknown registration): the broker registers again;
    - a broker made with ``ready_to_unfence=False`` heartbeats with ``want_fence`` (and so
      stays fenced) until :meth:`mark_ready_to_unfence`, which its driver calls once a
      heartbeat said it has ``caught_up`` and it has acted on the metadata (Kafka's broker
      waits so for its publishers);
    - any registered state -> PENDING_CONTROLLED_SHUTDOWN on
      :meth:`begin_controlled_shutdown`; -> SHUTTING_DOWN once a heartbeat says
      ``should_shutdown``.

    A retriable error (no active controller, a timeout) keeps the state and retries: a
    heartbeat after the heartbeat interval, a registration after ``REGISTRATION_RETRY_MS``,
    doubled for each further failure in a row (at most ``REGISTRATION_RETRY_MAX_MS``).
    """

    def __init__(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        heartbeat_interval_ms: int,
        now_ms: int,
        rack: str | None = None,
        *,
        ready_to_unfence: bool = True,
        previous_broker_epoch: int = -1,
    ) -> None:
        self.broker_id = broker_id
        self.previous_broker_epoch = previous_broker_epoch
        self.incarnation_id = incarnation_id
        self.rack = rack
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        self._due_ms = now_ms
        self._in_flight: LifecycleRequest | None = None
        self._failed_registrations = 0
        self.ready_to_unfence = ready_to_unfence
        self.caught_up = False  # a heartbeat said this broker has caught up with the log

    @property
    def is_registered(self) -> bool:
        return self.broker_epoch >= 0

    @property
    def is_shut_down(self) -> bool:
        """The controller released this broker (or it never registered)."""
        return self.state == BrokerState.SHUTTING_DOWN

    def next_deadline_ms(self) -> int | None:
        """When :meth:`poll` next has a request to hand out (None while one is in flight or
        the broker is shutting down)."""
        if self._in_flight is not None or self.state == BrokerState.SHUTTING_DOWN:
            return None
        return self._due_ms

    def poll(
        self, now_ms: int, listeners: Sequence[BrokerEndpoint], metadata_offset: int
    ) -> LifecycleRequest | None:
        """The request to send now, if one is due. ``metadata_offset`` is the offset of the
        last metadata record this broker has applied."""
        deadline = self.next_deadline_ms()
        if deadline is None or now_ms < deadline:
            return None
        request: LifecycleRequest
        if not self.is_registered:
            request = BrokerRegistrationRequest(
                self.broker_id,
                self.incarnation_id,
                tuple(listeners),
                self.rack,
                self.previous_broker_epoch,
            )
        else:
            request = BrokerHeartbeatRequest(
                self.broker_id,
                self.broker_epoch,
                metadata_offset,
                want_fence=not self.ready_to_unfence,
                want_shutdown=self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            )
        self._in_flight = request
        return request

    def _take(self, kind: type[R]) -> R:
        request = self._in_flight
        if not isinstance(request, kind):
            raise IllegalStateError(f"no {kind.__name__} is in flight (have {request!r})")
        self._in_flight = None
        return request

    def on_registered(self, result: int | KafkaError, now_ms: int) -> None:
        """The answer to the registration in flight: the new broker epoch, or the error."""
        self._take(BrokerRegistrationRequest)
        if isinstance(result, KafkaError):
            backoff = REGISTRATION_RETRY_MS << min(self._failed_registrations, 16)
            self._failed_registrations += 1
            self._due_ms = now_ms + min(backoff, REGISTRATION_RETRY_MAX_MS)
            return
        self._failed_registrations = 0
        self.broker_epoch = result
        if self.state == BrokerState.STARTING:
            self.state = BrokerState.RECOVERY
        self._due_ms = now_ms  # the first heartbeat goes out at once

    def on_heartbeat(self, result: HeartbeatResult | KafkaError, now_ms: int) -> None:
        """The answer to the heartbeat in flight, or the error that replaced it."""
        request = self._take(BrokerHeartbeatRequest)
        if isinstance(result, KafkaError):
            if result.retriable:
                self._due_ms = now_ms + self.heartbeat_interval_ms
            elif request.broker_epoch == self.broker_epoch:
                self.broker_epoch = -1
                if self.state in (BrokerState.RECOVERY, BrokerState.RUNNING):
                    self.state = BrokerState.STARTING
                self._due_ms = now_ms + REGISTRATION_RETRY_MS
            return
        self.caught_up = self.caught_up or result.is_caught_up
        if self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if result.should_shutdown:
                self.state = BrokerState.SHUTTING_DOWN
        elif self.state in (BrokerState.RECOVERY, BrokerState.RUNNING):
            self.state = BrokerState.RECOVERY if result.is_fenced else BrokerState.RUNNING
        self._due_ms = now_ms + self.heartbeat_interval_ms

    def mark_ready_to_unfence(self, now_ms: int) -> None:
        """The broker has acted on the metadata it caught up with: the next heartbeat, due
        now, asks to be unfenced."""
        if self.ready_to_unfence:
            return
        self.ready_to_unfence = True
        if self.is_registered:
            self._due_ms = now_ms

    def abandon_in_flight(self, now_ms: int) -> None:
        """The request in flight will never be answered (its driver gave up on it)."""
        if self._in_flight is not None:
            self._in_flight = None
            self._due_ms = now_ms

    def begin_controlled_shutdown(self, now_ms: int) -> None:
        """Ask the controller to move this broker's leadership away and release it. An
        unregistered broker has nothing to move and shuts down at once."""
        if not self.is_registered:
            self.state = BrokerState.SHUTTING_DOWN
            return
        if self.state in (BrokerState.RECOVERY, BrokerState.RUNNING):
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            self._due_ms = now_ms


REPORT_INTERVAL_MS = 10_000


class BrokerLifecycleManager:
    """Runs a :class:`BrokerLifecycle` on the event loop: sends its requests over the
    controller channel, one at a time, and feeds the answers back. ``listeners`` gives the
    advertised endpoints (known once the listeners are bound) and ``metadata_offset`` the
    offset this broker's metadata image has reached. ``on_caught_up`` runs once, when a
    heartbeat first says the broker has caught up with the metadata log; the broker is ready
    to be unfenced when it returns."""

    def __init__(
        self,
        lifecycle: BrokerLifecycle,
        channel: ControllerChannel,
        clock: Clock,
        listeners: Callable[[], Sequence[BrokerEndpoint]],
        metadata_offset: Callable[[], int],
        on_caught_up: Callable[[], None] | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        self.on_caught_up = on_caught_up
        self.channel = channel
        self.clock = clock
        self.listeners = listeners
        self.metadata_offset = metadata_offset
        self._runner: asyncio.Task[None] | None = None
        self._reported_ms: dict[str, int] = {}

    def start(self) -> None:
        self._runner = asyncio.create_task(self._run(), name="broker-lifecycle")

    async def _run(self) -> None:
        while True:
            await self._step()
            deadline = self.lifecycle.next_deadline_ms()
            if deadline is None:
                return
            await asyncio.sleep(max(deadline - self.clock(), 0) / 1000)

    async def _step(self) -> None:
        life = self.lifecycle
        request = life.poll(self.clock(), self.listeners(), self.metadata_offset())
        if isinstance(request, BrokerRegistrationRequest):
            try:
                epoch: int | KafkaError = await self.channel.register_broker(request)
            except KafkaError as e:
                epoch = e
            if isinstance(epoch, KafkaError):
                self._report("broker registration failed", epoch)
            life.on_registered(epoch, self.clock())
        elif isinstance(request, BrokerHeartbeatRequest):
            try:
                result: HeartbeatResult | KafkaError = await self.channel.broker_heartbeat(request)
            except KafkaError as e:
                result = e
            if isinstance(result, KafkaError):
                self._report("broker heartbeat failed", result)
            life.on_heartbeat(result, self.clock())
            if life.caught_up and not life.ready_to_unfence:
                if self.on_caught_up is not None:
                    self.on_caught_up()
                life.mark_ready_to_unfence(self.clock())

    def _report(self, what: str, error: KafkaError) -> None:
        """A refusal is a warning, a retriable failure (no controller reachable yet, say)
        news; each kind is logged once per ``REPORT_INTERVAL_MS`` while it lasts, so a
        broker that waits for the quorum, or for its previous incarnation's session to end,
        says why without flooding its log."""
        key = f"{what}: {error.name}"
        now = self.clock()
        last = self._reported_ms.get(key)
        if last is not None and now - last < REPORT_INTERVAL_MS:
            return
        self._reported_ms[key] = now
        if error.retriable:
            _log.info("%s, retrying: %s", what, error)
        else:
            _log.warning("%s (retrying): %s", what, error)

    async def stop(self, timeout_s: float = 5) -> None:
        """Controlled shutdown (bounded by ``timeout_s``), then stop heartbeating."""
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        life = self.lifecycle
        life.abandon_in_flight(self.clock())
        life.begin_controlled_shutdown(self.clock())
        if life.state != BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._step(), timeout_s)
        if life.is_shut_down:
            _log.info("controlled shutdown complete: the controller moved its leadership away")
        else:
            _log.warning(
                "controlled shutdown did not complete within %s s; shutting down anyway "
                "(the controller fences this broker when its session expires)",
                timeout_s,
            )
