"""ControllerService: the pure :class:`~rillet.controller.QuorumController` run on the event
loop over the metadata quorum (Kafka's ControllerApis and the QuorumController's event
queue).

A request (create topics, register a broker, ...) becomes records computed by the pure
controller; the records are proposed through Raft, applied at once to the controller's
working image (so the next request sees them), and the request is answered when they
commit. Committed records are replayed into the controller, so an inactive controller
follows the log. Any replica of the quorum may hold one; only the active (leader) one
answers, the others raise NOT_CONTROLLER.

This is the one module of :mod:`rillet.controller` that is not pure: it awaits commits on
the asyncio loop. Time comes from the injected clock. Not thread safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from rillet.controller import (
    AlterConfigOp,
    AlterPartitionResult,
    AlterPartitionState,
    ControllerResult,
    CreatableTopic,
    HeartbeatResult,
    ProducerIdsBlock,
    QuorumController,
    TopicResult,
)
from rillet.controller.elections import ElectionResults, ElectionType
from rillet.controller.quotas import QuotaAlteration
from rillet.controller.requests import BrokerHeartbeatRequest, BrokerRegistrationRequest
from rillet.controller.scram import ScramDeletion, ScramUpsertion
from rillet.errors import KafkaError, NotControllerError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ConfigResourceType, MetadataRecord
from rillet.protocol.metadata_records import encode_record
from rillet.raft.driver import RaftDriver
from rillet.raft.node import LeaderAndEpoch, QuorumInfo
from rillet.scheduler import Clock
from rillet.security.acls import AclBinding, AclBindingFilter

__all__ = ["ControllerService"]

T = TypeVar("T")


class ControllerService:
    """See the module docstring. :meth:`attach` the quorum's driver before any request."""

    def __init__(self, controller: QuorumController, clock: Clock) -> None:
        self.controller = controller
        self.clock = clock
        self.driver: RaftDriver | None = None
        self.leader = LeaderAndEpoch(None, -1)

    def attach(self, driver: RaftDriver) -> None:
        self.driver = driver

    @property
    def is_active(self) -> bool:
        return self.driver is not None and self.driver.leader_ready

    @property
    def controller_id(self) -> int | None:
        """The active controller as this replica knows it (None while there is none)."""
        return self.leader.leader_id

    def _require_active(self) -> tuple[QuorumController, RaftDriver]:
        if self.driver is None or not self.driver.leader_ready:
            raise NotControllerError(
                f"This node is not the active controller (leader: {self.leader.leader_id})."
            )
        return self.controller, self.driver

    async def _write(self, op: Callable[[QuorumController], ControllerResult[T]]) -> T:
        """Run ``op`` on the active controller, propose its records and return its response
        once they commit (at once when it wrote none)."""
        controller, driver = self._require_active()
        result = op(controller)
        if not result.records:
            return result.response
        offsets = driver.propose([encode_record(r) for r in result.records])
        controller.apply_appended(offsets.start, result.records)
        await driver.wait_committed(offsets.stop - 1)
        return result.response

    # -- broker lifecycle (KIP-631) ----------------------------------------------------------

    async def register_broker(self, request: BrokerRegistrationRequest) -> int:
        """Returns the broker's new epoch."""
        return await self._write(
            lambda c: c.register_broker(
                request.broker_id,
                request.incarnation_id,
                list(request.listeners),
                request.rack,
                self.clock(),
                request.previous_broker_epoch,
            )
        )

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> HeartbeatResult:
        def op(c: QuorumController) -> ControllerResult[HeartbeatResult]:
            return c.broker_heartbeat(
                request.broker_id,
                request.broker_epoch,
                self.clock(),
                caught_up=request.current_metadata_offset >= c.committed.offset,
                want_fence=request.want_fence,
                want_shutdown=request.want_shutdown,
            )

        return await self._write(op)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> list[AlterPartitionResult]:
        return await self._write(lambda c: c.alter_partition(broker_id, broker_epoch, changes))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        """The next block of producer ids for a broker (KIP-730), once its record commits."""
        return await self._write(lambda c: c.generate_next_producer_id(broker_id, broker_epoch))

    def fence_stale_brokers(self) -> None:
        """Fence brokers whose session expired (scheduled every heartbeat interval on every
        controller; only the active one acts). The write completes in the background."""
        self._background(lambda c: c.fence_stale_brokers(self.clock()))

    def balance_partition_leaders(self) -> None:
        """Automatic preferred leader election (every
        ``leader.imbalance.check.interval.seconds`` while ``auto.leader.rebalance.enable``)."""
        self._background(lambda c: c.balance_partition_leaders())

    def elect_unclean_leaders(self) -> None:
        """Unclean elections for leaderless partitions whose topic allows them (every
        ``unclean.leader.election.interval.ms``)."""
        self._background(lambda c: c.elect_unclean_leaders())

    def _background(self, op: Callable[[QuorumController], list[MetadataRecord]]) -> None:
        """A periodic task: on the active controller only, write what ``op`` decides; the
        write completes in the background (a failure is retried by the next period)."""
        if not self.is_active:
            return
        records = op(self.controller)
        if not records:
            return
        task = asyncio.get_running_loop().create_task(
            self._write(lambda _: ControllerResult(records, None))
        )
        task.add_done_callback(lambda t: t.exception())

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None = None
    ) -> ElectionResults:
        """ElectLeaders; ``None`` means every partition."""
        return await self._write(lambda c: c.elect_leaders(election_type, partitions))

    async def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> list[KafkaError | None]:
        """AlterPartitionReassignments; one result per request."""
        return await self._write(lambda c: c.alter_partition_reassignments(requests))

    def describe_quorum(self) -> QuorumInfo:
        """The quorum as its leader sees it (``metadata-quorum describe``)."""
        _, driver = self._require_active()
        info = driver.node.describe_quorum()
        if info is None:
            raise NotControllerError("This node is no longer the quorum leader.")
        return info

    # -- admin -----------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[TopicResult]:
        return await self._write(lambda c: c.create_topics(topics, validate_only))

    async def delete_topics(self, names: Sequence[str]) -> list[TopicResult]:
        return await self._write(lambda c: c.delete_topics(names))

    async def create_partitions(
        self,
        requests: Sequence[tuple[str, int, Mapping[int, Sequence[int]] | None]],
        validate_only: bool = False,
    ) -> list[TopicResult]:
        return await self._write(lambda c: c.create_partitions(requests, validate_only))

    async def incremental_alter_configs(
        self,
        resources: Sequence[tuple[ConfigResourceType, str, Sequence[AlterConfigOp]]],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        return await self._write(lambda c: c.incremental_alter_configs(resources, validate_only))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        return await self._write(lambda c: c.create_acls(bindings))

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        return await self._write(lambda c: c.delete_acls(filters))

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, KafkaError | None]]:
        return await self._write(lambda c: c.alter_user_scram_credentials(deletions, upsertions))

    async def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
    ) -> list[KafkaError | None]:
        return await self._write(lambda c: c.alter_client_quotas(alterations, validate_only))

    # -- the quorum's callbacks ----------------------------------------------------------------

    def on_commit(self, records: Sequence[tuple[int, MetadataRecord]]) -> None:
        self.controller.replay_committed(records)

    def on_load_snapshot(self, image: MetadataImage) -> None:
        self.controller.load_snapshot(image)

    def on_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader
        if not self.is_active:
            self.controller.revert_to_committed()
        if self.driver is not None and leader.leader_id == self.driver.node.node_id:
            self.controller.activate()
