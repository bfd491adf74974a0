""":class:`~rillet.broker.controller_channel.ControllerChannel` over the network (Kafka's
NodeToControllerChannelManager): the broker reaches the active controller on its CONTROLLER
listener, whichever voter that is.

The broker knows the active controller from the metadata log it follows: every node runs a
replica of the quorum (a broker-only node as an observer), whose leader is the active
controller. ``leader()`` reads it. While no leader is known, or the one called answers
NOT_CONTROLLER or cannot be reached, a forwarded request (admin changes, AlterPartition,
AllocateProducerIds) is retried every ``retry_backoff_ms`` until ``retry_timeout_ms`` has
passed; registration and heartbeats fail at once, since the broker's lifecycle retries them
on its own schedule. In combined mode ``local`` is this node's controller, called directly
while it is the active one.

A call in flight to a controller that stops being the active one is abandoned as soon as the
quorum names another (``leader_changed``), as Kafka's channel disconnects from the old
controller: a controller that was paused would otherwise hold a broker's heartbeat for the
whole request timeout, and the new controller would fence that live broker meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc

from rillet.broker.controller_channel import ConfigChanges, PartitionsToCreate
from rillet.controller import (
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
from rillet.errors import KafkaError, NotControllerError
from rillet.protocol.admin import reassignment_requests_to_pb, reassignment_results_from_pb
from rillet.protocol.controller import (
    allocate_producer_ids_block_from_pb,
    allocate_producer_ids_request_to_pb,
    alter_configs_request_to_pb,
    alter_configs_results_from_pb,
    alter_partition_request_to_pb,
    alter_partition_results_from_pb,
    create_partitions_request_to_pb,
    create_partitions_results_from_pb,
    create_topics_request_to_pb,
    create_topics_results_from_pb,
    delete_topics_request_to_pb,
    delete_topics_results_from_pb,
    elect_leaders_request_to_pb,
    elect_leaders_results_from_pb,
)
from rillet.protocol.errors import error_from_wire
from rillet.protocol.gen.v1 import controller_pb2_grpc, quorum_pb2, quorum_pb2_grpc, security_pb2
from rillet.protocol.quorum import (
    broker_heartbeat_request_to_pb,
    broker_heartbeat_result_from_pb,
    broker_registration_request_to_pb,
    describe_quorum_from_pb,
)
from rillet.protocol.quotas import alter_quotas_request_to_pb, alter_quotas_results_from_pb
from rillet.protocol.security import (
    acl_binding_to_pb,
    acl_filter_to_pb,
    alter_scram_request_to_pb,
    alter_scram_results_from_pb,
    create_acls_results_from_pb,
    delete_acls_results_from_pb,
)
from rillet.raft.node import QuorumInfo
from rillet.scheduler import Clock
from rillet.security.acls import AclBinding, AclBindingFilter
from rillet.security.tls import ClientTls, grpc_channel

__all__ = ["GrpcControllerChannel"]

_log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def _all_not_controller(errors: Sequence[KafkaError | None]) -> bool:
    return bool(errors) and all(isinstance(e, NotControllerError) for e in errors)


class GrpcControllerChannel:
    """See the module docstring. ``voters`` maps controller ids to ``host:port`` of their
    CONTROLLER listeners (``controller.quorum.voters``)."""

    def __init__(
        self,
        voters: Mapping[int, str],
        cluster_id: str,
        leader: Callable[[], int | None],
        clock: Clock,
        *,
        local: ControllerService | None = None,
        request_timeout_ms: int = 2000,
        retry_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        tls: ClientTls | None = None,
    ) -> None:
        self.voters = dict(voters)
        self.tls = tls
        self.cluster_id = cluster_id
        self.leader = leader
        self.clock = clock
        self.local = local
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_timeout_ms = retry_timeout_ms
        self.retry_backoff_s = retry_backoff_ms / 1000
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._change: asyncio.Future[None] | None = None

    def leader_changed(self) -> None:
        """The quorum's leader or epoch changed: calls in flight re-check their target."""
        if self._change is not None and not self._change.done():
            self._change.set_result(None)
        self._change = None

    async def _on_active(self, target: int, call: Awaitable[T]) -> T:
        """Await ``call`` to controller ``target``, abandoning it (NOT_CONTROLLER) once the
        quorum names another leader."""
        task: asyncio.Future[T] = asyncio.ensure_future(call)
        try:
            while True:
                if self._change is None:
                    self._change = asyncio.get_running_loop().create_future()
                change: asyncio.Future[Any] = self._change
                await asyncio.wait({task, change}, return_when=asyncio.FIRST_COMPLETED)
                if task.done():
                    return task.result()
                if self.leader() != target:
                    raise NotControllerError(
                        f"The active controller moved from {target} to {self.leader()}."
                    )
        finally:
            if not task.done():
                task.cancel()

    @property
    def controller_id(self) -> int | None:
        return self.leader()

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()

    def _channel(self, node_id: int) -> grpc.aio.Channel:
        ch = self._channels.get(node_id)
        if ch is None:
            ch = self._channels[node_id] = grpc_channel(self.voters[node_id], self.tls)
        return ch

    def _target(self) -> int:
        target = self.leader()
        if target is None:
            raise NotControllerError("No active controller is known yet.")
        if target not in self.voters:
            raise NotControllerError(f"The active controller {target} is not a known voter.")
        return target

    async def _call(
        self,
        local: Callable[[ControllerService], Awaitable[T]],
        remote: Callable[[grpc.aio.Channel], Awaitable[T]],
        *,
        retry: bool,
    ) -> T:
        """Send to the active controller: ``local`` when it is this node's, else ``remote``
        over its channel; retry NOT_CONTROLLER and unreachable controllers when ``retry``."""
        deadline = self.clock() + self.retry_timeout_ms
        while True:
            try:
                if self.local is not None and self.local.is_active:
                    return await local(self.local)
                target = self._target()
                try:
                    return await self._on_active(target, remote(self._channel(target)))
                except grpc.RpcError as e:
                    code = e.code() if isinstance(e, grpc.aio.AioRpcError) else None
                    raise NotControllerError(
                        f"The controller {target} at {self.voters[target]} did not answer"
                        f" ({code.name if code else e})."
                    ) from None
            except NotControllerError:
                if not retry or self.clock() >= deadline:
                    raise
            await asyncio.sleep(self.retry_backoff_s)

    def _opts(self) -> dict[str, Any]:
        return {"timeout": self.request_timeout_s}

    # -- lifecycle ---------------------------------------------------------------------------

    async def register_broker(self, request: BrokerRegistrationRequest) -> int:
        async def remote(ch: grpc.aio.Channel) -> int:
            stub = quorum_pb2_grpc.QuorumServiceStub(ch)
            r = await stub.BrokerRegistration(
                broker_registration_request_to_pb(request, self.cluster_id), **self._opts()
            )
            err = error_from_wire(r.error_code, r.error_message)
            if err is not None:
                raise err
            return r.broker_epoch

        return await self._call(lambda c: c.register_broker(request), remote, retry=False)

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> HeartbeatResult:
        async def remote(ch: grpc.aio.Channel) -> HeartbeatResult:
            stub = quorum_pb2_grpc.QuorumServiceStub(ch)
            r = await stub.BrokerHeartbeat(broker_heartbeat_request_to_pb(request), **self._opts())
            result = broker_heartbeat_result_from_pb(r)
            if isinstance(result, KafkaError):
                raise result
            return result

        return await self._call(lambda c: c.broker_heartbeat(request), remote, retry=False)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
    ) -> list[AlterPartitionResult]:
        async def remote(ch: grpc.aio.Channel) -> list[AlterPartitionResult]:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            r = await stub.AlterPartition(
                alter_partition_request_to_pb(broker_id, broker_epoch, changes), **self._opts()
            )
            results = alter_partition_results_from_pb(r)
            if isinstance(results, KafkaError):
                raise results
            return results

        return await self._call(
            lambda c: c.alter_partition(broker_id, broker_epoch, changes), remote, retry=True
        )

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        async def remote(ch: grpc.aio.Channel) -> ProducerIdsBlock:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            r = await stub.AllocateProducerIds(
                allocate_producer_ids_request_to_pb(broker_id, broker_epoch), **self._opts()
            )
            block = allocate_producer_ids_block_from_pb(broker_id, r)
            if isinstance(block, KafkaError):
                raise block
            return block

        return await self._call(
            lambda c: c.allocate_producer_ids(broker_id, broker_epoch), remote, retry=True
        )

    # -- forwarded admin requests ----------------------------------------------------------

    async def _forward_topics(
        self,
        local: Callable[[ControllerService], Awaitable[list[TopicResult]]],
        send: Callable[
            [controller_pb2_grpc.ControllerServiceAsyncStub], Awaitable[list[TopicResult]]
        ],
    ) -> list[TopicResult]:
        async def remote(ch: grpc.aio.Channel) -> list[TopicResult]:
            results = await send(controller_pb2_grpc.ControllerServiceStub(ch))
            if _all_not_controller([r.error for r in results]):
                raise NotControllerError(str(results[0].error))
            return results

        return await self._call(local, remote, retry=True)

    async def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[TopicResult]:
        request = create_topics_request_to_pb(topics, validate_only)

        async def send(stub: controller_pb2_grpc.ControllerServiceAsyncStub) -> list[TopicResult]:
            return create_topics_results_from_pb(await stub.CreateTopics(request, **self._opts()))

        return await self._forward_topics(lambda c: c.create_topics(topics, validate_only), send)

    async def delete_topics(self, names: Sequence[str]) -> list[TopicResult]:
        request = delete_topics_request_to_pb(names)

        async def send(stub: controller_pb2_grpc.ControllerServiceAsyncStub) -> list[TopicResult]:
            return delete_topics_results_from_pb(await stub.DeleteTopics(request, **self._opts()))

        return await self._forward_topics(lambda c: c.delete_topics(names), send)

    async def create_partitions(
        self, requests: PartitionsToCreate, validate_only: bool = False
    ) -> list[TopicResult]:
        request = create_partitions_request_to_pb(requests, validate_only)

        async def send(stub: controller_pb2_grpc.ControllerServiceAsyncStub) -> list[TopicResult]:
            r = await stub.CreatePartitions(request, **self._opts())
            return create_partitions_results_from_pb(r)

        return await self._forward_topics(
            lambda c: c.create_partitions(requests, validate_only), send
        )

    async def incremental_alter_configs(
        self, resources: ConfigChanges, validate_only: bool = False
    ) -> list[KafkaError | None]:
        request = alter_configs_request_to_pb(resources, validate_only)

        async def remote(ch: grpc.aio.Channel) -> list[KafkaError | None]:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            results = alter_configs_results_from_pb(
                await stub.AlterConfigs(request, **self._opts())
            )
            if _all_not_controller(results):
                raise NotControllerError(str(results[0]))
            return results

        return await self._call(
            lambda c: c.incremental_alter_configs(resources, validate_only), remote, retry=True
        )

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None
    ) -> ElectionResults:
        request = elect_leaders_request_to_pb(election_type, partitions)

        async def remote(ch: grpc.aio.Channel) -> ElectionResults:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            results = elect_leaders_results_from_pb(
                await stub.ElectLeaders(request, **self._opts())
            )
            if isinstance(results, KafkaError):
                raise results
            return results

        return await self._call(
            lambda c: c.elect_leaders(election_type, partitions), remote, retry=True
        )

    async def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> list[KafkaError | None]:
        request = reassignment_requests_to_pb(requests)

        async def remote(ch: grpc.aio.Channel) -> list[KafkaError | None]:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            answered = reassignment_results_from_pb(
                await stub.AlterPartitionReassignments(request, **self._opts())
            )
            if isinstance(answered, KafkaError):
                raise answered
            return [err for _, _, err in answered]

        return await self._call(
            lambda c: c.alter_partition_reassignments(requests), remote, retry=True
        )

    async def describe_quorum(self) -> QuorumInfo:
        async def local(c: ControllerService) -> QuorumInfo:
            return c.describe_quorum()

        async def remote(ch: grpc.aio.Channel) -> QuorumInfo:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            info = describe_quorum_from_pb(
                await stub.DescribeQuorum(quorum_pb2.DescribeQuorumRequest(), **self._opts())
            )
            if isinstance(info, KafkaError):
                raise info
            return info

        return await self._call(local, remote, retry=True)

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        request = security_pb2.CreateAclsRequest(creations=[acl_binding_to_pb(a) for a in bindings])

        async def remote(ch: grpc.aio.Channel) -> list[KafkaError | None]:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            results = create_acls_results_from_pb(await stub.CreateAcls(request, **self._opts()))
            if _all_not_controller(results):
                raise NotControllerError(str(results[0]))
            return results

        return await self._call(lambda c: c.create_acls(bindings), remote, retry=True)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        request = security_pb2.DeleteAclsRequest(filters=[acl_filter_to_pb(f) for f in filters])

        async def remote(ch: grpc.aio.Channel) -> list[KafkaError | list[AclBinding]]:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            results = delete_acls_results_from_pb(await stub.DeleteAcls(request, **self._opts()))
            if results and all(isinstance(r, NotControllerError) for r in results):
                raise NotControllerError(str(results[0]))
            return results

        return await self._call(lambda c: c.delete_acls(filters), remote, retry=True)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, KafkaError | None]]:
        request = alter_scram_request_to_pb(deletions, upsertions)

        async def remote(ch: grpc.aio.Channel) -> list[tuple[str, KafkaError | None]]:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            results = alter_scram_results_from_pb(
                await stub.AlterUserScramCredentials(request, **self._opts())
            )
            if results and all(isinstance(e, NotControllerError) for _, e in results):
                raise NotControllerError(str(results[0][1]))
            return results

        return await self._call(
            lambda c: c.alter_user_scram_credentials(deletions, upsertions), remote, retry=True
        )

    async def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool
    ) -> list[KafkaError | None]:
        request = alter_quotas_request_to_pb(alterations, validate_only)

        async def remote(ch: grpc.aio.Channel) -> list[KafkaError | None]:
            stub = controller_pb2_grpc.ControllerServiceStub(ch)
            results = alter_quotas_results_from_pb(
                await stub.AlterClientQuotas(request, **self._opts())
            )
            if results and all(isinstance(e, NotControllerError) for e in results):
                raise NotControllerError(str(results[0]))
            return results

        return await self._call(
            lambda c: c.alter_client_quotas(alterations, validate_only), remote, retry=True
        )
