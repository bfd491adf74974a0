"""A seeded simulation of the transaction coordinator: transactional producers (some sharing a
transactional id: zombies), partition leaders that verify (KIP-890 part 1) and write markers,
and one ``TransactionCoordinatorShard`` behind a driver, over a lossy network with a virtual
clock.

Everything nondeterministic comes from one seed: delays and losses of messages, duplicated
and late answers (to producers, to partition leaders, and the marker acks the coordinator
gets), partition leaders answering NOT_LEADER_OR_FOLLOWER to markers, producers that die,
stall past their transaction timeout, or get a second live instance, the coordinator's clock
jumping forward (its timeout scan then aborts transactions), producer ids not available for a
while, and the coordinator moving or crashing: its shard is thrown away (on a move the
answers of uncommitted records are NOT_COORDINATOR, on a crash they and its marker requests
in flight are lost) and a new one loads by replaying the committed records at coordinator
epoch + 1. A request is delivered only while its sender still waits for it (a connection
closes on a request timeout, as Kafka's clients do), answers may be late or duplicated.

The driver honours the shard's contract: it appends an operation's records and, once those
and all earlier records are committed, sends its answer and its markers, split by partition
leader; each leader's answer goes back to the shard (a lost request as NETWORK_EXCEPTION).
Producers behave as Kafka's: InitProducerId (sometimes again with their own id and epoch),
AddPartitionsToTxn, sometimes AddOffsetsToTxn, a write to each partition (now and then to one
it did not add), EndTxn, retrying what is retriable, dying when fenced (a new instance
replaces it), aborting on TRANSACTION_ABORTABLE. A partition leader verifies a producer's
first write of a transaction with the coordinator and appends it only if no marker for the
producer came meanwhile (the verification guard).

Invariants (:class:`TxnInvariants`), checked as records commit, answers and markers leave, and
markers land, and after every event: every committed record of an id is a legal transition of
the one before (at most one transaction at a time, decided once: a Prepare* follows an
Ongoing, its Complete* matches it); producer id and epoch never go back, and no two producer
instances are granted the same epoch; a success answered to a producer is for the current
epoch (a fenced producer's requests are refused) and an EndTxn answered NONE has the outcome
asked for; a marker carries its transaction's decided outcome and is only sent once it is
committed; a marker closes at a partition only data of its own transaction; whenever nothing
is uncommitted, a shard rebuilt from the committed records matches the live one. After the
faults stop, producers finish their transactions: every Prepare* completes, nothing is left
open at any partition (liveness).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from rillet.coordinator import transaction as tx
from rillet.coordinator.transaction import TransactionState
from rillet.errors import (
    CoordinatorLoadInProgressError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    NetworkError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
)
from rillet.types import TopicPartition as TP

S = TransactionState
COORDINATOR = "coordinator"
BROKERS = ("broker-0", "broker-1")
DATA = (TP("foo", 0), TP("foo", 1), TP("bar", 0), TP("bar", 1))
GROUPS = ("g-a", "g-b", "g-c")
TICK_MS = 50
BACKOFF_MS = 100
RETRY = {
    "CONCURRENT_TRANSACTIONS",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_COORDINATOR",
    "REQUEST_TIMED_OUT",
    "NOT_LEADER_OR_FOLLOWER",
}
FENCED = {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_PRODUCER_ID_MAPPING"}


class InvariantViolation(AssertionError):
    """A safety or liveness property failed."""


@dataclass(frozen=True)
class TxnSimOptions:
    transactional_ids: int = 3
    txn_timeout_ms: int = 3_000
    request_timeout_ms: int = 800
    max_delay_ms: int = 30
    drop_rate: float = 0.02
    dup_rate: float = 0.05
    marker_error_rate: float = 0.1
    append_ms: tuple[int, int] = (1, 15)
    fault_interval_ms: int = 1_500
    fault_phase_ms: int = 15_000
    liveness_ms: int = 60_000
    expiration_ms: int = 12_000

    @classmethod
    def for_seed(cls, seed: int) -> TxnSimOptions:
        r = random.Random(seed * 7919 + 11)
        return cls(
            transactional_ids=r.randint(2, 4),
            max_delay_ms=r.choice([5, 30, 120]),
            drop_rate=r.choice([0.0, 0.02, 0.1]),
            dup_rate=r.choice([0.0, 0.05, 0.3]),
            marker_error_rate=r.choice([0.0, 0.1, 0.4]),
            append_ms=r.choice([(1, 5), (1, 40)]),
            fault_interval_ms=r.choice([600, 1_500, 3_000]),
        )

    def coordinator_config(self) -> tx.TransactionCoordinatorConfig:
        return tx.TransactionCoordinatorConfig(
            transaction_state_log_num_partitions=1,
            transaction_max_timeout_ms=60_000,
            transactional_id_expiration_ms=self.expiration_ms,
            abort_timed_out_transactions_interval_ms=500,
            remove_expired_transactional_ids_interval_ms=2_000,
            offsets_topic_num_partitions=3,
        )


def broker_of(tp: TP) -> str:
    return BROKERS[(tp.partition + len(tp.topic)) % len(BROKERS)]


class Message(NamedTuple):
    src: str
    dst: str
    kind: str
    rid: int
    body: Any
    extra: Any = None


class _Event(NamedTuple):
    time: int
    seq: int
    kind: str
    data: Any = None


@dataclass
class MarkerRequest:
    """A WriteTxnMarkers request in flight: the marker, the partitions of one leader."""

    incarnation: int
    marker: tx.TxnMarker
    partitions: tuple[TP, ...]
    answered: bool = False
    timed_out: bool = False


class Coordinator:
    """The broker leading ``__transaction_state``-0: the shard while up, the committed
    records, the operations whose records are not committed yet (with what to send once
    they are), marker requests in flight, and its clock's skew."""

    def __init__(self) -> None:
        self.shard: tx.TransactionCoordinatorShard | None = None
        self.incarnation = 0
        self.committed: list[tuple[bytes, bytes | None]] = []
        self.pending: deque[tuple[tx.CoordinatorResult[Any], list[Message]]] = deque()
        self.ready_at = 0
        self.tick_at: int | None = None
        self.marker_requests: dict[int, MarkerRequest] = {}
        self.skew_ms = 0


