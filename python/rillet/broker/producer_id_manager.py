"""Producer ids for the producers that connect to this broker (Kafka's RPCProducerIdManager,
KIP-730), and InitProducerId for idempotent producers (the non-transactional half of Kafka's
TransactionCoordinator.handleInitProducerId).

The active controller gives this broker blocks of producer ids
(:func:`~rillet.controller.producer_ids.generate_next_producer_id`); the broker hands them
out one by one with no round trip. Once 90% of the current block is handed out, the next
block is asked for, so it is usually there before the current one runs out. When no id is
left and the next block has not come, a producer is answered COORDINATOR_LOAD_IN_PROGRESS,
which it retries (Kafka answers so rather than REQUEST_TIMED_OUT, which old clients treat as
fatal); here the request first waits a little for an allocation in flight. A failed
allocation (no controller, a stale broker epoch, a block that makes no sense) is asked for
again after ``retry_backoff_ms``, when a producer next needs an id.

:class:`ProducerIdBlocks` is the pure bookkeeping (times come in as arguments);
:class:`ProducerIdManager` drives it on the event loop over the
:class:`~rillet.broker.controller_channel.ControllerChannel`. Ids are unique across the
cluster because blocks are (the controller's records say which are taken); ids left in a
block when the broker stops are never handed out by anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rillet.broker.controller_channel import ControllerChannel
from rillet.controller import ProducerIdsBlock
from rillet.controller.producer_ids import INT64_MAX
from rillet.errors import (
    CoordinatorLoadInProgressError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    KafkaError,
)
from rillet.scheduler import Clock

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "PID_PREFETCH_THRESHOLD",
    "RETRY_BACKOFF_MS",
    "InitProducerIdRequest",
    "InitProducerIdResult",
    "ProducerIdBlocks",
    "ProducerIdManager",
    "handle_init_producer_id",
    "init_transactional_producer_id",
]

_log = logging.getLogger(__name__)

# Kafka's RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Producer epochs are int16 in Kafka's batches and requests.
MAX_PRODUCER_EPOCH = (1 << 15) - 1

# Kafka's ProducerIdManager.PidPrefetchThreshold and RetryBackoffMs.
PID_PREFETCH_THRESHOLD = 0.90
RETRY_BACKOFF_MS = 50
# How long an InitProducerId that finds no id waits for an allocation in flight before it is
# answered COORDINATOR_LOAD_IN_PROGRESS.
ALLOCATION_WAIT_MS = 500

_EMPTY = ProducerIdsBlock(-1, 0, 0)


class ProducerIdBlocks:
    """The current block, how far it is handed out, the next block once it has come, and
    whether one is being asked for. Pure and not thread safe.

    The driver asks :meth:`poll_request` after handing out ids (or failing to); when it says
    so, it sends one AllocateProducerIds and reports the outcome with :meth:`on_block` or
    :meth:`on_error`. At most one request is in flight, and none while a next block waits.
    """

    def __init__(self, broker_id: int, retry_backoff_ms: int = RETRY_BACKOFF_MS) -> None:
        self.broker_id = broker_id
        self.retry_backoff_ms = retry_backoff_ms
        self.current = _EMPTY
        self.next_producer_id = 0  # the next id of ``current`` to hand out
        self.next_block: ProducerIdsBlock | None = None
        self.request_in_flight = False
        self.backoff_deadline_ms: int | None = None

    @property
    def has_valid_block(self) -> bool:
        """Whether an id can be handed out without asking the controller."""
        return self._remaining() > 0 or self.next_block is not None

    def _remaining(self) -> int:
        return self.current.last_producer_id - self.next_producer_id + 1

    def generate_producer_id(self) -> int:
        """The next id, moving to the next block when the current one is used up; raises
        COORDINATOR_LOAD_IN_PROGRESS (retriable) when there is none."""
        if self._remaining() <= 0:
            if self.next_block is None:
                raise CoordinatorLoadInProgressError(
                    "Producer ID block is full. Waiting for next block"
                )
            self.current, self.next_block = self.next_block, None
            self.next_producer_id = self.current.first_producer_id
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        return producer_id

    def poll_request(self, now_ms: int) -> bool:
        """Whether to ask for the next block now: the current one is at least 90% handed
        out (or empty), none has come or is in flight, and no backoff is running. A True
        answer marks the request in flight."""
        if self.next_block is not None or self.request_in_flight:
            return False
        if self.backoff_deadline_ms is not None and now_ms < self.backoff_deadline_ms:
            return False
        used = self.next_producer_id - self.current.first_producer_id
        if self._remaining() > 0 and used < int(self.current.size * PID_PREFETCH_THRESHOLD):
            return False
        self.request_in_flight = True
        self.backoff_deadline_ms = None
        return True

    def on_block(self, block: ProducerIdsBlock, now_ms: int) -> str | None:
        """The controller's answer; returns why it was refused (and backs off), else None.
        As Kafka, a block that does not follow the current one or holds no valid id is
        refused."""
        self.request_in_flight = False
        problem = None
        if self.current is not _EMPTY and block.first_producer_id <= self.current.last_producer_id:
            problem = f"block {block} does not follow the current block {self.current}"
        elif (
            block.first_producer_id < 0
            or block.size <= 0
            or block.first_producer_id > INT64_MAX - block.size
        ):
            problem = f"block {block} holds an invalid range of ids"
        if problem is not None:
            self.backoff_deadline_ms = now_ms + self.retry_backoff_ms
            return problem
        self.next_block = block
        return None

    def on_error(self, now_ms: int) -> None:
        """The request failed (or its answer will never come): ask again after the backoff."""
        self.request_in_flight = False
        self.backoff_deadline_ms = now_ms + self.retry_backoff_ms


class ProducerIdManager:
    """Runs :class:`ProducerIdBlocks` on the event loop. ``broker_epoch`` gives this broker's
    current registration epoch (-1 while it has none: nothing is asked for then)."""

    def __init__(
        self,
        broker_id: int,
        channel: ControllerChannel,
        broker_epoch: Callable[[], int],
        clock: Clock,
        *,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        allocation_wait_ms: int = ALLOCATION_WAIT_MS,
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.clock = clock
        self.blocks = ProducerIdBlocks(broker_id, retry_backoff_ms)
        self.allocation_wait_s = allocation_wait_ms / 1000
        self._request: asyncio.Task[None] | None = None
        self._closed = False

    async def generate_producer_id(self) -> int:
        """A producer id no one else has or will get; COORDINATOR_LOAD_IN_PROGRESS when
        none has come from the controller within the allocation wait."""
        try:
            producer_id = self.blocks.generate_producer_id()
        except CoordinatorLoadInProgressError:
            request = self._maybe_request_next_block()
            if request is None:
                raise
            # The task never raises; shielded, a wait that times out leaves it running.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(request), self.allocation_wait_s)
            producer_id = self.blocks.generate_producer_id()
        self._maybe_request_next_block()
        return producer_id

    def _maybe_request_next_block(self) -> asyncio.Task[None] | None:
        """Send AllocateProducerIds if one is due; returns the request in flight, if any."""
        if self._closed:
            return None
        epoch = self.broker_epoch()
        if epoch >= 0 and self.blocks.poll_request(self.clock()):
            self._request = asyncio.get_running_loop().create_task(
                self._allocate(epoch), name="allocate-producer-ids"
            )
        return self._request if self.blocks.request_in_flight else None

    async def _allocate(self, broker_epoch: int) -> None:
        try:
            block = await self.channel.allocate_producer_ids(self.broker_id, broker_epoch)
        except asyncio.CancelledError:
            self.blocks.on_error(self.clock())
            raise
        except KafkaError as e:
            self.blocks.on_error(self.clock())
            log = _log.info if e.retriable else _log.warning
            log("AllocateProducerIds failed, will retry: %s", e)
            return
        except Exception:
            self.blocks.on_error(self.clock())
            _log.exception("AllocateProducerIds failed, will retry")
            return
        problem = self.blocks.on_block(block, self.clock())
        if problem is not None:
            _log.error("AllocateProducerIds answered a bad block, will retry: %s", problem)
        else:
            _log.debug("got producer id block %s", block)

    async def shutdown(self) -> None:
        self._closed = True
        if self._request is not None:
            self._request.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._request
            self._request = None


# -- InitProducerId --------------------------------------------------------------------------


@dataclass(frozen=True)
class InitProducerIdRequest:
    """InitProducerId as a producer sends it: ``transactional_id`` None for an idempotent
    producer; ``producer_id`` and ``producer_epoch`` both -1 for a new producer, both set
    when it asks for its epoch to be bumped (KIP-360)."""

    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class InitProducerIdResult:
    producer_id: int
    producer_epoch: int


TransactionalInitProducerId = Callable[[InitProducerIdRequest], Awaitable[InitProducerIdResult]]


async def init_transactional_producer_id(request: InitProducerIdRequest) -> InitProducerIdResult:
    """InitProducerId for a transactional producer: the transaction coordinator's part,
    which is not built yet. The coordinator replaces this function (it is
    :func:`handle_init_producer_id`'s ``transactional`` argument)."""
    raise InvalidRequestError("transactions are not supported yet")


async def handle_init_producer_id(
    request: InitProducerIdRequest,
    producer_ids: ProducerIdManager,
    transactional: TransactionalInitProducerId = init_transactional_producer_id,
) -> InitProducerIdResult:
    """InitProducerId (Kafka's KafkaApis.handleInitProducerIdRequest and
    TransactionCoordinator.handleInitProducerId). Raises the error to answer with.

    A producer id and epoch must be both -1 or both set (INVALID_REQUEST), and in range.
    Without a ``transactional_id`` the answer is a fresh producer id with epoch 0 (the id
    and epoch sent are not used, nor the timeout, as in Kafka). An empty
    ``transactional_id`` is INVALID_REQUEST and a timeout that is not positive
    INVALID_TRANSACTION_TIMEOUT; a transactional producer is otherwise ``transactional``'s.
    """
    pid, epoch = request.producer_id, request.producer_epoch
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        raise InvalidRequestError(
            f"producer id {pid} and producer epoch {epoch} must both be -1 or both be set"
        )
    if pid < NO_PRODUCER_ID or not NO_PRODUCER_EPOCH <= epoch <= MAX_PRODUCER_EPOCH:
        raise InvalidRequestError(f"invalid producer id {pid} or producer epoch {epoch}")
    if request.transactional_id is None:
        return InitProducerIdResult(await producer_ids.generate_producer_id(), 0)
    if not request.transactional_id:
        raise InvalidRequestError("transactional.id must not be empty")
    if request.transaction_timeout_ms <= 0:
        raise InvalidTransactionTimeoutError(
            f"transaction.timeout.ms must be positive (got {request.transaction_timeout_ms})"
        )
    return await transactional(request)
