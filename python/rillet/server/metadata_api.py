"""The gRPC MetadataService: brokers, topics and partitions (leader, replicas, ISR) from the
broker's current :class:`~rillet.metadata.image.MetadataImage`.

A request naming topics that do not exist may create them (``allow_auto_topic_creation``
and the broker's ``auto.create.topics.enable``) through the controller; the answer then
waits for the new topics to appear in this broker's image.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import grpc

from rillet.errors import InvalidTopicError, KafkaError, UnknownTopicOrPartitionError
from rillet.metadata.image import MetadataImage, TopicImage
from rillet.metadata.topic_names import validate_topic_name
from rillet.protocol import common_pb2, metadata_pb2, metadata_pb2_grpc
from rillet.protocol.errors import set_error

__all__ = ["MetadataServicer"]

Context = grpc.aio.ServicerContext[object, object]


class MetadataServicer(metadata_pb2_grpc.MetadataServiceServicer):
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        listener_name: str,
        cluster_id: str,
        controller_id: Callable[[], int],
        auto_create: Callable[[Sequence[str]], Awaitable[None]] | None = None,
    ) -> None:
        self.image = image
        self.listener_name = listener_name
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.auto_create = auto_create

    async def Metadata(
        self, request: metadata_pb2.MetadataRequest, context: Context
    ) -> metadata_pb2.MetadataResponse:
        image = self.image()
        names = list(request.topics) or sorted(t.name for t in image.topics())
        missing = [n for n in names if image.topic(n) is None]
        if missing and request.allow_auto_topic_creation and self.auto_create is not None:
            legal = []
            for n in missing:
                try:
                    legal.append(validate_topic_name(n))
                except InvalidTopicError:
                    continue
            if legal:
                await self.auto_create(legal)
                image = self.image()
        response = metadata_pb2.MetadataResponse(
            cluster_id=self.cluster_id, controller_id=self.controller_id()
        )
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint(self.listener_name)
            if b.fenced or ep is None:
                continue
            node = response.brokers.add(node_id=b.broker_id, host=ep.host, port=ep.port)
            if b.rack is not None:
                node.rack = b.rack
        live = {b.broker_id for b in image.brokers.values() if not b.fenced}
        for name in names:
            t = response.topics.add(name=name)
            topic = image.topic(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                    err: KafkaError = UnknownTopicOrPartitionError(
                        f"This server does not host this topic-partition: {name}."
                    )
                except InvalidTopicError as e:
                    err = e
                set_error(t, err)
                continue
            self._fill_topic(t, topic, live)
        return response

    @staticmethod
    def _fill_topic(
        t: metadata_pb2.MetadataResponse.Topic, topic: TopicImage, live: set[int]
    ) -> None:
        t.topic_id = topic.topic_id.bytes
        t.is_internal = topic.is_internal
        for p, reg in sorted(topic.partitions.items()):
            part = t.partitions.add(
                partition=p,
                leader_id=reg.leader,
                leader_epoch=reg.leader_epoch,
                replica_nodes=reg.replicas,
                isr_nodes=reg.isr,
                offline_replicas=[r for r in reg.replicas if r not in live],
            )
            if not reg.has_leader:
                part.error_code = common_pb2.LEADER_NOT_AVAILABLE
                part.error_message = f"There is no leader for {topic.name}-{p}."
