"""QuorumController: turns admin and broker-lifecycle requests into metadata records.

A pure state machine in the style of Kafka's QuorumController: no sockets, clocks, threads
or files; time comes in as ``now_ms`` and randomness from an injected ``random.Random``.
Every request returns a :class:`~rillet.controller.results.ControllerResult`: the records to
append to the metadata log and the response to send once they are committed. The active
controller applies its own records to :attr:`image` as soon as it appends them (so the next
request sees them) and keeps the last committed image apart; if it loses leadership it
calls :meth:`revert_to_committed` and continues from what the quorum committed.

The controller dispatches; each concern has its own module: topics and partitions
(:mod:`~rillet.controller.topics`), configs (:mod:`~rillet.controller.configs`), broker
membership (:mod:`~rillet.controller.cluster`), leader elections
(:mod:`~rillet.controller.elections`), ISR changes (:mod:`~rillet.controller.isr`) and
producer id blocks (:mod:`~rillet.controller.producer_ids`), ACLs
(:mod:`~rillet.controller.acls`) and SCRAM credentials (:mod:`~rillet.controller.scram`).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from rillet.controller import (
    acls,
    cluster,
    configs,
    elections,
    isr,
    producer_ids,
    quotas,
    reassignment,
    scram,
    topics,
)
from rillet.controller.cluster import HeartbeatResult
from rillet.controller.configs import AlterConfigOp
from rillet.controller.elections import ElectionResults, ElectionType
from rillet.controller.elr import maintain_elr
from rillet.controller.isr import AlterPartitionResult, AlterPartitionState
from rillet.controller.producer_ids import ProducerIdsBlock
from rillet.controller.quotas import QuotaAlteration
from rillet.controller.results import ControllerResult
from rillet.controller.scram import ScramDeletion, ScramUpsertion
from rillet.controller.topics import CreatableTopic, TopicDefaults, TopicResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
)
from rillet.security.acls import AclBinding, AclBindingFilter

__all__ = ["ControllerConfig", "QuorumController"]

T = TypeVar("T")


@dataclass(frozen=True)
class ControllerConfig:
    default_num_partitions: int = 1
    default_replication_factor: int = 1
    broker_session_timeout_ms: int = 9000
    unclean_leader_election: bool = False
    leader_imbalance_per_broker_percentage: int = 10
    broker_config: Mapping[str, object] = field(default_factory=dict)


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
        self._topic_defaults = TopicDefaults(
            config.default_num_partitions,
            config.default_replication_factor,
            config.broker_config,
        )
        self._unclean = config.unclean_leader_election
        self._cluster = cluster.ClusterControl(
            config.broker_session_timeout_ms, config.unclean_leader_election
        )

    # -- eligible leader replicas -------------------------------------------------------

    def _elr(self, result: ControllerResult[T]) -> ControllerResult[T]:
        """Every partition change an operation makes keeps the ELR (KIP-966) in step."""
        return ControllerResult(self._elr_records(result.records), result.response)

    def _elr_records(self, records: list[MetadataRecord]) -> list[MetadataRecord]:
        return maintain_elr(self.image, records, self.config.broker_config)

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

    def load_snapshot(self, image: MetadataImage) -> None:
        """A snapshot's image replaces what this (inactive) controller followed."""
        self.committed = self.image = image

    def activate(self) -> None:
        """This node's quorum replica became the leader: brokers' sessions start afresh."""
        self._cluster.restart_sessions()

    def revert_to_committed(self) -> None:
        """Leadership was lost: forget records that did not commit."""
        self.image = self.committed

    # -- topics, partitions and configs ----------------------------------------------------

    def create_topics(
        self, requests: Sequence[CreatableTopic], validate_only: bool = False
    ) -> ControllerResult[list[TopicResult]]:
        return self._elr(
            topics.create_topics(
                self.image, self._topic_defaults, self.rng, requests, validate_only
            )
        )

    def delete_topics(self, names: Sequence[str]) -> ControllerResult[list[TopicResult]]:
        return topics.delete_topics(self.image, names)

    def create_partitions(
        self,
        requests: Sequence[tuple[str, int, Mapping[int, Sequence[int]] | None]],
        validate_only: bool = False,
    ) -> ControllerResult[list[TopicResult]]:
        """Grow topics to ``count`` partitions: ``(topic, count, assignment of new ones)``."""
        return topics.create_partitions(self.image, self.rng, requests, validate_only)

    def incremental_alter_configs(
        self,
        resources: Sequence[tuple[ConfigResourceType, str, Sequence[AlterConfigOp]]],
        validate_only: bool = False,
    ) -> ControllerResult[list[KafkaError | None]]:
        """Changed configs take effect with their records: turning
        ``unclean.leader.election.enable`` on elects leaders for the leaderless partitions it
        now covers, in the same batch."""
        result = configs.incremental_alter_configs(
            self.image, self.config.broker_config, resources, validate_only
        )
        if any(
            isinstance(r, ConfigRecord) and r.name == elections.UNCLEAN_KEY for r in result.records
        ):
            after = self.image.replay(enumerate(result.records, self.image.offset + 1))
            result = ControllerResult(
                [*result.records, *elections.elect_unclean_leaders(after, self._unclean)],
                result.response,
            )
        return self._elr(result)

    # -- brokers ---------------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None,
        now_ms: int,
        previous_broker_epoch: int = -1,
    ) -> ControllerResult[int]:
        """Register (or re-register after a restart) a broker; it starts fenced. Returns its
        new broker epoch."""
        return self._elr(
            self._cluster.register_broker(
                self.image,
                broker_id,
                incarnation_id,
                endpoints,
                rack,
                now_ms,
                previous_broker_epoch,
            )
        )

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
        return self._elr(
            self._cluster.broker_heartbeat(
                self.image,
                broker_id,
                broker_epoch,
                now_ms,
                caught_up=caught_up,
                want_fence=want_fence,
                want_shutdown=want_shutdown,
            )
        )

    def fence_stale_brokers(self, now_ms: int) -> list[MetadataRecord]:
        """Fence every unfenced broker whose session expired."""
        return self._elr_records(self._cluster.fence_stale_brokers(self.image, now_ms))

    # -- leaders and ISRs ------------------------------------------------------------------

    def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Sequence[tuple[str, int]] | None = None,
    ) -> ControllerResult[ElectionResults]:
        """ElectLeaders (``rillet leader-election``); ``None`` means every partition."""
        return self._elr(elections.elect_leaders(self.image, election_type, partitions))

    def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> ControllerResult[list[KafkaError | None]]:
        """AlterPartitionReassignments (KIP-455): start (a target) or cancel (None)."""
        return self._elr(reassignment.alter_partition_reassignments(self.image, requests))

    def elect_unclean_leaders(self) -> list[MetadataRecord]:
        """Leaderless partitions of topics that allow unclean elections get a leader."""
        return self._elr_records(elections.elect_unclean_leaders(self.image, self._unclean))

    def balance_partition_leaders(self) -> list[MetadataRecord]:
        """Automatic preferred leader election for brokers over
        ``leader.imbalance.per.broker.percentage``."""
        return self._elr_records(
            elections.balance_partition_leaders(
                self.image, self.config.leader_imbalance_per_broker_percentage
            )
        )

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> ControllerResult[list[AlterPartitionResult]]:
        """A leader's ISR changes (KIP-497)."""
        return self._elr(isr.alter_partition(self.image, broker_id, broker_epoch, changes))

    # -- producer ids ----------------------------------------------------------------------

    def generate_next_producer_id(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[ProducerIdsBlock]:
        """AllocateProducerIds (KIP-730): the next block of producer ids for a broker."""
        return producer_ids.generate_next_producer_id(self.image, broker_id, broker_epoch)

    # -- security --------------------------------------------------------------------------

    def create_acls(
        self, bindings: Sequence[AclBinding]
    ) -> ControllerResult[list[KafkaError | None]]:
        return acls.create_acls(self.image, self.rng, bindings)

    def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> ControllerResult[list[KafkaError | list[AclBinding]]]:
        return acls.delete_acls(self.image, filters)

    def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> ControllerResult[list[tuple[str, KafkaError | None]]]:
        return scram.alter_user_scram_credentials(self.image, deletions, upsertions)

    def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
    ) -> ControllerResult[list[KafkaError | None]]:
        result = quotas.alter_client_quotas(self.image, alterations)
        return ControllerResult([], result.response) if validate_only else result
