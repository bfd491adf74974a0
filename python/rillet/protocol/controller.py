"""ControllerService messages (``controller.proto``) to and from the domain, both ways: a
broker's :class:`~rillet.server.grpc.controller_channel.GrpcControllerChannel` encodes
requests and decodes responses, the controller's servicer decodes requests and encodes
responses. The forwarded admin requests reuse ``admin.proto``'s messages (the controller's
side of those is in :mod:`rillet.protocol.admin`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from rillet.broker.controller_channel import ConfigChanges, PartitionsToCreate
from rillet.controller import (
    AlterPartitionResult,
    AlterPartitionState,
    CreatableTopic,
    ElectionResults,
    ElectionType,
    ProducerIdsBlock,
    TopicResult,
)
from rillet.errors import KafkaError
from rillet.protocol.errors import error_from_wire, set_error
from rillet.protocol.gen.v1 import admin_pb2, controller_pb2

__all__ = [
    "allocate_producer_ids_block_from_pb",
    "allocate_producer_ids_request_from_pb",
    "allocate_producer_ids_request_to_pb",
    "allocate_producer_ids_response",
    "alter_configs_request_to_pb",
    "alter_configs_results_from_pb",
    "alter_partition_request_from_pb",
    "alter_partition_request_to_pb",
    "alter_partition_response",
    "alter_partition_results_from_pb",
    "create_partitions_request_from_pb",
    "create_partitions_request_to_pb",
    "create_partitions_results_from_pb",
    "create_topics_request_to_pb",
    "create_topics_results_from_pb",
    "delete_topics_request_to_pb",
    "delete_topics_results_from_pb",
    "elect_leaders_request_to_pb",
    "elect_leaders_results_from_pb",
]

_OPS = {
    "SET": admin_pb2.ALTER_CONFIG_OP_SET,
    "DELETE": admin_pb2.ALTER_CONFIG_OP_DELETE,
    "APPEND": admin_pb2.ALTER_CONFIG_OP_APPEND,
    "SUBTRACT": admin_pb2.ALTER_CONFIG_OP_SUBTRACT,
}


def _topic_id(raw: bytes) -> uuid.UUID | None:
    return uuid.UUID(bytes=raw) if len(raw) == 16 and any(raw) else None


# -- topics ----------------------------------------------------------------------------------


def create_topics_request_to_pb(
    topics: Sequence[CreatableTopic], validate_only: bool
) -> admin_pb2.CreateTopicsRequest:
    request = admin_pb2.CreateTopicsRequest(validate_only=validate_only)
    for t in topics:
        out = request.topics.add(name=t.name, configs=dict(t.configs))
        if t.num_partitions != -1:
            out.num_partitions = t.num_partitions
        if t.replication_factor != -1:
            out.replication_factor = t.replication_factor
        for partition, replicas in sorted((t.assignment or {}).items()):
            out.assignments.add(partition=partition, broker_ids=list(replicas))
    return request


def create_topics_results_from_pb(response: admin_pb2.CreateTopicsResponse) -> list[TopicResult]:
    return [
        TopicResult(
            t.name,
            error_from_wire(t.error_code, t.error_message),
            _topic_id(t.topic_id),
            t.num_partitions,
            t.replication_factor,
        )
        for t in response.topics
    ]


def delete_topics_request_to_pb(names: Sequence[str]) -> admin_pb2.DeleteTopicsRequest:
    return admin_pb2.DeleteTopicsRequest(topic_names=list(names))


def delete_topics_results_from_pb(response: admin_pb2.DeleteTopicsResponse) -> list[TopicResult]:
    return [
        TopicResult(t.name, error_from_wire(t.error_code, t.error_message), _topic_id(t.topic_id))
        for t in response.topics
    ]


def create_partitions_request_to_pb(
    requests: PartitionsToCreate, validate_only: bool
) -> controller_pb2.ControllerCreatePartitionsRequest:
    request = controller_pb2.ControllerCreatePartitionsRequest(validate_only=validate_only)
    for name, count, assignment in requests:
        out = request.topics.add(name=name, count=count)
        for partition, replicas in sorted((assignment or {}).items()):
            out.assignments.add(partition=partition, broker_ids=list(replicas))
    return request


def create_partitions_results_from_pb(
    response: admin_pb2.CreatePartitionsResponse,
) -> list[TopicResult]:
    return [
        TopicResult(t.name, error_from_wire(t.error_code, t.error_message)) for t in response.topics
    ]


def create_partitions_request_from_pb(
    request: controller_pb2.ControllerCreatePartitionsRequest,
) -> list[tuple[str, int, dict[int, list[int]] | None]]:
    return [
        (
            t.name,
            t.count,
            {a.partition: list(a.broker_ids) for a in t.assignments} or None,
        )
        for t in request.topics
    ]


# -- configs -----------------------------------------------------------------------------------


def alter_configs_request_to_pb(
    resources: ConfigChanges, validate_only: bool
) -> admin_pb2.AlterConfigsRequest:
    request = admin_pb2.AlterConfigsRequest(validate_only=validate_only)
    for resource_type, name, ops in resources:
        out = request.resources.add(resource_type=int(resource_type), resource_name=name)
        for op in ops:
            config = out.configs.add(name=op.name, config_operation=_OPS[op.op])
            if op.value is not None:
                config.value = op.value
    return request


def alter_configs_results_from_pb(
    response: admin_pb2.AlterConfigsResponse,
) -> list[KafkaError | None]:
    return [error_from_wire(r.error_code, r.error_message) for r in response.results]


# -- AlterPartition --------------------------------------------------------------------------


def alter_partition_request_to_pb(
    broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionState]
) -> controller_pb2.AlterPartitionRequest:
    request = controller_pb2.AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch)
    for c in changes:
        request.partitions.add(
            topic_id=c.topic_id.bytes,
            partition=c.partition,
            leader_epoch=c.leader_epoch,
            partition_epoch=c.partition_epoch,
            new_isr=list(c.new_isr),
        )
    return request


def alter_partition_request_from_pb(
    request: controller_pb2.AlterPartitionRequest,
) -> tuple[int, int, list[AlterPartitionState]]:
    """Raises ValueError for a topic id that is not 16 bytes."""
    return (
        request.broker_id,
        request.broker_epoch,
        [
            AlterPartitionState(
                uuid.UUID(bytes=p.topic_id),
                p.partition,
                p.leader_epoch,
                p.partition_epoch,
                tuple(p.new_isr),
            )
            for p in request.partitions
        ],
    )


def alter_partition_response(
    result: Sequence[AlterPartitionResult] | BaseException,
) -> controller_pb2.AlterPartitionResponse:
    response = controller_pb2.AlterPartitionResponse()
    if isinstance(result, BaseException):
        set_error(response, result)
        return response
    for r in result:
        out = response.partitions.add(
            topic_id=r.topic_id.bytes,
            partition=r.partition,
            leader_id=r.leader_id,
            leader_epoch=r.leader_epoch,
            isr=list(r.isr),
            partition_epoch=r.partition_epoch,
        )
        if r.error is not None:
            set_error(out, r.error)
    return response


def alter_partition_results_from_pb(
    response: controller_pb2.AlterPartitionResponse,
) -> list[AlterPartitionResult] | KafkaError:
    """The per-partition results, or the error that refused the whole request."""
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err
    return [
        AlterPartitionResult(
            uuid.UUID(bytes=p.topic_id),
            p.partition,
            error_from_wire(p.error_code, p.error_message),
            p.leader_id,
            p.leader_epoch,
            tuple(p.isr),
            p.partition_epoch,
        )
        for p in response.partitions
    ]


# -- AllocateProducerIds (KIP-730) ------------------------------------------------------------


def allocate_producer_ids_request_to_pb(
    broker_id: int, broker_epoch: int
) -> controller_pb2.AllocateProducerIdsRequest:
    return controller_pb2.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch)


def allocate_producer_ids_request_from_pb(
    request: controller_pb2.AllocateProducerIdsRequest,
) -> tuple[int, int]:
    return request.broker_id, request.broker_epoch


def allocate_producer_ids_response(
    result: ProducerIdsBlock | BaseException,
) -> controller_pb2.AllocateProducerIdsResponse:
    if isinstance(result, BaseException):
        response = controller_pb2.AllocateProducerIdsResponse(
            producer_id_start=-1, producer_id_len=0
        )
        set_error(response, result)
        return response
    return controller_pb2.AllocateProducerIdsResponse(
        producer_id_start=result.first_producer_id, producer_id_len=result.size
    )


def allocate_producer_ids_block_from_pb(
    broker_id: int, response: controller_pb2.AllocateProducerIdsResponse
) -> ProducerIdsBlock | KafkaError:
    """The block given to ``broker_id``, or the error that refused it."""
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err
    return ProducerIdsBlock(broker_id, response.producer_id_start, response.producer_id_len)


# -- ElectLeaders ------------------------------------------------------------------------------


def elect_leaders_request_to_pb(
    election_type: ElectionType,
    partitions: Sequence[tuple[str, int]] | None,
    timeout_ms: int = 0,
) -> admin_pb2.ElectLeadersRequest:
    """``partitions`` None asks for every partition."""
    request = admin_pb2.ElectLeadersRequest(
        election_type=admin_pb2.ElectionType.ValueType(int(election_type)),
        all_partitions=partitions is None,
        timeout_ms=timeout_ms,
    )
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        by_topic.setdefault(topic, []).append(partition)
    for topic, ps in by_topic.items():
        request.topic_partitions.add(topic=topic, partitions=ps)
    return request


def elect_leaders_results_from_pb(
    response: admin_pb2.ElectLeadersResponse,
) -> ElectionResults | KafkaError:
    """The per-partition outcomes, or the error that refused the whole request."""
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err
    return {
        (r.topic, r.partition): error_from_wire(r.error_code, r.error_message)
        for r in response.results
    }