@dataclass
class Open:
    """A transaction open at a partition: its producer epoch and the coordinator's
    transaction (the id's span number) its first write was verified into."""

    tid: str
    epoch: int
    span: int


@dataclass
class Entry:
    """A partition leader's state of one producer id (Kafka's ProducerStateEntry)."""

    epoch: int = -1
    coordinator_epoch: int = -1
    markers: int = 0
    open: Open | None = None


class Broker:
    """The leader of some partitions: verifies first writes, appends, writes markers."""

    def __init__(self, sim: TxnSimulation, name: str) -> None:
        self.sim, self.name = sim, name
        self.entries: dict[TP, dict[int, Entry]] = {}
        self.verifying: dict[int, tuple[Message, int]] = {}  # vid -> produce, markers then

    def entry(self, tp: TP, producer_id: int) -> Entry:
        return self.entries.setdefault(tp, {}).setdefault(producer_id, Entry())

    def on_message(self, m: Message) -> None:
        if m.kind == "produce":
            self.produce(m)
        elif m.kind == "verify-response":
            self.on_verified(m.rid, m.body, m.extra)
        elif m.kind == "markers":
            marker, partitions = m.body
            errors = {tp: self.write_marker(tp, marker, m.extra) for tp in partitions}
            self.sim.send(self.name, COORDINATOR, "markers-response", m.rid, errors)

    def produce(self, m: Message) -> None:
        tid, producer_id, epoch, tp = m.body
        entry = self.entry(tp, producer_id)
        if epoch < entry.epoch:
            return self.answer(m, InvalidProducerEpochError(f"{epoch} < {entry.epoch}"))
        if entry.open is not None:
            if entry.open.epoch != epoch:
                self.sim.invariants.fail(f"{tp}: epoch {epoch} writes into {entry.open}")
            return self.answer(m, None)
        vid = self.sim.next_id()
        self.verifying[vid] = (m, entry.markers)
        request = tx.AddPartitionsToTxnRequest(tid, producer_id, epoch, (tp,), verify_only=True)
        self.sim.send(self.name, COORDINATOR, "verify", vid, request)
        timeout = self.sim.options.request_timeout_ms
        self.sim.push(self.sim.now + timeout, "verify-timeout", (self, vid))

    def on_verified(self, vid: int, response: tx.AddPartitionsToTxnResponse, span: int) -> None:
        waiting = self.verifying.pop(vid, None)
        if waiting is None:
            return
        m, markers_then = waiting
        tid, producer_id, epoch, tp = m.body
        if response.error is not None:
            return self.answer(m, response.error)
        entry = self.entry(tp, producer_id)
        if entry.markers != markers_then:  # a marker came meanwhile: the guard is gone
            return self.answer(m, InvalidTxnStateError("verification guard cleared"))
        if epoch < entry.epoch:
            return self.answer(m, InvalidProducerEpochError(f"{epoch} < {entry.epoch}"))
        if entry.open is None:
            entry.open = Open(tid, epoch, span)
            self.sim.log(f"{tp} opens {tid} span {span} for {producer_id}/{epoch}")
        elif (entry.open.epoch, entry.open.span) != (epoch, span):
            self.sim.invariants.fail(f"{tp}: verified into span {span}, open {entry.open}")
        entry.epoch = max(entry.epoch, epoch)
        self.answer(m, None)

    def on_verify_timeout(self, vid: int) -> None:
        waiting = self.verifying.pop(vid, None)
        if waiting is not None:
            self.answer(waiting[0], RequestTimedOutError("verification timed out"))

    def answer(self, m: Message, error: KafkaError | None) -> None:
        self.sim.send(self.name, m.src, "response", m.rid, error)

    def write_marker(self, tp: TP, marker: tx.TxnMarker, span: int) -> KafkaError | None:
        if self.sim.rng.random() < self.sim.marker_error_rate:
            return NotLeaderOrFollowerError("the leader moved")
        entry = self.entry(tp, marker.producer_id)
        if marker.producer_epoch < entry.epoch:
            return InvalidProducerEpochError(f"{marker.producer_epoch} < {entry.epoch}")
        if marker.coordinator_epoch < entry.coordinator_epoch:
            return TransactionCoordinatorFencedError(f"{marker.coordinator_epoch}")
        if entry.open is not None:
            self.sim.invariants.on_marker_closes(tp, entry.open, marker, span)
            entry.open = None
        entry.epoch, entry.coordinator_epoch = marker.producer_epoch, marker.coordinator_epoch
        entry.markers += 1
        return None

    def open_transactions(self) -> list[tuple[TP, Open]]:
        return [(tp, e.open) for tp, es in self.entries.items() for e in es.values() if e.open]


