"""One Rillet process: a broker, a controller, or both (``process.roles``), wired from a
:class:`~rillet.config.BrokerConfig`.

Start-up order: lock and open the log dirs (recovering after a crash), open the metadata
log, start the metadata quorum and the gRPC listeners, then register the broker with the
controller and heartbeat; the broker is unfenced once it has caught up with the metadata
log. Committed metadata records flow: quorum -> controller (replay) -> broker publisher
(MetadataImage, then become-leader / become-follower in the ReplicaManager).

Shutdown (SIGTERM) is controlled: the broker asks to be fenced so its leadership moves,
listeners stop, the quorum resigns, high watermarks and checkpoints are written, every log is
flushed and closed, and the clean-shutdown marker is written last.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import random
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rillet.broker.replica_manager import ReplicaManager
from rillet.config import BrokerConfig
from rillet.controller.quorum_controller import ControllerConfig, CreatableTopic, QuorumController
from rillet.errors import (
    KafkaError,
    KafkaStorageError,
    NotControllerError,
    SnapshotNotFoundError,
)
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import BrokerEndpoint, ConfigResourceType, MetadataRecord
from rillet.protocol import (
    admin_pb2,
    admin_pb2_grpc,
    fetch_pb2,
    metadata_pb2,
    metadata_pb2_grpc,
    produce_pb2,
    quorum_pb2,
    quorum_pb2_grpc,
)
from rillet.protocol.errors import error_to_wire
from rillet.raft import RaftConfig, RaftNode
from rillet.server.admin_api import AdminServicer
from rillet.server.controller_service import ControllerService
from rillet.server.data_plane import (
    FetchServicer,
    ProduceServicer,
    add_fetch_servicer,
    add_produce_servicer,
)
from rillet.server.metadata_api import MetadataServicer
from rillet.server.metadata_log import FileQuorumStateStore, MetadataLog
from rillet.server.quorum import QuorumDriver, QuorumServicer
from rillet.storage.log_manager import LogManager

__all__ = ["RilletServer"]

_log = logging.getLogger(__name__)

GRPC_SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", 128 << 20),
    ("grpc.max_send_message_length", 128 << 20),
    ("grpc.http2.max_frame_size", (16 << 20) - 1),
    ("grpc.http2.lookahead_bytes", 16 << 20),
    ("grpc.so_reuseport", 0),
]

Context = grpc.aio.ServicerContext[object, object]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MetadataPublisher:
    """The broker's side of the metadata log: the image, and the actions each change needs."""

    def __init__(self, replicas: ReplicaManager | None, log_manager: LogManager | None) -> None:
        self.image = MetadataImage()
        self.replicas = replicas
        self.log_manager = log_manager
        self.changed = asyncio.Event()

    def publish(self, records: Sequence[tuple[int, MetadataRecord]]) -> None:
        delta = MetadataDelta(self.image)
        for offset, record in records:
            delta.replay(offset, record)
        old, new = self.image, delta.apply()
        self.image = new
        if self.log_manager is not None:
            for rtype, name in {**old.configs, **new.configs}:
                if (
                    rtype == ConfigResourceType.TOPIC
                    and new.topic(name) is not None
                    and old.topic_config(name) != new.topic_config(name)
                ):
                    self.log_manager.update_topic_config(name, dict(new.topic_config(name)))
        if self.replicas is not None:
            self.replicas.apply_partition_changes(delta.partition_changes(), new)
        self.changed.set()
        self.changed = asyncio.Event()


