"""The whole cluster under the simulator: the control plane of :mod:`cluster` plus the data
plane. Every broker runs the real :class:`~rillet.broker.replica_manager.ReplicaManager` over
real logs (a LogManager in a temporary directory), the real
:class:`~rillet.broker.replica_fetcher.ReplicaFetcher` request building and response
handling, and sends its ISR changes to the active controller (AlterPartition); a producing
client (acks=all) and a consuming client talk to whichever broker their (possibly stale)
metadata names as leader. Everything travels on the simulated network with its delays,
losses and cuts; brokers crash (as kill -9 does: the page cache survives) or lose power
(what was not fsynced is lost from the first unflushed byte on, possibly mid-batch) and
restart with a new incarnation; brokers and controllers pause (as SIGSTOP does: nothing runs,
what is sent to them waits, and on resuming they act on it and on their overdue timers with
a view of the cluster that is seconds old); a broker's disk turns slow for a while (every
request that reads or writes its logs waits).

Invariants, checked after every event (:meth:`ReplicationSimulation.check`):

- all replicas agree on every offset below their high watermark (the first replica to
  cover an offset defines it; any other value there later is a violation);
- a record acknowledged with acks=all is at its offset below the leader's high watermark
  when it is acknowledged (so, with the first invariant, never lost or reordered);
- a record returned to a consumer is below the high watermark and stays where it was read;
- at most one broker leads a partition in a leader epoch.

After healing (:meth:`ReplicationSimulation.require_liveness`): every partition has a leader,
its ISR holds every replica again, the replicas hold the same log, and every acknowledged
record is in it at its offset.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cluster import Broker, ClusterOptions, ClusterSimulation, LifecycleReply, Packet, _Event

from rillet import BatchBuilder, decode_batches
from rillet.broker.lifecycle import BrokerLifecycle
from rillet.broker.metadata_publisher import MetadataPublisher
from rillet.broker.partition import Partition
from rillet.broker.replica_fetcher import (
    FetcherConfig,
    LeaderFetchResult,
    ReplicaFetcher,
    ReplicaFetchRequest,
)
from rillet.broker.replica_manager import FetchPartition, ReplicaManager
from rillet.controller import AlterPartitionResult, AlterPartitionState, CreatableTopic
from rillet.errors import KafkaError, NotControllerError, NotLeaderOrFollowerError
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition
from tests.support.power_loss import lose_unflushed

CLIENT = 1000  # the producing and consuming clients' address on the network
TOPIC = "events"


@dataclass(frozen=True)
class ReplicationOptions:
    cluster: ClusterOptions = field(default_factory=lambda: ClusterOptions(brokers=3))
    partitions: int = 2
    min_insync_replicas: int = 2
    replica_lag_time_max_ms: int = 2_000
    produce_interval_ms: int = 15
    consume_interval_ms: int = 40
    fetch_idle_ms: int = 20
    request_timeout_ms: int = 1_500
    fault_interval_ms: tuple[int, int] = (500, 2_500)
    crash_downtime_ms: tuple[int, int] = (200, 4_000)
    pause_ms: tuple[int, int] = (200, 3_000)
    slow_disk_ms: tuple[int, int] = (20, 400)  # the extra time each disk access takes
    slow_disk_for_ms: tuple[int, int] = (500, 4_000)


# -- packets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FetchCall:
    source_id: int
    destination_id: int
    call_id: int
    request: ReplicaFetchRequest


@dataclass(frozen=True)
class FetchReply:
    source_id: int
    destination_id: int
    call_id: int
    leader: int
    results: dict[TopicPartition, LeaderFetchResult]


@dataclass(frozen=True)
class AlterPartitionCall:
    source_id: int
    destination_id: int
    broker_epoch: int
    change: AlterPartitionState
    call_id: int


@dataclass
class _AlterInFlight:
    change: AlterPartitionState
    on_done: Callable[[AlterPartitionResult], None]
    still_wanted: Callable[[], bool]
    call_id: int = 0


@dataclass(frozen=True)
class ProduceCall:
    source_id: int
    destination_id: int
    call_id: int
    tp: TopicPartition
    value: bytes


@dataclass(frozen=True)
class ProduceReply:
    source_id: int
    destination_id: int
    call_id: int
    tp: TopicPartition
    value: bytes
    offset: int  # -1 on error
    error: str = ""


@dataclass(frozen=True)
class ConsumeCall:
    source_id: int
    destination_id: int
    call_id: int
    tp: TopicPartition
    offset: int


@dataclass(frozen=True)
class ConsumeReply:
    source_id: int
    destination_id: int
    call_id: int
    tp: TopicPartition
    high_watermark: int
    records: tuple[tuple[int, bytes], ...]
    error: str = ""


@dataclass(frozen=True)
class PendingProduce:
    """An acks=all append waiting on its leader for the in-sync replicas."""

    call: ProduceCall
    end_offset: int
    leader_epoch: int
    deadline_ms: int


def read_values(log_read: bytes) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value or b"") for b in decode_batches(log_read) for r in b.records]


class SimAlterPartition:
    """The broker's AlterPartitionManager on the simulated network: one change in flight per
    partition, sent again after a timeout without a definite answer for as long as the
    leader still wants it (the answer may have been lost after the controller committed)."""

    def __init__(self, sim: ReplicationSimulation, broker_id: int) -> None:
        self.sim = sim
        self.broker_id = broker_id
        self.in_flight: dict[TopicPartition, _AlterInFlight] = {}

    def submit(
        self,
        tp: TopicPartition,
        change: AlterPartitionState,
        on_done: Callable[[AlterPartitionResult], None],
        still_wanted: Callable[[], bool],
    ) -> bool:
        if tp in self.in_flight or self.sim.brokers[self.broker_id].lifecycle.broker_epoch < 0:
            return False
        self.in_flight[tp] = _AlterInFlight(change, on_done, still_wanted)
        self._send(tp)
        return True

    def _send(self, tp: TopicPartition) -> None:
        f = self.in_flight[tp]
        f.call_id = -1 - next(self.sim._ids)  # apart from the lifecycle's call ids
        self.sim._push(
            self.sim.now + self.sim.data_options.request_timeout_ms,
            "alter-timeout",
            (self.broker_id, tp, f.call_id),
        )
        b = self.sim.brokers[self.broker_id]
        leader = b.raft.leader_id
        if leader is None or leader not in self.sim.controllers:
            return  # sent again at the timeout
        self.sim.log(f"{self.broker_id} AlterPartition {tp} isr={f.change.new_isr}")
        call = AlterPartitionCall(
            self.broker_id, leader, b.lifecycle.broker_epoch, f.change, f.call_id
        )
        self.sim._send(call)  # type: ignore[arg-type]

    def on_timeout(self, tp: TopicPartition, call_id: int) -> None:
        f = self.in_flight.get(tp)
        if f is None or f.call_id != call_id:
            return
        if not f.still_wanted():
            del self.in_flight[tp]
            return
        self._send(tp)

    def on_reply(self, call_id: int, result: object) -> bool:
        """Whether ``call_id`` was one of this manager's calls."""
        tp = next((tp for tp, f in self.in_flight.items() if f.call_id == call_id), None)
        if tp is None:
            return call_id < 0
        f = self.in_flight[tp]
        if isinstance(result, KafkaError):
            if result.retriable:
                return True  # sent again at the timeout
            answer = AlterPartitionResult(f.change.topic_id, f.change.partition, error=result)
        else:
            assert isinstance(result, list)
            answer = result[0]
        del self.in_flight[tp]
        f.on_done(answer)
        return True


