"""The gRPC AdminService: topic and partition administration through the controller, cluster
and config descriptions from the metadata image and the broker's config."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import grpc

from rillet.config import BrokerConfig, config_value_to_string, resolve_topic_config
from rillet.controller.quorum_controller import AlterConfigOp, CreatableTopic
from rillet.errors import (
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ConfigResourceType
from rillet.protocol import admin_pb2, admin_pb2_grpc
from rillet.protocol.errors import set_error
from rillet.server.controller_service import ControllerService

__all__ = ["AdminServicer"]

Context = grpc.aio.ServicerContext[object, object]

_OPS = {
    admin_pb2.ALTER_CONFIG_OP_SET: "SET",
    admin_pb2.ALTER_CONFIG_OP_DELETE: "DELETE",
    admin_pb2.ALTER_CONFIG_OP_APPEND: "APPEND",
    admin_pb2.ALTER_CONFIG_OP_SUBTRACT: "SUBTRACT",
}
_SOURCES = {
    "DYNAMIC_TOPIC_CONFIG": admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG,
    "DYNAMIC_BROKER_CONFIG": admin_pb2.CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG,
    "STATIC_BROKER_CONFIG": admin_pb2.CONFIG_SOURCE_STATIC_BROKER_CONFIG,
    "DEFAULT_CONFIG": admin_pb2.CONFIG_SOURCE_DEFAULT_CONFIG,
}


def _resource_type(value: int) -> ConfigResourceType:
    try:
        return ConfigResourceType(value)
    except ValueError:
        raise InvalidRequestError(f"unsupported config resource type {value}") from None


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    def __init__(
        self,
        service: ControllerService,
        image: Callable[[], MetadataImage],
        config: BrokerConfig,
        cluster_id: str,
        listener_name: str,
    ) -> None:
        self.service = service
        self.image = image
        self.config = config
        self.cluster_id = cluster_id
        self.listener_name = listener_name

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: Context
    ) -> admin_pb2.CreateTopicsResponse:
        response = admin_pb2.CreateTopicsResponse()
        topics = [
            CreatableTopic(
                t.name,
                t.num_partitions if t.HasField("num_partitions") else -1,
                t.replication_factor if t.HasField("replication_factor") else -1,
                {a.partition: list(a.broker_ids) for a in t.assignments} or None,
                dict(t.configs),
            )
            for t in request.topics
        ]
        try:
            controller = self.service.require_active()
            results = await self.service.submit(
                controller.create_topics(topics, request.validate_only)
            )
        except KafkaError as e:
            for t in request.topics:
                set_error(response.topics.add(name=t.name), e)
            return response
        for r in results:
            out = response.topics.add(
                name=r.name,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
            )
            if r.topic_id is not None:
                out.topic_id = r.topic_id.bytes
            if r.error is not None:
                set_error(out, r.error)
        return response

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: Context
    ) -> admin_pb2.DeleteTopicsResponse:
        response = admin_pb2.DeleteTopicsResponse()
        names = list(request.topic_names)
        image = self.image()
        by_id = {t.topic_id.bytes: t.name for t in image.topics()}
        unknown_ids = [i for i in request.topic_ids if i not in by_id]
        names += [by_id[i] for i in request.topic_ids if i in by_id]
        try:
            controller = self.service.require_active()
            results = await self.service.submit(controller.delete_topics(names))
        except KafkaError as e:
            for n in names:
                set_error(response.topics.add(name=n), e)
            return response
        for r in results:
            out = response.topics.add(name=r.name)
            if r.topic_id is not None:
                out.topic_id = r.topic_id.bytes
            if r.error is not None:
                set_error(out, r.error)
        for i in unknown_ids:
            set_error(
                response.topics.add(topic_id=i),
                UnknownTopicOrPartitionError("This server does not host this topic ID."),
            )
        return response

    async def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: Context
    ) -> admin_pb2.CreatePartitionsResponse:
        response = admin_pb2.CreatePartitionsResponse()
        image = self.image()
        wanted = []
        for t in request.topics:
            assignment = None
            if t.assignments:
                topic = image.topic(t.name)
                first = len(topic.partitions) if topic else 0
                assignment = {first + i: list(a.broker_ids) for i, a in enumerate(t.assignments)}
            wanted.append((t.name, t.count, assignment))
        try:
            controller = self.service.require_active()
            results = await self.service.submit(
                controller.create_partitions(wanted, request.validate_only)
            )
        except KafkaError as e:
            for t in request.topics:
                set_error(response.topics.add(name=t.name), e)
            return response
        for r in results:
            out = response.topics.add(name=r.name)
            if r.error is not None:
                set_error(out, r.error)
        return response

    async def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context: Context
    ) -> admin_pb2.DescribeClusterResponse:
        image = self.image()
        leader = self.service.leader.leader_id
        response = admin_pb2.DescribeClusterResponse(
            cluster_id=self.cluster_id, controller_id=-1 if leader is None else leader
        )
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint(self.listener_name)
            out = response.brokers.add(
                node_id=b.broker_id,
                host=ep.host if ep else "",
                port=ep.port if ep else -1,
                is_fenced=b.fenced,
            )
            if b.rack is not None:
                out.rack = b.rack
        return response

    async def DescribeConfigs(
        self, request: admin_pb2.DescribeConfigsRequest, context: Context
    ) -> admin_pb2.DescribeConfigsResponse:
        response = admin_pb2.DescribeConfigsResponse()
        image = self.image()
        for res in request.resources:
            out = response.results.add(
                resource_type=res.resource_type, resource_name=res.resource_name
            )
            keys = set(res.configuration_keys)
            try:
                rtype = _resource_type(res.resource_type)
                entries = self._entries(rtype, res.resource_name, image)
            except KafkaError as e:
                set_error(out, e)
                continue
            for name, value, source in entries:
                if keys and name not in keys:
                    continue
                entry = out.configs.add(
                    name=name,
                    is_default=source == "DEFAULT_CONFIG",
                    source=_SOURCES.get(source, admin_pb2.CONFIG_SOURCE_UNKNOWN),
                    read_only=rtype == ConfigResourceType.BROKER,
                )
                if value is not None:
                    entry.value = value
        return response

    def _entries(
        self, rtype: ConfigResourceType, name: str, image: MetadataImage
    ) -> list[tuple[str, str | None, str]]:
        if rtype == ConfigResourceType.TOPIC:
            if image.topic(name) is None:
                raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
            resolved = resolve_topic_config(
                self.config.topic_synonyms, dict(image.topic_config(name))
            )
            return [
                (k, config_value_to_string(v), resolved.sources[k])
                for k, v in sorted(resolved.values.items())
            ]
        if name not in ("", str(self.config.node_id)):
            raise InvalidRequestError(f"This is broker {self.config.node_id}, not {name}.")
        dynamic: Mapping[str, str] = image.broker_config(name)
        out: list[tuple[str, str | None, str]] = []
        for e in self.config.describe():
            if e.name in dynamic:
                out.append((e.name, dynamic[e.name], "DYNAMIC_BROKER_CONFIG"))
            else:
                out.append((e.name, e.value, e.source))
        return out

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: Context
    ) -> admin_pb2.AlterConfigsResponse:
        response = admin_pb2.AlterConfigsResponse()
        resources = []
        outs = []
        for res in request.resources:
            out = response.results.add(
                resource_type=res.resource_type, resource_name=res.resource_name
            )
            try:
                rtype = _resource_type(res.resource_type)
            except KafkaError as e:
                set_error(out, e)
                continue
            ops = [
                AlterConfigOp(
                    c.name,
                    _OPS.get(c.config_operation, "SET"),
                    c.value if c.HasField("value") else None,
                )
                for c in res.configs
            ]
            resources.append((rtype, res.resource_name, ops))
            outs.append(out)
        try:
            controller = self.service.require_active()
            results = await self.service.submit(
                controller.incremental_alter_configs(resources, request.validate_only)
            )
        except KafkaError as e:
            for out in outs:
                set_error(out, e)
            return response
        for out, err in zip(outs, results, strict=True):
            if err is not None:
                set_error(out, err)
        return response
