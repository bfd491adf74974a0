"""AdminService messages (``admin.proto``) to and from the domain: topics, partitions, the
cluster and configs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rillet.broker.apis import (
    ClusterDescription,
    DescribedConfigs,
    LogDirDescription,
    ReplicaInfo,
)
from rillet.controller import (
    AlterConfigOp,
    CreatableTopic,
    ElectionResults,
    ElectionType,
    TopicResult,
)
from rillet.controller.reassignment import OngoingReassignment
from rillet.errors import InvalidRequestError, KafkaError
from rillet.metadata.records import ConfigResourceType
from rillet.protocol.errors import error_from_wire, set_error
from rillet.protocol.gen.v1 import admin_pb2

__all__ = [
    "alter_configs_request_from_pb",
    "alter_configs_response",
    "create_partitions_request_from_pb",
    "create_partitions_response",
    "create_topics_request_from_pb",
    "create_topics_response",
    "delete_topics_response",
    "describe_cluster_response",
    "describe_configs_request_from_pb",
    "describe_configs_response",
    "describe_log_dirs_request_from_pb",
    "describe_log_dirs_request_to_pb",
    "describe_log_dirs_response",
    "elect_leaders_request_from_pb",
    "elect_leaders_response",
    "list_reassignments_request_from_pb",
    "list_reassignments_request_to_pb",
    "list_reassignments_response",
    "log_dirs_from_pb",
    "reassignment_requests_from_pb",
    "reassignment_requests_to_pb",
    "reassignment_response",
    "reassignment_results_from_pb",
    "reassignments_from_pb",
]

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


def _resource_type(value: int) -> ConfigResourceType | KafkaError:
    try:
        return ConfigResourceType(value)
    except ValueError:
        return InvalidRequestError(f"unsupported config resource type {value}")


# -- topics and partitions -----------------------------------------------------------------


def create_topics_request_from_pb(
    request: admin_pb2.CreateTopicsRequest,
) -> list[CreatableTopic]:
    return [
        CreatableTopic(
            t.name,
            t.num_partitions if t.HasField("num_partitions") else -1,
            t.replication_factor if t.HasField("replication_factor") else -1,
            {a.partition: list(a.broker_ids) for a in t.assignments} or None,
            dict(t.configs),
        )
        for t in request.topics
    ]


def create_topics_response(results: Sequence[TopicResult]) -> admin_pb2.CreateTopicsResponse:
    response = admin_pb2.CreateTopicsResponse()
    for r in results:
        out = response.topics.add(
            name=r.name, num_partitions=r.num_partitions, replication_factor=r.replication_factor
        )
        if r.topic_id is not None:
            out.topic_id = r.topic_id.bytes
        if r.error is not None:
            set_error(out, r.error)
    return response


def delete_topics_response(
    results: Sequence[TopicResult], unknown_ids: Sequence[tuple[bytes, KafkaError]]
) -> admin_pb2.DeleteTopicsResponse:
    response = admin_pb2.DeleteTopicsResponse()
    for r in results:
        out = response.topics.add(name=r.name)
        if r.topic_id is not None:
            out.topic_id = r.topic_id.bytes
        if r.error is not None:
            set_error(out, r.error)
    for topic_id, err in unknown_ids:
        set_error(response.topics.add(topic_id=topic_id), err)
    return response


def create_partitions_request_from_pb(
    request: admin_pb2.CreatePartitionsRequest,
) -> list[tuple[str, int, list[list[int]]]]:
    """Each topic's ``(name, count, replica lists of the new partitions)``."""
    return [(t.name, t.count, [list(a.broker_ids) for a in t.assignments]) for t in request.topics]


def create_partitions_response(
    results: Sequence[TopicResult],
) -> admin_pb2.CreatePartitionsResponse:
    response = admin_pb2.CreatePartitionsResponse()
    for r in results:
        out = response.topics.add(name=r.name)
        if r.error is not None:
            set_error(out, r.error)
    return response


# -- cluster ---------------------------------------------------------------------------------


def describe_cluster_response(
    cluster: ClusterDescription,
) -> admin_pb2.DescribeClusterResponse:
    response = admin_pb2.DescribeClusterResponse(
        cluster_id=cluster.cluster_id, controller_id=cluster.controller_id
    )
    for b in cluster.brokers:
        out = response.brokers.add(
            node_id=b.node_id, host=b.host, port=b.port, is_fenced=b.is_fenced
        )
        if b.rack is not None:
            out.rack = b.rack
    return response


