"""BrokerLifecycle: registration, heartbeats, fencing and controlled shutdown as a pure state
machine, and its asyncio driver over a controller channel."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from rillet.broker.lifecycle import (
    REGISTRATION_RETRY_MS,
    BrokerLifecycle,
    BrokerLifecycleManager,
    BrokerState,
)
from rillet.controller import AlterPartitionResult, AlterPartitionState, HeartbeatResult
from rillet.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from rillet.errors import (
    DuplicateBrokerRegistrationError,
    IllegalStateError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)
from rillet.metadata.records import BrokerEndpoint

EP = (BrokerEndpoint("PLAINTEXT", "h", 9092),)
INTERVAL = 2_000
UNFENCED = HeartbeatResult(is_caught_up=True, is_fenced=False, should_shutdown=False)
FENCED = HeartbeatResult(is_caught_up=False, is_fenced=True, should_shutdown=False)


def life() -> BrokerLifecycle:
    return BrokerLifecycle(7, uuid.UUID(int=7), INTERVAL, now_ms=0)


def test_registers_then_heartbeats_and_is_unfenced_once_caught_up() -> None:
    b = life()
    assert b.state == BrokerState.STARTING and b.next_deadline_ms() == 0
    req = b.poll(0, EP, metadata_offset=-1)
    assert req == BrokerRegistrationRequest(7, uuid.UUID(int=7), EP)
    # One request in flight at a time.
    assert b.poll(0, EP, -1) is None and b.next_deadline_ms() is None
    b.on_registered(42, now_ms=10)
    assert (b.state, b.broker_epoch) == (BrokerState.RECOVERY, 42)
    hb = b.poll(10, EP, metadata_offset=5)
    assert hb == BrokerHeartbeatRequest(7, 42, 5)
    b.on_heartbeat(FENCED, now_ms=20)
    assert b.state == BrokerState.RECOVERY and b.next_deadline_ms() == 20 + INTERVAL
    assert b.poll(20 + INTERVAL - 1, EP, 9) is None
    assert b.poll(20 + INTERVAL, EP, 9) == BrokerHeartbeatRequest(7, 42, 9)
    b.on_heartbeat(UNFENCED, now_ms=2_030)
    assert b.state == BrokerState.RUNNING
    # Fenced by the controller (a missed session): back to RECOVERY, same registration.
    b.poll(4_030, EP, 9)
    b.on_heartbeat(FENCED, now_ms=4_031)
    assert (b.state, b.broker_epoch) == (BrokerState.RECOVERY, 42)


def test_retriable_errors_retry_and_others_re_register() -> None:
    b = life()
    b.poll(0, EP, -1)
    b.on_registered(NotControllerError("none yet"), now_ms=5)
    assert b.state == BrokerState.STARTING
    assert b.next_deadline_ms() == 5 + REGISTRATION_RETRY_MS
    b.poll(5 + REGISTRATION_RETRY_MS, EP, -1)
    b.on_registered(3, now_ms=60)
    b.poll(60, EP, 0)
    b.on_heartbeat(NotControllerError("moved"), now_ms=70)
    assert (b.state, b.broker_epoch) == (BrokerState.RECOVERY, 3)
    assert b.next_deadline_ms() == 70 + INTERVAL
    b.poll(70 + INTERVAL, EP, 0)
    b.on_heartbeat(StaleBrokerEpochError("expected 4"), now_ms=2_100)
    assert (b.state, b.broker_epoch) == (BrokerState.STARTING, -1)
    assert isinstance(b.poll(2_100 + REGISTRATION_RETRY_MS, EP, 0), BrokerRegistrationRequest)


def test_failed_registrations_back_off_up_to_a_limit() -> None:
    b = life()
    now, waits = 0, []
    for _ in range(8):
        b.poll(now, EP, -1)
        b.on_registered(DuplicateBrokerRegistrationError("still registered"), now_ms=now)
        deadline = b.next_deadline_ms()
        assert deadline is not None
        waits.append(deadline - now)
        now = deadline
    assert waits == [50, 100, 200, 400, 800, 1000, 1000, 1000]
    b.poll(now, EP, -1)
    b.on_registered(9, now_ms=now)
    b.poll(now, EP, 0)
    b.on_heartbeat(StaleBrokerEpochError("expected 10"), now_ms=now)
    # Registered once: the count starts again.
    assert b.next_deadline_ms() == now + REGISTRATION_RETRY_MS


def test_controlled_shutdown_waits_for_should_shutdown() -> None:
    b = life()
    b.begin_controlled_shutdown(0)
    assert b.state == BrokerState.SHUTTING_DOWN  # never registered: nothing to move
    b = life()
    b.poll(0, EP, -1)
    b.on_registered(1, 0)
    b.poll(0, EP, 0)
    b.on_heartbeat(UNFENCED, 1)
    b.begin_controlled_shutdown(5)
    assert b.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN
    hb = b.poll(5, EP, 0)
    assert isinstance(hb, BrokerHeartbeatRequest) and hb.want_shutdown
    b.on_heartbeat(HeartbeatResult(True, True, False), 6)
    assert b.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN
    b.poll(6 + INTERVAL, EP, 0)
    b.on_heartbeat(HeartbeatResult(True, True, True), 7 + INTERVAL)
    assert b.state == BrokerState.SHUTTING_DOWN and b.next_deadline_ms() is None


def test_an_answer_without_a_request_is_refused() -> None:
    b = life()
    with pytest.raises(IllegalStateError):
        b.on_heartbeat(UNFENCED, 0)
    b.poll(0, EP, -1)
    with pytest.raises(IllegalStateError):
        b.on_heartbeat(UNFENCED, 0)


class Channel:
    """A controller channel that answers from a script."""

    def __init__(self) -> None:
        self.calls: list[object] = []
        self.fail_next: KafkaError | None = None

    @property
    def controller_id(self) -> int | None:
        return 1

    async def register_broker(self, request: BrokerRegistrationRequest) -> int:
        self.calls.append(request)
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            raise err
        return 11

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> HeartbeatResult:
        self.calls.append(request)
        return HeartbeatResult(True, request.want_shutdown, request.want_shutdown)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> list[AlterPartitionResult]:
        raise AssertionError("not used")


async def test_the_driver_registers_heartbeats_and_shuts_down_in_a_controlled_way() -> None:
    channel = Channel()
    channel.fail_next = NotControllerError("not yet")
    now = [0]
    manager = BrokerLifecycleManager(
        BrokerLifecycle(7, uuid.UUID(int=7), 10, 0),
        channel,  # type: ignore[arg-type]
        lambda: now[0],
        lambda: EP,
        lambda: 3,
    )
    manager.start()
    for _ in range(2_000):
        if manager.lifecycle.state == BrokerState.RUNNING:
            break
        now[0] += 10
        await asyncio.sleep(0.005)
    assert manager.lifecycle.state == BrokerState.RUNNING
    kinds = [type(c).__name__ for c in channel.calls[:3]]
    assert kinds == [
        "BrokerRegistrationRequest",
        "BrokerRegistrationRequest",
        "BrokerHeartbeatRequest",
    ]
    await manager.stop()
    last = channel.calls[-1]
    assert isinstance(last, BrokerHeartbeatRequest) and last.want_shutdown
    assert manager.lifecycle.state == BrokerState.SHUTTING_DOWN


def test_a_broker_asks_to_be_unfenced_only_once_ready() -> None:
    b = BrokerLifecycle(7, uuid.UUID(int=7), INTERVAL, now_ms=0, ready_to_unfence=False)
    b.poll(0, EP, -1)
    b.on_registered(3, now_ms=1)
    hb = b.poll(1, EP, 0)
    assert isinstance(hb, BrokerHeartbeatRequest) and hb.want_fence
    b.on_heartbeat(HeartbeatResult(is_caught_up=True, is_fenced=True, should_shutdown=False), 2)
    assert b.caught_up and not b.ready_to_unfence
    b.mark_ready_to_unfence(now_ms=3)
    assert b.next_deadline_ms() == 3  # the next heartbeat goes now, and asks
    hb = b.poll(3, EP, 5)
    assert isinstance(hb, BrokerHeartbeatRequest) and not hb.want_fence


def test_registration_carries_the_clean_shutdown_epoch() -> None:
    b = BrokerLifecycle(7, uuid.UUID(int=7), INTERVAL, now_ms=0, previous_broker_epoch=41)
    req = b.poll(0, EP, -1)
    assert isinstance(req, BrokerRegistrationRequest) and req.previous_broker_epoch == 41
