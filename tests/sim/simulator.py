"""A deterministic simulator for the Raft core (in the spirit of tigerbeetle's VOPR and Kafka's
RaftEventSimulationTest).

Everything nondeterministic comes from one seed: the network (drops, delays, duplicates and
therefore reorders, partitions that cut links and heal), crashes and restarts, the clients'
proposals, and each node's election jitter. Time is virtual (integer ms) and only moves when
the next event is due. Each node runs the real :class:`~rillet.raft.node.RaftNode` behind a
tiny driver that honours the contract of :mod:`rillet.raft` (persist and flush, then send,
then apply).

Nodes take snapshots of their state (the entries applied) every few entries and, in some
worlds, let the log go behind them (KIP-630), so a lagging or wiped node must load the
leader's snapshot over FetchSnapshot before it can fetch again. Crashes lose exactly what is
not durable. The quorum state is durable once persisted; the
log (:class:`~rillet.raft.memory.MemoryRaftLog`) goes back to its last flush. A crash either
happens between two events (everything was persisted) or, half the time, right after the node
handled its next input and before its driver acted on the outputs, so that in-memory votes,
epochs, appends and truncations are lost.

Invariants are checked after every event (see :class:`Invariants`); after the fault phase the
world heals and a leader must be elected and a new entry committed everywhere within bounded
virtual time (liveness).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from rillet.raft import (
    Entry,
    LeaderState,
    MemoryQuorumStateStore,
    MemoryRaftLog,
    Message,
    Outputs,
    RaftConfig,
    RaftNode,
    SnapshotId,
    VoteResponse,
)


class InvariantViolation(AssertionError):
    """A safety or liveness property failed."""


def describe_message(m: Message) -> str:
    """A compact, stable one-line rendering of a message."""
    name = type(m).__name__
    parts = []
    for f in m.__dataclass_fields__:
        value = getattr(m, f)
        omitted = (
            f in ("source_id", "destination_id")
            or (f in ("records", "pre_vote") and not value)
            or (f == "error" and str(value) == "NONE")
            or (
                f in ("diverging_epoch", "snapshot_id", "high_watermark", "leader_id")
                and value is None
            )
        )
        if omitted:
            continue
        if f == "data":
            value = f"<{len(value)} bytes>"
        if f == "records":
            value = "[" + " ".join(f"{e.offset}@{e.epoch}" for e in value) + "]"
        parts.append(f"{f}={value}")
    return f"{m.source_id}->{m.destination_id} {name}({', '.join(parts)})"


@dataclass(frozen=True)
class SimOptions:
    """One world: its size, its faults and its timing."""

    voters: int = 3
    observers: int = 1
    fault_phase_ms: int = 30_000
    liveness_ms: int = 30_000
    drop_rate: float = 0.05
    duplicate_rate: float = 0.02
    min_delay_ms: int = 1
    max_delay_ms: int = 30
    fault_interval_ms: int = 1_500
    crash_downtime_ms: tuple[int, int] = (100, 3_000)
    propose_interval_ms: int = 150
    # Chance that a voter crashes within 50 ms of granting a vote (and is back within 300 ms).
    crash_after_vote_rate: float = 0.2
    # Each node snapshots its state after this many newly applied entries (0: never), and
    # then lets its log go behind the snapshot with this chance.
    snapshot_every: int = 0
    delete_behind_snapshot_rate: float = 0.0
    raft: RaftConfig = field(
        default_factory=lambda: RaftConfig(
            election_timeout_ms=1000,
            election_backoff_max_ms=1000,
            fetch_timeout_ms=2000,
            request_timeout_ms=400,
            retry_backoff_ms=20,
            fetch_max_wait_ms=500,
            fetch_max_entries=20,
        )
    )

    @classmethod
    def for_seed(cls, seed: int) -> SimOptions:
        """Draw a world from ``seed``: 3 or 5 voters, 1-2 observers, a fault mix."""
        r = random.Random(seed * 7919 + 17)
        voters = 3 if seed % 2 == 0 else 5
        # Drawn apart, so that the worlds drawn before snapshots existed stay the same.
        snapshots = random.Random(seed * 31 + 5)
        snapshot_every = snapshots.choice([0, 0, 7, 25])
        snapshot_chunk = snapshots.choice([64, 1 << 20])
        return cls(
            voters=voters,
            observers=r.randint(1, 2),
            drop_rate=r.choice([0.0, 0.02, 0.05, 0.15]),
            duplicate_rate=r.choice([0.0, 0.01, 0.05]),
            max_delay_ms=r.choice([5, 20, 60]),
            fault_interval_ms=r.choice([800, 1_500, 3_000]),
            crash_downtime_ms=r.choice([(100, 3_000), (20, 500)]),
            propose_interval_ms=r.choice([80, 150, 300]),
            snapshot_every=snapshot_every,
            delete_behind_snapshot_rate=0.0 if snapshot_every == 0 else 0.7,
            raft=RaftConfig(
                election_timeout_ms=1000,
                election_backoff_max_ms=1000,
                fetch_timeout_ms=2000,
                request_timeout_ms=400,
                retry_backoff_ms=20,
                fetch_max_wait_ms=500,
                # One entry per fetch lets a follower acknowledge an old epoch's entry
                # without the new leader's (the setting of Raft's Figure 8).
                fetch_max_entries=r.choice([1, 5, 20, 100]),
                pre_vote=r.random() < 0.7,
                check_quorum=r.random() < 0.8,
                fetch_snapshot_max_bytes=snapshot_chunk,
            ),
        )


def encode_state(entries: list[Entry]) -> bytes:
    """A simulated state machine's snapshot: the entries it applied, one per line."""
    return b"".join(
        f"{e.offset} {e.epoch} {int(e.control)} {e.payload.hex()}\n".encode() for e in entries
    )


