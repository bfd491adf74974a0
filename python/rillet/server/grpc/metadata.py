"""MetadataService over :meth:`BrokerApis.handle_metadata`."""

from __future__ import annotations

import grpc

from rillet.broker.apis import BrokerApis
from rillet.protocol.gen.v1 import metadata_pb2, metadata_pb2_grpc
from rillet.protocol.metadata import metadata_response

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
        result = await self.apis.handle_metadata(
            request.topics, request.allow_auto_topic_creation, self.listener_name
        )
        return metadata_response(result)
