"""MetadataService messages (``metadata.proto``) from the domain's
:class:`~rillet.broker.apis.MetadataResult`."""

from __future__ import annotations

from rillet.broker.apis import MetadataResult
from rillet.protocol.errors import set_error
from rillet.protocol.gen.v1 import metadata_pb2

__all__ = ["metadata_response"]


def metadata_response(result: MetadataResult) -> metadata_pb2.MetadataResponse:
    response = metadata_pb2.MetadataResponse(
        cluster_id=result.cluster_id, controller_id=result.controller_id
    )
    for b in result.brokers:
        node = response.brokers.add(node_id=b.node_id, host=b.host, port=b.port)
        if b.rack is not None:
            node.rack = b.rack
    for topic in result.topics:
        t = response.topics.add(name=topic.name)
        if topic.error is not None or topic.topic is None:
            if topic.error is not None:
                set_error(t, topic.error)
            continue
        t.topic_id = topic.topic.topic_id.bytes
        t.is_internal = topic.topic.is_internal
        for p in topic.partitions:
            part = t.partitions.add(
                partition=p.partition,
                leader_id=p.leader_id,
                leader_epoch=p.leader_epoch,
                replica_nodes=p.replicas,
                isr_nodes=p.isr,
                offline_replicas=p.offline_replicas,
                eligible_leader_replicas=p.elr,
            )
            if p.error is not None:
                set_error(part, p.error)
    return response
