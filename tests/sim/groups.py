"""A seeded simulation of the group coordinator: KIP-848 members and classic members of two
groups on one ``GroupCoordinatorShard``, over a lossy network, with a virtual clock.

Everything nondeterministic comes from one seed: delays and losses of requests and responses,
members that die (stop heartbeating), leave, restart (static members come back with their
instance id), stall (their messages held for seconds, then delivered in a burst), topics
gaining partitions, and the coordinator moving or crashing: its shard is thrown away (parked
requests and the responses of uncommitted records answered NOT_COORDINATOR on a move, lost
on a crash) and a new one loads by replaying the records committed so far. The driver
honours the shard's contract: it appends an operation's records and sends its response and
completions once those and all earlier records are committed.

Clients behave as Kafka's: one heartbeat in flight, a full heartbeat after any failure, a
revocation acknowledged at once, offsets committed from what they own (on revocation too),
fetched before a new partition is consumed, and a member that heard no good answer to a
request sent within a session timeout gives its partitions up (the coordinator can only have
fenced it later). A process's requests die with it (its connection closes).

Transactional producers (:class:`~group_clients.TxnProducer`) commit the offsets of group
``etl`` inside transactions, ended by markers the transaction coordinator writes through
``complete_transaction``; a TxnOffsetCommit is written as a transactional batch of its
producer and a marker as a control batch, and the log refuses either for an older producer
epoch than it has seen (Kafka's producer state; the driver then calls ``result.undo()``).
The "fence" fault aborts a producer's transaction with its next epoch while its
TxnOffsetCommit is on its way, so that the request, when it lands, is a zombie's.

Invariants after every event (:class:`GroupInvariants`): no partition owned by two live
members of a group (by the members' own views); a KIP-848 member owns only what the
coordinator counts as its (assigned or pending revocation); the epochs a member is told, and
the generations it syncs, never go back; committed offsets never go back (a transaction's
count when its COMMIT marker is committed); an offset of a transaction not decided COMMIT is
never visible, neither in the shard's committed offsets nor in an OffsetFetch answer, which
answers UNSTABLE_OFFSET_COMMIT only when asked for stable offsets; and whenever nothing is
uncommitted, a shard rebuilt from the committed records (pending offsets included) matches
the live one. After the faults stop, every subscribed partition must be owned by exactly one
live member, both groups be Stable, every producer have committed a transaction since, with
none open, and group ``etl`` hold the offsets of each producer's last committed one
(liveness).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from group_clients import (
    CLASSIC_GROUP,
    CONSUMER_GROUP,
    ETL_GROUP,
    MARKER_RID,
    NAMES,
    TICK_MS,
    TOPIC_IDS,
    TP,
    ClassicMember,
    Client,
    ConsumerMember,
    MarkerAck,
    TxnProducer,
)

from rillet.coordinator import group as g
from rillet.coordinator.group.consumer_group import ConsumerGroup
from rillet.coordinator.group.records import OffsetCommitKey, OffsetCommitValue
from rillet.coordinator.group.txn_offsets import error_txn_commit_response
from rillet.errors import InvalidProducerEpochError, NotCoordinatorError

Delivery = tuple[str, int, Any]  # client name, request id, response
# One entry of the partition: ("r", key, value, producer id, epoch) for a record, of a
# transactional batch when the producer id is not -1; ("m", producer id, epoch, committed)
# for a COMMIT or ABORT marker.
Entry = tuple[Any, ...]


class InvariantViolation(AssertionError):
    """A safety or liveness property failed."""


@dataclass(frozen=True)
class GroupSimOptions:
    consumers: int = 3
    classics: int = 2
    static_rate: float = 0.4
    foo_partitions: int = 6
    bar_partitions: int = 3
    session_ms: int = 2_000
    heartbeat_ms: int = 250
    rebalance_ms: int = 3_000  # >= the session: a silent member is fenced by then anyway
    request_timeout_ms: int = 800
    max_delay_ms: int = 30
    drop_rate: float = 0.02
    append_ms: tuple[int, int] = (1, 15)
    fault_interval_ms: int = 1_500
    fault_phase_ms: int = 15_000
    liveness_ms: int = 40_000
    txn_producers: int = 2

    @classmethod
    def for_seed(cls, seed: int) -> GroupSimOptions:
        r = random.Random(seed * 7717 + 3)
        return cls(
            consumers=r.randint(2, 4),
            classics=r.randint(1, 3),
            static_rate=r.choice([0.0, 0.4, 1.0]),
            foo_partitions=r.randint(3, 8),
            bar_partitions=r.randint(1, 4),
            max_delay_ms=r.choice([5, 30, 120]),
            drop_rate=r.choice([0.0, 0.02, 0.1]),
            append_ms=r.choice([(1, 5), (1, 40)]),
            fault_interval_ms=r.choice([600, 1_500, 3_000]),
            txn_producers=r.randint(1, 2),
        )

    def coordinator_config(self) -> g.GroupCoordinatorConfig:
        return g.GroupCoordinatorConfig(
            offsets_topic_num_partitions=1,
            consumer_group_session_timeout_ms=self.session_ms,
            consumer_group_heartbeat_interval_ms=self.heartbeat_ms,
            classic_group_initial_rebalance_delay_ms=300,
            classic_group_min_session_timeout_ms=500,
        )


class _Event(NamedTuple):
    time: int
    seq: int
    kind: str
    data: Any = None


class Coordinator:
    """The broker leading the partition: the shard while up, the committed records, and
    operations whose records are not committed yet (with what to send once they are)."""

    def __init__(self) -> None:
        self.shard: g.GroupCoordinatorShard | None = None
        self.incarnation = 0
        self.committed: list[Entry] = []
        self.pending: deque[tuple[list[Entry], list[Delivery]]] = deque()
        # The latest producer epoch the partition's log has seen, uncommitted entries
        # included (the log's producer state, which refuses older epochs).
        self.log_epochs: dict[int, int] = {}
        self.ready_at = 0
        self.tick_at: int | None = None


class GroupInvariants:
    """The safety properties of the module doc, checked after every event."""

    def __init__(self, sim: GroupSimulation) -> None:
        self.sim = sim
        self.offsets: dict[tuple[str, str, int], int] = {}
        # Transactional offsets committed to the log, by producer, until their marker.
        self.pending: dict[int, dict[tuple[str, str, int], int]] = {}
        # Each transaction's decision: (producer index, transaction) -> COMMIT or not.
        self.decisions: dict[tuple[int, int], bool] = {}

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"t={self.sim.now}ms: {message}")

    def on_epoch(self, member: Client, epoch: int) -> None:
        if epoch < member.best_epoch:
            self.fail(f"{member.name} was told epoch {epoch} after {member.best_epoch}")
        member.best_epoch = epoch

    def on_committed(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry[0] == "m":
                _, producer_id, _, committed = entry
                for key, offset in self.pending.pop(producer_id, {}).items():
                    if committed:
                        self.on_offset(key, offset)
                continue
            record = g.decode_record(entry[1], entry[2])
            if not isinstance(record.key, OffsetCommitKey):
                continue
            key = (record.key.group, record.key.topic, record.key.partition)
            if not isinstance(record.value, OffsetCommitValue):
                self.offsets.pop(key, None)  # a tombstone: deleted, may start over
                for offsets in self.pending.values():
                    offsets.pop(key, None)
            elif entry[3] >= 0:
                self.pending.setdefault(entry[3], {})[key] = record.value.offset
            else:
                self.on_offset(key, record.value.offset)

    def on_offset(self, key: tuple[str, str, int], offset: int) -> None:
        before = self.offsets.get(key, -1)
        if offset < before:
            self.fail(f"committed offset of {key} went back {before} -> {offset}")
        self.offsets[key] = offset

    def check_offsets(self, shard: g.GroupCoordinatorShard) -> None:
        """With nothing uncommitted, the shard's committed offsets are the log's, as this
        model reads it (a transaction's at its COMMIT marker). Groups here never mix plain and
        transactional commits, so Kafka's rule for a plain commit written between a
        transaction's record and its marker does not arise."""
        theirs = {
            (gid, t, p): o.committed_offset
            for gid, topics in shard.state.offsets.items()
            for t, ps in topics.items()
            for p, o in ps.items()
        }
        if theirs != self.offsets:
            diff = sorted(set(theirs.items()) ^ set(self.offsets.items()))
            self.fail(f"the committed offsets are not the log's: {diff[:6]}")

    def on_decided(self, producer: TxnProducer, txn: int, committed: bool) -> None:
        if (producer.index, txn) in self.decisions:
            self.fail(f"{producer.name} decided transaction {txn} twice")
        self.decisions[(producer.index, txn)] = committed

    def committed_txn(self, partition: int, offset: int) -> bool:
        """Whether ``offset`` of etl's foo-``partition`` is a transaction decided COMMIT."""
        owner = partition % self.sim.options.txn_producers
        return self.decisions.get((owner, offset), False)

    def on_etl_fetch(
        self, producer: TxnProducer, response: g.OffsetFetchResponse, stable: bool
    ) -> None:
        """An OffsetFetch answer about etl: never a pending offset, never one that goes back;
        UNSTABLE_OFFSET_COMMIT only when stable offsets were asked for."""
        if response.error is not None:
            return
        for t in response.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if p.error is not None:
                    if p.error.name != "UNSTABLE_OFFSET_COMMIT" or not stable:
                        self.fail(f"{producer.name} fetched {tp}: {p.error.name}")
                    continue
                if p.committed_offset < 0:
                    continue
                if not self.committed_txn(p.partition_index, p.committed_offset):
                    self.fail(
                        f"{producer.name} fetched {tp} at {p.committed_offset}, an offset of a "
                        "transaction not committed"
                    )
                if p.committed_offset < producer.fetched.get(tp, -1):
                    self.fail(f"{tp} of etl went back to {p.committed_offset}")
                producer.fetched[tp] = p.committed_offset

    def check(self) -> None:
        for group in (CONSUMER_GROUP, CLASSIC_GROUP):
            owner: dict[TP, str] = {}
            for c in self.sim.clients:
                for tp in c.owned if c.alive and c.group == group else ():
                    if tp in owner:
                        self.fail(f"{tp} owned by {owner[tp]} and {c.name} in {group}")
                    owner[tp] = c.name
        shard = self.sim.coordinator.shard
        group_state = None if shard is None else shard.state.consumer_group(CONSUMER_GROUP)
        for c in self.sim.clients:
            if shard is None or not (isinstance(c, ConsumerMember) and c.alive and c.owned):
                continue
            member = None if group_state is None else group_state.members.get(c.name)
            counted = set() if member is None else member.owned_partitions()
            theirs = {(NAMES[t], p) for t, p in counted}
            if not c.owned <= theirs:
                extra = sorted(c.owned - theirs)
                self.fail(f"{c.name} owns {extra} the coordinator does not count as its")
        etl = {} if shard is None else shard.state.offsets.get(ETL_GROUP, {})
        for topic, partitions in etl.items():
            for partition, o in partitions.items():
                if not self.committed_txn(partition, o.committed_offset):
                    self.fail(
                        f"etl's {topic}-{partition} is at {o.committed_offset}, an offset of a "
                        "transaction not committed"
                    )


class GroupSimulation:
    """The world of one seed (see the module doc)."""

    def __init__(
        self,
        seed: int,
        options: GroupSimOptions | None = None,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.seed, self.options, self.trace = seed, options or GroupSimOptions.for_seed(seed), trace
        self.rng = random.Random(seed)
        self.now = self.events = 0
        self._queue: list[_Event] = []
        self._seq, self._rid, self.incarnations = itertools.count(), itertools.count(1), 0
        self.history: deque[str] = deque(maxlen=300)
        self.partition_counts = {
            "foo": self.options.foo_partitions,
            "bar": self.options.bar_partitions,
        }
        self.classic_counts = dict(self.partition_counts)  # what the persisted assignment used
        self.coordinator = Coordinator()
        self.replica = self._new_shard()  # never loaded: replays every committed record
        self.invariants = GroupInvariants(self)
        self.clients: list[Client] = []
        self.producers: list[TxnProducer] = []
        self.channel_free: dict[tuple[str, str], int] = {}
        self.faults, self.drop_rate = True, self.options.drop_rate
        for i in range(self.options.consumers):
            static = f"ci{i}" if self.rng.random() < self.options.static_rate else None
            self.start(ConsumerMember(self, f"c{i}.0", static, ("foo", "bar")[: 2 - i % 2]))
        for i in range(self.options.classics):
            static = f"ki{i}" if self.rng.random() < self.options.static_rate else None
            self.start(ClassicMember(self, f"k{i}.0", static))
        for i in range(self.options.txn_producers):
            producer = TxnProducer(self, i, self.options.txn_producers)
            self.producers.append(producer)
            self.push(self.now, "client", producer)
        self.load_coordinator()

    # -- plumbing --------------------------------------------------------------------------

    def _new_shard(self) -> g.GroupCoordinatorShard:
        config, rng = self.options.coordinator_config(), random.Random(self.rng.getrandbits(64))
        return g.GroupCoordinatorShard(0, config, rng=rng, topics=self.topics())

    def topics(self) -> dict[str, g.TopicInfo]:
        return {t: g.TopicInfo(TOPIC_IDS[t], n) for t, n in self.partition_counts.items()}

    def log(self, text: str) -> None:
        line = f"{self.now:>7} {text}"
        self.history.append(line)
        if self.trace is not None:
            self.trace(line)

    def push(self, time: int, kind: str, data: Any = None) -> None:
        heapq.heappush(self._queue, _Event(max(time, self.now), next(self._seq), kind, data))

    def _arrival(self, a: str, b: str) -> int | None:
        """When a message from a to b arrives (FIFO per direction), None if it is lost."""
        if self.rng.random() < self.drop_rate:
            return None
        at = self.now + self.rng.randint(1, self.options.max_delay_ms)
        at = self.channel_free[(a, b)] = max(at, self.channel_free.get((a, b), 0))
        return at

    def send(self, client: Client, kind: str, request: Any) -> int:
        rid = next(self._rid)
        at = self._arrival(client.name, "coordinator")
        if at is not None:
            self.push(at, "request", (client, rid, kind, request))
        return rid

    def respond(self, name: str, rid: int, response: Any) -> None:
        if rid == MARKER_RID:  # the answer to a marker: broker to broker, not lost here
            producer = self.client(name)
            assert isinstance(producer, TxnProducer)
            producer.on_marker_ack(response)
            return
        at = self._arrival("coordinator", name)
        if at is not None:
            self.push(at, "response", (self.client(name), rid, response))

    def client(self, name: str) -> Client:
        return next(c for c in [*self.clients, *self.producers] if c.name == name)

    # -- members ---------------------------------------------------------------------------

    def start(self, client: Client) -> None:
        self.clients.append(client)
        self.push(self.now, "client", client)
        static = f" (static {client.instance_id})" if client.instance_id else ""
        self.log(f"start {client.name}{static}")

    def kill(self, client: Client, why: str) -> None:
        if client.alive:
            client.alive = False
            client.owned.clear()
            self.log(f"{client.name} stops: {why}")

    def restart(self, client: Client) -> None:
        """A new process (a new member id; the same instance id if static)."""
        self.kill(client, "restarted")
        self.incarnations += 1
        name = f"{client.base}.{self.incarnations}"
        if isinstance(client, ConsumerMember):
            self.start(ConsumerMember(self, name, client.instance_id, client.topics))
        else:
            self.start(ClassicMember(self, name, client.instance_id))

    def assign_ranges(self, members: tuple[g.JoinGroupResponseMember, ...]) -> dict[str, bytes]:
        """The classic leader's assignment: per topic, contiguous ranges in member order."""
        subscribed = {m.member_id: g.decode_subscription(m.metadata).topics for m in members}
        out: dict[str, dict[str, tuple[int, ...]]] = {m: {} for m in subscribed}
        for topic, count in sorted(self.partition_counts.items()):
            takers = sorted(m for m, ts in subscribed.items() if topic in ts)
            start = 0
            for i, m in enumerate(takers):
                share = count // len(takers) + (1 if i < count % len(takers) else 0)
                if share:
                    out[m][topic] = tuple(range(start, start + share))
                start += share
        return {m: g.encode_assignment(g.ConsumerProtocolAssignment(a)) for m, a in out.items()}

    # -- the coordinator and its driver ----------------------------------------------------

    def load_coordinator(self) -> None:
        co = self.coordinator
        co.incarnation += 1
        shard = self._new_shard()
        co.log_epochs = {}
        for entry in co.committed:
            replay_entry(shard, entry)
            producer_id, epoch = (entry[1], entry[2]) if entry[0] == "m" else entry[3:5]
            if producer_id >= 0:
                co.log_epochs[producer_id] = max(epoch, co.log_epochs.get(producer_id, -1))
        shard.on_loaded(self.now)
        co.shard, co.pending, co.ready_at, co.tick_at = shard, deque(), self.now, None
        self.log(f"coordinator {co.incarnation} loads {len(co.committed)} records")
        self.check_replica(shard)
        self._schedule_tick()

    def unload_coordinator(self, crash: bool, downtime_ms: int) -> None:
        co = self.coordinator
        if co.shard is None:
            return
        parked = [delivery(c) for c in co.shard.unload()]
        lost = sum(len(entries) for entries, _ in co.pending)
        if not crash:  # the broker lives on: it answers what it will never complete
            for _, deliveries in co.pending:
                parked += [(n, r, not_coordinator(resp)) for n, r, resp in deliveries]
            for name, rid, response in parked:
                self.respond(name, rid, response)
        self.log(f"coordinator {'crashes' if crash else 'moves'}; {lost} records uncommitted")
        co.shard, co.pending = None, deque()
        self.push(self.now + downtime_ms, "load")

    def _schedule_tick(self) -> None:
        co = self.coordinator
        deadline = None if co.shard is None else co.shard.next_deadline_ms()
        if deadline is not None and (co.tick_at is None or deadline < co.tick_at):
            co.tick_at = max(deadline, self.now)
            self.push(co.tick_at, "tick", co.incarnation)

    def _handle(self, client: Client, rid: int, kind: str, request: Any) -> None:
        shard, now, handle = self.coordinator.shard, self.now, (client.name, rid)
        if shard is None:
            self.respond(client.name, rid, not_coordinator(EMPTY_RESPONSES[kind]))
            return
        if kind == "heartbeat" and isinstance(client, ConsumerMember):
            result: Any = shard.consumer_group_heartbeat(request, now)
        elif kind == "heartbeat":
            result = shard.heartbeat(request, now)
        elif kind == "join":
            result = shard.join_group(request, handle, now)
        elif kind == "sync":
            result = shard.sync_group(request, handle, now)
        elif kind == "leave":
            result = shard.leave_group(request, now)
        elif kind == "commit":
            result = shard.commit_offsets(request, now)
        elif kind == "txn_commit":
            result = shard.txn_offset_commit(request, now)
        else:
            result = shard.fetch_offsets(request)
        if not self._append(
            result, [] if result.response is None else [(client.name, rid, result.response)]
        ):
            assert isinstance(request, g.TxnOffsetCommitRequest)
            error = InvalidProducerEpochError(f"epoch {request.producer_epoch} is fenced")
            self.respond(client.name, rid, error_txn_commit_response(request, error))

    def _write_marker(self, producer: TxnProducer, txn: int, attempt: int) -> None:
        """The transaction coordinator's marker reaches the group coordinator
        (WriteTxnMarkers -> complete_transaction); a coordinator that is down gets it again
        from the producer's retry."""
        co = self.coordinator
        if co.shard is None or producer.phase != "ending" or producer.txn != txn:
            return
        epoch, committed = producer.marker
        result = co.shard.complete_transaction(producer.producer_id, epoch, 0, committed)
        if result.marker is None:
            self.invariants.fail(f"a loaded shard refused a marker: {result.response}")
        ack = MarkerAck(txn, attempt)
        if not self._append(result, [(producer.name, MARKER_RID, ack)]):
            self.invariants.fail(f"the log refused {producer.name}'s marker in its epoch {epoch}")

    def _append(self, result: g.CoordinatorResult[Any], deliveries: list[Delivery]) -> bool:
        """Appends the records (committed after a delay, in order) with what to send then.
        False if the log refused a transactional batch or marker of an older producer epoch
        than it has seen: nothing is appended, and the shard takes it back (``undo``)."""
        co = self.coordinator
        producer = result.producer or result.marker
        if producer is not None and (result.records or result.marker is not None):
            if producer.producer_epoch < co.log_epochs.get(producer.producer_id, -1):
                assert result.undo is not None
                result.undo()
                self.log(f"the log refuses producer {producer.producer_id}'s old epoch")
                return False
            co.log_epochs[producer.producer_id] = producer.producer_epoch
        deliveries += [delivery(c) for c in result.completions]
        entries = entries_of(result)
        delay = self.rng.randint(*self.options.append_ms) if entries else 0
        co.ready_at = max(co.ready_at, self.now + delay)
        co.pending.append((entries, deliveries))
        self.push(co.ready_at, "commit", co.incarnation)
        self._schedule_tick()
        return True

    def _commit_head(self, incarnation: int) -> None:
        co = self.coordinator
        if incarnation != co.incarnation or not co.pending:
            return
        entries, deliveries = co.pending.popleft()
        for entry in entries:
            co.committed.append(entry)
            replay_entry(self.replica, entry)
        self.invariants.on_committed(entries)
        for name, rid, response in deliveries:
            self.respond(name, rid, response)
        if not co.pending and co.shard is not None:
            self.check_replica(co.shard)
            self.invariants.check_offsets(co.shard)

    def check_replica(self, live: g.GroupCoordinatorShard) -> None:
        rebalancing = (
            g.ClassicGroupState.PREPARING_REBALANCE,
            g.ClassicGroupState.COMPLETING_REBALANCE,
        )
        skip = {
            gid
            for gid, gr in live.state.groups.items()
            if getattr(gr, "state", None) in rebalancing
        }
        if state_view(live, skip) != state_view(self.replica, skip):
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
        if kind == "client" and data.alive:
            data.tick()
            self.push(self.now + TICK_MS, "client", data)
        elif kind == "request":
            client, rid, rkind, request = data
            if client.alive:  # a process's connection dies with it
                self.log(f"{client.name} -> {rkind} {describe(request)}")
                self._handle(client, rid, rkind, request)
        elif kind == "response":
            client, rid, response = data
            sent = client.inflight.pop(rid, None)
            if client.alive and sent is not None:
                self.log(f"{client.name} <- {sent[0]} {describe(response)}")
                client.on_response(sent[0], sent[1], response)
        elif kind == "commit":
            self._commit_head(data)
        elif (
            kind == "tick" and co.shard is not None and (data, time) == (co.incarnation, co.tick_at)
        ):
            co.tick_at = None
            self._append(co.shard.tick(self.now), [])
        elif kind == "load" and co.shard is None:
            self.load_coordinator()
        elif kind == "fault" and self.faults:
            self._fault()
            gap = int(self.rng.expovariate(1 / self.options.fault_interval_ms)) + 1
            self.push(self.now + gap, "fault")
        elif kind == "marker":
            self._write_marker(*data)
        elif kind == "restart" and not any(c.alive for c in self.clients if c.base == data.base):
            self.restart(data)  # one process per member: two would fence each other

    def _fault(self) -> None:
        live = [c for c in self.clients if c.alive]
        kinds = ["die", "leave", "restart", "stall", "move", "crash", "partitions", "lossy"]
        kinds += ["fence"] if self.producers else []
        kind = self.rng.choice(kinds)
        if kind in ("die", "leave", "restart") and live:
            victim = self.rng.choice(live)
            if kind == "leave":
                victim.leave()
            self.kill(victim, kind)
            self.push(self.now + self.rng.randint(100, 4_000), "restart", victim)
        elif kind == "stall" and live:
            # A long pause (GC, a stuck network): its messages wait, both ways, and arrive in
            # a burst; meanwhile it is fenced, and its partitions move on.
            victim = self.rng.choice([*live, *self.producers])
            until = self.now + self.rng.randint(1_000, 5_000)
            for channel in ((victim.name, "coordinator"), ("coordinator", victim.name)):
                self.channel_free[channel] = max(self.channel_free.get(channel, 0), until)
            self.log(f"{victim.name} stalls until {until}")
        elif kind in ("move", "crash"):
            self.unload_coordinator(kind == "crash", self.rng.randint(0, 1_500))
        elif kind == "partitions" and self.partition_counts["foo"] < 12:
            self.partition_counts["foo"] += 1
            self.log(f"foo grows to {self.partition_counts['foo']} partitions")
            if self.coordinator.shard is not None:
                self.coordinator.shard.on_metadata(self.topics())
        elif kind == "lossy":
            self.drop_rate = self.rng.choice([0.0, 0.05, 0.3])
            self.log(f"network loss now {self.drop_rate}")
        elif kind == "fence":
            self.rng.choice(self.producers).fence()

    # -- phases ----------------------------------------------------------------------------

    def run(self) -> None:
        """Faults, then heal, then require convergence; InvariantViolation on failure."""
        self.push(self.options.fault_interval_ms, "fault")
        self.run_until(self.options.fault_phase_ms)
        self.heal()
        self.require_liveness(self.options.liveness_ms)

    def heal(self) -> None:
        """No more faults: a clean network, the coordinator up, every member running."""
        self.faults, self.drop_rate = False, 0.0
        if self.coordinator.shard is None:
            self.load_coordinator()
        for base in sorted({c.base for c in self.clients}):
            incarnations = [c for c in self.clients if c.base == base]
            if not any(c.alive for c in incarnations):
                self.restart(incarnations[-1])
        for producer in self.producers:
            producer.commits_since_heal = 0
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
        """Both groups Stable, every live member in its group, and every subscribed partition
        owned (and being consumed) by exactly one live member."""
        shard = self.coordinator.shard
        if shard is None or self.coordinator.pending:
            return False
        consumer = shard.state.consumer_group(CONSUMER_GROUP)
        classic = shard.state.classic_group(CLASSIC_GROUP)
        if consumer is None or str(consumer.state) != "Stable":
            return False
        if classic is None or classic.state != g.ClassicGroupState.STABLE:
            return False
        consumer_topics = {
            t for c in self.clients if isinstance(c, ConsumerMember) for t in c.topics
        }
        for group, topics, in_group in (
            (CONSUMER_GROUP, consumer_topics, len(consumer.members)),
            (CLASSIC_GROUP, {"foo", "bar"}, len(classic.members)),
        ):
            members = [c for c in self.clients if c.alive and c.group == group]
            wanted = sorted((t, p) for t in topics for p in range(self.partition_counts[t]))
            if sorted(tp for c in members for tp in c.owned) != wanted or in_group != len(members):
                return False
            if any(v is None for c in members for v in c.positions.values()):
                return False
        return self.transactions_converged(shard)

    def transactions_converged(self, shard: g.GroupCoordinatorShard) -> bool:
        """Every producer committed a transaction since healing and has none open, and etl
        holds each one's last committed transaction."""
        if shard.state.pending.has_open_transactions(ETL_GROUP):
            return False
        wanted: dict[int, int] = {}
        for p in self.producers:
            if p.phase != "idle" or p.commits_since_heal == 0:
                return False
            last = max(n for (i, n), ok in self.invariants.decisions.items() if i == p.index and ok)
            wanted.update({partition: last for _, partition in p.partitions})
        etl = shard.state.offsets.get(ETL_GROUP, {}).get("foo", {})
        return {p: o.committed_offset for p, o in etl.items()} == wanted

    def status(self) -> str:
        shard = self.coordinator.shard
        groups = {} if shard is None else {k: str(v.state) for k, v in shard.state.groups.items()}
        owned = {c.name: sorted(c.owned) for c in self.clients if c.alive}
        producers = {p.name: (p.phase, p.txn, p.commits_since_heal) for p in self.producers}
        return f"groups={groups} owned={owned} producers={producers}"

    def summary(self) -> str:
        o = self.options
        return (
            f"seed={self.seed}: {o.consumers} KIP-848 + {o.classics} classic members, "
            f"{o.txn_producers} transactional producers, "
            f"delay<={o.max_delay_ms}ms loss={o.drop_rate} events={self.events} "
            f"records={len(self.coordinator.committed)} loads={self.coordinator.incarnation} "
            f"processes={len(self.clients)}"
        )

    def recent_history(self) -> str:
        return "\n".join(self.history)


def entries_of(result: g.CoordinatorResult[Any]) -> list[Entry]:
    """What ``result`` appends to the partition."""
    if result.marker is not None:
        m = result.marker
        return [("m", m.producer_id, m.producer_epoch, m.committed)]
    pid, epoch = (-1, -1)
    if result.producer is not None:
        pid, epoch = result.producer.producer_id, result.producer.producer_epoch
    return [("r", r.key_bytes(), r.value_bytes(), pid, epoch) for r in result.records]


def replay_entry(shard: g.GroupCoordinatorShard, entry: Entry) -> None:
    if entry[0] == "m":
        shard.replay_end_transaction_marker(entry[1], entry[3], producer_epoch=entry[2])
    else:
        shard.replay(entry[1], entry[2], producer_id=entry[3], producer_epoch=entry[4])


EMPTY_RESPONSES: dict[str, Any] = {
    "heartbeat": g.ConsumerGroupHeartbeatResponse(),
    "join": g.JoinGroupResponse(),
    "sync": g.SyncGroupResponse(),
    "leave": g.LeaveGroupResponse(),
    "commit": g.OffsetCommitResponse(()),
    "txn_commit": g.TxnOffsetCommitResponse(()),
    "fetch": g.OffsetFetchResponse(""),
}


def not_coordinator(response: Any) -> Any:
    """The response with NOT_COORDINATOR instead (a coordinator that moved, or is down)."""
    error = NotCoordinatorError("not the coordinator")
    if isinstance(response, g.OffsetCommitResponse | g.TxnOffsetCommitResponse):
        topics = tuple(
            g.TopicPartitionErrors(
                t.name, tuple(g.PartitionError(p.partition_index, error) for p in t.partitions)
            )
            for t in response.topics
        )
        return replace(response, topics=topics)
    return replace(response, error=error)


def delivery(completion: g.Completion) -> Delivery:
    """A completion's answer and where it goes (handles are (client name, request id))."""
    handle: Any = completion.handle
    return handle[0], handle[1], completion.response


def describe(message: Any) -> str:
    text = repr(message)
    return text if len(text) < 300 else text[:297] + "..."


def state_view(shard: g.GroupCoordinatorShard, skip: set[str]) -> dict[str, Any]:
    """Everything the records determine: KIP-848 groups whole, classic groups as persisted
    (those in a rebalance skipped), offsets."""
    offsets, pending = shard.state.offsets, shard.state.pending
    view: dict[str, Any] = {
        "offsets": {k: {t: dict(ps) for t, ps in v.items()} for k, v in offsets.items()},
        "pending": (
            {
                pid: {gid: {t: dict(ps) for t, ps in ts.items()} for gid, ts in groups.items()}
                for pid, groups in pending.by_producer.items()
            },
            {gid: set(pids) for gid, pids in pending.open_by_group.items()},
        ),
    }
    for gid, gr in sorted(shard.state.groups.items()):
        if gid in skip:
            continue
        if isinstance(gr, ConsumerGroup):
            view[gid] = (
                gr.group_epoch,
                gr.assignment_epoch,
                dict(gr.subscription_metadata),
                dict(gr.target_assignment),
                dict(gr.members),
            )
        else:
            members = {
                m.member_id: (
                    m.group_instance_id,
                    m.client_id,
                    m.session_timeout_ms,
                    m.rebalance_timeout_ms,
                    m.assignment,
                    m.metadata(gr.protocol_name),
                )
                for m in gr.members.values()
            }
            leader = gr.leader_id if members else None
            view[gid] = (
                str(gr.state),
                gr.generation_id,
                gr.protocol_type,
                gr.protocol_name,
                leader,
                members,
            )
    return view