class DataBroker:
    """The data plane of one broker: its logs, replicas, and one fetcher per leader."""

    def __init__(self, sim: ReplicationSimulation, node_id: int, root: Path) -> None:
        self.node_id = node_id
        self.root = root
        self.log_manager = LogManager([root], clock=lambda: sim.now)
        self.log_manager.startup()
        self.alter = SimAlterPartition(sim, node_id)
        self.replicas = ReplicaManager(
            node_id,
            self.log_manager,
            lambda: sim.now,
            self.alter,  # type: ignore[arg-type]
        )
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # leader -> the fetch out to it: (call id, request)
        self.in_flight: dict[int, tuple[int, ReplicaFetchRequest]] = {}
        self.crashed = False

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self.replicas.partitions.get(tp)

    def crash(self, power_loss: random.Random | None = None) -> None:
        """As kill -9: nothing is checkpointed or marked clean; the written bytes stay. With
        ``power_loss`` (its random choices), the bytes past each log's recovery point (what
        was never fsynced) are lost too: all, none, or from a random byte on."""
        flushed = {p.log.dir: p.log.recovery_point for p in self.replicas.partitions.values()}
        for p in self.replicas.partitions.values():
            p.log.close()
        if power_loss is not None:
            for log_dir, recovery_point in flushed.items():
                lose_unflushed(Path(log_dir), recovery_point, power_loss)
        # A crash skips the orderly shutdown: only the directory locks go (the process's
        # file descriptors close when it dies).
        self.log_manager._logs.clear()
        self.log_manager._dirs = []
        self.log_manager._release_locks()
        self.crashed = True


