"""A deterministic simulation of the control plane: the metadata quorum's controllers and the
brokers, on one seeded network and virtual clock.

Each controller runs the real :class:`~rillet.raft.node.RaftNode` (a voter) under the real
:class:`~rillet.controller.QuorumController`; each broker runs a RaftNode as an observer
(brokers learn metadata by replicating the log), the real
:class:`~rillet.broker.metadata_publisher.MetadataPublisher` and the real
:class:`~rillet.broker.lifecycle.BrokerLifecycle`. The drivers here are the simulator's: they
honour the same contracts as the asyncio drivers (persist, then send, then apply; a
controller answers a request once its records commit), with time and the network simulated
from one seed. Metadata records travel encoded by the real codec.

Invariants are checked after every event (see :meth:`ClusterSimulation.check`).
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from rillet.broker.lifecycle import BrokerLifecycle, BrokerState, LifecycleRequest
from rillet.broker.metadata_publisher import MetadataPublisher
from rillet.broker.producer_id_manager import ProducerIdBlocks
from rillet.controller import (
    PRODUCER_ID_BLOCK_SIZE,
    ControllerConfig,
    ControllerResult,
    HeartbeatResult,
    ProducerIdsBlock,
    QuorumController,
)
from rillet.controller.requests import BrokerRegistrationRequest
from rillet.errors import (
    CoordinatorLoadInProgressError,
    KafkaError,
    NotControllerError,
    RequestTimedOutError,
)
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import BrokerEndpoint, MetadataRecord, ProducerIdsRecord
from rillet.protocol.metadata_records import decode_entries, encode_record
from rillet.raft import (
    LeaderState,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    Message,
    RaftConfig,
    RaftNode,
)


class InvariantViolation(AssertionError):
    """A safety or liveness property of the control plane failed."""


@dataclass(frozen=True)
class LifecycleCall:
    """A broker's registration or heartbeat on the simulated network."""

    source_id: int
    destination_id: int
    call_id: int
    request: LifecycleRequest


@dataclass(frozen=True)
class LifecycleReply:
    source_id: int
    destination_id: int
    call_id: int
    result: int | HeartbeatResult | KafkaError


@dataclass(frozen=True)
class ProducerIdsCall:
    """A broker's AllocateProducerIds (KIP-730) on the simulated network."""

    source_id: int
    destination_id: int
    call_id: int
    broker_epoch: int


@dataclass(frozen=True)
class ProducerIdsReply:
    source_id: int
    destination_id: int
    call_id: int
    result: ProducerIdsBlock | KafkaError


Packet = Message | LifecycleCall | LifecycleReply | ProducerIdsCall | ProducerIdsReply


@dataclass(frozen=True)
class ClusterOptions:
    controllers: int = 3
    brokers: int = 1
    min_delay_ms: int = 1
    max_delay_ms: int = 10
    drop_rate: float = 0.0
    heartbeat_interval_ms: int = 500
    session_timeout_ms: int = 3_000
    request_timeout_ms: int = 1_000
    # Every so often each registered broker hands out this many producer ids from the
    # blocks the controller gives it (the real ProducerIdBlocks); 0: brokers ask for none.
    producer_ids_interval_ms: int = 0
    producer_ids_per_interval: int = 150
    raft: RaftConfig = field(
        default_factory=lambda: RaftConfig(
            election_timeout_ms=1000,
            election_backoff_max_ms=1000,
            fetch_timeout_ms=2000,
            request_timeout_ms=400,
            retry_backoff_ms=20,
            fetch_max_wait_ms=200,
        )
    )


class Controller:
    """One controller: a voter and the quorum controller over its committed log. Requests
    wait in ``pending`` (by the offset of their last record) until that record commits."""

    def __init__(self, sim: ClusterSimulation, node_id: int) -> None:
        self.node_id = node_id
        self.raft = sim.raft_node(node_id)
        self.controller = QuorumController(
            ControllerConfig(broker_session_timeout_ms=sim.options.session_timeout_ms),
            random.Random(sim.rng.getrandbits(64)),
        )
        self.pending: list[tuple[int, LifecycleReply | ProducerIdsReply]] = []