# -- configs ---------------------------------------------------------------------------------


def describe_configs_request_from_pb(
    request: admin_pb2.DescribeConfigsRequest,
) -> list[tuple[ConfigResourceType | KafkaError, str, list[str]]]:
    return [
        (_resource_type(r.resource_type), r.resource_name, list(r.configuration_keys))
        for r in request.resources
    ]


def describe_configs_response(
    request: admin_pb2.DescribeConfigsRequest, results: Sequence[DescribedConfigs]
) -> admin_pb2.DescribeConfigsResponse:
    response = admin_pb2.DescribeConfigsResponse()
    for res, result in zip(request.resources, results, strict=True):
        out = response.results.add(resource_type=res.resource_type, resource_name=res.resource_name)
        if result.error is not None:
            set_error(out, result.error)
            continue
        for e in result.entries:
            entry = out.configs.add(
                name=e.name,
                is_default=e.source == "DEFAULT_CONFIG",
                source=_SOURCES.get(e.source, admin_pb2.CONFIG_SOURCE_UNKNOWN),
                read_only=e.read_only,
            )
            if e.value is not None:
                entry.value = e.value
    return response


def alter_configs_request_from_pb(
    request: admin_pb2.AlterConfigsRequest,
) -> list[tuple[ConfigResourceType | KafkaError, str, list[AlterConfigOp]]]:
    return [
        (
            _resource_type(r.resource_type),
            r.resource_name,
            [
                AlterConfigOp(
                    c.name,
                    _OPS.get(c.config_operation, "SET"),
                    c.value if c.HasField("value") else None,
                )
                for c in r.configs
            ],
        )
        for r in request.resources
    ]


def alter_configs_response(
    request: admin_pb2.AlterConfigsRequest, results: Sequence[KafkaError | None]
) -> admin_pb2.AlterConfigsResponse:
    response = admin_pb2.AlterConfigsResponse()
    for res, err in zip(request.resources, results, strict=True):
        out = response.results.add(resource_type=res.resource_type, resource_name=res.resource_name)
        if err is not None:
            set_error(out, err)
    return response


# -- leader elections --------------------------------------------------------------------------


def elect_leaders_request_from_pb(
    request: admin_pb2.ElectLeadersRequest,
) -> tuple[ElectionType, list[tuple[str, int]] | None]:
    """The election type and the partitions (None: every partition). Raises
    InvalidRequestError for an unknown type or a partition named twice."""
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        raise InvalidRequestError(f"unknown election type {request.election_type}") from None
    if request.all_partitions:
        return election_type, None
    partitions = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    seen: set[tuple[str, int]] = set()
    for tp in partitions:
        if tp in seen:
            raise InvalidRequestError(f"partition {tp[0]}-{tp[1]} is named more than once")
        seen.add(tp)
    return election_type, partitions


def elect_leaders_response(
    result: ElectionResults | BaseException,
) -> admin_pb2.ElectLeadersResponse:
    """Per-partition outcomes sorted by topic and partition, or the error that refused the
    whole request."""
    response = admin_pb2.ElectLeadersResponse()
    if isinstance(result, BaseException):
        set_error(response, result)
        return response
    for (topic, partition), err in sorted(result.items()):
        out = response.results.add(topic=topic, partition=partition)
        if err is not None:
            set_error(out, err)
    return response


# -- log directories ---------------------------------------------------------------------------


def describe_log_dirs_request_to_pb(
    topics: Mapping[str, Sequence[int]] | None,
) -> admin_pb2.DescribeLogDirsRequest:
    """``topics`` None asks for every partition."""
    request = admin_pb2.DescribeLogDirsRequest(all_topics=topics is None)
    for topic, partitions in (topics or {}).items():
        request.topics.add(topic=topic, partitions=list(partitions))
    return request


def describe_log_dirs_request_from_pb(
    request: admin_pb2.DescribeLogDirsRequest,
) -> dict[str, set[int]] | None:
    if request.all_topics:
        return None
    wanted: dict[str, set[int]] = {}
    for t in request.topics:
        wanted.setdefault(t.topic, set()).update(t.partitions)
    return wanted


