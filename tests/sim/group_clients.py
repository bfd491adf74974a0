"""The clients of the group coordinator's simulation (:mod:`groups`): KIP-848 consumers and
classic consumers as Kafka 4's clients behave, each one process of a member, and
transactional producers that commit a group's offsets inside their transactions.

Clients behave as Kafka's: one heartbeat in flight, a full heartbeat after any failure, a
revocation acknowledged at once, offsets committed from what they own (on revocation too),
fetched before a new partition is consumed, and a member that heard no good answer to a
request sent within a session timeout gives its partitions up (the coordinator can only have
fenced it later). A process's requests die with it (its connection closes).
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rillet.coordinator import group as g
from rillet.errors import KafkaError

if TYPE_CHECKING:
    from groups import GroupSimulation

CONSUMER_GROUP, CLASSIC_GROUP = "orders", "billing"
TOPIC_IDS = {"foo": uuid.UUID(int=0xF00), "bar": uuid.UUID(int=0xBA2)}
NAMES = {v: k for k, v in TOPIC_IDS.items()}
TP = tuple[str, int]
TICK_MS = 50  # how often a member acts
ETL_GROUP = "etl"  # the transactional producers' group
MARKER_RID = -1  # the "request id" of a marker's answer, which comes without the network
MARKER_RETRY_MS = 1_000  # the transaction coordinator sends an unanswered marker again


class Client(ABC):
    """One member process: its requests in flight, the partitions it owns with its positions,
    and when it sent the last request that got a good answer."""

    def __init__(self, sim: GroupSimulation, name: str, group: str, instance_id: str | None):
        self.sim, self.name, self.group, self.instance_id = sim, name, group, instance_id
        self.base = name.split(".")[0]  # the member, across its process incarnations
        self.alive = True
        self.owned: set[TP] = set()
        self.positions: dict[TP, int | None] = {}
        self.inflight: dict[int, tuple[str, int]] = {}  # request id -> (kind, sent at)
        self.last_good_sent = sim.now
        self.next_heartbeat = self.next_commit = self.retry_at = sim.now
        self.best_epoch = -1

    @abstractmethod
    def tick(self) -> None:
        """Act once (every TICK_MS): heartbeat, commit, retry."""

    @abstractmethod
    def on_response(self, kind: str, sent_at: int, response: Any) -> None:
        """The answer to a request of ``kind`` sent at ``sent_at``."""

    @abstractmethod
    def leave(self) -> None:
        """Leave the group (a clean shutdown)."""

    def send(self, kind: str, request: Any) -> None:
        self.inflight[self.sim.send(self, kind, request)] = (kind, self.sim.now)

    def busy(self, kind: str) -> bool:
        return any(k == kind for k, _ in self.inflight.values())

    def expire_requests(self, parked_ms: int = 0) -> list[str]:
        """Gives up on requests unanswered for the request timeout (JoinGroup and SyncGroup
        may wait ``parked_ms`` more); a late answer is ignored."""
        timeout, now = self.sim.options.request_timeout_ms, self.sim.now

        def late(kind: str, at: int) -> bool:
            return now - at >= timeout + (parked_ms if kind in ("join", "sync") else 0)

        expired = [r for r, (kind, at) in self.inflight.items() if late(kind, at)]
        return [self.inflight.pop(r)[0] for r in expired]

    def take(self, partitions: set[TP]) -> None:
        """New partitions: consumed once their committed offsets are fetched."""
        for tp in partitions - self.owned:
            self.positions[tp] = None
        self.owned |= partitions

    def drop(self, partitions: set[TP], why: str) -> None:
        if partitions & self.owned:
            self.sim.log(f"{self.name} gives up {sorted(partitions & self.owned)} ({why})")
        self.owned -= partitions
        for tp in partitions:
            self.positions.pop(tp, None)

    def commit(self, partitions: set[TP], generation: int, member_id: str) -> None:
        known = {tp: self.positions[tp] for tp in sorted(partitions) if self.positions.get(tp)}
        if not known or not member_id:
            return
        topics = tuple(
            g.OffsetCommitRequestTopic(
                t,
                tuple(
                    g.OffsetCommitRequestPartition(p, o or 0)
                    for (tt, p), o in known.items()
                    if tt == t
                ),
            )
            for t in sorted({t for t, _ in known})
        )
        request = g.OffsetCommitRequest(self.group, topics, generation, member_id)
        self.send("commit", request)

    def consume(self) -> None:
        """Fetches committed offsets of new partitions (again if an answer was lost), and
        moves through the partitions it can read."""
        missing = sorted(tp for tp, position in self.positions.items() if position is None)
        if missing and not self.busy("fetch"):
            topics = tuple(
                g.TopicPartitionIndexes(t, tuple(p for tt, p in missing if tt == t))
                for t in sorted({t for t, _ in missing})
            )
            self.send("fetch", g.OffsetFetchRequest(self.group, topics))
        for tp, position in self.positions.items():
            if position is not None:
                self.positions[tp] = position + self.sim.rng.randint(0, 3)

    def on_fetch(self, response: g.OffsetFetchResponse) -> None:
        for t in response.topics if response.error is None else ():
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp in self.owned and self.positions.get(tp) is None:
                    self.positions[tp] = max(p.committed_offset, 1)

    def too_late(self, sent_at: int) -> bool:
        """Whether a session (less a margin: the member acts every tick) has passed since
        ``sent_at``: the coordinator may have fenced it since, so nothing it owns is safe."""
        return self.sim.now - sent_at >= self.sim.options.session_ms - 2 * TICK_MS

    def self_fence_due(self) -> bool:
        return bool(self.owned) and self.too_late(self.last_good_sent)


class ConsumerMember(Client):
    """A KIP-848 consumer, as the coordinator sees Kafka 4's."""

    def __init__(self, sim: GroupSimulation, name: str, instance_id: str | None, topics: Any):
        super().__init__(sim, name, CONSUMER_GROUP, instance_id)
        self.topics: tuple[str, ...] = topics
        self.epoch = 0
        self.full = True

    def tick(self) -> None:
        if "heartbeat" in self.expire_requests():
            self.full = True
        if self.self_fence_due():
            self.drop(set(self.owned), "no good answer for a session")
            self.epoch = 0
        self.consume()
        now = self.sim.now
        if not self.busy("heartbeat") and now >= max(self.next_heartbeat, self.retry_at):
            self.send("heartbeat", self.heartbeat_request())
        if self.epoch > 0 and now >= self.next_commit and not self.busy("commit"):
            self.next_commit = now + 1_000
            self.commit(set(self.owned), self.epoch, self.name)

    def heartbeat_request(self) -> g.ConsumerGroupHeartbeatRequest:
        owned = tuple(
            g.OwnedTopicPartitions(
                TOPIC_IDS[t], tuple(sorted(p for tt, p in self.owned if tt == t))
            )
            for t in sorted({t for t, _ in self.owned})
        )
        full = self.epoch == 0 or self.full
        return g.ConsumerGroupHeartbeatRequest(
            self.group,
            member_id=self.name,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.sim.options.rebalance_ms if full else -1,
            subscribed_topic_names=self.topics if full else None,
            topic_partitions=owned,
            client_id=self.name,
        )

    def on_response(self, kind: str, sent_at: int, response: Any) -> None:
        if kind == "fetch":
            self.on_fetch(response)
        if kind != "heartbeat":
            return
        now = self.sim.now
        if response.error is None and self.too_late(sent_at):
            # An answer from before its session ran out: it may have been fenced since.
            self.drop(set(self.owned), "an answer older than a session")
            self.epoch, self.full = 0, True
            return
        if response.error is None:
            self.sim.invariants.on_epoch(self, response.member_epoch)
            self.epoch, self.full, self.last_good_sent = response.member_epoch, False, sent_at
            self.next_heartbeat = now + response.heartbeat_interval_ms
            if response.assignment is not None:
                new = {(NAMES[a.topic_id], p) for a in response.assignment for p in a.partitions}
                revoked, added = self.owned - new, new - self.owned
                self.commit(revoked, self.epoch, self.name)
                self.drop(revoked, "revoked")
                self.take(added)
                if revoked or added:
                    self.next_heartbeat = now  # acknowledge at once
            return
        name = response.error.name
        if name in ("FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"):
            self.drop(set(self.owned), name)
            self.epoch = 0
        elif name == "FENCED_INSTANCE_ID":
            self.sim.kill(self, "fenced by another incarnation")
        else:
            self.full = True
            self.retry_at = now + (500 if name == "UNRELEASED_INSTANCE_ID" else 100)

    def leave(self) -> None:
        """A clean shutdown: commit, give everything up, leave (-2, for a while, if static)."""
        self.commit(set(self.owned), self.epoch, self.name)
        self.drop(set(self.owned), "leaving")
        if self.epoch > 0:
            epoch = -2 if self.instance_id is not None else -1
            self.send("heartbeat", replace(self.heartbeat_request(), member_epoch=epoch))


