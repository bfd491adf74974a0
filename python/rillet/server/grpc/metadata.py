"""MetadataService over :meth:`BrokerApis.handle_metadata`; with an authorizer, a topic named
that the caller may not describe (or, missing, create) is answered TOPIC_AUTHORIZATION_FAILED
without being looked up or created, as Kafka answers it
(:func:`~rillet.server.grpc.acl_policy.metadata_plan`)."""

from __future__ import annotations

import grpc

from rillet.broker.apis import BrokerApis, MetadataResult
from rillet.protocol.gen.v1 import metadata_pb2, metadata_pb2_grpc
from rillet.protocol.metadata import metadata_response
from rillet.server.grpc.acl_policy import metadata_plan
from rillet.server.grpc.authorization import call_session

__all__ = ["MetadataServicer"]

Context = grpc.aio.ServicerContext[object, object]


class MetadataServicer(metadata_pb2_grpc.MetadataServiceServicer):
    """Answers with the endpoints of ``listener_name`` (the listener clients use)."""

    def __init__(self, apis: BrokerApis, listener_name: str) -> None:
        self.apis = apis
        self.listener_name = listener_name

    async def Metadata(
        self, request: metadata_pb2.MetadataRequest, context: Context
    ) -> metadata_pb2.MetadataResponse:
        names = list(request.topics)
        refused, auto_create = metadata_plan(
            call_session(), names, request.allow_auto_topic_creation
        )
        looked_up = [n for n in names if n not in refused]
        if names and not looked_up:
            # Only the brokers (handle_metadata reads no names as every topic).
            cluster = self.apis.handle_describe_cluster(self.listener_name)
            brokers = [b for b in cluster.brokers if not b.is_fenced and b.port >= 0]
            result = MetadataResult(cluster.cluster_id, cluster.controller_id, brokers, [])
        else:
            result = await self.apis.handle_metadata(looked_up, auto_create, self.listener_name)
        response = metadata_response(result)
        for name, error in refused.items():
            response.topics.add(name=name, error_code=error.code, error_message=error.message)
        return response
