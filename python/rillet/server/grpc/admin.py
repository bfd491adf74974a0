"""AdminService over :class:`~rillet.broker.apis.BrokerApis`, and its ACL and SCRAM
credential and client quota calls over :class:`~rillet.broker.security_apis.SecurityApis`."""

from __future__ import annotations

import grpc

from rillet.broker.apis import BrokerApis
from rillet.broker.security_apis import SecurityApis
from rillet.controller.topics import TopicResult
from rillet.errors import KafkaError, TopicDeletionDisabledError
from rillet.protocol.admin import (
    alter_configs_request_from_pb,
    alter_configs_response,
    create_partitions_request_from_pb,
    create_partitions_response,
    create_topics_request_from_pb,
    create_topics_response,
    delete_topics_response,
    describe_cluster_response,
    describe_configs_request_from_pb,
    describe_configs_response,
    describe_log_dirs_request_from_pb,
    describe_log_dirs_response,
    elect_leaders_request_from_pb,
    elect_leaders_response,
    list_reassignments_request_from_pb,
    list_reassignments_response,
    reassignment_requests_from_pb,
    reassignment_response,
)
from rillet.protocol.errors import set_error
from rillet.protocol.gen.v1 import admin_pb2, admin_pb2_grpc, quorum_pb2, quota_pb2, security_pb2
from rillet.protocol.quorum import describe_quorum_response
from rillet.protocol.quotas import (
    alter_quotas_request_from_pb,
    alter_quotas_response,
    describe_quotas_request_from_pb,
    describe_quotas_response,
)
from rillet.protocol.security import (
    acl_binding_from_pb,
    acl_binding_to_pb,
    acl_filter_from_pb,
    alter_scram_request_from_pb,
    alter_scram_response,
    create_acls_response,
    delete_acls_response,
)

__all__ = ["AdminServicer"]