def decode_state(data: bytes) -> list[Entry]:
    out = []
    for line in data.decode().splitlines():
        offset, epoch, control, payload = line.split(" ")
        out.append(Entry(int(offset), int(epoch), bytes.fromhex(payload), control == "1"))
    return out


class SimNode:
    """One process: durable storage that survives crashes, and the Raft node while it is up."""

    def __init__(self, node_id: int, is_voter: bool) -> None:
        self.node_id = node_id
        self.is_voter = is_voter
        self.log = MemoryRaftLog()
        self.store = MemoryQuorumStateStore()
        self.raft: RaftNode | None = None
        self.incarnation = 0
        self.crash_pending = False
        self.tick_at: int | None = None
        # Per incarnation: what the driver saw and applied.
        self.applied: list[Entry] = []
        self.snapshot_at = 0
        self.high_watermark = 0
        self.epoch = 0
        self.leader_epoch_seen = -1
        # Across incarnations: what was persisted.
        self.persisted_epoch = 0

    @property
    def up(self) -> bool:
        return self.raft is not None


class Invariants:
    """Safety properties, checked after every event.

    - Election safety: at most one leader per epoch, ever.
    - Epochs never go backwards on a node (in memory within a run; in the store across runs).
    - The high watermark a node reports never goes backwards (within a run).
    - State machine safety / log matching: every node applies the same entry at each offset,
      in order, each once; no payload is committed twice.
    - One vote per epoch: no voter grants two candidates a vote in the same epoch.
    - Durability: every committed entry is in the flushed log of a majority of voters, and in
      the log of every node at the moment it becomes leader (leader completeness).
    """

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: list[Entry] = []
        self.committed_payloads: set[bytes] = set()
        self.votes: dict[tuple[int, int], int] = {}

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"t={self.sim.now}ms: {message}")

    def on_outputs(self, sn: SimNode, out: Outputs) -> None:
        for m in out.messages:
            if isinstance(m, VoteResponse) and m.vote_granted and not m.pre_vote:
                # One vote per epoch, even across crashes (Raft §5.2): checked on what was
                # actually said, not on what the node remembers.
                voted = self.votes.setdefault((m.source_id, m.candidate_epoch), m.destination_id)
                if voted != m.destination_id:
                    self.fail(
                        f"node {m.source_id} voted for {voted} and {m.destination_id} in "
                        f"epoch {m.candidate_epoch}"
                    )
        if out.quorum_state is not None:
            if out.quorum_state.epoch < sn.persisted_epoch:
                self.fail(
                    f"node {sn.node_id} persisted epoch {out.quorum_state} after "
                    f"{sn.persisted_epoch}"
                )
            sn.persisted_epoch = out.quorum_state.epoch
        if out.high_watermark < sn.high_watermark:
            self.fail(
                f"node {sn.node_id} high watermark went back {sn.high_watermark} -> "
                f"{out.high_watermark}"
            )
        sn.high_watermark = out.high_watermark
        if out.load_snapshot is not None:
            self._load_snapshot(sn, out.load_snapshot)
        for entry in out.committed:
            if entry.offset != len(sn.applied):
                self.fail(f"node {sn.node_id} applied {entry} after {len(sn.applied)} entries")
            sn.applied.append(entry)
            if entry.offset < len(self.committed):
                if self.committed[entry.offset] != entry:
                    self.fail(
                        f"node {sn.node_id} committed {entry} but "
                        f"{self.committed[entry.offset]} was committed before"
                    )
            elif entry.offset == len(self.committed):
                if not entry.control:
                    if entry.payload in self.committed_payloads:
                        self.fail(f"payload {entry.payload!r} committed twice")
                    self.committed_payloads.add(entry.payload)
                self.committed.append(entry)
            else:
                self.fail(f"node {sn.node_id} committed {entry} past a gap")
        if len(sn.applied) != out.high_watermark:
            self.fail(
                f"node {sn.node_id} applied {len(sn.applied)} entries with high watermark "
                f"{out.high_watermark}"
            )

    def _load_snapshot(self, sn: SimNode, snapshot_id: SnapshotId) -> None:
        """A node replaces its state with a snapshot: the committed entries up to its end."""
        size = sn.log.snapshot_size(snapshot_id)
        state = decode_state(sn.log.read_snapshot(snapshot_id, 0, size))
        if len(state) != snapshot_id.end_offset or state != self.committed[: len(state)]:
            self.fail(
                f"node {sn.node_id} loaded snapshot {snapshot_id} holding "
                f"{len(state)} entries that are not the committed ones"
            )
        if len(state) < len(sn.applied):
            self.fail(f"node {sn.node_id} loaded {snapshot_id} after applying {len(sn.applied)}")
        sn.applied = state
        sn.snapshot_at = len(state)

    def check(self) -> None:
        sim = self.sim
        last = self.committed[-1] if self.committed else None
        for sn in sim.nodes.values():
            raft = sn.raft
            if raft is None:
                continue
            if raft.epoch < sn.epoch:
                self.fail(f"node {sn.node_id} epoch went back {sn.epoch} -> {raft.epoch}")
            sn.epoch = raft.epoch
            if isinstance(raft.state, LeaderState):
                leader = self.leader_of_epoch.setdefault(raft.epoch, sn.node_id)
                if leader != sn.node_id:
                    self.fail(f"two leaders in epoch {raft.epoch}: {leader} and {sn.node_id}")
                if sn.leader_epoch_seen != raft.epoch:
                    sn.leader_epoch_seen = raft.epoch
                    if last is not None and not _in_snapshot(raft.log, last.offset):
                        has_it = raft.log.end_offset > last.offset
                        held = raft.log.read(last.offset, 1) if has_it else []
                        if held != [last]:
                            self.fail(
                                f"leader {sn.node_id} of epoch {raft.epoch} lacks committed {last}"
                            )
        if last is not None:
            holders = [
                sn.node_id
                for sn in sim.nodes.values()
                if sn.is_voter
                and (sn.log.durable_entry(last.offset) == last or _in_snapshot(sn.log, last.offset))
            ]
            if len(holders) < len(sim.voter_ids) // 2 + 1:
                self.fail(f"committed {last} is durable only on {holders}")


