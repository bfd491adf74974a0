"""The client's cluster metadata keeps each partition's leader epoch (KIP-320): a response
naming an older epoch, from a broker whose metadata is behind, does not send the client back
to a deposed leader."""

from __future__ import annotations

from rillet.client.cluster import ClusterMetadata
from rillet.protocol import metadata_pb2
from rillet.types import TopicPartition

TP = TopicPartition("t", 0)


def _response(leader: int, epoch: int) -> metadata_pb2.MetadataResponse:
    r = metadata_pb2.MetadataResponse(cluster_id="c", controller_id=1)
    for b in (1, 2, 3):
        r.brokers.add(node_id=b, host=f"h{b}", port=9092)
    t = r.topics.add(name="t")
    t.partitions.add(partition=0, leader_id=leader, leader_epoch=epoch)
    return r


def test_an_older_leader_epoch_does_not_replace_a_newer_one() -> None:
    cluster = ClusterMetadata(["h1:9092"])
    cluster._apply_grpc(_response(leader=1, epoch=3))
    assert (cluster.leader_address(TP), cluster.leader_epoch(TP)) == ("h1:9092", 3)
    cluster._apply_grpc(_response(leader=2, epoch=4))
    assert (cluster.leader_address(TP), cluster.leader_epoch(TP)) == ("h2:9092", 4)
    # A broker cut off since epoch 3 still names broker 1.
    cluster._apply_grpc(_response(leader=1, epoch=3))
    assert (cluster.leader_address(TP), cluster.leader_epoch(TP)) == ("h2:9092", 4)
    cluster._apply_grpc(_response(leader=3, epoch=5))
    assert (cluster.leader_address(TP), cluster.leader_epoch(TP)) == ("h3:9092", 5)