class Producer:
    """One process of a transactional producer (see the module doc). States: ``init`` ->
    ``ready`` -> ``adding`` (-> ``offsets``) -> ``producing`` -> ``ending`` -> ``ready``; a
    draining producer goes ``idle`` instead of beginning a transaction."""

    def __init__(self, sim: TxnSimulation, tid: str, incarnation: int) -> None:
        self.sim, self.tid = sim, tid
        self.name = f"{tid}.{incarnation}"
        self.alive = True
        self.state = "init"
        self.producer_id = self.epoch = -1
        self.reinit_with_own_epoch = False
        self.inflight: dict[int, tuple[str, int, Any]] = {}  # rid -> kind, sent at, request
        self.retry_at = sim.now
        self.partitions: tuple[TP, ...] = ()
        self.group: str | None = None
        self.to_write: set[TP] = set()
        self.commit = True

    def busy(self, kind: str) -> bool:
        return any(k == kind for k, _, _ in self.inflight.values())

    def send(self, kind: str, request: Any, dst: str = COORDINATOR) -> None:
        rid = self.sim.next_id()
        self.inflight[rid] = (kind, self.sim.now, request)
        self.sim.send(self.name, dst, kind, rid, request)

    def tick(self) -> None:
        timeout = self.sim.options.request_timeout_ms
        for rid in [r for r, (_, at, _) in self.inflight.items() if self.sim.now - at >= timeout]:
            del self.inflight[rid]  # given up: resent below
        if self.sim.now < self.retry_at:
            return
        tid, pid, epoch = self.tid, self.producer_id, self.epoch
        if self.state == "init" and not self.inflight:
            own = (pid, epoch) if self.reinit_with_own_epoch else (-1, -1)
            self.send("init", tx.InitProducerIdRequest(tid, self.sim.options.txn_timeout_ms, *own))
        elif self.state == "ready":
            self.begin()
        elif self.state == "adding" and not self.inflight:
            self.send("add", tx.AddPartitionsToTxnRequest(tid, pid, epoch, self.partitions))
        elif self.state == "offsets" and not self.inflight:
            assert self.group is not None
            self.send("offsets", tx.AddOffsetsToTxnRequest(tid, pid, epoch, self.group))
        elif self.state == "producing":
            for tp in sorted(self.to_write):
                if not any(k == "produce" and r[3] == tp for k, _, r in self.inflight.values()):
                    self.send("produce", (tid, pid, epoch, tp), broker_of(tp))
            if not self.to_write:
                self.state, self.commit = "ending", self.sim.rng.random() < 0.8
        if self.state == "ending" and not self.inflight:
            self.send("end", tx.EndTxnRequest(tid, pid, epoch, self.commit))

    def begin(self) -> None:
        rng = self.sim.rng
        if self.sim.draining:
            self.state = "idle"
        elif rng.random() < 0.1:
            self.state, self.reinit_with_own_epoch = "init", True
        else:
            self.partitions = tuple(sorted(rng.sample(DATA, rng.randint(1, 3))))
            self.group = rng.choice(GROUPS) if rng.random() < 0.3 else None
            self.to_write = set(self.partitions)
            if rng.random() < 0.05:  # a stray write to a partition it did not add
                self.to_write.add(rng.choice(DATA))
            self.state = "adding"

    def on_response(self, kind: str, request: Any, response: Any) -> None:
        error: KafkaError | None = response if kind == "produce" else response.error
        name = None if error is None else error.name
        if name in RETRY:
            self.retry_at = self.sim.now + BACKOFF_MS
        elif name in FENCED:
            self.sim.kill(self, name or "")
        elif kind == "init" and name is None and self.state == "init":
            self.producer_id, self.epoch = response.producer_id, response.producer_epoch
            self.state, self.reinit_with_own_epoch = "ready", False
        elif kind == "add" and name is None and self.state == "adding":
            self.state = "offsets" if self.group else "producing"
        elif kind == "offsets" and name is None and self.state == "offsets":
            self.state = "producing"
        elif kind == "produce" and name is None:
            self.to_write.discard(request[3])
        elif kind == "produce" and name in ("TRANSACTION_ABORTABLE", "INVALID_TXN_STATE"):
            if self.state == "producing":
                self.inflight.clear()
                self.state, self.commit = "ending", False
        elif kind == "end" and name is None and self.state == "ending":
            self.state = "ready"
        elif name is not None:
            self.sim.invariants.fail(f"{self.name} got {name} for {kind} in state {self.state}")


