"""The broker's producer ids (Kafka's RPCProducerIdManager, KIP-730): ids handed out of the
current block, the next block asked for at 90%, COORDINATOR_LOAD_IN_PROGRESS when none is
left, a failed allocation asked for again after the backoff; and InitProducerId's checks."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from rillet.broker.controller_channel import ControllerChannel
from rillet.broker.producer_id_manager import (
    RETRY_BACKOFF_MS,
    InitProducerIdRequest,
    InitProducerIdResult,
    ProducerIdBlocks,
    ProducerIdManager,
    handle_init_producer_id,
)
from rillet.controller import ProducerIdsBlock
from rillet.controller.producer_ids import INT64_MAX
from rillet.errors import (
    CoordinatorLoadInProgressError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)

# -- the bookkeeping -------------------------------------------------------------------------


def block(first: int, size: int = 1000, broker: int = 1) -> ProducerIdsBlock:
    return ProducerIdsBlock(broker, first, size)


def with_block(first: int = 0, size: int = 1000) -> ProducerIdBlocks:
    b = ProducerIdBlocks(1)
    assert b.poll_request(0)
    assert b.on_block(block(first, size), 0) is None
    return b


def test_nothing_to_hand_out_before_the_first_block() -> None:
    b = ProducerIdBlocks(1)
    assert not b.has_valid_block
    with pytest.raises(CoordinatorLoadInProgressError, match="Waiting for next block") as e:
        b.generate_producer_id()
    assert e.value.retriable
    # An empty block is used up: ask at once, once.
    assert b.poll_request(0) and b.request_in_flight
    assert not b.poll_request(0)


def test_ids_come_in_order_and_the_next_block_is_asked_for_at_90_percent() -> None:
    b = with_block(5000)
    ids = [b.generate_producer_id() for _ in range(899)]
    assert ids == list(range(5000, 5899))
    assert not b.poll_request(0)
    assert b.generate_producer_id() == 5899  # the 900th: 90% handed out
    assert b.poll_request(0)
    assert not b.poll_request(0)  # one in flight at a time
    assert b.on_block(block(9000), 0) is None
    assert not b.poll_request(0)  # none while the next block waits
    rest = [b.generate_producer_id() for _ in range(100)]
    assert rest == list(range(5900, 6000))
    # The current block is used up: the next one takes over without a round trip.
    assert b.generate_producer_id() == 9000
    assert b.current == block(9000) and b.next_block is None


def test_a_used_up_block_without_a_next_one_is_a_retriable_error() -> None:
    b = with_block(0, size=10)
    assert [b.generate_producer_id() for _ in range(9)] == list(range(9))
    assert b.poll_request(0)  # prefetch
    assert b.generate_producer_id() == 9
    with pytest.raises(CoordinatorLoadInProgressError):
        b.generate_producer_id()
    assert b.on_block(block(10, size=10), 0) is None
    assert b.generate_producer_id() == 10


def test_a_failed_request_is_asked_for_again_after_the_backoff() -> None:
    b = with_block(0, size=10)
    for _ in range(9):
        b.generate_producer_id()
    assert b.poll_request(100)
    b.on_error(100)
    assert not b.request_in_flight
    assert not b.poll_request(100 + RETRY_BACKOFF_MS - 1)
    # Still 90% used: once the backoff is over the prefetch is asked for again.
    assert b.poll_request(100 + RETRY_BACKOFF_MS)


@pytest.mark.parametrize(
    "bad",
    [
        block(500),  # overlaps the current block
        block(999),
        block(-5),
        block(2000, size=0),
        block(INT64_MAX - 10, size=1000),
    ],
)
def test_a_block_that_makes_no_sense_is_refused_and_asked_for_again(bad: ProducerIdsBlock) -> None:
    b = with_block(0)
    for _ in range(900):
        b.generate_producer_id()
    assert b.poll_request(0)
    assert b.on_block(bad, 0) is not None
    assert b.next_block is None and not b.request_in_flight
    assert not b.poll_request(1)
    assert b.poll_request(RETRY_BACKOFF_MS)


# -- the driver ------------------------------------------------------------------------------


class Controller:
    """A ControllerChannel that gives contiguous blocks, or fails, on demand."""

    controller_id = 1

    def __init__(self, size: int = 1000) -> None:
        self.size = size
        self.next = 0
        self.calls: list[tuple[int, int]] = []
        self.failures: list[KafkaError] = []
        self.gate: asyncio.Event | None = None

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        self.calls.append((broker_id, broker_epoch))
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)
        first, self.next = self.next, self.next + self.size
        return ProducerIdsBlock(broker_id, first, self.size)


def manager(
    controller: Controller, epoch: int = 7, now: list[int] | None = None, wait_ms: int = 500
) -> ProducerIdManager:
    clock = now if now is not None else [0]
    return ProducerIdManager(
        3,
        cast(ControllerChannel, controller),
        lambda: epoch,
        lambda: clock[0],
        allocation_wait_ms=wait_ms,
    )


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_first_id_waits_for_the_first_block() -> None:
    c = Controller()
    m = manager(c)
    assert await m.generate_producer_id() == 0
    assert c.calls == [(3, 7)]
    assert [await m.generate_producer_id() for _ in range(3)] == [1, 2, 3]
    await m.shutdown()


async def test_ids_are_handed_out_with_no_round_trip_across_blocks() -> None:
    c = Controller(size=10)
    m = manager(c)
    ids = []
    for _ in range(45):
        ids.append(await m.generate_producer_id())
        await settle()  # the prefetch, once asked for, arrives
    assert ids == list(range(45))
    assert len(c.calls) == 5  # 4 full blocks and one prefetched at 90% of the fifth
    await m.shutdown()


async def test_no_id_within_the_wait_is_coordinator_load_in_progress() -> None:
    c = Controller()
    c.gate = asyncio.Event()
    m = manager(c, wait_ms=20)
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    assert len(c.calls) == 1  # the request in flight is not sent again
    # The request outlives the waits that gave up on it; the client's retry gets an id.
    c.gate.set()
    await settle()
    assert await m.generate_producer_id() == 0
    await m.shutdown()


async def test_controller_errors_are_retried_after_the_backoff() -> None:
    now = [1000]
    c = Controller()
    c.failures = [NotControllerError("none yet"), StaleBrokerEpochError("old")]
    m = manager(c, now=now, wait_ms=50)
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    assert len(c.calls) == 1
    # Within the backoff nothing is sent.
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    assert len(c.calls) == 1
    now[0] += RETRY_BACKOFF_MS
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    now[0] += RETRY_BACKOFF_MS
    assert await m.generate_producer_id() == 0
    assert len(c.calls) == 3
    await m.shutdown()


async def test_nothing_is_asked_for_before_the_broker_is_registered() -> None:
    c = Controller()
    m = manager(c, epoch=-1, wait_ms=10)
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    assert c.calls == []
    await m.shutdown()


async def test_shutdown_abandons_the_request_in_flight() -> None:
    c = Controller()
    c.gate = asyncio.Event()
    m = manager(c, wait_ms=10)
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    await m.shutdown()
    with pytest.raises(CoordinatorLoadInProgressError):
        await m.generate_producer_id()
    assert len(c.calls) == 1


# -- InitProducerId --------------------------------------------------------------------------


async def init(request: InitProducerIdRequest, **kwargs: Any) -> InitProducerIdResult:
    m = manager(Controller())
    try:
        return await handle_init_producer_id(request, m, **kwargs)
    finally:
        await m.shutdown()


@pytest.mark.parametrize(
    ("producer_id", "producer_epoch", "timeout_ms"),
    [(-1, -1, 0), (17, 3, -5), (0, 0, 60_000)],
)
async def test_an_idempotent_producer_gets_a_fresh_id_and_epoch_0(
    producer_id: int, producer_epoch: int, timeout_ms: int
) -> None:
    # As Kafka: the id, epoch and timeout sent are not used without a transactional id.
    request = InitProducerIdRequest(None, timeout_ms, producer_id, producer_epoch)
    assert await init(request) == InitProducerIdResult(0, 0)


@pytest.mark.parametrize(
    ("transactional_id", "producer_id", "producer_epoch"),
    [
        (None, -1, 0),
        (None, 5, -1),
        ("tx", -1, 3),
        (None, -2, -2),
        (None, 5, 1 << 15),
        (None, 5, -7),
    ],
)
async def test_bad_producer_ids_and_epochs_are_invalid_requests(
    transactional_id: str | None, producer_id: int, producer_epoch: int
) -> None:
    request = InitProducerIdRequest(transactional_id, 60_000, producer_id, producer_epoch)
    with pytest.raises(InvalidRequestError):
        await init(request)


async def test_an_empty_transactional_id_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequestError, match="must not be empty"):
        await init(InitProducerIdRequest("", 60_000))


@pytest.mark.parametrize("timeout_ms", [0, -1])
async def test_a_transactional_producer_needs_a_positive_timeout(timeout_ms: int) -> None:
    with pytest.raises(InvalidTransactionTimeoutError):
        await init(InitProducerIdRequest("tx", timeout_ms))


async def test_transactions_are_refused_until_the_coordinator_exists() -> None:
    with pytest.raises(InvalidRequestError, match="transactions are not supported yet"):
        await init(InitProducerIdRequest("tx", 60_000))


async def test_the_transaction_coordinator_plugs_in() -> None:
    seen: list[InitProducerIdRequest] = []

    async def coordinator(request: InitProducerIdRequest) -> InitProducerIdResult:
        seen.append(request)
        return InitProducerIdResult(42, 1)

    request = InitProducerIdRequest("tx", 60_000, 42, 0)
    assert await init(request, transactional=coordinator) == InitProducerIdResult(42, 1)
    assert seen == [request]