class _ControllerQuorumServicer(QuorumServicer):
    """QuorumService plus the broker lifecycle RPCs, answered by the active controller."""

    def __init__(self, driver: QuorumDriver, service: ControllerService) -> None:
        super().__init__(driver)
        self.service = service

    async def BrokerRegistration(
        self, request: quorum_pb2.BrokerRegistrationRequest, context: Context
    ) -> quorum_pb2.BrokerRegistrationResponse:
        try:
            controller = self.service.require_active()
            endpoints = [
                BrokerEndpoint(e.name, e.host, e.port, "PLAINTEXT") for e in request.listeners
            ]
            epoch = await self.service.submit(
                controller.register_broker(
                    request.broker_id,
                    uuid.UUID(bytes=request.incarnation_id),
                    endpoints,
                    request.rack if request.HasField("rack") else None,
                    _now_ms(),
                )
            )
        except (KafkaError, ValueError) as e:
            w = error_to_wire(e)
            return quorum_pb2.BrokerRegistrationResponse(
                error_code=w.error_code, error_message=w.error_message, broker_epoch=-1
            )
        return quorum_pb2.BrokerRegistrationResponse(broker_epoch=epoch)

    async def BrokerHeartbeat(
        self, request: quorum_pb2.BrokerHeartbeatRequest, context: Context
    ) -> quorum_pb2.BrokerHeartbeatResponse:
        try:
            controller = self.service.require_active()
            caught_up = request.current_metadata_offset >= controller.committed.offset
            r = await self.service.submit(
                controller.broker_heartbeat(
                    request.broker_id,
                    request.broker_epoch,
                    _now_ms(),
                    caught_up=caught_up,
                    want_fence=request.want_fence,
                    want_shutdown=request.want_shutdown,
                )
            )
        except KafkaError as e:
            w = error_to_wire(e)
            return quorum_pb2.BrokerHeartbeatResponse(
                error_code=w.error_code, error_message=w.error_message, is_fenced=True
            )
        return quorum_pb2.BrokerHeartbeatResponse(
            is_caught_up=r.is_caught_up, is_fenced=r.is_fenced, should_shutdown=r.should_shutdown
        )

    async def FetchSnapshot(
        self, request: quorum_pb2.FetchSnapshotRequest, context: Context
    ) -> quorum_pb2.FetchSnapshotResponse:
        # Snapshots (KIP-630) are not written yet, so there is never one to fetch.
        w = error_to_wire(SnapshotNotFoundError("This node has no metadata snapshot."))
        return quorum_pb2.FetchSnapshotResponse(
            error_code=w.error_code, error_message=w.error_message
        )

    async def DescribeQuorum(
        self, request: quorum_pb2.DescribeQuorumRequest, context: Context
    ) -> quorum_pb2.DescribeQuorumResponse:
        info = self.driver.node.describe_quorum()
        if info is None:
            w = error_to_wire(NotControllerError("This node is not the quorum leader."))
            return quorum_pb2.DescribeQuorumResponse(
                error_code=w.error_code, error_message=w.error_message
            )
        response = quorum_pb2.DescribeQuorumResponse(
            leader_id=info.leader_id,
            leader_epoch=info.leader_epoch,
            high_watermark=info.high_watermark,
        )
        for group, states in (
            (response.current_voters, info.voters),
            (response.observers, info.observers),
        ):
            for s in states:
                group.add(
                    replica_id=s.replica_id,
                    log_end_offset=s.log_end_offset,
                    last_fetch_timestamp_ms=s.last_fetch_ms if s.last_fetch_ms is not None else -1,
                    last_caught_up_timestamp_ms=(
                        s.last_caught_up_ms if s.last_caught_up_ms is not None else -1
                    ),
                )
        return response