class ClassicMember(Client):
    """A classic consumer with the eager protocol (everything revoked before it rejoins);
    the leader assigns contiguous ranges of both topics, and rejoins when they grow."""

    def __init__(self, sim: GroupSimulation, name: str, instance_id: str | None):
        super().__init__(sim, name, CLASSIC_GROUP, instance_id)
        self.member_id = ""
        self.generation = -1
        self.state = "idle"  # -> joining -> syncing -> stable
        self.leader = False
        self.assigned_with: dict[str, int] | None = None  # counts of its computed assignment

    def join_request(self) -> g.JoinGroupRequest:
        metadata = g.encode_subscription(g.ConsumerProtocolSubscription(("foo", "bar")))
        opts = self.sim.options
        return g.JoinGroupRequest(
            self.group,
            opts.session_ms,
            opts.rebalance_ms,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocols=(g.JoinGroupProtocol("range", metadata),),
            client_id=self.name,
        )

    def rejoin(self, why: str, commit: bool = True) -> None:
        if commit:
            self.commit(set(self.owned), self.generation, self.member_id)
        self.drop(set(self.owned), why)
        self.state = "idle"

    def tick(self) -> None:
        if {"join", "sync"} & set(self.expire_requests(self.sim.options.rebalance_ms)):
            self.state = "idle"
        if self.self_fence_due():
            self.rejoin("no good answer for a session", commit=False)
        self.consume()
        now = self.sim.now
        if self.state == "idle" and now >= self.retry_at and not self.busy("join"):
            self.state = "joining"
            self.send("join", self.join_request())
        if self.state != "stable":
            return
        if self.leader and self.sim.classic_counts != self.sim.partition_counts:
            self.rejoin("the leader saw new partitions")
            return
        if not self.busy("heartbeat") and now >= self.next_heartbeat:
            self.next_heartbeat = now + self.sim.options.heartbeat_ms
            request = g.HeartbeatRequest(
                self.group, self.generation, self.member_id, self.instance_id
            )
            self.send("heartbeat", request)
        if now >= self.next_commit and not self.busy("commit"):
            self.next_commit = now + 1_000
            self.commit(set(self.owned), self.generation, self.member_id)

    def on_response(self, kind: str, sent_at: int, response: Any) -> None:
        if kind == "commit":
            return
        error: KafkaError | None = response.error
        name = None if error is None else error.name
        if kind == "fetch":
            self.on_fetch(response)
        elif name is None and self.too_late(sent_at):
            self.rejoin("an answer older than a session", commit=False)
        elif name == "MEMBER_ID_REQUIRED":
            self.member_id, self.state = response.member_id, "idle"  # rejoin with it
        elif name is not None and (kind != "heartbeat" or self.state == "stable"):
            self.on_error(name)
        elif kind == "join" and name is None:
            self.on_joined(response, sent_at)
        elif kind == "sync" and name is None and self.state == "syncing":
            # An assignment is persisted before anyone gets it: synced generations only grow.
            self.sim.invariants.on_epoch(self, self.generation)
            if self.assigned_with is not None:
                self.sim.classic_counts = self.assigned_with
            self.state, self.last_good_sent = "stable", sent_at
            assignment = g.decode_assignment(response.assignment).assigned_partitions
            self.take({(t, p) for t, ps in assignment.items() for p in ps})
        elif kind == "heartbeat" and name is None and self.state == "stable":
            self.last_good_sent = sent_at

    def on_joined(self, response: g.JoinGroupResponse, sent_at: int) -> None:
        self.member_id, self.generation = response.member_id, response.generation_id
        self.leader = response.leader == self.member_id
        self.last_good_sent = sent_at  # a JoinGroup answer restarts the session too
        self.assigned_with = None
        assignments: dict[str, bytes] = {}
        if self.leader and not response.skip_assignment:
            assignments = self.sim.assign_ranges(response.members)
            self.assigned_with = dict(self.sim.partition_counts)
        self.state = "syncing"
        sync = g.SyncGroupRequest(
            self.group, self.generation, self.member_id, self.instance_id, assignments=assignments
        )
        self.send("sync", sync)

    def on_error(self, name: str) -> None:
        if name == "FENCED_INSTANCE_ID":
            self.sim.kill(self, "fenced by another incarnation")
        elif name in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"):
            self.drop(set(self.owned), name)
            self.member_id = "" if name == "UNKNOWN_MEMBER_ID" else self.member_id
            self.state = "idle"
        elif name == "REBALANCE_IN_PROGRESS":
            self.rejoin("rebalance in progress")
        elif self.state in ("joining", "syncing"):
            self.state = "idle"
        self.retry_at = self.sim.now + 100

    def leave(self) -> None:
        self.commit(set(self.owned), self.generation, self.member_id)
        self.drop(set(self.owned), "leaving")
        if self.member_id and self.instance_id is None:
            request = g.LeaveGroupRequest(self.group, (g.MemberIdentity(self.member_id),))
            self.send("leave", request)