Context = grpc.aio.ServicerContext[object, object]


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    """Describes brokers with the endpoints of ``listener_name``."""

    def __init__(
        self, apis: BrokerApis, listener_name: str, security: SecurityApis | None = None
    ) -> None:
        self.apis = apis
        self.listener_name = listener_name
        self.security = security or SecurityApis(apis.channel, apis.image, None)

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: Context
    ) -> admin_pb2.CreateTopicsResponse:
        topics = create_topics_request_from_pb(request)
        results = await self.apis.handle_create_topics(topics, request.validate_only)
        return create_topics_response(results)

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: Context
    ) -> admin_pb2.DeleteTopicsResponse:
        if not self.apis.config.delete_topic_enable:
            disabled = TopicDeletionDisabledError()
            return delete_topics_response(
                [TopicResult(n, disabled) for n in request.topic_names],
                [(i, disabled) for i in request.topic_ids],
            )
        results, unknown = await self.apis.handle_delete_topics(
            list(request.topic_names), list(request.topic_ids)
        )
        return delete_topics_response(results, unknown)

    async def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: Context
    ) -> admin_pb2.CreatePartitionsResponse:
        results = await self.apis.handle_create_partitions(
            create_partitions_request_from_pb(request), request.validate_only
        )
        return create_partitions_response(results)

    async def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context: Context
    ) -> admin_pb2.DescribeClusterResponse:
        return describe_cluster_response(self.apis.handle_describe_cluster(self.listener_name))

    async def DescribeQuorum(
        self, request: quorum_pb2.DescribeQuorumRequest, context: Context
    ) -> quorum_pb2.DescribeQuorumResponse:
        return describe_quorum_response(await self.apis.handle_describe_quorum())

    async def DescribeConfigs(
        self, request: admin_pb2.DescribeConfigsRequest, context: Context
    ) -> admin_pb2.DescribeConfigsResponse:
        results = self.apis.handle_describe_configs(describe_configs_request_from_pb(request))
        return describe_configs_response(request, results)

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: Context
    ) -> admin_pb2.AlterConfigsResponse:
        results = await self.apis.handle_alter_configs(
            alter_configs_request_from_pb(request), request.validate_only
        )
        return alter_configs_response(request, results)

    async def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: Context
    ) -> admin_pb2.ElectLeadersResponse:
        try:
            election_type, partitions = elect_leaders_request_from_pb(request)
        except KafkaError as e:
            return elect_leaders_response(e)
        return elect_leaders_response(
            await self.apis.handle_elect_leaders(election_type, partitions, request.timeout_ms)
        )

    async def DescribeLogDirs(
        self, request: admin_pb2.DescribeLogDirsRequest, context: Context
    ) -> admin_pb2.DescribeLogDirsResponse:
        wanted = describe_log_dirs_request_from_pb(request)
        return describe_log_dirs_response(self.apis.handle_describe_log_dirs(wanted))

    async def AlterPartitionReassignments(
        self, request: admin_pb2.AlterPartitionReassignmentsRequest, context: Context
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        requests = reassignment_requests_from_pb(request)
        results = await self.apis.handle_alter_partition_reassignments(requests, request.timeout_ms)
        return reassignment_response(requests, results)

    async def ListPartitionReassignments(
        self, request: admin_pb2.ListPartitionReassignmentsRequest, context: Context
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        partitions = list_reassignments_request_from_pb(request)
        return list_reassignments_response(
            self.apis.handle_list_partition_reassignments(partitions)
        )

    async def CreateAcls(
        self, request: security_pb2.CreateAclsRequest, context: Context
    ) -> security_pb2.CreateAclsResponse:
        bindings = [acl_binding_from_pb(a) for a in request.creations]
        return create_acls_response(await self.security.create_acls(bindings))

    async def DescribeAcls(
        self, request: security_pb2.DescribeAclsRequest, context: Context
    ) -> security_pb2.DescribeAclsResponse:
        response = security_pb2.DescribeAclsResponse()
        found = self.security.describe_acls(acl_filter_from_pb(request.filter))
        if isinstance(found, KafkaError):
            set_error(response, found)
        else:
            response.acls.extend(acl_binding_to_pb(a) for a in found)
        return response

    async def DeleteAcls(
        self, request: security_pb2.DeleteAclsRequest, context: Context
    ) -> security_pb2.DeleteAclsResponse:
        filters = [acl_filter_from_pb(f) for f in request.filters]
        return delete_acls_response(await self.security.delete_acls(filters))

    async def DescribeUserScramCredentials(
        self, request: security_pb2.DescribeUserScramCredentialsRequest, context: Context
    ) -> security_pb2.DescribeUserScramCredentialsResponse:
        response = security_pb2.DescribeUserScramCredentialsResponse()
        for d in self.security.describe_user_scram_credentials(list(request.users)):
            out = response.results.add(user=d.user)
            if d.error is not None:
                set_error(out, d.error)
            for mechanism, iterations in d.credentials:
                out.credential_infos.add(mechanism=mechanism, iterations=iterations)
        return response

    async def AlterUserScramCredentials(
        self, request: security_pb2.AlterUserScramCredentialsRequest, context: Context
    ) -> security_pb2.AlterUserScramCredentialsResponse:
        deletions, upsertions = alter_scram_request_from_pb(request)
        return alter_scram_response(
            await self.security.alter_user_scram_credentials(deletions, upsertions)
        )

    async def DescribeClientQuotas(
        self, request: quota_pb2.DescribeClientQuotasRequest, context: Context
    ) -> quota_pb2.DescribeClientQuotasResponse:
        components, strict = describe_quotas_request_from_pb(request)
        return describe_quotas_response(self.security.describe_client_quotas(components, strict))

    async def AlterClientQuotas(
        self, request: quota_pb2.AlterClientQuotasRequest, context: Context
    ) -> quota_pb2.AlterClientQuotasResponse:
        alterations, validate_only = alter_quotas_request_from_pb(request)
        return alter_quotas_response(
            alterations, await self.security.alter_client_quotas(alterations, validate_only)
        )
