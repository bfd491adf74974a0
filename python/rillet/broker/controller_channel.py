"""The broker's one way to the active controller (Kafka's NodeToControllerChannelManager):
registration and heartbeats, ISR changes (AlterPartition), blocks of producer ids
(AllocateProducerIds, KIP-730), and the admin requests a broker forwards (create/delete
topics, create partitions, alter configs, auto topic creation, ACLs, SCRAM credentials,
client quotas).

Every method raises a :class:`~rillet.errors.KafkaError` when the request as a whole
fails (NOT_CONTROLLER when there is no active controller to take it, say); per-item
errors come back inside the results. :class:`InProcessControllerChannel` serves a node
that runs its broker and a controller in one process (combined mode). A broker that
talks to a remote controller gets an implementation over RPC with this same interface;
nothing else in the broker changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from rillet.controller import (
    AlterConfigOp,
    AlterPartitionResult,
    AlterPartitionState,
    CreatableTopic,
    ElectionResults,
    ElectionType,
    HeartbeatResult,
    ProducerIdsBlock,
    TopicResult,
)
from rillet.controller.quotas import QuotaAlteration
from rillet.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from rillet.controller.scram import ScramDeletion, ScramUpsertion
from rillet.controller.service import ControllerService
from rillet.errors import KafkaError
from rillet.metadata.records import ConfigResourceType
from rillet.raft.node import QuorumInfo
from rillet.security.acls import AclBinding, AclBindingFilter

__all__ = ["ControllerChannel", "InProcessControllerChannel"]

PartitionsToCreate = Sequence[tuple[str, int, Mapping[int, Sequence[int]] | None]]
ConfigChanges = Sequence[tuple[ConfigResourceType, str, Sequence[AlterConfigOp]]]


class ControllerChannel(Protocol):
    @property
    def controller_id(self) -> int | None:
        """The active controller as last known (None while there is none)."""
        ...

    async def register_broker(self, request: BrokerRegistrationRequest) -> int:
        """Returns the new broker epoch."""
        ...

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> HeartbeatResult: ...

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> list[AlterPartitionResult]: ...

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        """The next block of producer ids for this broker, once the controller committed it
        (STALE_BROKER_EPOCH when ``broker_epoch`` is not its current registration's)."""
        ...

    async def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[TopicResult]: ...

    async def delete_topics(self, names: Sequence[str]) -> list[TopicResult]: ...

    async def create_partitions(
        self, requests: PartitionsToCreate, validate_only: bool = False
    ) -> list[TopicResult]: ...

    async def incremental_alter_configs(
        self, resources: ConfigChanges, validate_only: bool = False
    ) -> list[KafkaError | None]: ...

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None
    ) -> ElectionResults:
        """ElectLeaders; ``None`` means every partition."""
        ...

    async def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> list[KafkaError | None]:
        """AlterPartitionReassignments: one result per request."""
        ...

    async def describe_quorum(self) -> QuorumInfo:
        """The metadata quorum as its leader sees it."""
        ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """CreateAcls: one result per binding."""
        ...

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        """DeleteAcls: per filter, the ACLs it deleted or why it could not."""
        ...

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, KafkaError | None]]:
        """AlterUserScramCredentials: one result per user."""
        ...

    async def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool
    ) -> list[KafkaError | None]:
        """AlterClientQuotas: one result per alteration."""
        ...

    async def close(self) -> None: ...


class InProcessControllerChannel:
    """:class:`ControllerChannel` to the controller in this process: each call goes straight
    to the :class:`~rillet.controller.service.ControllerService`, which answers only while
    this node is the active controller."""

    def __init__(self, service: ControllerService) -> None:
        self.service = service

    @property
    def controller_id(self) -> int | None:
        return self.service.controller_id

    async def register_broker(self, request: BrokerRegistrationRequest) -> int:
        return await self.service.register_broker(request)

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> HeartbeatResult:
        return await self.service.broker_heartbeat(request)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> list[AlterPartitionResult]:
        return await self.service.alter_partition(broker_id, broker_epoch, changes)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        return await self.service.allocate_producer_ids(broker_id, broker_epoch)

    async def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[TopicResult]:
        return await self.service.create_topics(topics, validate_only)

    async def delete_topics(self, names: Sequence[str]) -> list[TopicResult]:
        return await self.service.delete_topics(names)

    async def create_partitions(
        self, requests: PartitionsToCreate, validate_only: bool = False
    ) -> list[TopicResult]:
        return await self.service.create_partitions(requests, validate_only)

    async def incremental_alter_configs(
        self, resources: ConfigChanges, validate_only: bool = False
    ) -> list[KafkaError | None]:
        return await self.service.incremental_alter_configs(resources, validate_only)

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None
    ) -> ElectionResults:
        return await self.service.elect_leaders(election_type, partitions)

    async def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> list[KafkaError | None]:
        return await self.service.alter_partition_reassignments(requests)

    async def describe_quorum(self) -> QuorumInfo:
        return self.service.describe_quorum()

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        return await self.service.create_acls(bindings)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        return await self.service.delete_acls(filters)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, KafkaError | None]]:
        return await self.service.alter_user_scram_credentials(deletions, upsertions)

    async def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool
    ) -> list[KafkaError | None]:
        return await self.service.alter_client_quotas(alterations, validate_only)

    async def close(self) -> None:
        pass