@dataclass(frozen=True)
class MarkerAck:
    """The group coordinator's answer to a marker (WriteTxnMarkers): ``txn`` and ``attempt``
    of the marker it answers, None once the marker is committed."""

    txn: int
    attempt: int
    error: KafkaError | None = None


class TxnProducer(Client):
    """A transactional producer, and the transaction coordinator's side of its transactions,
    committing offsets of group ``etl`` (no members: generation -1).

    Transaction n commits offset n for each of the producer's partitions (those foo
    partitions p with p % count == index), then ends: COMMIT if every partition's
    TxnOffsetCommit succeeded (and a coin says so), else ABORT. The transaction coordinator
    writes the marker to the group's partition until it is answered; only then does the
    next transaction begin (Kafka's PrepareCommit before CompleteCommit). A transaction whose
    TxnOffsetCommit went unanswered (it may still arrive), or that the coordinator times out
    (the "fence" fault), is aborted with the producer's next epoch, so that the late request
    is a zombie the log refuses (KIP-890's epoch bump).
    """

    def __init__(self, sim: GroupSimulation, index: int, count: int):
        super().__init__(sim, f"p{index}", ETL_GROUP, None)
        self.index = index
        self.producer_id = 5_000 + index
        self.epoch = 0
        foo = sim.options.foo_partitions
        self.partitions: tuple[TP, ...] = tuple(
            ("foo", p) for p in range(foo) if p % count == index
        )
        self.txn = 0  # the current (or last) transaction
        self.phase = "idle"  # -> committing -> ending -> idle
        self.marker: tuple[int, bool] = (0, False)  # (epoch, committed) while ending
        self.marker_attempt = 0
        self.marker_sent_at = 0
        self.next_txn = sim.now
        self.next_fetch = sim.now
        self.fetch_stable = False
        self.fetched: dict[TP, int] = {}  # the last offset each partition was fetched at
        self.commits_since_heal = 0

    def tick(self) -> None:
        now = self.sim.now
        if "txn_commit" in self.expire_requests() and self.phase == "committing":
            self.end(committed=False, fence=True)
        if self.phase == "ending" and now - self.marker_sent_at >= MARKER_RETRY_MS:
            self.send_marker()
        if self.phase == "idle" and now >= self.next_txn:
            self.begin()
        if not self.busy("fetch") and now >= self.next_fetch:
            self.next_fetch = now + 300
            self.fetch_stable = self.sim.rng.random() < 0.5
            topics = (g.TopicPartitionIndexes("foo", tuple(p for _, p in self.partitions)),)
            request = g.OffsetFetchRequest(ETL_GROUP, topics, require_stable=self.fetch_stable)
            self.send("fetch", request)

    def begin(self) -> None:
        self.txn += 1
        self.phase = "committing"
        partitions = tuple(g.OffsetCommitRequestPartition(p, self.txn) for _, p in self.partitions)
        request = g.TxnOffsetCommitRequest(
            f"txn-{self.index}",
            ETL_GROUP,
            self.producer_id,
            self.epoch,
            (g.OffsetCommitRequestTopic("foo", partitions),),
        )
        self.send("txn_commit", request)

    def end(self, committed: bool, fence: bool) -> None:
        """The transaction coordinator decides; with ``fence``, in the producer's next epoch
        (a request of the old one still on its way is a zombie's)."""
        if fence:
            self.epoch += 1
            self.inflight = {r: v for r, v in self.inflight.items() if v[0] != "txn_commit"}
        self.sim.invariants.on_decided(self, self.txn, committed)
        self.sim.log(
            f"{self.name} {'commits' if committed else 'aborts'} txn {self.txn} "
            f"(epoch {self.epoch})"
        )
        self.phase, self.marker = "ending", (self.epoch, committed)
        self.send_marker()

    def send_marker(self) -> None:
        self.marker_attempt += 1
        self.marker_sent_at = self.sim.now
        delay = self.sim.rng.randint(1, self.sim.options.max_delay_ms)
        self.sim.push(self.sim.now + delay, "marker", (self, self.txn, self.marker_attempt))

    def on_marker_ack(self, ack: MarkerAck) -> None:
        if self.phase != "ending" or ack.txn != self.txn:
            return
        if ack.error is not None:
            if ack.attempt == self.marker_attempt:
                self.send_marker()
            return
        self.phase = "idle"
        self.next_txn = self.sim.now + self.sim.rng.randint(20, 400)
        if self.marker[1]:
            self.commits_since_heal += 1

    def on_response(self, kind: str, sent_at: int, response: Any) -> None:
        if kind == "fetch":
            self.sim.invariants.on_etl_fetch(self, response, self.fetch_stable)
            return
        if kind != "txn_commit" or self.phase != "committing":
            return
        errors = {
            (t.name, p.partition_index): p.error for t in response.topics for p in t.partitions
        }
        ok = set(errors) == set(self.partitions) and all(e is None for e in errors.values())
        self.end(committed=ok and self.sim.rng.random() < 0.8, fence=False)

    def fence(self) -> None:
        """The transaction coordinator times the transaction out (or the producer restarts)
        while its TxnOffsetCommit is on its way."""
        if self.phase == "committing":
            self.end(committed=False, fence=True)

    def leave(self) -> None:
        pass