class TxnInvariants:
    """The safety properties of the module doc."""

    def __init__(self, sim: TxnSimulation) -> None:
        self.sim = sim
        self.committed: dict[str, tx.TransactionLogValue | None] = {}
        self.spans: dict[str, int] = {}  # transactional id -> its transactions so far
        self.decided: dict[tuple[str, int], bool] = {}  # (id, span) -> committed
        self.grants: dict[str, tuple[tuple[int, int], str]] = {}

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"t={self.sim.now}ms: {message}")

    def on_committed(self, record: tx.TransactionRecord) -> None:
        tid, value = record.transactional_id, record.value
        before = self.committed.get(tid)
        if value is None:
            if before is None or not S.from_id(before.transaction_status).is_expiration_allowed:
                self.fail(f"{tid} expired while {before}")
            self.committed[tid] = None
            return
        state = S.from_id(value.transaction_status)
        previous = S.EMPTY if before is None else S.from_id(before.transaction_status)
        if previous not in state.valid_previous_states:
            self.fail(f"{tid}: committed {state} after {previous}")
        if before is not None and (value.producer_id, value.producer_epoch) < (
            before.producer_id,
            before.producer_epoch,
        ):
            self.fail(f"{tid}: epoch went back {before} -> {value}")
        if state is S.ONGOING and previous is not S.ONGOING:
            self.spans[tid] = self.spans.get(tid, 0) + 1
        if state.is_prepare:
            self.decided[(tid, self.spans[tid])] = state is S.PREPARE_COMMIT
        self.committed[tid] = value

    def current(self, tid: str) -> tuple[TransactionState | None, int, int]:
        value = self.committed.get(tid)
        if value is None:
            return None, -1, -1
        return S.from_id(value.transaction_status), value.producer_id, value.producer_epoch

    def on_released(self, m: Message, request: Any) -> None:
        """An answer leaves the coordinator (its records, and all before, committed)."""
        response = m.body
        if m.kind not in ("response", "verify-response") or response.error is not None:
            return
        state, pid, epoch = self.current(request.transactional_id)
        if m.kind == "verify-response" and state is not S.ONGOING:
            self.fail(f"{request} verified while the id is {state}")
        if isinstance(request, tx.InitProducerIdRequest):
            asked = (response.producer_id, response.producer_epoch)
            self.on_grant(request.transactional_id, m.dst, asked)
        else:
            asked = (request.producer_id, request.producer_epoch)
        if asked != (pid, epoch):
            self.fail(f"{m.dst} got a success for {asked}, the id is at {(pid, epoch)}")
        if isinstance(request, tx.EndTxnRequest):
            wanted = (
                {S.PREPARE_COMMIT, S.COMPLETE_COMMIT}
                if request.committed
                else {S.PREPARE_ABORT, S.COMPLETE_ABORT}
            )
            if state not in wanted:
                self.fail(f"{m.dst}'s EndTxn(commit={request.committed}) answered in {state}")

    def on_grant(self, tid: str, instance: str, grant: tuple[int, int]) -> None:
        """Grants leave in increasing order, and no two instances share one (a retry of
        the same instance may get its grant again)."""
        best = self.grants.get(tid)
        if best is not None and (grant < best[0] or (grant == best[0] and best[1] != instance)):
            self.fail(f"{instance} granted {grant} after {best}")
        self.grants[tid] = (grant, instance)

    def on_marker_sent(self, marker: tx.TxnMarker) -> int:
        """A marker leaves: its outcome is committed and is the transaction's. Its span."""
        tid = marker.transactional_id
        state, pid, epoch = self.current(tid)
        prepare = S.PREPARE_COMMIT if marker.committed else S.PREPARE_ABORT
        if (state, pid, epoch) != (prepare, marker.producer_id, marker.producer_epoch):
            self.fail(f"marker {marker} sent while {tid} is {(state, pid, epoch)}")
        span = self.spans[tid]
        if self.decided[(tid, span)] != marker.committed:
            self.fail(f"marker {marker} against the decision of span {span}")
        return span

    def on_marker_closes(self, tp: TP, open_: Open, marker: tx.TxnMarker, span: int) -> None:
        if (open_.tid, open_.span) != (marker.transactional_id, span):
            self.fail(f"{tp}: a marker of {marker.transactional_id} span {span} closes {open_}")
        if self.decided[(open_.tid, open_.span)] != marker.committed:
            self.fail(f"{tp}: {open_} closed against its decision by {marker}")

    def check(self) -> None:
        shard = self.sim.coordinator.shard
        if shard is None:
            return
        for tid, pending in shard.pending_markers.items():
            state = shard.state.transactions[tid].state
            if not state.is_prepare or pending.committed != (state is S.PREPARE_COMMIT):
                self.fail(f"markers pending for {tid} in {state}")


