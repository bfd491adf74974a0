"""ControllerService on the controller listener (Kafka's ControllerApis): AlterPartition from
partition leaders, AllocateProducerIds from brokers, the admin requests brokers forward, and
DescribeQuorum. Each call goes to
this node's :class:`~rillet.controller.service.ControllerService`, which answers only while
it is the active controller; otherwise every result carries NOT_CONTROLLER and the broker
tries the leader it learns of next."""

from __future__ import annotations

import grpc

from rillet.controller import TopicResult
from rillet.controller.scram import users_named
from rillet.controller.service import ControllerService
from rillet.errors import InvalidRequestError, KafkaError
from rillet.protocol.admin import (
    alter_configs_request_from_pb,
    alter_configs_response,
    create_partitions_response,
    create_topics_request_from_pb,
    create_topics_response,
    delete_topics_response,
    elect_leaders_request_from_pb,
    elect_leaders_response,
    reassignment_requests_from_pb,
    reassignment_response,
)
from rillet.protocol.controller import (
    allocate_producer_ids_request_from_pb,
    allocate_producer_ids_response,
    alter_partition_request_from_pb,
    alter_partition_response,
    create_partitions_request_from_pb,
)
from rillet.protocol.gen.v1 import (
    admin_pb2,
    controller_pb2,
    controller_pb2_grpc,
    quorum_pb2,
    quota_pb2,
    security_pb2,
)
from rillet.protocol.quorum import describe_quorum_response
from rillet.protocol.quotas import alter_quotas_request_from_pb, alter_quotas_response
from rillet.protocol.security import (
    acl_binding_from_pb,
    acl_filter_from_pb,
    alter_scram_request_from_pb,
    alter_scram_response,
    create_acls_response,
    delete_acls_response,
)

__all__ = ["ControllerServicer"]

Context = grpc.aio.ServicerContext[object, object]


class ControllerServicer(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self, controller: ControllerService) -> None:
        self.controller = controller

    async def AlterPartition(
        self, request: controller_pb2.AlterPartitionRequest, context: Context
    ) -> controller_pb2.AlterPartitionResponse:
        try:
            broker_id, epoch, changes = alter_partition_request_from_pb(request)
        except ValueError as e:
            return alter_partition_response(InvalidRequestError(f"bad topic id: {e}"))
        try:
            results = await self.controller.alter_partition(broker_id, epoch, changes)
        except KafkaError as e:
            return alter_partition_response(e)
        return alter_partition_response(results)

    async def AllocateProducerIds(
        self, request: controller_pb2.AllocateProducerIdsRequest, context: Context
    ) -> controller_pb2.AllocateProducerIdsResponse:
        broker_id, epoch = allocate_producer_ids_request_from_pb(request)
        try:
            block = await self.controller.allocate_producer_ids(broker_id, epoch)
        except KafkaError as e:
            return allocate_producer_ids_response(e)
        return allocate_producer_ids_response(block)

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: Context
    ) -> admin_pb2.CreateTopicsResponse:
        topics = create_topics_request_from_pb(request)
        try:
            results = await self.controller.create_topics(topics, request.validate_only)
        except KafkaError as e:
            results = [TopicResult(t.name, e) for t in topics]
        return create_topics_response(results)

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: Context
    ) -> admin_pb2.DeleteTopicsResponse:
        names = list(request.topic_names)
        try:
            results = await self.controller.delete_topics(names)
        except KafkaError as e:
            results = [TopicResult(n, e) for n in names]
        return delete_topics_response(results, [])

    async def CreatePartitions(
        self, request: controller_pb2.ControllerCreatePartitionsRequest, context: Context
    ) -> admin_pb2.CreatePartitionsResponse:
        wanted = create_partitions_request_from_pb(request)
        try:
            results = await self.controller.create_partitions(wanted, request.validate_only)
        except KafkaError as e:
            results = [TopicResult(name, e) for name, _, _ in wanted]
        return create_partitions_response(results)

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: Context
    ) -> admin_pb2.AlterConfigsResponse:
        resources = alter_configs_request_from_pb(request)
        results: list[KafkaError | None] = [
            t if isinstance(t, KafkaError) else None for t, _, _ in resources
        ]
        valid = [
            (i, (t, n, ops))
            for i, (t, n, ops) in enumerate(resources)
            if not isinstance(t, KafkaError)
        ]
        try:
            answers = await self.controller.incremental_alter_configs(
                [r for _, r in valid], request.validate_only
            )
        except KafkaError as e:
            answers = [e] * len(valid)
        for (i, _), answer in zip(valid, answers, strict=True):
            results[i] = answer
        return alter_configs_response(request, results)

    async def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: Context
    ) -> admin_pb2.ElectLeadersResponse:
        try:
            election_type, partitions = elect_leaders_request_from_pb(request)
            return elect_leaders_response(
                await self.controller.elect_leaders(election_type, partitions)
            )
        except KafkaError as e:
            return elect_leaders_response(e)

    async def AlterPartitionReassignments(
        self, request: admin_pb2.AlterPartitionReassignmentsRequest, context: Context
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        requests = reassignment_requests_from_pb(request)
        try:
            results = await self.controller.alter_partition_reassignments(requests)
        except KafkaError as e:
            return reassignment_response(requests, e)
        return reassignment_response(requests, results)

    async def DescribeQuorum(
        self, request: quorum_pb2.DescribeQuorumRequest, context: Context
    ) -> quorum_pb2.DescribeQuorumResponse:
        try:
            return describe_quorum_response(self.controller.describe_quorum())
        except KafkaError as e:
            return describe_quorum_response(e)

    async def CreateAcls(
        self, request: security_pb2.CreateAclsRequest, context: Context
    ) -> security_pb2.CreateAclsResponse:
        bindings = [acl_binding_from_pb(a) for a in request.creations]
        try:
            return create_acls_response(await self.controller.create_acls(bindings))
        except KafkaError as e:
            return create_acls_response([e] * len(bindings))

    async def DeleteAcls(
        self, request: security_pb2.DeleteAclsRequest, context: Context
    ) -> security_pb2.DeleteAclsResponse:
        filters = [acl_filter_from_pb(f) for f in request.filters]
        try:
            return delete_acls_response(await self.controller.delete_acls(filters))
        except KafkaError as e:
            return delete_acls_response([e] * len(filters))

    async def AlterUserScramCredentials(
        self, request: security_pb2.AlterUserScramCredentialsRequest, context: Context
    ) -> security_pb2.AlterUserScramCredentialsResponse:
        deletions, upsertions = alter_scram_request_from_pb(request)
        try:
            results = await self.controller.alter_user_scram_credentials(deletions, upsertions)
        except KafkaError as e:
            results = [(u, e) for u in users_named(deletions, upsertions)]
        return alter_scram_response(results)

    async def AlterClientQuotas(
        self, request: quota_pb2.AlterClientQuotasRequest, context: Context
    ) -> quota_pb2.AlterClientQuotasResponse:
        alterations, validate_only = alter_quotas_request_from_pb(request)
        try:
            results = await self.controller.alter_client_quotas(alterations, validate_only)
        except KafkaError as e:
            results = [e] * len(alterations)
        return alter_quotas_response(alterations, results)
