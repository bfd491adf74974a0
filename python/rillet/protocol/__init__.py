"""Rillet's gRPC API (``proto/rillet/v1``): the generated modules under short names.

Messages are in ``x_pb2`` and services (stubs, servicers, ``add_*Servicer_to_server``) in
``x_pb2_grpc``; ``errors`` is the one place Kafka errors cross the wire::

    from rillet.protocol import produce_pb2, produce_pb2_grpc

    stub = produce_pb2_grpc.ProduceServiceStub(channel)
    response = await stub.Produce(produce_pb2.ProduceRequest(acks=1, topics=[...]))

The code itself is generated into :mod:`rillet.protocol.gen.v1` by ``scripts/gen_proto.py``
(never edited by hand); the package name ``rillet.v1`` of the .proto files stays the wire name
(``/rillet.v1.FetchService/Fetch``), so clients in other languages see the same API.
"""

from __future__ import annotations

from rillet.protocol import errors
from rillet.protocol.gen.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
    fetch_pb2,
    fetch_pb2_grpc,
    metadata_pb2,
    metadata_pb2_grpc,
    metadata_records_pb2,
    produce_pb2,
    produce_pb2_grpc,
    quorum_pb2,
    quorum_pb2_grpc,
)

__all__ = [
    "admin_pb2",
    "admin_pb2_grpc",
    "common_pb2",
    "controller_pb2",
    "controller_pb2_grpc",
    "errors",
    "fetch_pb2",
    "fetch_pb2_grpc",
    "metadata_pb2",
    "metadata_pb2_grpc",
    "metadata_records_pb2",
    "produce_pb2",
    "produce_pb2_grpc",
    "quorum_pb2",
    "quorum_pb2_grpc",
]