class TxnSimulation:
    """The world of the module doc, run from one seed."""

    def __init__(
        self,
        seed: int,
        options: TxnSimOptions | None = None,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.seed = seed
        self.options = options or TxnSimOptions.for_seed(seed)
        self.rng = random.Random(seed)
        self.trace = trace
        self.now = 0
        self.events = 0
        self.history: deque[str] = deque(maxlen=80)
        self._queue: list[_Event] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self._producer_ids = itertools.count(1000)
        self.producer_ids_down_until = 0
        self.drop_rate = self.options.drop_rate
        self.dup_rate = self.options.dup_rate
        self.marker_error_rate = self.options.marker_error_rate
        self.stalled_until: dict[str, int] = {}
        self.faults, self.draining = True, False
        self.coordinator = Coordinator()
        self.replica = self._new_shard(0)
        self.brokers = {name: Broker(self, name) for name in BROKERS}
        self.producers: list[Producer] = []
        self.by_name: dict[str, Producer] = {}
        self.incarnations: dict[str, int] = {}
        self.invariants = TxnInvariants(self)
        self.tids = [f"txn-{i}" for i in range(self.options.transactional_ids)]
        for tid in self.tids:
            self.start_producer(tid)
        self.load_coordinator()

    # -- plumbing --------------------------------------------------------------------------

    def log(self, text: str) -> None:
        line = f"{self.now:>6} {text}"
        self.history.append(line)
        if self.trace is not None:
            self.trace(line)

    def next_id(self) -> int:
        return next(self._ids)

    def push(self, time: int, kind: str, data: Any = None) -> None:
        heapq.heappush(self._queue, _Event(time, next(self._seq), kind, data))

    def send(self, src: str, dst: str, kind: str, rid: int, body: Any, extra: Any = None) -> None:
        """A message over the network: maybe lost; answers maybe duplicated; held while
        either end is stalled."""
        if self.rng.random() < self.drop_rate:
            self.log(f"lost {kind} {src} -> {dst}")
            return
        at = self.now + self.rng.randint(1, self.options.max_delay_ms)
        at = max(at, self.stalled_until.get(src, 0), self.stalled_until.get(dst, 0))
        message = Message(src, dst, kind, rid, body, extra)
        self.push(at, "deliver", message)
        if "response" in kind and self.rng.random() < self.dup_rate:
            self.push(at + self.rng.randint(0, 4 * self.options.max_delay_ms), "deliver", message)

    def coordinator_now(self) -> int:
        return self.now + self.coordinator.skew_ms

    def next_producer_id(self) -> int:
        if self.now < self.producer_ids_down_until:
            raise CoordinatorLoadInProgressError("waiting for a producer id block")
        return next(self._producer_ids)

    def _new_shard(self, epoch: int) -> tx.TransactionCoordinatorShard:
        config = self.options.coordinator_config()
        return tx.TransactionCoordinatorShard(0, epoch, config, producer_ids=self.next_producer_id)

    # -- producers -------------------------------------------------------------------------

    def start_producer(self, tid: str) -> Producer:
        self.incarnations[tid] = self.incarnations.get(tid, 0) + 1
        producer = Producer(self, tid, self.incarnations[tid])
        self.producers.append(producer)
        self.by_name[producer.name] = producer
        self.log(f"{producer.name} starts")
        self.push(self.now + self.rng.randint(0, TICK_MS), "producer", producer)
        return producer

    def kill(self, producer: Producer, why: str) -> None:
        if not producer.alive:
            return
        producer.alive = False
        producer.inflight.clear()
        self.log(f"{producer.name} dies ({why})")
        self.push(self.now + self.rng.randint(100, 2_000), "restart", producer.tid)

    def alive(self, tid: str) -> list[Producer]:
        return [p for p in self.producers if p.alive and p.tid == tid]

    def awaited(self, m: Message) -> bool:
        """Whether the sender of a request still waits for it (else its connection closed)."""
        if m.src == COORDINATOR:
            request = self.coordinator.marker_requests.get(m.rid)
            return m.kind != "markers" or (request is not None and not request.timed_out)
        if m.src in self.brokers:
            return m.kind != "verify" or m.rid in self.brokers[m.src].verifying
        producer = self.by_name[m.src]
        return producer.alive and m.rid in producer.inflight

    # -- the coordinator and its driver ----------------------------------------------------

    def load_coordinator(self) -> None:
        co = self.coordinator
        co.incarnation += 1
        shard = self._new_shard(co.incarnation)
        for key, value in co.committed:
            shard.replay(key, value)
        co.shard, co.pending, co.ready_at, co.tick_at = shard, deque(), self.now, None
        self.log(f"coordinator {co.incarnation} loads {len(co.committed)} records")
        self.check_replica(shard)
        self._append(shard.on_loaded(self.coordinator_now()), [])

    def unload_coordinator(self, crash: bool, downtime_ms: int) -> None:
        co = self.coordinator
        if co.shard is None:
            return
        co.shard.unload()
        if crash:  # its connections close: its marker requests die with it
            co.marker_requests.clear()
        else:  # the broker lives on: it answers what it will never complete
            for _, answers in co.pending:
                for m in answers:
                    self.send(COORDINATOR, m.dst, m.kind, m.rid, not_coordinator(m.extra))
        lost = sum(len(result.records) for result, _ in co.pending)
        self.log(f"coordinator {'crashes' if crash else 'moves'}; {lost} records uncommitted")
        co.shard, co.pending = None, deque()
        self.push(self.now + downtime_ms, "load")

    def _schedule_tick(self) -> None:
        co = self.coordinator
        deadline = None if co.shard is None else co.shard.next_deadline_ms()
        if deadline is None:
            return
        at = max(deadline - co.skew_ms, self.now)
        if co.tick_at is None or at < co.tick_at:
            co.tick_at = at
            self.push(at, "tick", co.incarnation)

    def on_coordinator_message(self, m: Message) -> None:
        co, now = self.coordinator, self.coordinator_now()
        if m.kind == "markers-response":
            self.on_marker_answer(m.rid, m.body)
            return
        shard = co.shard
        if shard is None:
            self.send(COORDINATOR, m.src, answer_kind(m), m.rid, not_coordinator(m.body))
            return
        request = m.body
        if m.kind == "init":
            result: tx.CoordinatorResult[Any] = shard.init_producer_id(request, now)
        elif m.kind in ("add", "verify"):
            result = shard.add_partitions_to_txn(request, now)
        elif m.kind == "offsets":
            result = shard.add_offsets_to_txn(request, now)
        else:
            result = shard.end_txn(request, now)
        kind = answer_kind(m)
        self._append(result, [Message(COORDINATOR, m.src, kind, m.rid, result.response, request)])

    def on_marker_answer(self, rid: int, errors: dict[TP, KafkaError | None] | None) -> None:
        """A leader's answer to a marker request (None: it timed out). Duplicates and late
        answers go to the shard too, which must ignore them."""
        co = self.coordinator
        request = co.marker_requests.get(rid)
        if request is None or co.shard is None or request.incarnation != co.incarnation:
            return
        if errors is None:
            request.timed_out = True
            if request.answered:
                return
            errors = dict.fromkeys(request.partitions, NetworkError("request timed out"))
        request.answered = True
        result = co.shard.on_markers_written(request.marker, errors, self.coordinator_now())
        self._append(result, [])

    def _append(self, result: tx.CoordinatorResult[Any], answers: list[Message]) -> None:
        """Appends the records (committed after a delay, in order) with what to send then."""
        co = self.coordinator
        delay = self.rng.randint(*self.options.append_ms) if result.records else 0
        co.ready_at = max(co.ready_at, self.now + delay)
        co.pending.append((result, answers))
        self.push(co.ready_at, "commit", co.incarnation)
        self._schedule_tick()

    def _commit_head(self, incarnation: int) -> None:
        co = self.coordinator
        if incarnation != co.incarnation or not co.pending:
            return
        result, answers = co.pending.popleft()
        for record in result.records:
            key, value = record.key_bytes(), record.value_bytes()
            co.committed.append((key, value))
            self.replica.replay(key, value)
            self.invariants.on_committed(record)
        for m in answers:
            request, span = m.extra, None
            if m.kind == "verify-response":  # the transaction it verified into, for the leader
                span = self.invariants.spans.get(request.transactional_id, 0)
            self.invariants.on_released(m, request)
            self.send(m.src, m.dst, m.kind, m.rid, m.body, span)
        for marker in result.markers:
            self.send_marker(marker)
        if not co.pending and co.shard is not None:
            self.check_replica(co.shard)

    def send_marker(self, marker: tx.TxnMarker) -> None:
        co = self.coordinator
        span = self.invariants.on_marker_sent(marker)
        for broker in BROKERS:
            partitions = tuple(tp for tp in marker.partitions if broker_of(tp) == broker)
            if not partitions:
                continue
            rid = self.next_id()
            co.marker_requests[rid] = MarkerRequest(co.incarnation, marker, partitions)
            self.send(COORDINATOR, broker, "markers", rid, (marker, partitions), span)
            self.push(self.now + self.options.request_timeout_ms, "marker-timeout", rid)

    def check_replica(self, live: tx.TransactionCoordinatorShard) -> None:
        if state_view(live) != state_view(self.replica):
            self.invariants.fail("the shard rebuilt from the committed records differs")

    # -- the event loop and faults ---------------------------------------------------------

    def run_until(self, time: int) -> None:
        while self._queue and self._queue[0].time <= time:
            event = heapq.heappop(self._queue)
            self.now = event.time
            self.events += 1
            self._dispatch(event.kind, event.time, event.data)
            self.invariants.check()
        self.now = max(self.now, time)

    def _dispatch(self, kind: str, time: int, data: Any) -> None:
        co = self.coordinator
        if kind == "producer" and data.alive:
            data.tick()
            self.push(self.now + TICK_MS, "producer", data)
        elif kind == "deliver":
            self.deliver(data)
        elif kind == "commit":
            self._commit_head(data)
        elif (
            kind == "tick" and co.shard is not None and (data, time) == (co.incarnation, co.tick_at)
        ):
            co.tick_at = None
            self._append(co.shard.tick(self.coordinator_now()), [])
        elif kind == "marker-timeout":
            self.on_marker_answer(data, None)
        elif kind == "verify-timeout":
            data[0].on_verify_timeout(data[1])
        elif kind == "load" and co.shard is None:
            self.load_coordinator()
        elif kind == "fault" and self.faults:
            self._fault()
            gap = int(self.rng.expovariate(1 / self.options.fault_interval_ms)) + 1
            self.push(self.now + gap, "fault")
        elif kind == "restart" and not self.alive(data):
            self.start_producer(data)

    def deliver(self, m: Message) -> None:
        if "response" not in m.kind and not self.awaited(m):
            return  # its sender gave up on it: the connection is closed
        if "response" not in m.kind:
            self.log(f"{m.src} -> {m.dst} {m.kind} {describe(m.body)}")
        if m.dst == COORDINATOR:
            self.on_coordinator_message(m)
        elif m.dst in self.brokers:
            self.brokers[m.dst].on_message(m)
        else:
            producer = self.by_name[m.dst]
            sent = producer.inflight.pop(m.rid, None) if producer.alive else None
            if sent is not None:
                self.log(f"{producer.name} <- {sent[0]} {describe(m.body)}")
                producer.on_response(sent[0], sent[2], m.body)

    def _fault(self) -> None:
        kinds = ["kill", "zombie", "stall", "move", "crash", "jump", "lossy", "ids", "markers"]
        kind = self.rng.choice(kinds)
        live = [p for p in self.producers if p.alive]
        if kind == "kill" and live:
            self.kill(self.rng.choice(live), "killed")
        elif kind == "zombie" and live:
            self.start_producer(self.rng.choice(live).tid)  # a second live instance
        elif kind == "stall" and live:
            # A long pause (GC, a stuck network), past the transaction timeout at times.
            victim = self.rng.choice(live)
            until = self.now + self.rng.randint(500, 2 * self.options.txn_timeout_ms)
            self.stalled_until[victim.name] = until
            self.log(f"{victim.name} stalls until {until}")
        elif kind in ("move", "crash"):
            self.unload_coordinator(kind == "crash", self.rng.randint(0, 1_500))
        elif kind == "jump":
            jump = self.rng.randint(1, 3) * self.options.txn_timeout_ms
            self.coordinator.skew_ms += jump
            self.log(f"the coordinator's clock jumps {jump} ms")
            self.coordinator.tick_at = None
            self._schedule_tick()
        elif kind == "lossy":
            self.drop_rate = self.rng.choice([0.0, 0.05, 0.3])
            self.dup_rate = self.rng.choice([0.0, 0.1, 0.5])
            self.log(f"network loss now {self.drop_rate}, duplicates {self.dup_rate}")
        elif kind == "ids":
            self.producer_ids_down_until = self.now + self.rng.randint(100, 1_000)
            self.log(f"no producer ids until {self.producer_ids_down_until}")
        elif kind == "markers":
            self.marker_error_rate = self.rng.choice([0.0, 0.1, 0.5])
            self.log(f"leaders refuse markers at rate {self.marker_error_rate}")

    # -- phases ----------------------------------------------------------------------------

    def run(self) -> None:
        """Faults, then heal, then require convergence; InvariantViolation on failure."""
        self.push(self.options.fault_interval_ms, "fault")
        self.run_until(self.options.fault_phase_ms)
        self.heal()
        self.require_liveness(self.options.liveness_ms)

    def heal(self) -> None:
        """No more faults: a clean network, the coordinator up, producers draining (they
        finish their transaction, then stay idle), one live instance per id."""
        self.faults, self.draining = False, True
        self.drop_rate = self.dup_rate = self.marker_error_rate = 0.0
        self.stalled_until.clear()
        self.producer_ids_down_until = 0
        if self.coordinator.shard is None:
            self.load_coordinator()
        for tid in self.tids:
            if not self.alive(tid):
                self.start_producer(tid)
        self.log("heal everything")

    def require_liveness(self, within_ms: int) -> None:
        deadline = self.now + within_ms
        while self.now < deadline:
            self.run_until(self.now + 100)
            if self.converged():
                return
        raise InvariantViolation(
            f"liveness: not converged {within_ms} ms after healing: {self.status()}"
        )

    def converged(self) -> bool:
        """Every transaction finished: no id Ongoing or Prepare*, no markers awaited, nothing
        uncommitted, nothing open at a partition, every id's producers idle."""
        co = self.coordinator
        shard = co.shard
        if shard is None or co.pending or shard.pending_markers:
            return False
        if any(m.state not in IDLE_STATES for m in shard.state.transactions.values()):
            return False
        if any(b.open_transactions() for b in self.brokers.values()):
            return False
        return all(
            any(p.state == "idle" for p in self.alive(tid))
            and all(p.state == "idle" for p in self.alive(tid))
            for tid in self.tids
        )

    def status(self) -> str:
        shard = self.coordinator.shard
        ids = (
            {} if shard is None else {k: str(v.state) for k, v in shard.state.transactions.items()}
        )
        producers = {p.name: p.state for p in self.producers if p.alive}
        opened = [o for b in self.brokers.values() for o in b.open_transactions()]
        markers = {} if shard is None else dict(shard.pending_markers)
        return f"ids={ids} producers={producers} open={opened} markers={markers}"

    def summary(self) -> str:
        o = self.options
        return (
            f"seed={self.seed}: {o.transactional_ids} ids, delay<={o.max_delay_ms}ms "
            f"loss={o.drop_rate} dup={o.dup_rate} marker errors={o.marker_error_rate} "
            f"events={self.events} records={len(self.coordinator.committed)} "
            f"loads={self.coordinator.incarnation} processes={len(self.producers)} "
            f"transactions={sum(self.invariants.spans.values())}"
        )

    def recent_history(self) -> str:
        return "\n".join(self.history)


IDLE_STATES = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def answer_kind(m: Message) -> str:
    return "verify-response" if m.kind == "verify" else "response"


def not_coordinator(request: Any) -> Any:
    """The answer NOT_COORDINATOR to a request (a coordinator that moved, or is down)."""
    error = NotCoordinatorError("not the coordinator")
    if isinstance(request, tx.InitProducerIdRequest):
        return tx.InitProducerIdResponse(error)
    if isinstance(request, tx.AddPartitionsToTxnRequest):
        return tx.AddPartitionsToTxnResponse(
            request.transactional_id, dict.fromkeys(request.partitions, error)
        )
    if isinstance(request, tx.AddOffsetsToTxnRequest):
        return tx.AddOffsetsToTxnResponse(error)
    return tx.EndTxnResponse(error)


def describe(message: Any) -> str:
    text = repr(message)
    return text if len(text) < 300 else text[:297] + "..."


def state_view(shard: tx.TransactionCoordinatorShard) -> dict[str, Any]:
    """Everything the records determine: each id but its unpersisted last epoch."""
    return {
        tid: replace(m, last_producer_epoch=-1)
        for tid, m in sorted(shard.state.transactions.items())
    }