class Broker:
    """One broker: an observer of the metadata log, its image, and its lifecycle."""

    def __init__(self, sim: ClusterSimulation, node_id: int) -> None:
        self.node_id = node_id
        self.raft = sim.raft_node(node_id)
        self.publisher = MetadataPublisher(None, None, held=True)
        self.lifecycle = BrokerLifecycle(
            node_id,
            uuid.UUID(int=node_id),
            sim.options.heartbeat_interval_ms,
            sim.now,
            ready_to_unfence=False,
        )
        self.call: LifecycleCall | None = None
        self.call_deadline_ms = 0
        self.endpoints = (BrokerEndpoint("PLAINTEXT", f"broker-{node_id}", 9092),)
        self.producer_ids = ProducerIdBlocks(node_id)
        self.producer_ids_call: ProducerIdsCall | None = None
        self.producer_ids_deadline_ms = 0


class _Event(NamedTuple):
    """A scheduled event; ordered by (time, seq) as a plain tuple, which the heap compares
    in C (``seq`` is unique, so ``kind`` and ``data`` are never compared)."""

    time: int
    seq: int
    kind: str
    data: object = None


class ClusterSimulation:
    def __init__(
        self,
        seed: int,
        options: ClusterOptions | None = None,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.seed = seed
        self.options = options or ClusterOptions()
        self.rng = random.Random(seed)
        self.now = 0
        self._queue: list[_Event] = []
        self._seq = itertools.count()
        self._calls = itertools.count()
        n = self.options.controllers
        self.controller_ids = list(range(1, n + 1))
        self.broker_ids = list(range(n + 1, n + self.options.brokers + 1))
        self.controllers = {i: Controller(self, i) for i in self.controller_ids}
        self.brokers = {i: Broker(self, i) for i in self.broker_ids}
        self.blocked: set[tuple[int, int]] = set()
        self.history: deque[str] = deque(maxlen=300)
        self._trace = trace
        # Safety state.
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: list[tuple[int, bytes]] = []
        self.images: dict[int, MetadataImage] = {}
        self.broker_epochs: dict[int, int] = {}
        self.producer_id_blocks: list[ProducerIdsBlock] = []  # as brokers took them
        self._producer_ids_checked = -1  # the last committed offset checked
        self._next_producer_id = 0  # where the committed blocks end
        # The one pending wake-up per node (raft ticks, broker lifecycles): an event for
        # another time is stale and ignored.
        self._tick_at: dict[int, int] = {}
        self._lifecycle_at: dict[int, int] = {}
        for c in self.controllers.values():
            c.raft.tick(self.now)
            self._after_raft(c.node_id)
            self._push(self.now + self.options.heartbeat_interval_ms, "fence-check", c.node_id)
        for b in self.brokers.values():
            b.raft.tick(self.now)
            self._after_raft(b.node_id)
            self._lifecycle_at[b.node_id] = self.now
            self._push(self.now, "lifecycle", b.node_id)
            if self.options.producer_ids_interval_ms:
                self._push(self.now, "producer-ids", b.node_id)

    def raft_node(self, node_id: int) -> RaftNode:
        """A Raft replica with its own memory storage: a voter if ``node_id`` is a
        controller's, else an observer."""
        return RaftNode(
            node_id=node_id,
            voters=self.controller_ids,
            log=MemoryRaftLog(),
            store=MemoryQuorumStateStore(),
            rng=random.Random(self.rng.getrandbits(64)),
            now_ms=self.now,
            config=self.options.raft,
        )

    # -- the event loop --------------------------------------------------------------------

    def _push(self, time: int, kind: str, data: object = None) -> None:
        heapq.heappush(self._queue, _Event(max(time, self.now), next(self._seq), kind, data))

    def log(self, text: str) -> None:
        self.history.append(f"{self.now:>7} {text}")
        if self._trace is not None:
            self._trace(f"{self.now:>7} {text}")

    def run_until(self, time: int) -> None:
        while self._queue and self._queue[0].time <= time:
            event = heapq.heappop(self._queue)
            self.now = event.time
            self._dispatch(event)
            self.check()
        self.now = max(self.now, time)

    def run_until_true(self, condition: Callable[[], bool], within_ms: int, what: str) -> None:
        deadline = self.now + within_ms
        while not condition():
            if self.now >= deadline:
                raise InvariantViolation(f"t={self.now}ms: not {what} within {within_ms} ms")
            self.run_until(self.now + 10)

    def _dispatch(self, event: _Event) -> None:
        if event.kind == "deliver":
            assert isinstance(
                event.data,
                Message | LifecycleCall | LifecycleReply | ProducerIdsCall | ProducerIdsReply,
            )
            self._deliver(event.data)
        elif event.kind == "tick":
            assert isinstance(event.data, int)
            if self._tick_at.get(event.data) == event.time:
                del self._tick_at[event.data]
                self._raft(event.data).tick(self.now)
                self._after_raft(event.data)
        elif event.kind == "lifecycle":
            assert isinstance(event.data, int)
            if self._lifecycle_at.get(event.data) == event.time:
                del self._lifecycle_at[event.data]
                self._run_lifecycle(self.brokers[event.data])
        elif event.kind == "producer-ids":
            assert isinstance(event.data, int)
            self._hand_out_producer_ids(self.brokers[event.data])
            self._push(self.now + self.options.producer_ids_interval_ms, "producer-ids", event.data)
        elif event.kind == "fence-check":
            assert isinstance(event.data, int)
            self._fence_check(self.controllers[event.data])
        else:  # pragma: no cover
            raise ValueError(event.kind)

    def _raft(self, node_id: int) -> RaftNode:
        if node_id in self.controllers:
            return self.controllers[node_id].raft
        return self.brokers[node_id].raft

    # -- the network -----------------------------------------------------------------------

    def _send(self, packet: Packet) -> None:
        if self.rng.random() < self.options.drop_rate:
            return
        delay = self.rng.randint(self.options.min_delay_ms, self.options.max_delay_ms)
        self._push(self.now + delay, "deliver", packet)

    def _deliver(self, packet: Packet) -> None:
        if (packet.source_id, packet.destination_id) in self.blocked:
            return
        if isinstance(packet, LifecycleCall):
            self.log(f"{packet.source_id}->{packet.destination_id} {packet.request}")
            self._handle_call(self.controllers[packet.destination_id], packet)
        elif isinstance(packet, LifecycleReply):
            self.log(f"{packet.source_id}->{packet.destination_id} {packet.result}")
            self._handle_reply(self.brokers[packet.destination_id], packet)
        elif isinstance(packet, ProducerIdsCall):
            self.log(f"{packet.source_id}->{packet.destination_id} {packet}")
            self._allocate_producer_ids(self.controllers[packet.destination_id], packet)
        elif isinstance(packet, ProducerIdsReply):
            self.log(f"{packet.source_id}->{packet.destination_id} {packet.result}")
            self._on_producer_ids(self.brokers[packet.destination_id], packet)
        else:
            raft = self._raft(packet.destination_id)
            raft.step(packet, self.now)
            self._after_raft(packet.destination_id)

    def isolate(self, node_id: int) -> None:
        ids = [*self.controller_ids, *self.broker_ids]
        self.blocked = {(a, b) for a in ids for b in ids if a != b and node_id in (a, b)}
        self.log(f"isolate {node_id}")

    def heal(self) -> None:
        self.blocked = set()
        self.log("heal")

    # -- the Raft drivers ------------------------------------------------------------------

    def _after_raft(self, node_id: int) -> None:
        """Persist (the memory stores are durable at once), send, then apply."""
        raft = self._raft(node_id)
        out = raft.poll()
        for m in out.messages:
            self._send(m)
        if out.committed:
            self._check_committed(node_id, [(e.offset, e.payload) for e in out.committed])
            records = decode_entries(out.committed)
            self._check_producer_id_records(records)
            if node_id in self.controllers:
                self._apply_controller(self.controllers[node_id], records, out.high_watermark)
            elif records:
                self.brokers[node_id].publisher.publish(records)
        if out.leader_change is not None and node_id in self.controllers:
            c = self.controllers[node_id]
            self.log(f"controller {node_id}: {raft.state!r}")
            if raft.is_leader:
                c.controller.activate()
            else:
                c.controller.revert_to_committed()
                for _, reply in c.pending:
                    if isinstance(reply, ProducerIdsReply):
                        self._send(replace(reply, result=NotControllerError("")))
                    else:
                        self._reply(c, reply.destination_id, reply.call_id, NotControllerError(""))
                c.pending = []
        deadline = raft.next_deadline_ms()
        if deadline is not None:
            deadline = max(deadline, self.now)
            if self._tick_at.get(node_id, deadline + 1) > deadline:
                self._tick_at[node_id] = deadline
                self._push(deadline, "tick", node_id)

    def _apply_controller(
        self, c: Controller, records: Sequence[tuple[int, MetadataRecord]], high_watermark: int
    ) -> None:
        if records:
            c.controller.replay_committed(records)
        done = [reply for last, reply in c.pending if last < high_watermark]
        c.pending = [(last, reply) for last, reply in c.pending if last >= high_watermark]
        for reply in done:
            self._send(reply)

    # -- the controllers -------------------------------------------------------------------

    def _write(
        self,
        c: Controller,
        result: ControllerResult[object],
        reply: LifecycleReply | ProducerIdsReply | None,
    ) -> None:
        """Propose ``result``'s records on the leader and send ``reply`` once they commit
        (at once when there are none)."""
        if not result.records:
            if reply is not None:
                self._send(reply)
            return
        offsets = c.raft.propose([encode_record(r) for r in result.records], self.now)
        c.controller.apply_appended(offsets.start, result.records)
        if reply is not None:
            c.pending.append((offsets.stop - 1, reply))
        self._after_raft(c.node_id)

    def _reply(self, c: Controller, to: int, call_id: int, result: object) -> None:
        assert isinstance(result, int | HeartbeatResult | KafkaError)
        self._send(LifecycleReply(c.node_id, to, call_id, result))

    def _handle_call(self, c: Controller, call: LifecycleCall) -> None:
        if not c.raft.leader_ready:
            self._reply(c, call.source_id, call.call_id, NotControllerError("not active"))
            return
        request = call.request
        try:
            result: ControllerResult[object]
            if isinstance(request, BrokerRegistrationRequest):
                result = c.controller.register_broker(  # type: ignore[assignment]
                    request.broker_id,
                    request.incarnation_id,
                    list(request.listeners),
                    request.rack,
                    self.now,
                    request.previous_broker_epoch,
                )
            else:
                result = c.controller.broker_heartbeat(  # type: ignore[assignment]
                    request.broker_id,
                    request.broker_epoch,
                    self.now,
                    caught_up=request.current_metadata_offset >= c.controller.committed.offset,
                    want_fence=request.want_fence,
                    want_shutdown=request.want_shutdown,
                )
        except KafkaError as e:
            self._reply(c, call.source_id, call.call_id, e)
            return
        response = result.response
        assert isinstance(response, int | HeartbeatResult)
        self._write(c, result, LifecycleReply(c.node_id, call.source_id, call.call_id, response))

    def _allocate_producer_ids(self, c: Controller, call: ProducerIdsCall) -> None:
        result: ProducerIdsBlock | KafkaError
        if not c.raft.leader_ready:
            result = NotControllerError("not active")
        else:
            try:
                allocated = c.controller.generate_next_producer_id(
                    call.source_id, call.broker_epoch
                )
            except KafkaError as e:
                result = e
            else:
                reply = ProducerIdsReply(
                    c.node_id, call.source_id, call.call_id, allocated.response
                )
                self._write(c, allocated, reply)  # type: ignore[arg-type]
                return
        self._send(ProducerIdsReply(c.node_id, call.source_id, call.call_id, result))

    def _fence_check(self, c: Controller) -> None:
        if c.raft.leader_ready:
            records = c.controller.fence_stale_brokers(self.now)
            if records:
                self.log(f"controller {c.node_id} fences: {records}")
                self._write(c, ControllerResult(records, None), None)
            # Automatic preferred leader election, at every check: leadership moves back
            # while clients produce, not only when brokers fail.
            records = c.controller.balance_partition_leaders()
            if records:
                self.log(f"controller {c.node_id} rebalances: {records}")
                self._write(c, ControllerResult(records, None), None)
        self._push(self.now + self.options.heartbeat_interval_ms, "fence-check", c.node_id)

    # -- the brokers -----------------------------------------------------------------------

    def _run_lifecycle(self, b: Broker) -> None:
        if b.call is not None and self.now >= b.call_deadline_ms:
            self._feed(b, b.call, RequestTimedOutError("no answer"))
        request = b.lifecycle.poll(self.now, b.endpoints, b.publisher.image.offset)
        if request is not None:
            leader = b.raft.leader_id
            call = LifecycleCall(b.node_id, leader or 0, next(self._calls), request)
            if leader is None or leader not in self.controllers:
                self._feed(b, call, NotControllerError("no known controller"))
            else:
                b.call = call
                b.call_deadline_ms = self.now + self.options.request_timeout_ms
                self._send(call)
        deadline = b.call_deadline_ms if b.call is not None else b.lifecycle.next_deadline_ms()
        if deadline is not None:
            deadline = max(deadline, self.now + 1)
            if self._lifecycle_at.get(b.node_id) != deadline:
                self._lifecycle_at[b.node_id] = deadline
                self._push(deadline, "lifecycle", b.node_id)

    def _handle_reply(self, b: Broker, reply: LifecycleReply) -> None:
        if b.call is None or b.call.call_id != reply.call_id:
            return  # an answer to a call given up on
        self._feed(b, b.call, reply.result)
        self._run_lifecycle(b)

    def _feed(self, b: Broker, call: LifecycleCall, result: object) -> None:
        b.call = None
        life = b.lifecycle
        if isinstance(call.request, BrokerRegistrationRequest):
            assert isinstance(result, int | KafkaError)
            life.on_registered(result, self.now)
        else:
            assert isinstance(result, HeartbeatResult | KafkaError)
            life.on_heartbeat(result, self.now)
            if life.caught_up and not life.ready_to_unfence:
                # The real broker's BrokerLifecycleManager does the same on_caught_up.
                b.publisher.release()
                life.mark_ready_to_unfence(self.now)

    def _hand_out_producer_ids(self, b: Broker) -> None:
        """Producers ask this broker for ids; it asks the controller for blocks as the real
        ProducerIdManager does (one request at a time, a timeout is a failure)."""
        blocks = b.producer_ids
        if b.producer_ids_call is not None and self.now >= b.producer_ids_deadline_ms:
            b.producer_ids_call = None
            blocks.on_error(self.now)
        for _ in range(self.options.producer_ids_per_interval):
            try:
                blocks.generate_producer_id()
            except CoordinatorLoadInProgressError:
                break
        epoch = b.lifecycle.broker_epoch
        leader = b.raft.leader_id
        if epoch < 0 or leader is None or leader not in self.controllers:
            return
        if blocks.poll_request(self.now):
            call = ProducerIdsCall(b.node_id, leader, next(self._calls), epoch)
            b.producer_ids_call = call
            b.producer_ids_deadline_ms = self.now + self.options.request_timeout_ms
            self._send(call)

    def _on_producer_ids(self, b: Broker, reply: ProducerIdsReply) -> None:
        if b.producer_ids_call is None or b.producer_ids_call.call_id != reply.call_id:
            return  # an answer to a call given up on
        b.producer_ids_call = None
        if isinstance(reply.result, KafkaError):
            b.producer_ids.on_error(self.now)
        elif b.producer_ids.on_block(reply.result, self.now) is None:
            self._check_producer_id_block(b.node_id, reply.result)

    # -- invariants ------------------------------------------------------------------------

    def _check_committed(self, node_id: int, entries: list[tuple[int, bytes]]) -> None:
        """Every node applies the same entry at each offset."""
        for offset, payload in entries:
            if offset < len(self.committed):
                if self.committed[offset] != (offset, payload):
                    self.fail(f"node {node_id} committed a different entry at {offset}")
            elif offset == len(self.committed):
                self.committed.append((offset, payload))
            else:
                self.fail(f"node {node_id} committed {offset} past a gap")

    def _check_producer_id_records(self, records: Sequence[tuple[int, MetadataRecord]]) -> None:
        """No two committed ProducerIdsRecords give overlapping blocks (KIP-730): each block
        (the :data:`PRODUCER_ID_BLOCK_SIZE` ids before its ``next_producer_id``) starts at
        or after the end of the ones committed before it. Checked once per offset (every
        node commits the same records, see :meth:`_check_committed`)."""
        for offset, record in records:
            if offset <= self._producer_ids_checked:
                continue
            self._producer_ids_checked = offset
            if isinstance(record, ProducerIdsRecord):
                start = record.next_producer_id - PRODUCER_ID_BLOCK_SIZE
                if start < self._next_producer_id:
                    self.fail(
                        f"ProducerIdsRecord at {offset} gives ids from {start}, but ids up to "
                        f"{self._next_producer_id} were given already"
                    )
                self._next_producer_id = record.next_producer_id

    def _check_producer_id_block(self, broker_id: int, block: ProducerIdsBlock) -> None:
        """No two blocks brokers took overlap, whichever controller gave them, and each was
        committed before its broker got it (a block answered before its record commits
        could be given again by the next active controller)."""
        if block.next_block_first_id > self._next_producer_id:
            self.fail(f"broker {broker_id} took {block}, which was never committed")
        for other in self.producer_id_blocks:
            if (
                block.first_producer_id <= other.last_producer_id
                and other.first_producer_id <= block.last_producer_id
            ):
                self.fail(f"broker {broker_id} took {block}, which overlaps {other}")
        self.producer_id_blocks.append(block)

    def check(self) -> None:
        """After every event (and, for producer ids, as records commit and blocks arrive:
        committed blocks and the blocks brokers take never overlap):

        - at most one active controller per epoch;
        - a broker's metadata image never moves back, and its epoch never decreases;
        - in every committed image, no partition is led by a fenced or unknown broker and
          every fenced broker is out of every ISR it could leave (the last member stays).
        """
        for c in self.controllers.values():
            raft = c.raft
            if isinstance(raft.state, LeaderState):
                leader = self.leader_of_epoch.setdefault(raft.epoch, c.node_id)
                if leader != c.node_id:
                    self.fail(f"two active controllers in epoch {raft.epoch}")
            self._check_image(c.node_id, c.controller.committed)
        for b in self.brokers.values():
            self._check_image(b.node_id, b.publisher.image)
            epoch = b.lifecycle.broker_epoch
            if epoch >= 0:
                if epoch < self.broker_epochs.get(b.node_id, -1):
                    self.fail(f"broker {b.node_id} epoch went back to {epoch}")
                self.broker_epochs[b.node_id] = epoch

    def _check_image(self, node_id: int, image: MetadataImage) -> None:
        before = self.images.get(node_id)
        if image is before:
            return  # images are immutable: this one was checked when it was new
        if before is not None and image.offset < before.offset:
            self.fail(f"node {node_id} image went back {before.offset} -> {image.offset}")
        self.images[node_id] = image
        for topic in image.topics():
            for p, reg in topic.partitions.items():
                if reg.has_leader:
                    b = image.brokers.get(reg.leader)
                    if b is None or b.fenced:
                        self.fail(
                            f"node {node_id}: {topic.name}-{p} led by fenced broker {reg.leader}"
                        )

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"t={self.now}ms: {message}\n" + "\n".join(self.history))

    # -- views for scenarios ---------------------------------------------------------------

    def active_controller(self) -> Controller | None:
        for c in self.controllers.values():
            if c.raft.leader_ready:
                return c
        return None

    def fenced_in_committed(self, broker_id: int) -> bool | None:
        """Whether the active controller's committed image has ``broker_id`` fenced (None
        when there is no active controller or the broker is not registered)."""
        c = self.active_controller()
        if c is None:
            return None
        b = c.controller.committed.brokers.get(broker_id)
        return None if b is None else b.fenced

    def broker_state(self, broker_id: int) -> BrokerState:
        return self.brokers[broker_id].lifecycle.state
