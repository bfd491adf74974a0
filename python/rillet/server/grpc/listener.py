"""A gRPC server for one group of listeners (the broker's or the controller's), with health
checking and reflection for every service it serves, and the two groups' services."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import grpc
from google.protobuf.descriptor import FileDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rillet.broker.apis import BrokerApis
from rillet.broker.group_coordinator import GroupCoordinator
from rillet.broker.producer_id_manager import ProducerIdManager
from rillet.broker.security_apis import SecurityApis
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.broker.txn_marker_writer import TxnMarkerWriter
from rillet.config import Endpoint
from rillet.controller.service import ControllerService
from rillet.errors import KafkaStorageError
from rillet.protocol.gen.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    controller_pb2,
    controller_pb2_grpc,
    fetch_pb2,
    group_pb2,
    group_pb2_grpc,
    metadata_pb2,
    metadata_pb2_grpc,
    produce_pb2,
    quorum_pb2,
    quorum_pb2_grpc,
    sasl_pb2,
    sasl_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)
from rillet.raft.driver import RaftDriver
from rillet.scheduler import Clock
from rillet.security.tls import ListenerTls
from rillet.server.grpc.admin import AdminServicer
from rillet.server.grpc.controller import ControllerServicer
from rillet.server.grpc.fetch import FetchServicer, add_fetch_servicer
from rillet.server.grpc.group import GroupServicer
from rillet.server.grpc.metadata import MetadataServicer
from rillet.server.grpc.produce import ProduceServicer, add_produce_servicer
from rillet.server.grpc.quorum import QuorumServicer
from rillet.server.grpc.sasl import SaslServicer
from rillet.server.grpc.transaction import TransactionServicer

__all__ = ["GRPC_SERVER_OPTIONS", "GrpcListener", "broker_listener", "controller_listener"]

GRPC_SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", 128 << 20),
    ("grpc.max_send_message_length", 128 << 20),
    ("grpc.http2.max_frame_size", (16 << 20) - 1),
    ("grpc.http2.lookahead_bytes", 16 << 20),
    ("grpc.so_reuseport", 0),
]

Registration = Callable[[grpc.aio.Server], None]


class GrpcListener:
    """Serves ``services`` (full names, for health and reflection), added to the server by
    ``register``, on every endpoint. :attr:`bound` maps listener names to the bound ports
    (an endpoint with port 0 gets a free one)."""

    def __init__(
        self,
        register: Sequence[Registration],
        services: Sequence[str],
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        self.server = grpc.aio.server(options=GRPC_SERVER_OPTIONS, interceptors=interceptors)
        for add in register:
            add(self.server)
        self.services = list(services)
        self.bound: dict[str, int] = {}

    async def start(
        self, endpoints: Sequence[Endpoint], tls: Mapping[str, ListenerTls] | None = None
    ) -> None:
        """Serve on ``endpoints``; those named in ``tls`` (SSL listeners) over TLS."""
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, self.server)
        reflection.enable_server_reflection(
            [*self.services, reflection.SERVICE_NAME, health.SERVICE_NAME], self.server
        )
        for ep in endpoints:
            listener_tls = (tls or {}).get(ep.listener_name)
            if listener_tls is None:
                port = self.server.add_insecure_port(ep.bind_address)
            else:
                port = self.server.add_secure_port(ep.bind_address, listener_tls.grpc_credentials())
            if port == 0:
                raise KafkaStorageError(f"cannot bind listener {ep}")
            self.bound[ep.listener_name] = port
        await self.server.start()
        for name in [*self.services, ""]:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, grace_s: float | None) -> None:
        await self.server.stop(grace_s)


def _service(file: FileDescriptor, name: str) -> str:
    return file.services_by_name[name].full_name


def broker_listener(
    apis: BrokerApis,
    groups: GroupCoordinator,
    producer_ids: ProducerIdManager,
    clock: Clock,
    listener_name: str,
    *,
    transactions: TransactionCoordinator | None = None,
    txn_markers: TxnMarkerWriter | None = None,
    security: SecurityApis | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    sasl: SaslServicer | None = None,
) -> GrpcListener:
    """The client API of a broker: produce, fetch, metadata, admin (with ACLs and SCRAM
    credentials from ``security``), groups, producer ids and transactions (with the
    inter-broker WriteTxnMarkers), and SaslService on a SASL listener (``sasl``). Brokers
    are described with their ``listener_name`` endpoints; ``clock`` stamps records sent
    without a timestamp."""
    sasl_service: tuple[list[Registration], list[str]] = ([], [])
    if sasl is not None:
        sasl_service = (
            [lambda s: sasl_pb2_grpc.add_SaslServiceServicer_to_server(sasl, s)],
            [_service(sasl_pb2.DESCRIPTOR, "SaslService")],
        )
    return GrpcListener(
        [
            *sasl_service[0],
            lambda s: add_produce_servicer(ProduceServicer(apis, clock), s),
            lambda s: add_fetch_servicer(FetchServicer(apis), s),
            lambda s: metadata_pb2_grpc.add_MetadataServiceServicer_to_server(
                MetadataServicer(apis, listener_name), s
            ),
            lambda s: admin_pb2_grpc.add_AdminServiceServicer_to_server(
                AdminServicer(apis, listener_name, security), s
            ),
            lambda s: group_pb2_grpc.add_GroupServiceServicer_to_server(
                GroupServicer(groups, listener_name, transactions), s
            ),
            lambda s: transaction_pb2_grpc.add_TransactionServiceServicer_to_server(
                TransactionServicer(producer_ids, transactions, txn_markers, apis.image), s
            ),
        ],
        [
            _service(produce_pb2.DESCRIPTOR, "ProduceService"),
            _service(fetch_pb2.DESCRIPTOR, "FetchService"),
            _service(metadata_pb2.DESCRIPTOR, "MetadataService"),
            _service(admin_pb2.DESCRIPTOR, "AdminService"),
            _service(group_pb2.DESCRIPTOR, "GroupService"),
            _service(transaction_pb2.DESCRIPTOR, "TransactionService"),
            *sasl_service[1],
        ],
        interceptors,
    )


def controller_listener(
    driver: RaftDriver,
    controller: ControllerService,
    clock: Clock,
    cluster_id: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> GrpcListener:
    """The API of a controller: the quorum (Raft, broker registration and heartbeats) and
    the controller's requests from brokers (AlterPartition, forwarded admin changes)."""
    quorum = QuorumServicer(driver, controller, clock, cluster_id)
    apis = ControllerServicer(controller)
    return GrpcListener(
        [
            lambda s: quorum_pb2_grpc.add_QuorumServiceServicer_to_server(quorum, s),
            lambda s: controller_pb2_grpc.add_ControllerServiceServicer_to_server(apis, s),
        ],
        [
            _service(quorum_pb2.DESCRIPTOR, "QuorumService"),
            _service(controller_pb2.DESCRIPTOR, "ControllerService"),
        ],
        interceptors,
    )