class RilletServer:
    """Wires and runs one node. ``await start()``, then ``await stop()``."""

    def __init__(self, config: BrokerConfig, cluster_id: str) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.rng = random.Random()
        self.log_manager: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.publisher: MetadataPublisher | None = None
        self.metadata_log: MetadataLog | None = None
        self.driver: QuorumDriver | None = None
        self.service: ControllerService | None = None
        self.servers: list[grpc.aio.Server] = []
        self.bound: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._metadata_lock: IO[bytes] | None = None
        self._broker_epoch = -1
        self._stopping = False

    # -- start -----------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        if cfg.is_broker:
            self.log_manager = LogManager(list(cfg.log_dirs), broker_config=cfg.topic_synonyms)
            self.log_manager.startup()
            self.replicas = ReplicaManager(cfg.node_id, self.log_manager, _now_ms)
        self.publisher = MetadataPublisher(self.replicas, self.log_manager)
        mdir = Path(cfg.metadata_log_dir)
        if self.log_manager is None or mdir.resolve() not in [
            Path(d).resolve() for d in cfg.log_dirs
        ]:
            self._metadata_lock = self._lock_dir(mdir)
        self.metadata_log = MetadataLog.open(mdir)
        voters = dict(cfg.quorum_voters)
        store = FileQuorumStateStore(mdir, list(voters))
        controller = QuorumController(
            ControllerConfig(
                default_num_partitions=cfg.num_partitions,
                default_replication_factor=cfg.default_replication_factor,
                broker_session_timeout_ms=cfg.broker_session_timeout_ms,
                unclean_leader_election=cfg.unclean_leader_election_enable,
                broker_config=cfg.topic_synonyms,
            ),
            self.rng,
        )
        self.service = ControllerService(controller)
        self.service.listeners.append(self.publisher.publish)
        node = RaftNode(
            node_id=cfg.node_id,
            voters=list(voters),
            log=self.metadata_log,
            store=store,
            rng=self.rng,
            now_ms=_now_ms(),
            config=RaftConfig(
                election_timeout_ms=cfg.quorum_election_timeout_ms,
                election_backoff_max_ms=cfg.quorum_election_backoff_max_ms,
                fetch_timeout_ms=cfg.quorum_fetch_timeout_ms,
                request_timeout_ms=cfg.quorum_request_timeout_ms,
            ),
        )
        peers = {v: str(hp) for v, hp in voters.items() if v != cfg.node_id}
        self.driver = QuorumDriver(
            node,
            store,
            self.metadata_log,
            _now_ms,
            peers,
            self.cluster_id,
            self.service.on_commit,
            self.service.on_leader_change,
        )
        self.service.driver = self.driver
        await self._start_listeners()
        await self.driver.start()
        if cfg.is_broker:
            self._spawn(self._broker_lifecycle())
            self._spawn(self._every(cfg.log_flush_scheduler_interval_ms, self._flush))
            self._spawn(self._every(cfg.log_retention_check_interval_ms, self._retention))
            self._spawn(self._every(cfg.log_flush_offset_checkpoint_interval_ms, self._checkpoint))
            self._spawn(self._every(cfg.replica_lag_time_max_ms // 2, self._shrink_isrs))
        if cfg.is_controller:
            self._spawn(self._every(cfg.broker_heartbeat_interval_ms, self._fence_stale))

    @staticmethod
    def _lock_dir(d: Path) -> IO[bytes]:
        d.mkdir(parents=True, exist_ok=True)
        f = open(d / ".lock", "ab")  # noqa: SIM115 - held for the process lifetime
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise KafkaStorageError(
                f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another "
                "process or thread is using this directory."
            ) from None
        return f

    async def _start_listeners(self) -> None:
        cfg = self.config
        assert self.service is not None and self.driver is not None and self.publisher is not None
        if cfg.is_broker and cfg.broker_listeners:
            assert self.replicas is not None
            server = grpc.aio.server(options=GRPC_SERVER_OPTIONS)
            listener = (cfg.inter_broker_listener or cfg.broker_listeners[0]).listener_name
            publisher = self.publisher
            add_produce_servicer(ProduceServicer(self.replicas, _now_ms), server)
            add_fetch_servicer(FetchServicer(self.replicas), server)
            metadata_pb2_grpc.add_MetadataServiceServicer_to_server(
                MetadataServicer(
                    lambda: publisher.image,
                    listener,
                    self.cluster_id,
                    lambda: (
                        -1
                        if self.service is None or self.service.leader.leader_id is None
                        else self.service.leader.leader_id
                    ),
                    self._auto_create if cfg.auto_create_topics_enable else None,
                ),
                server,
            )
            admin_pb2_grpc.add_AdminServiceServicer_to_server(
                AdminServicer(
                    self.service, lambda: publisher.image, cfg, self.cluster_id, listener
                ),
                server,
            )
            services = [
                produce_pb2.DESCRIPTOR.services_by_name["ProduceService"].full_name,
                fetch_pb2.DESCRIPTOR.services_by_name["FetchService"].full_name,
                metadata_pb2.DESCRIPTOR.services_by_name["MetadataService"].full_name,
                admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
            ]
            await self._serve(server, services, cfg.broker_listeners)
        if cfg.is_controller and cfg.controller_listeners:
            server = grpc.aio.server(options=GRPC_SERVER_OPTIONS)
            quorum_pb2_grpc.add_QuorumServiceServicer_to_server(
                _ControllerQuorumServicer(self.driver, self.service), server
            )
            services = [quorum_pb2.DESCRIPTOR.services_by_name["QuorumService"].full_name]
            await self._serve(server, services, cfg.controller_listeners)

    async def _serve(
        self, server: grpc.aio.Server, services: list[str], endpoints: Sequence[object]
    ) -> None:
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        reflection.enable_server_reflection(
            [*services, reflection.SERVICE_NAME, health.SERVICE_NAME], server
        )
        for ep in endpoints:
            port = server.add_insecure_port(ep.bind_address)  # type: ignore[attr-defined]
            if port == 0:
                raise KafkaStorageError(f"cannot bind listener {ep}")
            self.bound[ep.listener_name] = port  # type: ignore[attr-defined]
        await server.start()
        for name in [*services, ""]:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        self.servers.append(server)

    def _spawn(self, coro: object) -> None:
        self._tasks.append(asyncio.create_task(coro))  # type: ignore[arg-type]

    # -- broker lifecycle ------------------------------------------------------------------

    def _endpoints(self) -> list[BrokerEndpoint]:
        out = []
        for ep in self.config.advertised_listeners:
            if ep.listener_name in self.config.controller_listener_names:
                continue
            port = self.bound.get(ep.listener_name, ep.port)
            out.append(BrokerEndpoint(ep.listener_name, ep.host or "localhost", port, "PLAINTEXT"))
        return out

    async def _broker_lifecycle(self) -> None:
        """Register with the active controller, then heartbeat until shutdown."""
        assert self.service is not None and self.publisher is not None
        incarnation = uuid.uuid4()
        interval = self.config.broker_heartbeat_interval_ms / 1000
        while not self._stopping:
            try:
                if self._broker_epoch < 0:
                    controller = self.service.require_active()
                    self._broker_epoch = await self.service.submit(
                        controller.register_broker(
                            self.config.node_id, incarnation, self._endpoints(), None, _now_ms()
                        )
                    )
                controller = self.service.require_active()
                await self.service.submit(
                    controller.broker_heartbeat(
                        self.config.node_id,
                        self._broker_epoch,
                        _now_ms(),
                        caught_up=self.publisher.image.offset >= controller.committed.offset,
                    )
                )
            except NotControllerError:
                pass  # no active controller yet (or it is remote: multi-node brokers fetch it)
            except KafkaError as e:
                _log.warning("broker heartbeat failed: %s", e)
                self._broker_epoch = -1
            await asyncio.sleep(interval if self._broker_epoch >= 0 else 0.05)

    async def _auto_create(self, names: Sequence[str]) -> None:
        assert self.service is not None and self.publisher is not None
        controller = self.service.require_active()
        await self.service.submit(controller.create_topics([CreatableTopic(n) for n in names]))

    async def wait_until_ready(self, timeout_s: float = 30) -> None:
        """Wait until this broker is registered, unfenced and visible in its own metadata."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            image = self.publisher.image if self.publisher else None
            me = image.brokers.get(self.config.node_id) if image else None
            if me is not None and not me.fenced:
                return
            await asyncio.sleep(0.02)
        raise KafkaStorageError("the broker did not become ready in time")

    # -- periodic work -----------------------------------------------------------------------

    async def _every(self, interval_ms: int, fn: object) -> None:
        while not self._stopping:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                fn()  # type: ignore[operator]
            except Exception:
                _log.exception("periodic task failed")

    def _flush(self) -> None:
        if self.log_manager is not None:
            self.log_manager.flush_dirty_logs()

    def _retention(self) -> None:
        if self.log_manager is not None and self.replicas is not None:
            self.log_manager.cleanup_logs(self.replicas.high_watermarks())

    def _checkpoint(self) -> None:
        if self.log_manager is not None and self.replicas is not None:
            self.log_manager.checkpoint_high_watermarks(self.replicas.high_watermarks())
            self.log_manager.checkpoint()

    def _shrink_isrs(self) -> None:
        if self.replicas is not None:
            self.replicas.maybe_shrink_isrs(self.config.replica_lag_time_max_ms)

    def _fence_stale(self) -> None:
        if self.service is None or not self.service.is_active:
            return
        records = self.service.controller.fence_stale_brokers(_now_ms())
        if records:
            from rillet.controller.quorum_controller import ControllerResult

            task = asyncio.get_running_loop().create_task(
                self.service.submit(ControllerResult(records, None))
            )
            task.add_done_callback(lambda t: t.exception())

    # -- stop ------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Controlled shutdown, then close everything; the clean-shutdown marker comes last."""
        if self._stopping:
            return
        self._stopping = True
        if self.service is not None and self._broker_epoch >= 0:
            with contextlib.suppress(Exception):
                controller = self.service.require_active()
                await asyncio.wait_for(
                    self.service.submit(
                        controller.broker_heartbeat(
                            self.config.node_id, self._broker_epoch, _now_ms(), want_shutdown=True
                        )
                    ),
                    5,
                )
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for server in self.servers:
            await server.stop(1)
        if self.driver is not None:
            await self.driver.stop()
        if self.replicas is not None:
            self.replicas.shutdown()
        if self.log_manager is not None:
            if self.replicas is not None:
                self.log_manager.checkpoint_high_watermarks(self.replicas.high_watermarks())
            self.log_manager.shutdown()
        if self.metadata_log is not None:
            self.metadata_log.close()
        if self._metadata_lock is not None:
            self._metadata_lock.close()