class ReplicationSimulation(ClusterSimulation):
    def __init__(
        self,
        seed: int,
        options: ReplicationOptions | None = None,
        trace: object = None,
    ) -> None:
        self.data_options = options or ReplicationOptions()
        # The logs are real files; on tmpfs when there is one, since the simulated disk,
        # not the machine's, decides what survives a crash.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self._tmp = Path(tempfile.mkdtemp(prefix=f"rillet-sim-{seed}-", dir=shm))
        self.data: dict[int, DataBroker] = {}
        self.restarts: dict[int, int] = {}
        super().__init__(seed, self.data_options.cluster, trace=trace)  # type: ignore[arg-type]
        for b in self.brokers.values():
            self._attach(b)
        self._ids = itertools.count()
        self.topic_created = False
        # Safety state.
        self.defined: dict[TopicPartition, dict[int, bytes]] = {}
        self.checked: dict[tuple[int, TopicPartition], int] = {}
        self.leaders: dict[tuple[TopicPartition, int], int] = {}
        self.pending: dict[int, list[PendingProduce]] = {}
        self.acked: dict[TopicPartition, dict[int, bytes]] = {}
        self.consumed: dict[TopicPartition, dict[int, bytes]] = {}
        self.positions: dict[TopicPartition, int] = {}
        self.produced = 0
        self.faults_on = True
        self.producing = True
        # Paused nodes (SIGSTOP): node -> when it resumes. Nothing runs on it meanwhile; what
        # is sent to it waits, and its timers fire late, all at once, when it resumes.
        self.paused: dict[int, int] = {}
        # Brokers whose disk is slow: node -> (until when, extra ms per disk access).
        self.slow_disks: dict[int, tuple[int, int]] = {}
        self._disk_waited: set[int] = set()  # id() of packets already held for a slow disk
        self.recovering_power_loss = False  # a broker lost power and is not back in sync
        # The topic is made on a healthy cluster; faults start once it exists.
        self._push(self.now + 100, "create")
        self._push(self.now + 100, "produce")
        self._push(self.now + 100, "consume")

    def close(self) -> None:
        for d in self.data.values():
            if not d.crashed:
                d.crash()
        shutil.rmtree(self._tmp, ignore_errors=True)

    # -- brokers ---------------------------------------------------------------------------

    def _attach(self, b: Broker) -> None:
        d = DataBroker(self, b.node_id, self._tmp / f"broker{b.node_id}")
        self.data[b.node_id] = d
        b.publisher = MetadataPublisher(d.replicas, d.log_manager, held=True)
        self._push(self.now + self.data_options.fetch_idle_ms, "fetch", b.node_id)

    def crash_broker(self, node_id: int, downtime_ms: int, *, power_loss: bool = False) -> None:
        what = "power loss on" if power_loss else "crash"
        self.log(f"{what} broker {node_id} for {downtime_ms} ms")
        self.paused.pop(node_id, None)  # a stopped process can be killed too
        self.data[node_id].crash(self.rng if power_loss else None)
        self.pending.pop(node_id, None)  # a dead broker answers nothing
        self._tick_at.pop(node_id, None)
        self._lifecycle_at.pop(node_id, None)
        self._push(self.now + downtime_ms, "restart", node_id)

    def _restart(self, node_id: int) -> None:
        if self.alive(node_id):
            return  # already restarted (healing does not wait for the downtime)
        self.log(f"restart broker {node_id}")
        n = self.restarts[node_id] = self.restarts.get(node_id, 0) + 1
        b = Broker(self, node_id)
        b.lifecycle = BrokerLifecycle(
            node_id,
            uuid.UUID(int=node_id * 1000 + n),
            self.options.heartbeat_interval_ms,
            self.now,
            ready_to_unfence=False,
        )
        self.brokers[node_id] = b
        self.images.pop(node_id, None)  # a new process starts from an empty image
        self._attach(b)
        b.raft.tick(self.now)
        self._after_raft(node_id)
        self._lifecycle_at[node_id] = self.now
        self._push(self.now, "lifecycle", node_id)

    def alive(self, node_id: int) -> bool:
        d = self.data.get(node_id)
        return d is None or not d.crashed

    # -- events ----------------------------------------------------------------------------

    def _owner(self, event: _Event) -> int | None:
        """The node an event runs on (None: the clients or the simulation itself)."""
        if event.kind == "deliver":
            return int(event.data.destination_id)  # type: ignore[attr-defined]
        if event.kind in ("tick", "lifecycle", "fetch", "expire"):
            return event.data  # type: ignore[return-value]
        if event.kind in ("fetch-timeout", "alter-timeout"):
            return event.data[0]  # type: ignore[index,no-any-return]
        return None

    def pause(self, node_id: int, duration_ms: int) -> None:
        if node_id in self.paused:
            return
        self.log(f"pause {node_id} for {duration_ms} ms")
        self.paused[node_id] = self.now + duration_ms
        self._push(self.now + duration_ms, "resume", node_id)

    def _resume(self, node_id: int) -> None:
        if self.paused.pop(node_id, None) is None:
            return
        self.log(f"resume {node_id}")
        # Its timers were due while it was stopped: they fire now.
        self._tick_at[node_id] = self.now
        self._push(self.now, "tick", node_id)
        if node_id in self.brokers and self.alive(node_id):
            self._lifecycle_at[node_id] = self.now
            self._push(self.now, "lifecycle", node_id)

    def _dispatch(self, event: _Event) -> None:
        kind = event.kind
        owner = self._owner(event)
        if owner is not None and owner in self.paused:
            if kind not in ("tick", "lifecycle"):  # those are re-armed on resume
                self._push(self.paused[owner], kind, event.data)
            return
        if kind == "resume":
            assert isinstance(event.data, int)
            self._resume(event.data)
            return
        if kind == "deliver":
            self._deliver(event.data)  # type: ignore[arg-type]
        elif kind == "fetch":
            assert isinstance(event.data, int)
            if self.alive(event.data):
                self._fetch_round(self.data[event.data])
        elif kind == "create":
            self._maybe_create_topic()
            if not self.topic_created:
                self._push(self.now + 100, "create")
            else:
                delay = self.rng.randint(*self.data_options.fault_interval_ms)
                self._push(self.now + delay, "fault")
        elif kind == "produce":
            if self.producing:
                self._produce()
            self._push(self.now + self.data_options.produce_interval_ms, "produce")
        elif kind == "consume":
            self._consume()
            self._push(self.now + self.data_options.consume_interval_ms, "consume")
        elif kind == "fault":
            if self.faults_on:
                self._inject_fault()
                self._push(
                    self.now + self.rng.randint(*self.data_options.fault_interval_ms), "fault"
                )
        elif kind == "restart":
            assert isinstance(event.data, int)
            self._restart(event.data)
        elif kind == "fetch-timeout":
            node_id, leader, call_id = event.data  # type: ignore[misc]
            self._fetch_timeout(node_id, leader, call_id)
        elif kind == "alter-timeout":
            node_id, tp, call_id = event.data  # type: ignore[misc]
            if self.alive(node_id):
                self.data[node_id].alter.on_timeout(tp, call_id)
        elif kind == "expire":
            assert isinstance(event.data, int)
            self._expire_produce(event.data)
        elif kind in ("tick", "lifecycle") and not self.alive(event.data):  # type: ignore[arg-type]
            return
        else:
            super()._dispatch(event)

    def _deliver(self, packet: Packet) -> None:  # type: ignore[override]
        p: object = packet
        if not self.alive(packet.destination_id):
            return
        if (packet.source_id, packet.destination_id) in self.blocked:
            return
        if self._held_for_slow_disk(p):
            return
        if isinstance(p, FetchCall):
            self._serve_fetch(p)
        elif isinstance(p, FetchReply):
            self._on_fetch_reply(p)
        elif isinstance(p, AlterPartitionCall):
            self._serve_alter_partition(p)
        elif isinstance(p, LifecycleReply) and self.data[p.destination_id].alter.on_reply(
            p.call_id, p.result
        ):
            pass
        elif isinstance(p, ProduceCall):
            self._serve_produce(p)
        elif isinstance(p, ProduceReply):
            self._on_produce_reply(p)
        elif isinstance(p, ConsumeCall):
            self._serve_consume(p)
        elif isinstance(p, ConsumeReply):
            self._on_consume_reply(p)
        else:
            super()._deliver(packet)

    def _held_for_slow_disk(self, packet: object) -> bool:
        """A request that reads or writes the logs of a broker with a slow disk is handled
        that much later (once; the packet is then marked)."""
        if not isinstance(packet, FetchCall | FetchReply | ProduceCall | ConsumeCall):
            return False
        if id(packet) in self._disk_waited:
            self._disk_waited.discard(id(packet))
            return False
        slow = self.slow_disks.get(packet.destination_id)
        if slow is None or slow[0] <= self.now:
            self.slow_disks.pop(packet.destination_id, None)
            return False
        self._disk_waited.add(id(packet))
        self._push(self.now + slow[1], "deliver", packet)
        return True

    def isolate(self, node_id: int) -> None:
        super().isolate(node_id)
        ids = [*self.controller_ids, *self.broker_ids, CLIENT]
        self.blocked |= {(a, node_id) for a in ids if a != node_id}
        self.blocked |= {(node_id, a) for a in ids if a != node_id}

    def _after_raft(self, node_id: int) -> None:
        super()._after_raft(node_id)
        d = self.data.get(node_id) if hasattr(self, "data") else None
        if d is not None and not d.crashed:
            self._sync_fetchers(d)

    # -- follower fetching -----------------------------------------------------------------

    def _sync_fetchers(self, d: DataBroker) -> None:
        """Each followed partition in the fetcher of its current leader and epoch."""
        want: dict[int, dict[TopicPartition, int]] = {}
        for tp, p in d.replicas.partitions.items():
            if not p.is_leader and p.leader_id >= 0:
                want.setdefault(p.leader_id, {})[tp] = p.leader_epoch
        for leader, f in d.fetchers.items():
            stale = [tp for tp in f.partitions if want.get(leader, {}).get(tp) is None]
            f.remove_partitions(stale)
        for leader, parts in want.items():
            f = d.fetchers.get(leader)
            if f is None:
                f = d.fetchers[leader] = ReplicaFetcher(
                    f"sim {d.node_id}<-{leader}",
                    d.node_id,
                    leader,
                    None,  # type: ignore[arg-type]  # the simulator carries its requests
                    d.partition,
                    lambda b=d.node_id: self.brokers[b].lifecycle.broker_epoch,
                    lambda: self.now,
                    FetcherConfig(backoff_ms=100),
                )
            changed = {
                tp: e
                for tp, e in parts.items()
                if f.partitions.get(tp) is None or f.partitions[tp].leader_epoch != e
            }
            if changed:
                f.add_partitions(changed)

    def _fetch_round(self, d: DataBroker) -> None:
        """Send each fetcher's request (one in flight per leader); come back soon."""
        d.replicas.maybe_shrink_isrs(self.data_options.replica_lag_time_max_ms)
        for leader, f in d.fetchers.items():
            if leader in d.in_flight:
                continue
            request = f.build_request(self.now)
            if request is None:
                continue
            call_id = next(self._ids)
            d.in_flight[leader] = (call_id, request)
            self._send(FetchCall(d.node_id, leader, call_id, request))  # type: ignore[arg-type]
            self._push(
                self.now + self.data_options.request_timeout_ms,
                "fetch-timeout",
                (d.node_id, leader, call_id),
            )
        self._push(self.now + self.data_options.fetch_idle_ms, "fetch", d.node_id)

    def _fetch_timeout(self, node_id: int, leader: int, call_id: int) -> None:
        d = self.data[node_id]
        out = d.in_flight.get(leader)
        if out is not None and out[0] == call_id and not d.crashed:
            del d.in_flight[leader]
            f = d.fetchers.get(leader)
            if f is not None:
                for tp in out[1].partitions:
                    state = f.partitions.get(tp)
                    if state is not None:
                        state.delayed_until_ms = self.now + f.config.backoff_ms

    def _serve_fetch(self, call: FetchCall) -> None:
        leader = self.data[call.destination_id]
        wanted = {
            tp: FetchPartition(
                p.fetch_offset, p.max_bytes, p.current_leader_epoch, p.last_fetched_epoch
            )
            for tp, p in call.request.partitions.items()
        }
        got = leader.replicas.read(wanted, call.request.replica_id, call.request.max_bytes)
        results = {
            tp: LeaderFetchResult(
                r.error,
                r.high_watermark,
                r.log_start_offset,
                r.diverging_epoch,
                r.data.read_all() if r.data is not None and r.size else b"",
            )
            for tp, r in got.items()
        }
        self._complete_produces(leader)
        reply = FetchReply(
            call.destination_id, call.source_id, call.call_id, call.destination_id, results
        )
        self._send(reply)  # type: ignore[arg-type]

    def _on_fetch_reply(self, reply: FetchReply) -> None:
        d = self.data[reply.destination_id]
        out = d.in_flight.get(reply.leader)
        if out is None or out[0] != reply.call_id:
            return
        del d.in_flight[reply.leader]
        f = d.fetchers.get(reply.leader)
        if f is not None:
            f.handle_response(out[1], reply.results, self.now)

    # -- ISR changes -----------------------------------------------------------------------

    def _serve_alter_partition(self, call: AlterPartitionCall) -> None:
        c = self.controllers[call.destination_id]
        if not c.raft.leader_ready:
            self._reply(c, call.source_id, call.call_id, NotControllerError("not active"))
            return
        try:
            result = c.controller.alter_partition(call.source_id, call.broker_epoch, [call.change])
        except KafkaError as e:
            self.log(f"controller {c.node_id}: AlterPartition from {call.source_id}: {e}")
            self._reply(c, call.source_id, call.call_id, e)
            return
        for r in result.response:
            if r.error is not None:
                self.log(f"controller {c.node_id}: AlterPartition from {call.source_id}: {r.error}")
        reply = LifecycleReply(c.node_id, call.source_id, call.call_id, result.response)  # type: ignore[arg-type]
        self._write(c, result, reply)  # type: ignore[arg-type]

    def _maybe_create_topic(self) -> None:
        if self.topic_created:
            return
        c = self.active_controller()
        if c is None:
            return
        unfenced = [b for b in c.controller.committed.brokers.values() if not b.fenced]
        if len(unfenced) < len(self.broker_ids):
            return
        result = c.controller.create_topics(
            [
                CreatableTopic(
                    TOPIC,
                    self.data_options.partitions,
                    len(self.broker_ids),
                    configs={"min.insync.replicas": str(self.data_options.min_insync_replicas)},
                )
            ]
        )
        if result.response[0].error is None:
            self.topic_created = True
            self.log(f"controller {c.node_id} creates {TOPIC}")
            self._write(c, result, None)  # type: ignore[arg-type]

    # -- the producing client (acks=all) ---------------------------------------------------

    def _client_view_leader(self, tp: TopicPartition) -> int | None:
        """The leader as a random live broker's metadata says (it may be stale)."""
        live = [b for b in self.broker_ids if self.alive(b)]
        if not live:
            return None
        image = self.brokers[self.rng.choice(live)].publisher.image
        topic = image.topic(tp.topic)
        reg = topic.partitions.get(tp.partition) if topic is not None else None
        return reg.leader if reg is not None and reg.has_leader else None

    def _produce(self) -> None:
        if not self.topic_created:
            return
        tp = TopicPartition(TOPIC, self.produced % self.data_options.partitions)
        leader = self._client_view_leader(tp)
        if leader is None:
            return
        value = f"{tp.partition}-{self.produced}".encode()
        self.produced += 1
        self._send(ProduceCall(CLIENT, leader, next(self._ids), tp, value))  # type: ignore[arg-type]

    def _serve_produce(self, call: ProduceCall) -> None:
        d = self.data[call.destination_id]
        b = BatchBuilder()
        b.append(self.now, None, call.value)
        try:
            p = d.partition(call.tp)
            if p is None:
                raise NotLeaderOrFollowerError(f"{call.tp} is not here")
            info = p.append_records_to_leader(b.build(), -1)
        except KafkaError as e:
            self._reply_produce(d.node_id, call, -1, e.__class__.__name__)
            return
        self.log(
            f"{d.node_id} appends {call.value!r} at {info.first_offset} epoch {p.leader_epoch}"
        )
        deadline = self.now + self.data_options.request_timeout_ms
        self.pending.setdefault(d.node_id, []).append(
            PendingProduce(call, info.last_offset + 1, p.leader_epoch, deadline)
        )
        self._push(deadline, "expire", d.node_id)
        self._complete_produces(d)

    def _complete_produces(self, d: DataBroker) -> None:
        """Answer the acks=all appends whose records every in-sync replica now has, or that
        failed (the purgatory's check)."""
        waiting = self.pending.get(d.node_id)
        if not waiting or d.crashed:
            return
        keep = []
        for w in waiting:
            tp, value = w.call.tp, w.call.value
            p = d.partition(tp)
            try:
                if p is None:
                    raise NotLeaderOrFollowerError(f"{tp} left broker {d.node_id}")
                done = p.check_enough_replicas_reach_offset(w.end_offset, w.leader_epoch)
            except KafkaError as e:
                self._reply_produce(d.node_id, w.call, -1, e.__class__.__name__)
                continue
            if not done:
                keep.append(w)
                continue
            offset = w.end_offset - 1
            # Acknowledged: it must be at its offset below the HW, as the replicas agree.
            self._cover(d, tp)
            held = self.defined.get(tp, {}).get(offset)
            if held != value:
                self.fail(f"{d.node_id} acks {value!r} at {tp}@{offset}, which holds {held!r}")
            self._reply_produce(d.node_id, w.call, offset, "")
        self.pending[d.node_id] = keep

    def _expire_produce(self, node_id: int) -> None:
        if not self.alive(node_id):
            return
        keep = []
        for w in self.pending.get(node_id, []):
            if w.deadline_ms <= self.now:
                self._reply_produce(node_id, w.call, -1, "RequestTimedOutError")
            else:
                keep.append(w)
        self.pending[node_id] = keep

    def _reply_produce(self, node_id: int, call: ProduceCall, offset: int, error: str) -> None:
        reply = ProduceReply(node_id, CLIENT, call.call_id, call.tp, call.value, offset, error)
        self._send(reply)  # type: ignore[arg-type]

    def _on_produce_reply(self, reply: ProduceReply) -> None:
        if reply.offset >= 0:
            self.log(f"client: {reply.value!r} acked at {reply.tp}@{reply.offset}")
            self.acked.setdefault(reply.tp, {})[reply.offset] = reply.value

    # -- the consuming client --------------------------------------------------------------

    def _consume(self) -> None:
        if not self.topic_created:
            return
        for i in range(self.data_options.partitions):
            tp = TopicPartition(TOPIC, i)
            leader = self._client_view_leader(tp)
            if leader is not None:
                call = ConsumeCall(CLIENT, leader, next(self._ids), tp, self.positions.get(tp, 0))
                self._send(call)  # type: ignore[arg-type]

    def _serve_consume(self, call: ConsumeCall) -> None:
        d = self.data[call.destination_id]
        got = d.replicas.read({call.tp: FetchPartition(call.offset, 1 << 16)}, -1, 1 << 16)[call.tp]
        if got.error is not None:
            reply = ConsumeReply(d.node_id, CLIENT, call.call_id, call.tp, -1, (), str(got.error))
        else:
            data = got.data.read_all() if got.data is not None and got.size else b""
            records = tuple((o, v) for o, v in read_values(data) if o >= call.offset)
            for o, _v in records:
                if o >= got.high_watermark:
                    self.fail(
                        f"{d.node_id} returned {call.tp}@{o} above its HW {got.high_watermark}"
                    )
            self._cover(d, call.tp)
            for o, v in records:
                if self.defined.get(call.tp, {}).get(o) != v:
                    self.fail(
                        f"{d.node_id} returned {v!r} at {call.tp}@{o}, which holds "
                        f"{self.defined.get(call.tp, {}).get(o)!r}"
                    )
            reply = ConsumeReply(
                d.node_id, CLIENT, call.call_id, call.tp, got.high_watermark, records
            )
        self._send(reply)  # type: ignore[arg-type]

    def _on_consume_reply(self, reply: ConsumeReply) -> None:
        if reply.error:
            return
        consumed = self.consumed.setdefault(reply.tp, {})
        for o, v in reply.records:
            consumed[o] = v
            if o >= self.positions.get(reply.tp, 0):
                self.positions[reply.tp] = o + 1

    # -- faults ----------------------------------------------------------------------------

    def _inject_fault(self) -> None:
        roll = self.rng.random()
        live = [b for b in self.broker_ids if self.alive(b)]
        if self.recovering_power_loss and self._all_in_sync():
            self.recovering_power_loss = False
        if roll < 0.3 and len(live) == len(self.broker_ids) and not self.recovering_power_loss:
            victim = self.rng.choice(live)
            # A power loss takes what a broker never fsynced: only the other replicas keep
            # it. Until the broker is registered anew and back in every ISR, no other broker
            # fails (a second failure then, kill -9 or power, is beyond what replication
            # without fsync survives: Kafka has the same limit).
            power_loss = self.rng.random() < 0.4 and self._all_in_sync()
            self.recovering_power_loss = power_loss
            self.crash_broker(
                victim,
                self.rng.randint(*self.data_options.crash_downtime_ms),
                power_loss=power_loss,
            )
        elif roll < 0.38:
            victim = self.rng.choice(live)
            until = self.now + self.rng.randint(*self.data_options.slow_disk_for_ms)
            delay = self.rng.randint(*self.data_options.slow_disk_ms)
            self.slow_disks[victim] = (until, delay)
            self.log(f"slow disk on broker {victim}: +{delay} ms per access until {until}")
        elif roll < 0.55:
            self.isolate(self.rng.choice([*self.broker_ids, *self.controller_ids]))
        elif roll < 0.7:
            a, b = self.rng.sample([*self.broker_ids, *self.controller_ids], 2)
            self.blocked.add((a, b))  # one way only
            self.log(f"cut {a} -> {b}")
        elif roll < 0.8:
            victim = self.rng.choice([*live, *self.controller_ids])
            self.pause(victim, self.rng.randint(*self.data_options.pause_ms))
        else:
            self.heal()

    def _all_in_sync(self) -> bool:
        """Every partition's committed ISR holds all its replicas, all of them unfenced and
        registered by the process running now (not a session from before a restart)."""
        c = self.active_controller()
        if c is None:
            return False
        image = c.controller.committed
        topic = image.topic(TOPIC)
        if topic is None:
            return False
        return all(
            set(reg.isr) == set(reg.replicas)
            and all(
                b in image.brokers
                and not image.brokers[b].fenced
                and image.brokers[b].broker_epoch == self.brokers[b].lifecycle.broker_epoch
                for b in reg.replicas
            )
            for reg in topic.partitions.values()
        )

    # -- invariants ------------------------------------------------------------------------

    def _cover(self, d: DataBroker, tp: TopicPartition) -> None:
        """Compare (or define) the offsets below ``d``'s high watermark of ``tp``."""
        p = d.partition(tp)
        if p is None or d.crashed:
            return
        key = (d.node_id, tp)
        hw = p.high_watermark
        start = min(self.checked.get(key, 0), hw)
        start = max(start, p.log.log_start_offset)
        if hw > start:
            defined = self.defined.setdefault(tp, {})
            for o, v in read_values(p.log.read(start, 1 << 30, max_offset=hw).read_all()):
                if o < start or o >= hw:
                    continue
                have = defined.setdefault(o, v)
                if have != v:
                    self.fail(
                        f"broker {d.node_id} holds {v!r} at {tp}@{o} below its HW {hw}; "
                        f"another replica had {have!r}"
                    )
        self.checked[key] = hw

    def check(self) -> None:
        super().check()
        if not hasattr(self, "defined"):
            return
        for d in self.data.values():
            if d.crashed:
                continue
            for tp, p in d.replicas.partitions.items():
                if p.high_watermark != self.checked.get((d.node_id, tp)):
                    self._cover(d, tp)  # (an unchanged HW has nothing new to compare)
                if p.is_leader:
                    holder = self.leaders.setdefault((tp, p.leader_epoch), d.node_id)
                    if holder != d.node_id:
                        self.fail(
                            f"{tp}: brokers {holder} and {d.node_id} both lead epoch "
                            f"{p.leader_epoch}"
                        )

    # -- the run ---------------------------------------------------------------------------

    def heal_all(self) -> None:
        """No more faults or new records; restart every crashed broker."""
        self.faults_on = False
        self.producing = False
        self.heal()
        self.slow_disks.clear()
        for node in list(self.paused):
            self._resume(node)
        for b in self.broker_ids:
            if not self.alive(b):
                self._restart(b)

    def require_liveness(self, within_ms: int) -> None:
        def settled() -> bool:
            for tp in self.partitions():
                leader = self.leader_of(tp)
                if leader is None:
                    return False
                lp = self.data[leader].partition(tp)
                assert lp is not None
                if set(lp.isr) != set(self.broker_ids):
                    return False
                # Automatic preferred leader election has moved leadership back.
                if leader != lp.replicas[0]:
                    return False
                replicas = [self.data[b].partition(tp) for b in self.broker_ids]
                if any(r is None for r in replicas):
                    return False  # a restarted broker has not acted on the metadata yet
                ends = {r.log.log_end_offset for r in replicas if r is not None}
                if len(ends) != 1 or lp.high_watermark != lp.log.log_end_offset:
                    return False
            return True

        self.run_until_true(
            settled, within_ms, "every partition led by its preferred replica, fully in sync"
        )
        for tp in self.partitions():
            leader = self.leader_of(tp)
            assert leader is not None
            final = dict(read_values(self._read_all(self.data[leader], tp)))
            for o, v in self.acked.get(tp, {}).items():
                if final.get(o) != v:
                    self.fail(
                        f"acknowledged {v!r} at {tp}@{o} is not there (final: {final.get(o)!r})"
                    )
            for o, v in self.consumed.get(tp, {}).items():
                if final.get(o) != v:
                    self.fail(f"consumed {v!r} at {tp}@{o} is not there (final: {final.get(o)!r})")
            for b in self.broker_ids:
                if dict(read_values(self._read_all(self.data[b], tp))) != final:
                    self.fail(f"broker {b}'s log of {tp} differs from the leader's")
        # And the healed cluster takes new records.
        acked = sum(len(a) for a in self.acked.values())
        self.producing = True
        self.run_until_true(
            lambda: sum(len(a) for a in self.acked.values()) > acked,
            within_ms,
            "a record acknowledged after healing",
        )

    def _read_all(self, d: DataBroker, tp: TopicPartition) -> bytes:
        p = d.partition(tp)
        assert p is not None
        log = p.log
        if log.log_end_offset == log.log_start_offset:
            return b""
        return log.read(log.log_start_offset, 1 << 30).read_all()

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, i) for i in range(self.data_options.partitions)]

    def leader_of(self, tp: TopicPartition) -> int | None:
        for d in self.data.values():
            p = d.partition(tp)
            if not d.crashed and p is not None and p.is_leader:
                c = self.active_controller()
                reg = None
                if c is not None:
                    topic = c.controller.committed.topic(tp.topic)
                    reg = topic.partitions.get(tp.partition) if topic else None
                if (
                    reg is not None
                    and reg.leader == d.node_id
                    and reg.leader_epoch == p.leader_epoch
                ):
                    return d.node_id
        return None

    def summary(self) -> str:
        acked = sum(len(a) for a in self.acked.values())
        consumed = sum(len(c) for c in self.consumed.values())
        restarts = sum(self.restarts.values())
        return f"produced {self.produced}, acked {acked}, consumed {consumed}, restarts {restarts}"