def _in_snapshot(log: MemoryRaftLog, offset: int) -> bool:
    """``offset`` is covered by a snapshot the log holds (durable, like all its snapshots)."""
    return any(s.end_offset > offset for s in log.snapshot_ids())


class _Event(NamedTuple):
    """A scheduled event; ordered by (time, seq) as a plain tuple, which the heap compares
    in C (``seq`` is unique, so ``kind`` and ``data`` are never compared)."""

    time: int
    seq: int
    kind: str
    data: object = None


class Simulation:
    """A seeded world of ``options.voters`` voters and ``options.observers`` observers."""

    def __init__(
        self,
        seed: int,
        options: SimOptions | None = None,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        self.seed = seed
        self.options = options if options is not None else SimOptions.for_seed(seed)
        self.rng = random.Random(seed)
        self.now = 0
        self._queue: list[_Event] = []
        self._seq = itertools.count()
        self.voter_ids = list(range(1, self.options.voters + 1))
        self.observer_ids = list(
            range(self.options.voters + 1, self.options.voters + self.options.observers + 1)
        )
        self.nodes = {i: SimNode(i, i in self.voter_ids) for i in self.voter_ids}
        self.nodes.update({i: SimNode(i, False) for i in self.observer_ids})
        self.blocked: set[tuple[int, int]] = set()
        self.drop_rate = self.options.drop_rate
        self.duplicate_rate = self.options.duplicate_rate
        self.faults_enabled = True
        self.sentinel_count = 0  # liveness checks' entries, numbered across checks
        self.invariants = Invariants(self)
        # The recent past, printed when a run fails: log lines, and delivered messages kept
        # unformatted (formatting every message would double the cost of a run).
        self.history: deque[tuple[int, str | Message]] = deque(maxlen=400)
        self._trace = trace
        self._proposals = itertools.count()
        self.proposed = 0
        self.events = 0
        for sn in self.nodes.values():
            self._boot(sn)

    # -- the event loop --------------------------------------------------------------------

    def _push(self, time: int, kind: str, data: object = None) -> None:
        heapq.heappush(self._queue, _Event(max(time, self.now), next(self._seq), kind, data))

    def run_until(self, time: int) -> None:
        while self._queue and self._queue[0].time <= time:
            event = heapq.heappop(self._queue)
            self.now = event.time
            self.events += 1
            self._dispatch(event)
            self.invariants.check()
        self.now = max(self.now, time)

    def _dispatch(self, event: _Event) -> None:
        if event.kind == "deliver":
            assert isinstance(event.data, tuple)
            self._deliver(*event.data)
        elif event.kind == "tick":
            assert isinstance(event.data, tuple)
            node_id, incarnation = event.data
            sn = self.nodes[node_id]
            if sn.raft is not None and sn.incarnation == incarnation and sn.tick_at == event.time:
                sn.tick_at = None
                sn.raft.tick(self.now)
                self._after_input(sn)
        elif event.kind == "propose":
            self._propose()
            if self.faults_enabled:
                interval = self.options.propose_interval_ms
                self._push(self.now + int(self.rng.expovariate(1 / interval)) + 1, "propose")
        elif event.kind == "fault":
            if self.faults_enabled:
                self._inject_fault()
                interval = self.options.fault_interval_ms
                self._push(self.now + int(self.rng.expovariate(1 / interval)) + 1, "fault")
        elif event.kind == "crash":
            assert isinstance(event.data, int)
            sn = self.nodes[event.data]
            if sn.raft is not None and self.faults_enabled:
                self._crash(sn, "soon after voting", downtime_ms=(1, 300))
        elif event.kind == "stop":
            assert isinstance(event.data, int)
            sn = self.nodes[event.data]
            if sn.raft is not None:
                self._crash(sn, "stopped after resigning")
        elif event.kind == "restart":
            assert isinstance(event.data, int)
            sn = self.nodes[event.data]
            if sn.raft is None:
                self._boot(sn)
        else:  # pragma: no cover
            raise ValueError(event.kind)

    def log(self, text: str) -> None:
        self.history.append((self.now, text))
        if self._trace is not None:
            self._trace(f"{self.now:>7} {text}")

    def recent_history(self) -> str:
        """The last few hundred events, one per line, for a failure report."""
        return "\n".join(
            f"{t:>7} {item if isinstance(item, str) else describe_message(item)}"
            for t, item in self.history
        )

    # -- nodes and their drivers -----------------------------------------------------------

    def _boot(self, sn: SimNode) -> None:
        sn.incarnation += 1
        sn.applied = []
        snapshots = sn.log.snapshot_ids()
        if snapshots:
            # Start from the latest snapshot, as a real driver does.
            latest = snapshots[-1]
            sn.applied = decode_state(sn.log.read_snapshot(latest, 0, sn.log.snapshot_size(latest)))
        sn.snapshot_at = len(sn.applied)
        sn.high_watermark = len(sn.applied)
        sn.epoch = 0
        sn.leader_epoch_seen = -1
        sn.crash_pending = False
        sn.tick_at = None
        sn.raft = RaftNode(
            node_id=sn.node_id,
            voters=self.voter_ids,
            log=sn.log,
            store=sn.store,
            rng=random.Random(self.rng.getrandbits(64)),
            now_ms=self.now,
            config=self.options.raft,
            applied_offset=len(sn.applied),
        )
        self.log(
            f"boot {sn.node_id} as {sn.raft.state!r} (log [{sn.log.log_start_offset}, "
            f"{sn.log.end_offset}), {len(sn.applied)} applied from a snapshot)"
        )
        sn.raft.tick(self.now)
        self._after_input(sn)

    def _crash(
        self,
        sn: SimNode,
        why: str,
        downtime_ms: tuple[int, int] | None = None,
        *,
        restart: bool = True,
    ) -> None:
        sn.raft = None
        sn.incarnation += 1
        sn.crash_pending = False
        sn.tick_at = None
        sn.log.lose_unflushed()
        self.log(f"crash {sn.node_id} ({why}); durable log end {sn.log.end_offset}")
        if restart:
            low, high = downtime_ms if downtime_ms is not None else self.options.crash_downtime_ms
            self._push(self.now + self.rng.randint(low, high), "restart", sn.node_id)

    def _after_input(self, sn: SimNode) -> None:
        raft = sn.raft
        assert raft is not None
        if sn.crash_pending:
            self._crash(sn, "before its outputs were persisted")
            return
        out = raft.poll()
        if out.quorum_state is not None:
            sn.store.persist(*out.quorum_state)
        if out.flush_log:
            sn.log.flush()
        for message in out.messages:
            self._send(message)
            if (
                self.faults_enabled
                and isinstance(message, VoteResponse)
                and message.vote_granted
                and not message.pre_vote
                and self.rng.random() < self.options.crash_after_vote_rate
            ):
                # The moment a forgotten vote would matter most: crash soon after voting,
                # and come back while the election is still on.
                self._push(self.now + self.rng.randint(1, 50), "crash", sn.node_id)
        self.invariants.on_outputs(sn, out)
        self._maybe_snapshot(sn)
        if out.leader_change is not None:
            self.log(f"node {sn.node_id}: {raft.state!r}")
        deadline = raft.next_deadline_ms()
        if deadline is not None and (sn.tick_at is None or deadline < sn.tick_at):
            sn.tick_at = max(deadline, self.now)
            self._push(sn.tick_at, "tick", (sn.node_id, sn.incarnation))

    def _maybe_snapshot(self, sn: SimNode) -> None:
        every = self.options.snapshot_every
        if every == 0 or len(sn.applied) - sn.snapshot_at < every:
            return
        snapshot_id = SnapshotId(len(sn.applied), sn.applied[-1].epoch)
        sn.log.create_snapshot(snapshot_id, encode_state(sn.applied))
        sn.snapshot_at = len(sn.applied)
        if self.rng.random() < self.options.delete_behind_snapshot_rate:
            sn.log.delete_before_snapshot(snapshot_id)
            self.log(f"node {sn.node_id}: snapshot {snapshot_id}, log starts there")

    # -- the network -----------------------------------------------------------------------

    def _send(self, message: Message) -> None:
        if self.rng.random() < self.drop_rate:
            return
        copies = 2 if self.rng.random() < self.duplicate_rate else 1
        for _ in range(copies):
            delay = self.rng.randint(self.options.min_delay_ms, self.options.max_delay_ms)
            self._push(self.now + delay, "deliver", (message,))

    def _deliver(self, message: Message) -> None:
        sn = self.nodes[message.destination_id]
        if sn.raft is None or (message.source_id, message.destination_id) in self.blocked:
            return
        self.history.append((self.now, message))
        if self._trace is not None:
            self._trace(f"{self.now:>7} {describe_message(message)}")
        sn.raft.step(message, self.now)
        self._after_input(sn)

    # -- clients and faults ----------------------------------------------------------------

    def leaders(self) -> list[SimNode]:
        return [sn for sn in self.nodes.values() if sn.raft is not None and sn.raft.is_leader]

    def _propose(self) -> None:
        leaders = self.leaders()
        if not leaders:
            return
        sn = self.rng.choice(leaders)
        assert sn.raft is not None
        count = self.rng.randint(1, 3)
        payloads = [f"v{next(self._proposals)}".encode() for _ in range(count)]
        sn.raft.propose(payloads, self.now)
        self.proposed += count
        self._after_input(sn)

    def _inject_fault(self) -> None:
        ids = sorted(self.nodes)
        kind = self.rng.choice(
            ["partition", "isolate", "cut", "heal", "crash", "crash", "crash-leader", "shutdown"]
            + (["wipe-observer"] if self.options.snapshot_every else [])
        )
        if kind == "partition":
            side = set(self.rng.sample(ids, self.rng.randint(1, len(ids) - 1)))
            self.blocked = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
            self.log(f"partition {sorted(side)} | {sorted(set(ids) - side)}")
        elif kind == "isolate":
            victim = self.rng.choice(ids)
            self.blocked = {(a, b) for a in ids for b in ids if a != b and victim in (a, b)}
            self.log(f"isolate {victim}")
        elif kind == "cut":
            pairs = [(a, b) for a in ids for b in ids if a < b]
            cut = self.rng.sample(pairs, self.rng.randint(1, max(1, len(pairs) // 3)))
            one_way = self.rng.random() < 0.3
            self.blocked = {(a, b) for a, b in cut} | (
                set() if one_way else {(b, a) for a, b in cut}
            )
            self.log(f"cut {sorted(self.blocked)}")
        elif kind == "heal":
            self.blocked = set()
            self.log("heal network")
        elif kind == "shutdown":
            # Graceful shutdown of the leader: resign (EndQuorumEpoch), then stop a moment later.
            for sn in self.leaders():
                assert sn.raft is not None
                self.log(f"shutdown {sn.node_id}: resign")
                sn.raft.resign(self.now)
                self._after_input(sn)
                self._push(self.now + self.rng.randint(10, 300), "stop", sn.node_id)
        elif kind == "wipe-observer":
            # A new observer (a broker whose disk was replaced): it starts from nothing, and
            # from the leader's snapshot if the leader's log no longer starts at 0.
            observers = [sn for sn in self.nodes.values() if not sn.is_voter]
            if observers:
                sn = self.rng.choice(observers)
                if sn.raft is not None:
                    self._crash(sn, "to be wiped", restart=True)
                sn.log = MemoryRaftLog()
                sn.store = MemoryQuorumStateStore()
                sn.persisted_epoch = 0
                self.log(f"wipe observer {sn.node_id}")
        elif kind == "crash-leader":
            for sn in self.leaders():
                if self.rng.random() < 0.5:
                    sn.crash_pending = True
                    self.log(f"crash leader {sn.node_id} at its next input")
                else:
                    self._crash(sn, "leader, between events")
        else:
            up = [sn for sn in self.nodes.values() if sn.raft is not None]
            if not up:
                return
            sn = self.rng.choice(up)
            if self.rng.random() < 0.5:
                sn.crash_pending = True  # crashes after its next input, before persisting
                self.log(f"crash {sn.node_id} at its next input")
            else:
                self._crash(sn, "between events")

    # -- phases ----------------------------------------------------------------------------

    def run(self) -> None:
        """Fault phase, then heal, then require liveness; raise InvariantViolation on failure."""
        self._push(self.now + 1, "propose")
        self._push(self.now + self.options.fault_interval_ms, "fault")
        self.run_until(self.options.fault_phase_ms)
        self.heal()
        # Time to elect a leader, plus time for the slowest node to fetch the whole log one
        # response per round trip.
        longest = max(sn.log.end_offset for sn in self.nodes.values())
        transfer_ms = -(-longest // self.options.raft.fetch_max_entries) * (
            2 * self.options.max_delay_ms
        )
        self.require_liveness(self.options.liveness_ms + transfer_ms)
        # Then the leader dies for good: the rest of the voters, a majority, elect another
        # (followers that time out one after another must not keep each other following it).
        leader = self.leaders()[0]
        self._crash(leader, "leader, for good", restart=False)
        self.require_liveness(self.options.liveness_ms + transfer_ms)

    def heal(self) -> None:
        """End of faults: a clean network, every node up, no pending crash."""
        self.faults_enabled = False
        self.blocked = set()
        self.drop_rate = 0.0
        self.duplicate_rate = 0.0
        for sn in self.nodes.values():
            sn.crash_pending = False
            if sn.raft is None:
                self._boot(sn)
        self.log("heal everything")

    def require_liveness(self, within_ms: int) -> None:
        """A leader gets elected and a new entry commits on every node within ``within_ms``."""
        deadline = self.now + within_ms
        sentinels: set[bytes] = set()
        proposed_in: set[tuple[int, int]] = set()
        while self.now < deadline:
            for sn in self.leaders():
                assert sn.raft is not None
                key = (sn.node_id, sn.raft.epoch)
                if key not in proposed_in:
                    proposed_in.add(key)
                    self.sentinel_count += 1
                    payload = f"sentinel-{self.sentinel_count}".encode()
                    sentinels.add(payload)
                    sn.raft.propose([payload], self.now)
                    self._after_input(sn)
            if sentinels and all(
                any(e.payload in sentinels for e in sn.applied)
                for sn in self.nodes.values()
                if sn.raft is not None
            ):
                return
            self.run_until(self.now + 50)
        states = {i: repr(sn.raft) for i, sn in self.nodes.items()}
        raise InvariantViolation(
            f"liveness: no entry committed everywhere within {within_ms}ms of healing: {states}"
        )

    def summary(self) -> str:
        return (
            f"seed={self.seed} {self.options.voters} voters + {self.options.observers} "
            f"observers, events={self.events}, proposed={self.proposed}, "
            f"committed={len(self.invariants.committed)}, "
            f"epochs={len(self.invariants.leader_of_epoch)}"
        )
