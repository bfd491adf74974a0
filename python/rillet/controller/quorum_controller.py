"""QuorumController: turns admin and broker-lifecycle requests into metadata records.

A pure state machine in the style of Kafka's QuorumController: no sockets, clocks, threads
or files; time comes in as ``now_ms`` and randomness from an injected ``random.Random``.
Every request returns a :class:`ControllerResult`: the records to append to the metadata log
and the response to send once they are committed. The active controller applies its own
records to :attr:`image` as soon as it appends them (so the next request sees them) and
keeps the last committed image apart; if it loses leadership it calls
:meth:`revert_to_committed` and continues from what the quorum committed.

Leader election lives here too: fencing a broker (a missed session, a controlled shutdown)
moves leadership of its partitions to another in-sync replica, or to none (-1) when no
in-sync replica is alive, unless ``unclean.leader.election.enable`` lets an out-of-sync
replica lead.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rillet import errors
from rillet.config import resolve_topic_config
from rillet.controller.placement import place_replicas, validate_assignment
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage, PartitionRegistration
from rillet.metadata.records import (
    NO_LEADER,
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.metadata.topic_names import validate_topic_name

__all__ = [
    "AlterConfigOp",
    "ControllerConfig",
    "ControllerResult",
    "CreatableTopic",
    "HeartbeatResult",
    "QuorumController",
    "TopicResult",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ControllerConfig:
    default_num_partitions: int = 1
    default_replication_factor: int = 1
    broker_session_timeout_ms: int = 9000
    unclean_leader_election: bool = False
    broker_config: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ControllerResult(Generic[T]):
    records: list[MetadataRecord]
    response: T


@dataclass(frozen=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicResult:
    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True)
class AlterConfigOp:
    """IncrementalAlterConfigs: ``op`` is SET, DELETE, APPEND or SUBTRACT."""

    name: str
    op: str
    value: str | None = None


@dataclass(frozen=True)
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shutdown: bool


def _collision_key(name: str) -> str:
    # Kafka: '.' and '_' collide in metric names, so topics differing only there collide.
    return name.replace(".", "_")


class QuorumController:
    """See the module docstring. Not thread safe: one event loop drives it."""

    def __init__(
        self,
        config: ControllerConfig,
        rng: random.Random,
        image: MetadataImage | None = None,
    ) -> None:
        self.config = config
        self.rng = rng
        self.committed = image or MetadataImage()
        self.image = self.committed
        self._pending: list[MetadataRecord] = []
        self._last_heartbeat_ms: dict[int, int] = {}

    # -- the log ---------------------------------------------------------------------------

    def apply_appended(self, first_offset: int, records: Sequence[MetadataRecord]) -> None:
        """The active controller appended ``records`` at ``first_offset``: make them visible to
        the next request, before they commit."""
        self.image = self.image.replay((first_offset + i, r) for i, r in enumerate(records))

    def replay_committed(self, records: Iterable[tuple[int, MetadataRecord]]) -> None:
        """Records the quorum committed. An inactive controller follows them; the active one
        has already applied them and only advances its committed image."""
        records = list(records)
        self.committed = self.committed.replay(records)
        if self.image.offset < self.committed.offset:
            self.image = self.committed

    def revert_to_committed(self) -> None:
        """Leadership was lost: forget records that did not commit."""
        self.image = self.committed

    # -- topics ----------------------------------------------------------------------------

    def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> ControllerResult[list[TopicResult]]:
        records: list[MetadataRecord] = []
        results: list[TopicResult] = []
        taken = {_collision_key(t.name) for t in self.image.topics()}
        for t in topics:
            try:
                recs, result = self._create_topic(t, taken)
            except KafkaError as e:
                results.append(TopicResult(t.name if isinstance(t.name, str) else "", e))
                continue
            results.append(result)
            taken.add(_collision_key(t.name))
            if not validate_only:
                records.extend(recs)
        return ControllerResult(records, results)

    def _create_topic(
        self, t: CreatableTopic, taken: set[str]
    ) -> tuple[list[MetadataRecord], TopicResult]:
        validate_topic_name(t.name)
        if self.image.topic(t.name) is not None:
            raise errors.TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
        if _collision_key(t.name) in taken:
            raise errors.InvalidTopicError(
                f"Topic '{t.name}' collides with an existing topic: '.' and '_' collide."
            )
        resolve_topic_config(self.config.broker_config, t.configs)
        registered = sorted(self.image.brokers)
        if t.assignment is not None:
            if t.num_partitions not in (-1, len(t.assignment)) or t.replication_factor != -1:
                raise errors.InvalidRequestError(
                    "a replica assignment cannot be combined with a partition count or a "
                    "replication factor"
                )
            assignment = validate_assignment(t.assignment, registered)
        else:
            n = t.num_partitions if t.num_partitions != -1 else self.config.default_num_partitions
            rf = (
                t.replication_factor
                if t.replication_factor != -1
                else self.config.default_replication_factor
            )
            if n <= 0:
                raise errors.InvalidPartitionsError("Number of partitions must be larger than 0.")
            if rf <= 0:
                raise errors.InvalidReplicationFactorError(
                    "Replication factor must be larger than 0."
                )
            assignment = place_replicas(self.image.unfenced_brokers(), n, rf, self.rng)
        topic_id = uuid.UUID(int=self.rng.getrandbits(128), version=4)
        records: list[MetadataRecord] = [TopicRecord(t.name, topic_id)]
        for p, replicas in sorted(assignment.items()):
            records.append(self._new_partition(topic_id, p, replicas))
        for name, value in sorted(t.configs.items()):
            records.append(ConfigRecord(ConfigResourceType.TOPIC, t.name, name, value))
        rf = len(next(iter(assignment.values())))
        return records, TopicResult(t.name, None, topic_id, len(assignment), rf)

    def _new_partition(
        self, topic_id: uuid.UUID, partition: int, replicas: Sequence[int]
    ) -> PartitionRecord:
        live = [b for b in replicas if self._is_usable(b)]
        isr = tuple(live) if live else tuple(replicas)
        leader = live[0] if live else NO_LEADER
        return PartitionRecord(topic_id, partition, tuple(replicas), isr, leader)

    def _is_usable(self, broker_id: int) -> bool:
        b = self.image.brokers.get(broker_id)
        return b is not None and not b.fenced

    def delete_topics(self, names: Sequence[str]) -> ControllerResult[list[TopicResult]]:
        records: list[MetadataRecord] = []
        results: list[TopicResult] = []
        for name in names:
            topic = self.image.topic(name)
            if topic is None:
                err = errors.UnknownTopicOrPartitionError(
                    "This server does not host this topic-partition."
                )
                results.append(TopicResult(name, err))
                continue
            records.append(RemoveTopicRecord(topic.topic_id))
            results.append(TopicResult(name, None, topic.topic_id, len(topic.partitions)))
        return ControllerResult(records, results)

    def create_partitions(
        self,
        requests: Sequence[tuple[str, int, Mapping[int, Sequence[int]] | None]],
        validate_only: bool = False,
    ) -> ControllerResult[list[TopicResult]]:
        """Grow topics to ``count`` partitions: ``(topic, count, assignment of new ones)``."""
        records: list[MetadataRecord] = []
        results: list[TopicResult] = []
        for name, count, assignment in requests:
            try:
                recs = self._create_partitions(name, count, assignment)
            except KafkaError as e:
                results.append(TopicResult(name, e))
                continue
            results.append(TopicResult(name, None, num_partitions=count))
            if not validate_only:
                records.extend(recs)
        return ControllerResult(records, results)

    def _create_partitions(
        self, name: str, count: int, assignment: Mapping[int, Sequence[int]] | None
    ) -> list[MetadataRecord]:
        topic = self.image.topic(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
        current = len(topic.partitions)
        if count < current:
            raise errors.InvalidPartitionsError(
                f"Topic currently has {current} partitions, which is higher than the "
                f"requested {count}."
            )
        if count == current:
            raise errors.InvalidPartitionsError(f"Topic already has {current} partitions.")
        if assignment is not None:
            new = validate_assignment(assignment, sorted(self.image.brokers), current)
        else:
            rf = len(topic.partitions[0].replicas) if topic.partitions else 1
            new = place_replicas(
                self.image.unfenced_brokers(), count - current, rf, self.rng, current
            )
        return [self._new_partition(topic.topic_id, p, r) for p, r in sorted(new.items())]

    def incremental_alter_configs(
        self,
        resources: Sequence[tuple[ConfigResourceType, str, Sequence[AlterConfigOp]]],
        validate_only: bool = False,
    ) -> ControllerResult[list[KafkaError | None]]:
        records: list[MetadataRecord] = []
        results: list[KafkaError | None] = []
        for rtype, rname, ops in resources:
            try:
                recs = self._alter_configs(rtype, rname, ops)
            except KafkaError as e:
                results.append(e)
                continue
            results.append(None)
            if not validate_only:
                records.extend(recs)
        return ControllerResult(records, results)

    def _alter_configs(
        self, rtype: ConfigResourceType, rname: str, ops: Sequence[AlterConfigOp]
    ) -> list[MetadataRecord]:
        if rtype == ConfigResourceType.TOPIC:
            if self.image.topic(rname) is None:
                raise errors.UnknownTopicOrPartitionError(f"Topic {rname} does not exist.")
            current = dict(self.image.topic_config(rname))
        else:
            current = dict(self.image.broker_config(rname))
        for op in ops:
            if op.op == "SET":
                if op.value is None:
                    raise errors.InvalidRequestError(f"SET of {op.name} needs a value")
                current[op.name] = op.value
            elif op.op == "DELETE":
                current.pop(op.name, None)
            elif op.op in ("APPEND", "SUBTRACT"):
                items = [v for v in current.get(op.name, "").split(",") if v]
                given = [v for v in (op.value or "").split(",") if v]
                if op.op == "APPEND":
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                current[op.name] = ",".join(items)
            else:
                raise errors.InvalidRequestError(f"unknown config operation {op.op}")
        if rtype == ConfigResourceType.TOPIC:
            resolve_topic_config(self.config.broker_config, current)
        before = (
            self.image.topic_config(rname)
            if rtype == ConfigResourceType.TOPIC
            else self.image.broker_config(rname)
        )
        records: list[MetadataRecord] = []
        for name in sorted(set(before) | set(current)):
            if before.get(name) != current.get(name):
                records.append(ConfigRecord(rtype, rname, name, current.get(name)))
        return records

    # -- brokers ---------------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None,
        now_ms: int,
    ) -> ControllerResult[int]:
        """Register (or re-register after a restart) a broker; it starts fenced. Returns its
        new broker epoch."""
        existing = self.image.brokers.get(broker_id)
        if (
            existing is not None
            and existing.incarnation_id != incarnation_id
            and not existing.fenced
            and now_ms - self._last_heartbeat_ms.get(broker_id, 0)
            < self.config.broker_session_timeout_ms
        ):
            raise errors.DuplicateBrokerRegistrationError(
                f"Another broker is registered with id {broker_id}."
            )
        epoch = max((b.broker_epoch for b in self.image.brokers.values()), default=0) + 1
        self._last_heartbeat_ms[broker_id] = now_ms
        records: list[MetadataRecord] = [
            RegisterBrokerRecord(broker_id, incarnation_id, epoch, tuple(endpoints), rack, True)
        ]
        if existing is not None and not existing.fenced:
            records.extend(self._leave_isrs(broker_id))
        return ControllerResult(records, epoch)

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        now_ms: int,
        *,
        caught_up: bool = True,
        want_fence: bool = False,
        want_shutdown: bool = False,
    ) -> ControllerResult[HeartbeatResult]:
        """A broker's heartbeat: unfence it once caught up with the metadata log, fence it when
        it asks to (controlled shutdown moves its leadership away first)."""
        b = self.image.brokers.get(broker_id)
        if b is None:
            raise errors.BrokerIdNotRegisteredError(f"Broker {broker_id} is not registered.")
        if b.broker_epoch != broker_epoch:
            raise errors.StaleBrokerEpochError(
                f"Expected broker epoch {b.broker_epoch}, but got {broker_epoch}"
            )
        self._last_heartbeat_ms[broker_id] = now_ms
        records: list[MetadataRecord] = []
        fenced = b.fenced
        if (want_fence or want_shutdown) and not b.fenced:
            records.extend(self._fence(broker_id))
            fenced = True
        elif b.fenced and caught_up and not want_fence and not want_shutdown:
            records.append(UnfenceBrokerRecord(broker_id, broker_epoch))
            records.extend(self._elect_on_unfence(broker_id, records))
            fenced = False
        return ControllerResult(records, HeartbeatResult(caught_up, fenced, want_shutdown))

    def fence_stale_brokers(self, now_ms: int) -> list[MetadataRecord]:
        """Fence every unfenced broker whose session expired."""
        records: list[MetadataRecord] = []
        for broker_id, b in sorted(self.image.brokers.items()):
            last = self._last_heartbeat_ms.setdefault(broker_id, now_ms)
            if not b.fenced and now_ms - last >= self.config.broker_session_timeout_ms:
                records.extend(self._fence(broker_id))
        return records

    def _fence(self, broker_id: int) -> list[MetadataRecord]:
        b = self.image.brokers[broker_id]
        return [FenceBrokerRecord(broker_id, b.broker_epoch), *self._leave_isrs(broker_id)]

    def _leave_isrs(self, broker_id: int) -> list[MetadataRecord]:
        """Move leadership and ISR membership away from ``broker_id``."""
        out: list[MetadataRecord] = []
        for topic in self.image.topics():
            for p, reg in sorted(topic.partitions.items()):
                if broker_id not in reg.isr and reg.leader != broker_id:
                    continue
                # The last ISR member stays in the ISR (it has every committed record) even
                # while it is down, so that it can lead again when it returns.
                isr = tuple(b for b in reg.isr if b != broker_id) or reg.isr
                leader = reg.leader
                if leader == broker_id:
                    leader = self._choose_leader(reg, isr, exclude=broker_id)
                if isr != reg.isr or leader != reg.leader:
                    out.append(
                        PartitionChangeRecord(
                            topic.topic_id,
                            p,
                            isr=isr if isr != reg.isr else None,
                            leader=leader if leader != reg.leader else None,
                        )
                    )
        return out

    def _choose_leader(
        self, reg: PartitionRegistration, isr: Sequence[int], exclude: int = NO_LEADER
    ) -> int:
        for b in reg.replicas:
            if b in isr and b != exclude and self._is_usable(b):
                return b
        if self.config.unclean_leader_election:
            for b in reg.replicas:
                if b != exclude and self._is_usable(b):
                    return b
        return NO_LEADER

    def _elect_on_unfence(
        self, broker_id: int, pending: Sequence[MetadataRecord]
    ) -> list[MetadataRecord]:
        """Leaderless partitions that ``broker_id`` can lead get it as leader."""
        out: list[MetadataRecord] = []
        for topic in self.image.topics():
            for p, reg in sorted(topic.partitions.items()):
                if reg.has_leader or broker_id not in reg.replicas:
                    continue
                if broker_id in reg.isr or self.config.unclean_leader_election:
                    isr = reg.isr if broker_id in reg.isr else (broker_id,)
                    out.append(
                        PartitionChangeRecord(
                            topic.topic_id,
                            p,
                            leader=broker_id,
                            isr=None if isr == reg.isr else isr,
                        )
                    )
        return out

    def elect_preferred_leaders(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> ControllerResult[dict[tuple[str, int], KafkaError | None]]:
        """Move leadership to each partition's preferred (first) replica where it is alive and
        in sync. ``None`` means every partition."""
        records: list[MetadataRecord] = []
        results: dict[tuple[str, int], KafkaError | None] = {}
        wanted = partitions
        if wanted is None:
            wanted = [(t.name, p) for t in self.image.topics() for p in sorted(t.partitions)]
        for name, p in wanted:
            topic = self.image.topic(name)
            reg = topic.partitions.get(p) if topic else None
            if topic is None or reg is None:
                results[(name, p)] = errors.UnknownTopicOrPartitionError(
                    f"{name}-{p} does not exist."
                )
                continue
            preferred = reg.preferred_leader
            if reg.leader == preferred:
                results[(name, p)] = errors.ElectionNotNeededError(
                    f"Leader is already the preferred replica for {name}-{p}."
                )
                continue
            if preferred not in reg.isr or not self._is_usable(preferred):
                results[(name, p)] = errors.PreferredLeaderNotAvailableError(
                    f"The preferred leader {preferred} of {name}-{p} is not available."
                )
                continue
            records.append(PartitionChangeRecord(topic.topic_id, p, leader=preferred))
            results[(name, p)] = None
        return ControllerResult(records, results)