def describe_log_dirs_response(
    dirs: Sequence[LogDirDescription],
) -> admin_pb2.DescribeLogDirsResponse:
    response = admin_pb2.DescribeLogDirsResponse()
    for d in dirs:
        out = response.log_dirs.add(
            log_dir=d.path, total_bytes=d.total_bytes, usable_bytes=d.usable_bytes
        )
        if d.error is not None:
            set_error(out, d.error)
        for r in d.replicas:
            out.partitions.add(
                topic=r.topic,
                partition=r.partition,
                size=r.size,
                offset_lag=r.offset_lag,
                is_future=r.is_future,
            )
    return response


def log_dirs_from_pb(
    response: admin_pb2.DescribeLogDirsResponse,
) -> list[LogDirDescription] | KafkaError:
    """The directories, or the error that refused the whole request."""
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err
    return [
        LogDirDescription(
            d.log_dir,
            error_from_wire(d.error_code, d.error_message),
            [
                ReplicaInfo(p.topic, p.partition, p.size, p.offset_lag, p.is_future)
                for p in d.partitions
            ],
            d.total_bytes,
            d.usable_bytes,
        )
        for d in response.log_dirs
    ]


# -- partition reassignments ---------------------------------------------------------------------

Reassignment = tuple[str, int, Sequence[int] | None]


def reassignment_requests_to_pb(
    requests: Sequence[Reassignment], timeout_ms: int = 0
) -> admin_pb2.AlterPartitionReassignmentsRequest:
    """A target of None cancels."""
    request = admin_pb2.AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms)
    by_topic: dict[str, admin_pb2.AlterPartitionReassignmentsRequest.Topic] = {}
    for topic, partition, target in requests:
        t = by_topic.get(topic)
        if t is None:
            t = by_topic[topic] = request.topics.add(name=topic)
        out = t.partitions.add(partition=partition)
        if target is not None:
            out.replicas.broker_ids.extend(target)
    return request


def reassignment_requests_from_pb(
    request: admin_pb2.AlterPartitionReassignmentsRequest,
) -> list[Reassignment]:
    return [
        (t.name, p.partition, tuple(p.replicas.broker_ids) if p.HasField("replicas") else None)
        for t in request.topics
        for p in t.partitions
    ]


def reassignment_response(
    requests: Sequence[Reassignment], results: Sequence[KafkaError | None] | BaseException
) -> admin_pb2.AlterPartitionReassignmentsResponse:
    """One result per request, in order, or the error that refused them all."""
    response = admin_pb2.AlterPartitionReassignmentsResponse()
    if isinstance(results, BaseException):
        set_error(response, results)
        return response
    for (topic, partition, _), err in zip(requests, results, strict=True):
        out = response.results.add(topic=topic, partition=partition)
        if err is not None:
            set_error(out, err)
    return response


def reassignment_results_from_pb(
    response: admin_pb2.AlterPartitionReassignmentsResponse,
) -> list[tuple[str, int, KafkaError | None]] | KafkaError:
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err
    return [
        (r.topic, r.partition, error_from_wire(r.error_code, r.error_message))
        for r in response.results
    ]


def list_reassignments_request_to_pb(
    partitions: Sequence[tuple[str, int]] | None,
) -> admin_pb2.ListPartitionReassignmentsRequest:
    request = admin_pb2.ListPartitionReassignmentsRequest(all_topics=partitions is None)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        by_topic.setdefault(topic, []).append(partition)
    for topic, ps in by_topic.items():
        request.topics.add(name=topic, partitions=ps)
    return request


def list_reassignments_request_from_pb(
    request: admin_pb2.ListPartitionReassignmentsRequest,
) -> list[tuple[str, int]] | None:
    if request.all_topics:
        return None
    return [(t.name, p) for t in request.topics for p in t.partitions]


def list_reassignments_response(
    ongoing: Mapping[tuple[str, int], OngoingReassignment],
) -> admin_pb2.ListPartitionReassignmentsResponse:
    response = admin_pb2.ListPartitionReassignmentsResponse()
    for (topic, partition), r in sorted(ongoing.items()):
        response.reassignments.add(
            topic=topic,
            partition=partition,
            replicas=r.replicas,
            adding_replicas=r.adding_replicas,
            removing_replicas=r.removing_replicas,
        )
    return response


def reassignments_from_pb(
    response: admin_pb2.ListPartitionReassignmentsResponse,
) -> dict[tuple[str, int], OngoingReassignment] | KafkaError:
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err
    return {
        (r.topic, r.partition): OngoingReassignment(
            tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas)
        )
        for r in response.reassignments
    }
