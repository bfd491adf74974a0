"""One Rillet process, wired from a :class:`~rillet.config.BrokerConfig`: the composition
root. It builds a broker, a controller, or both (``process.roles``), connects them, and
owns their start and stop order; it holds no request handling, protocol or housekeeping
logic of its own. Tests reuse it (``tests/support/mini_broker.py``) rather than wiring the
components a second time.

Start-up: lock and open the log dirs (recovering after a crash), open the metadata log,
start the listeners and the metadata quorum, then register the broker with the controller
and heartbeat; the broker is unfenced once it has caught up with the metadata log.
Committed metadata records flow: quorum -> controller (replay) and broker publisher
(MetadataImage, then become-leader / become-follower in the ReplicaManager). Every node
writes a snapshot of the image after ``metadata.log.max.record.bytes.between.snapshots`` of
records (KIP-630), starts from its latest snapshot, and lets the metadata log go behind its
snapshots within ``metadata.max.retention.bytes`` / ``.ms``; a node that fell behind the
leader's log start loads the leader's snapshot instead.

Shutdown (SIGTERM) is controlled: the broker asks to be fenced so its leadership moves,
listeners stop, the quorum resigns, high watermarks and checkpoints are written, every log
is flushed and closed, and the clean-shutdown marker is written last.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import random
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import grpc

from rillet.broker.alter_partition import AlterPartitionManager
from rillet.broker.apis import BrokerApis
from rillet.broker.authorizer import BrokerAuthorizer, broker_authorizer
from rillet.broker.controller_channel import ControllerChannel, InProcessControllerChannel
from rillet.broker.group_coordinator import GroupCoordinator
from rillet.broker.lifecycle import BrokerLifecycle, BrokerLifecycleManager
from rillet.broker.metadata_publisher import MetadataPublisher
from rillet.broker.metrics import BrokerMetrics, NodeState
from rillet.broker.producer_id_manager import ProducerIdManager
from rillet.broker.quotas import BrokerQuotas, QuotaWindow
from rillet.broker.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from rillet.broker.replica_manager import ReplicaManager
from rillet.broker.security_apis import SecurityApis
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.broker.txn_broker_clients import BrokerClients
from rillet.broker.txn_marker_channel import TxnMarkerChannel
from rillet.broker.txn_marker_writer import TxnMarkerWriter
from rillet.broker.txn_verification import TxnVerifier
from rillet.config import BrokerConfig, Endpoint
from rillet.config.ssl_keys import SSL_KEY_PREFIX
from rillet.controller import ControllerConfig, QuorumController
from rillet.controller.service import ControllerService
from rillet.coordinator.group.config import GroupCoordinatorConfig
from rillet.coordinator.transaction import TransactionCoordinatorConfig
from rillet.errors import KafkaStorageError
from rillet.metadata.records import BrokerEndpoint
from rillet.metadata.snapshot import (
    SnapshotPolicy,
    decode_snapshot,
    encode_snapshot,
    image_from_records,
)
from rillet.protocol.metadata_records import decode_entries
from rillet.raft import Entry, LeaderAndEpoch, RaftConfig, RaftNode, SnapshotId
from rillet.raft.driver import QuorumStatus, RaftDriver
from rillet.raft.metadata_log import MetadataLog
from rillet.raft.quorum_state import FileQuorumStateStore
from rillet.scheduler import AsyncioScheduler, Clock, wall_clock_ms
from rillet.security.sasl import SUPPORTED_MECHANISMS, ListenerSasl
from rillet.security.scram import ScramCredential
from rillet.security.tls import ClientTls, ListenerTls
from rillet.server.grpc.authorization import CallGate
from rillet.server.grpc.controller_channel import GrpcControllerChannel
from rillet.server.grpc.listener import GrpcListener, broker_listener, controller_listener
from rillet.server.grpc.quorum import GrpcRaftTransport
from rillet.server.grpc.replica_fetch_client import GrpcReplicaFetchClient
from rillet.server.grpc.request_metrics import GrpcRequestMetrics
from rillet.server.grpc.sasl import GrpcSasl, SaslServicer
from rillet.server.grpc.txn_client import GrpcTxnBrokerClient
from rillet.server.kafka.admin import KafkaAdmin
from rillet.server.kafka.admin_security import KafkaSecurityAdmin
from rillet.server.kafka.apis import KafkaApis
from rillet.server.kafka.consumer_groups import KafkaConsumerGroups
from rillet.server.kafka.groups import KafkaGroups
from rillet.server.kafka.listener import KafkaListener
from rillet.server.kafka.transactions import KafkaTransactions
from rillet.server.metrics_endpoint import MetricsEndpoint
from rillet.storage.dir_lock import lock_dir
from rillet.storage.log_cleaner import LogCleanerConfig
from rillet.storage.log_manager import LogManager, ProducerStateConfig
from rillet.types import TopicPartition

__all__ = ["RilletServer"]

_log = logging.getLogger(__name__)

# The broker configs the group coordinator takes (GroupCoordinatorConfig.from_properties).
GROUP_KEYS = (
    "offsets.topic.num.partitions",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offset.metadata.max.bytes",
    "group.consumer.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.max.size",
    "group.consumer.assignors",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.max.size",
)
# The broker configs the transaction coordinator takes (TransactionCoordinatorConfig).
TRANSACTION_KEYS = (
    "transaction.state.log.num.partitions",
    "transaction.max.timeout.ms",
    "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "offsets.topic.num.partitions",
)
# Kafka's retry.backoff.ms default: how long a transaction marker waits before a retry.
TXN_MARKER_RETRY_BACKOFF_MS = 100


class RilletServer:
    """Wires and runs one node: ``await start()``, then ``await stop()``. The components
    are attributes once started (``None`` where the node's roles do not need one)."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster_id: str,
        *,
        clock: Clock = wall_clock_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.clock = clock
        self.rng = rng or random.Random()
        self.scheduler = AsyncioScheduler()
        self.log_manager: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        self.txn_verifier: TxnVerifier | None = None
        self.txn_markers: TxnMarkerWriter | None = None
        self.txn_channel: TxnMarkerChannel | None = None
        self.broker_clients: BrokerClients | None = None
        self.alter_partition: AlterPartitionManager | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self.apis: BrokerApis | None = None
        self.metrics: BrokerMetrics | None = None
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.security: SecurityApis | None = None
        # The authorizer of the broker (over its metadata image) or controller (over the
        # controller's); None without authorizer.class.name.
        self.authorizer: BrokerAuthorizer | None = None
        self.metadata_log: MetadataLog | None = None
        self.driver: RaftDriver | None = None
        self.listeners: list[GrpcListener | KafkaListener] = []
        self.bound: dict[str, int] = {}
        self._metadata_lock: IO[bytes] | None = None
        cfg = config
        # The SSL listeners' TLS, loaded now so that bad key material stops the start.
        self.listener_tls = {
            ep.listener_name: ListenerTls(
                ep.listener_name, cfg.listener_config(ep.listener_name, SSL_KEY_PREFIX)
            )
            for ep in cfg.listeners
            if ep.security_protocol in ("SSL", "SASL_SSL")
        }
        # The SASL listeners' mechanisms and credentials, checked now likewise.
        self.listener_sasl = {
            ep.listener_name: ListenerSasl(
                ep.listener_name,
                cfg.listener_config(ep.listener_name, "sasl.")["sasl.enabled.mechanisms"],
                {m: cfg.jaas_config(ep.listener_name, m) for m in SUPPORTED_MECHANISMS},
                self._scram_credential,
            )
            for ep in cfg.broker_listeners
            if ep.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")
        }
        self.inter_broker_tls = self._client_tls(cfg.inter_broker_listener_name)
        self.controller_tls = self._client_tls(next(iter(cfg.controller_listener_names), None))
        self.controller = ControllerService(
            QuorumController(
                ControllerConfig(
                    default_num_partitions=cfg.num_partitions,
                    default_replication_factor=cfg.default_replication_factor,
                    broker_session_timeout_ms=cfg.broker_session_timeout_ms,
                    unclean_leader_election=cfg.unclean_leader_election_enable,
                    leader_imbalance_per_broker_percentage=(
                        cfg.leader_imbalance_per_broker_percentage
                    ),
                    broker_config=cfg.topic_synonyms,
                ),
                self.rng,
            ),
            clock,
        )
        self.channel: ControllerChannel
        if cfg.is_controller and set(cfg.quorum_voters) == {cfg.node_id}:
            # A quorum of this node alone: its controller is the only one there is.
            self.channel = InProcessControllerChannel(self.controller)
        else:
            self.channel = GrpcControllerChannel(
                {v: str(hp) for v, hp in cfg.quorum_voters.items()},
                cluster_id,
                lambda: self.controller.controller_id,
                clock,
                local=self.controller if cfg.is_controller else None,
                request_timeout_ms=cfg.quorum_request_timeout_ms,
                tls=self.controller_tls,
            )
        self.publisher = MetadataPublisher(None, None)
        self.snapshots = SnapshotPolicy(
            cfg.metadata_log_max_record_bytes_between_snapshots,
            cfg.metadata_log_max_snapshot_interval_ms,
        )
        self._last_record: tuple[int, int] | None = None  # (offset, epoch) last applied
        self._ended_epoch = -1  # the broker epoch a clean shutdown records (KIP-966)

    # -- start -----------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        inert = cfg.inert_settings_warning()
        if inert is not None:
            _log.warning(inert)
        if cfg.is_broker:
            self._start_broker_storage()
        metrics = self.metrics = self._build_metrics()
        mdir = Path(cfg.metadata_log_dir)
        if self.log_manager is None or mdir.resolve() not in [
            Path(d).resolve() for d in cfg.log_dirs
        ]:
            self._metadata_lock = lock_dir(mdir)
        self.metadata_log = MetadataLog.open(
            mdir,
            clock=self.clock,
            segment_bytes=cfg.metadata_log_segment_bytes,
            segment_ms=cfg.metadata_log_segment_ms,
        )
        applied = self._load_latest_snapshot()
        voters = dict(cfg.quorum_voters)
        store = FileQuorumStateStore(mdir, list(voters))
        node = RaftNode(
            node_id=cfg.node_id,
            voters=list(voters),
            log=self.metadata_log,
            store=store,
            rng=self.rng,
            now_ms=self.clock(),
            config=RaftConfig(
                election_timeout_ms=cfg.quorum_election_timeout_ms,
                election_backoff_max_ms=cfg.quorum_election_backoff_max_ms,
                fetch_timeout_ms=cfg.quorum_fetch_timeout_ms,
                request_timeout_ms=cfg.quorum_request_timeout_ms,
            ),
            applied_offset=applied,
        )
        peers = {v: str(hp) for v, hp in voters.items() if v != cfg.node_id}
        self.driver = RaftDriver(
            node,
            store,
            self.metadata_log,
            self.clock,
            GrpcRaftTransport(peers, self.cluster_id, self.controller_tls),
            self._on_commit,
            self._on_leader_change,
            self._on_load_snapshot,
            commit_latency_ms=metrics.raft_commit_latency_ms,
        )
        self.controller.attach(self.driver)
        await self._start_listeners(self.driver)
        await self.driver.start()
        if cfg.is_broker:
            self._start_broker_background()
        if cfg.is_controller:
            self.scheduler.schedule(
                "fence-stale-brokers",
                self.controller.fence_stale_brokers,
                cfg.broker_heartbeat_interval_ms,
            )
            if cfg.auto_leader_rebalance_enable:
                self.scheduler.schedule(
                    "auto-leader-rebalance",
                    self.controller.balance_partition_leaders,
                    cfg.leader_imbalance_check_interval_seconds * 1000,
                )
            self.scheduler.schedule(
                "elect-unclean-leaders",
                self.controller.elect_unclean_leaders,
                cfg.unclean_leader_election_interval_ms,
            )

    def _start_broker_storage(self) -> None:
        cfg = self.config
        self.log_manager = LogManager(
            list(cfg.log_dirs),
            broker_config=cfg.topic_synonyms,
            clock=self.clock,
            cleaner_config=LogCleanerConfig.from_broker_config(cfg.values),
            producer_state_config=ProducerStateConfig.from_broker_config(cfg.values),
        )
        self.log_manager.startup()
        life = BrokerLifecycle(
            cfg.node_id,
            uuid.uuid4(),
            cfg.broker_heartbeat_interval_ms,
            self.clock(),
            rack=cfg.broker_rack,
            ready_to_unfence=False,
            previous_broker_epoch=self.log_manager.previous_broker_epoch,
        )
        self.alter_partition = AlterPartitionManager(
            cfg.node_id, self.channel, lambda: life.broker_epoch
        )
        self.producer_ids = ProducerIdManager(
            cfg.node_id, self.channel, lambda: life.broker_epoch, self.clock
        )
        fetchers = ReplicaFetcherManager(
            cfg.node_id,
            lambda tp: replicas.partitions.get(tp),
            self._connect_to_broker,
            lambda: life.broker_epoch,
            self.clock,
            FetcherConfig(
                max_wait_ms=cfg["replica.fetch.wait.max.ms"],
                min_bytes=cfg["replica.fetch.min.bytes"],
                partition_max_bytes=cfg["replica.fetch.max.bytes"],
                response_max_bytes=cfg["replica.fetch.response.max.bytes"],
                backoff_ms=cfg["replica.fetch.backoff.ms"],
                request_timeout_ms=cfg["replica.socket.timeout.ms"],
                num_fetchers=cfg["num.replica.fetchers"],
            ),
        )
        replicas = self.replicas = ReplicaManager(
            cfg.node_id, self.log_manager, self.clock, self.alter_partition, fetchers
        )
        # Act on the metadata only once the controller says this broker has caught up.
        self.publisher = MetadataPublisher(self.replicas, self.log_manager, held=True)
        self.lifecycle = BrokerLifecycleManager(
            life,
            self.channel,
            self.clock,
            self._endpoints,
            lambda: self.publisher.image.offset,
            self._on_caught_up,
        )
        txn_config = TransactionCoordinatorConfig.from_properties(
            {k: cfg[k] for k in TRANSACTION_KEYS}
        )
        request_timeout_ms = cfg["request.timeout.ms"]
        clients = BrokerClients(
            self._inter_broker_address,
            lambda broker, address: GrpcTxnBrokerClient(broker, address, self.inter_broker_tls),
        )
        self.broker_clients = clients
        verifier = self.txn_verifier = TxnVerifier(
            cfg.node_id,
            self.replicas,
            lambda: self.publisher.image,
            clients,
            None,
            num_partitions=txn_config.transaction_state_log_num_partitions,
            request_timeout_ms=request_timeout_ms,
            enabled=cfg["transaction.partition.verification.enable"],
        )
        self.apis = BrokerApis(
            cfg,
            self.cluster_id,
            self.replicas,
            lambda: self.publisher.image,
            self.channel,
            txn_verifier=verifier,
        )
        self.apis.quotas = BrokerQuotas(
            lambda: self.publisher.image,
            QuotaWindow(cfg["quota.window.num"], cfg["quota.window.size.seconds"]),
            time.monotonic,
        )
        self.authorizer = broker_authorizer(cfg, lambda: self.publisher.image)
        self.security = SecurityApis(self.channel, lambda: self.publisher.image, self.authorizer)
        self.groups = GroupCoordinator(
            cfg.node_id,
            self.replicas,
            self.log_manager,
            self.channel,
            GroupCoordinatorConfig.from_properties({k: cfg[k] for k in GROUP_KEYS}),
            self.clock,
            replication_factor=cfg.offsets_topic_replication_factor,
            commit_timeout_ms=cfg["offsets.commit.timeout.ms"],
        )
        self.publisher.listeners.append(self.groups.on_metadata)
        self.txn_markers = TxnMarkerWriter(
            self.replicas,
            self.clock,
            groups=self.groups,
            guards=verifier.guards,
            timeout_ms=request_timeout_ms,
        )
        self.txn_channel = TxnMarkerChannel(
            cfg.node_id,
            lambda: self.publisher.image,
            clients,
            self.txn_markers.write_txn_markers,
            request_timeout_ms=request_timeout_ms,
        )
        self.transactions = TransactionCoordinator(
            cfg.node_id,
            self.replicas,
            self.log_manager,
            self.channel,
            txn_config,
            self.clock,
            producer_ids=self.producer_ids,
            markers=self.txn_channel,
            replication_factor=cfg.transaction_state_log_replication_factor,
            min_isr=cfg["transaction.state.log.min.isr"],
            segment_bytes=cfg["transaction.state.log.segment.bytes"],
            commit_timeout_ms=request_timeout_ms,
            retry_backoff_ms=TXN_MARKER_RETRY_BACKOFF_MS,
        )
        verifier.local = self.transactions.add_partitions_to_txn
        self.publisher.listeners.append(self.transactions.on_metadata)

    def _on_caught_up(self) -> None:
        """The controller says this broker has the metadata: act on it (leaders, followers,
        stray logs deleted), then ask to be unfenced."""
        _log.info(
            "caught up with the metadata log at offset %d: acting on it",
            self.publisher.image.offset,
        )
        self.publisher.release()

    def _start_broker_background(self) -> None:
        cfg = self.config
        assert self.log_manager is not None and self.replicas is not None
        assert self.lifecycle is not None
        self.lifecycle.start()
        self.log_manager.schedule(
            self.scheduler,
            flush_check_ms=cfg.log_flush_scheduler_interval_ms,
            retention_check_ms=cfg.log_retention_check_interval_ms,
            checkpoint_ms=cfg.log_flush_offset_checkpoint_interval_ms,
            high_watermarks=self.replicas.high_watermarks,
        )
        self.replicas.schedule(
            self.scheduler,
            replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            hw_checkpoint_ms=cfg["replica.high.watermark.checkpoint.interval.ms"],
        )

    async def _start_listeners(self, driver: RaftDriver) -> None:
        cfg = self.config
        if cfg.is_broker and cfg.broker_listeners:
            assert self.apis is not None
            name = (cfg.inter_broker_listener or cfg.grpc_listeners[0]).listener_name
            assert self.groups is not None and self.producer_ids is not None
            # One gRPC server per SASL listener (a server cannot tell which of its ports a
            # call came in on), and one for the others.
            plain = [ep for ep in cfg.grpc_listeners if ep.listener_name not in self.listener_sasl]
            groups = [(ep.listener_name, [ep]) for ep in cfg.grpc_listeners if ep not in plain]
            for sasl_name, endpoints in [*([(None, plain)] if plain else []), *groups]:
                sasl = None
                if sasl_name is not None:
                    sasl = GrpcSasl(self.listener_sasl[sasl_name])
                # Brokers are described by the endpoints of the listener asked, as Kafka does.
                listener = broker_listener(
                    self.apis,
                    self.groups,
                    self.producer_ids,
                    self.clock,
                    name if sasl_name is None else sasl_name,
                    transactions=self.transactions,
                    txn_markers=self.txn_markers,
                    security=self.security,
                    interceptors=self._grpc_interceptors(endpoints, sasl),
                    sasl=None
                    if sasl is None
                    else SaslServicer(sasl, cfg["connection.failed.authentication.delay.ms"]),
                )
                await self._listen(listener, endpoints)
            if cfg.kafka_listeners:
                security = self.security
                assert security is not None
                relay = self._grpc_address()
                kafka = KafkaListener(
                    KafkaApis(
                        self.apis,
                        [
                            KafkaGroups(self.groups, self.transactions),
                            KafkaConsumerGroups(self.groups),
                            KafkaTransactions(self.producer_ids, self.transactions),
                            KafkaAdmin(self.apis, self.transactions),
                            KafkaSecurityAdmin(security),
                        ],
                        fetch_session_cache_slots=cfg["max.incremental.fetch.session.cache.slots"],
                        authorizer=self.authorizer,
                        metrics=self.metrics,
                    ),
                    max_request_bytes=cfg.socket_request_max_bytes,
                    idle_ms=cfg["connections.max.idle.ms"],
                    network_threads=cfg.num_network_threads,
                    grpc_address=None if relay is None else relay[0],
                    grpc_tls=None if relay is None else relay[1],
                    grpc_authenticates=relay is not None and relay[2],
                    grpc_relay_anonymous_only=(
                        relay is not None and self.authorizer is not None and not relay[2]
                    ),
                    failed_authentication_delay_ms=cfg["connection.failed.authentication.delay.ms"],
                )
                await kafka.start(cfg.kafka_listeners, self.listener_tls, self.listener_sasl)
                self.bound.update(kafka.bound)
                self.listeners.append(kafka)
        if cfg.is_controller and cfg.controller_listeners:
            listener = controller_listener(
                driver,
                self.controller,
                self.clock,
                self.cluster_id,
                self._grpc_interceptors(cfg.controller_listeners),
            )
            await self._listen(listener, cfg.controller_listeners)
        if cfg["metrics.port"] >= 0 and self.metrics is not None:
            self.metrics_endpoint = MetricsEndpoint(
                self.metrics, cfg["metrics.host"], cfg["metrics.port"]
            )
            self.bound["METRICS"] = await self.metrics_endpoint.start()

    def _build_metrics(self) -> BrokerMetrics:
        """The node's metrics, read from its components at each scrape; counted by the
        broker's handlers and log flusher (and, as they are made, the Raft driver and the
        gRPC listeners)."""
        cfg = self.config
        roles = tuple(r for r in ("broker", "controller") if r in cfg.process_roles)

        def quorum() -> QuorumStatus | None:
            return None if self.driver is None else self.driver.status()

        log_manager, replicas = self.log_manager, self.replicas
        if log_manager is None or replicas is None or self.apis is None:  # a controller only
            committed = self.controller.controller
            return BrokerMetrics(
                NodeState(
                    cfg.node_id,
                    lambda: committed.committed,
                    lambda topic: 1,
                    lambda: self.controller.is_active,
                    lambda: 0,
                    roles,
                    quorum=quorum,
                )
            )
        groups, life = self.groups, self.lifecycle
        assert groups is not None and life is not None

        def end_offset(tp: TopicPartition) -> int | None:
            p = replicas.partitions.get(tp)
            return None if p is None else p.high_watermark

        metrics = self.apis.metrics = BrokerMetrics(
            NodeState(
                cfg.node_id,
                lambda: self.publisher.image,
                lambda topic: int(log_manager.topic_config(topic)["min.insync.replicas"]),
                lambda: self.controller.is_active,
                lambda: len(replicas.partitions),
                roles,
                broker_state=lambda: life.lifecycle.state.value,
                quorum=quorum,
                purgatories=(replicas.produce_purgatory, replicas.fetch_purgatory),
                committed_offsets=groups.committed_offsets,
                end_offset=end_offset,
            )
        )
        log_manager.on_flush_ms = metrics.log_flush_time_ms
        return metrics

    def _grpc_interceptors(
        self, endpoints: Sequence[Endpoint], sasl: GrpcSasl | None = None
    ) -> list[grpc.aio.ServerInterceptor]:
        """The request metrics (first, so that they time the rest), then the gate."""
        timing = [] if self.metrics is None else [GrpcRequestMetrics(self.metrics)]
        return [*timing, *self._grpc_gate(endpoints, sasl)]

    def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """A SCRAM listener's credential lookup: the broker's metadata image."""
        return None if self.security is None else self.security.scram_credential(mechanism, user)

    def _grpc_gate(
        self, endpoints: Sequence[Endpoint], sasl: GrpcSasl | None
    ) -> list[grpc.aio.ServerInterceptor]:
        """The gRPC listeners on ``endpoints`` authenticate calls with ``sasl`` or client
        certificates and, with an authorizer, check them against the ACLs
        (:mod:`rillet.server.grpc.authorization`); with none of these, no gate."""
        authorizer = self.authorizer
        if authorizer is None and self.config.is_controller:
            # A controller-only node authorizes against the controller's committed image.
            authorizer = self.authorizer = broker_authorizer(
                self.config, lambda: self.controller.controller.committed
            )
        mapper = next(
            (
                self.listener_tls[ep.listener_name].principal_mapper
                for ep in endpoints
                if ep.listener_name in self.listener_tls
            ),
            None,
        )
        if authorizer is None and sasl is None and mapper is None:
            return []
        return [CallGate(authorizer, mapper, sasl)]

    async def _listen(
        self, listener: GrpcListener | KafkaListener, endpoints: Sequence[Endpoint]
    ) -> None:
        await listener.start(endpoints, self.listener_tls)
        self.bound.update(listener.bound)
        self.listeners.append(listener)

    def _grpc_address(self) -> tuple[tuple[str, int], ClientTls | None, bool] | None:
        """Where the Kafka listeners relay gRPC clients: this broker's first SASL gRPC
        listener, whose calls authenticate themselves, else its first gRPC listener. With
        the TLS to reach it (the host name not checked: it is this node), and whether it is
        a SASL one. With an authorizer, the relay presents no certificate to a listener that
        is not SASL, so that relayed calls never pass for the broker itself (and the Kafka
        listeners relay only ANONYMOUS connections there)."""
        endpoints = sorted(
            self.config.grpc_listeners, key=lambda ep: ep.listener_name not in self.listener_sasl
        )
        for ep in endpoints:
            port = self.bound.get(ep.listener_name)
            if port is None:
                continue
            authenticates = ep.listener_name in self.listener_sasl
            wildcard = ep.host in ("", "0.0.0.0", "::")
            tls = self._client_tls(ep.listener_name)
            if tls is not None:
                tls = dataclasses.replace(tls, check_hostname=False)
                if self.authorizer is not None and not authenticates:
                    tls = dataclasses.replace(tls, key=None, chain=None)
            return (("127.0.0.1" if wildcard else ep.host), port), tls, authenticates
        return None

    def _client_tls(self, listener_name: str | None) -> ClientTls | None:
        """How this node connects to ``listener_name`` on other nodes: over TLS with that
        listener's truststore and keystore when its security protocol is SSL."""
        if listener_name is None:
            return None
        if self.config.listener_security_protocol_map.get(listener_name) not in ("SSL", "SASL_SSL"):
            return None
        return ClientTls.from_settings(self.config.listener_config(listener_name, SSL_KEY_PREFIX))

    def _endpoints(self) -> list[BrokerEndpoint]:
        """The advertised broker endpoints, with the ports actually bound."""
        out = []
        for ep in self.config.advertised_listeners:
            if ep.listener_name in self.config.controller_listener_names:
                continue
            port = self.bound.get(ep.listener_name, ep.port)
            out.append(
                BrokerEndpoint(ep.listener_name, ep.host or "localhost", port, ep.security_protocol)
            )
        return out

    def _inter_broker_address(self, broker_id: int) -> str | None:
        """``host:port`` of ``broker_id``'s inter-broker listener, as its registration in the
        metadata says (None while it has none there)."""
        broker = self.publisher.image.brokers.get(broker_id)
        listener = self.config.inter_broker_listener_name
        ep = broker.endpoint(listener) if broker is not None and listener else None
        return None if ep is None else f"{ep.host}:{ep.port}"

    def _connect_to_broker(self, broker_id: int) -> GrpcReplicaFetchClient | None:
        """A connection to ``broker_id``'s inter-broker listener (None while it has none)."""
        address = self._inter_broker_address(broker_id)
        if address is None:
            return None
        return GrpcReplicaFetchClient(broker_id, address, self.inter_broker_tls)

    def _on_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.controller.on_leader_change(leader)
        if isinstance(self.channel, GrpcControllerChannel):
            self.channel.leader_changed()

    def _on_commit(self, entries: Sequence[Entry]) -> None:
        records = decode_entries(entries)
        if records:
            self.controller.on_commit(records)
            self.publisher.publish(records)
            now = self.clock()
            for e in entries:
                if not e.control:
                    self.snapshots.record_applied(len(e.payload), now)
                    self._last_record = (e.offset, e.epoch)
            self._maybe_snapshot(now)

    # -- metadata snapshots (KIP-630) ------------------------------------------------------

    def _load_latest_snapshot(self) -> int:
        """Start from the latest snapshot on disk; returns the offset it covers up to (0:
        none, the whole log replays)."""
        assert self.metadata_log is not None
        ids = self.metadata_log.snapshot_ids()
        if not ids:
            return 0
        self._load_snapshot(ids[-1])
        _log.info("loaded metadata snapshot %s", _describe(ids[-1]))
        return ids[-1].end_offset

    def _on_load_snapshot(self, snapshot_id: SnapshotId) -> None:
        """The quorum fetched the leader's snapshot: its image replaces ours."""
        self._load_snapshot(snapshot_id, skipped=True)
        _log.info("loaded metadata snapshot %s fetched from the leader", _describe(snapshot_id))

    def _load_snapshot(self, snapshot_id: SnapshotId, *, skipped: bool = False) -> None:
        assert self.metadata_log is not None
        log = self.metadata_log
        data = log.read_snapshot(snapshot_id, 0, log.snapshot_size(snapshot_id))
        records = decode_snapshot(data)
        image, _ = image_from_records(records, snapshot_id.end_offset)
        self.controller.on_load_snapshot(image)
        self.publisher.load_snapshot(records, snapshot_id.end_offset, skipped=skipped)
        self.snapshots.reset()
        self._last_record = None

    def _maybe_snapshot(self, now: int) -> None:
        """Write a snapshot of the image when enough has been applied since the last one,
        then let the log go behind the snapshots as retention allows."""
        log = self.metadata_log
        if log is None or self._last_record is None or not self.snapshots.due(now):
            return
        offset, epoch = self._last_record
        snapshot_id = SnapshotId(offset + 1, epoch)
        ids = log.snapshot_ids()
        if ids and ids[-1] >= snapshot_id:
            self.snapshots.reset()
            return
        data = encode_snapshot(self.publisher.image, now)
        log.create_snapshot(snapshot_id, data)
        self.snapshots.reset()
        _log.info("wrote metadata snapshot %s (%d bytes)", _describe(snapshot_id), len(data))
        self._clean_metadata_log(now)

    def _clean_metadata_log(self, now: int) -> None:
        """Kafka's KafkaMetadataLog cleaning: while the log and snapshots together exceed
        ``metadata.max.retention.bytes``, or the oldest snapshot is older than
        ``metadata.max.retention.ms``, and a newer snapshot exists, the oldest snapshot goes
        and the log start moves to the next one. The latest snapshot always stays."""
        log = self.metadata_log
        assert log is not None
        max_bytes = self.config.metadata_max_retention_bytes
        max_ms = self.config.metadata_max_retention_ms
        ids = log.snapshot_ids()
        for oldest, following in itertools.pairwise(ids):
            too_big = max_bytes >= 0 and log.size_in_bytes() > max_bytes
            written_ms = int(log.snapshot_path(oldest).stat().st_mtime * 1000)
            too_old = max_ms >= 0 and now - written_ms > max_ms
            if not (too_big or too_old) or not log.delete_before_snapshot(following):
                return
            _log.info(
                "metadata log now starts at offset %d (snapshot %s)",
                log.log_start_offset,
                _describe(following),
            )

    async def wait_until_ready(self, timeout_s: float = 30) -> None:
        """Wait until this broker is registered, unfenced and visible in its own metadata
        (its own registration: another broker may hold the same id)."""
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    me = self.publisher.image.brokers.get(self.config.node_id)
                    epoch = self.lifecycle.lifecycle.broker_epoch if self.lifecycle else -1
                    if me is not None and not me.fenced and me.broker_epoch == epoch >= 0:
                        return
                    await asyncio.sleep(0.02)
        except TimeoutError:
            raise KafkaStorageError("the broker did not become ready in time") from None

    # -- stop ------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Controlled shutdown, then close everything; the clean-shutdown marker comes last.
        Safe to call once more, and after a failed start."""
        if self.lifecycle is not None:
            self._ended_epoch = self.lifecycle.lifecycle.broker_epoch
            await self.lifecycle.stop()
            self.lifecycle = None
        if self.replicas is not None:
            await self.replicas.stop_fetchers()
        if self.groups is not None:
            await self.groups.close()
        if self.transactions is not None:
            await self.transactions.close()
        for closing in (self.txn_channel, self.txn_verifier, self.broker_clients):
            if closing is not None:
                await closing.close()
        await self.scheduler.shutdown()
        for listener in self.listeners:
            await listener.stop(1)
        self.listeners.clear()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
            self.metrics_endpoint = None
        if self.driver is not None:
            await self.driver.stop()
            self.driver = None
        if self.alter_partition is not None:
            await self.alter_partition.shutdown()
        if self.producer_ids is not None:
            await self.producer_ids.shutdown()
        await self.channel.close()
        if self.replicas is not None:
            self.replicas.shutdown()
            self.replicas = None
        if self.log_manager is not None:
            self.log_manager.shutdown(self._ended_epoch)
            self.log_manager = None
        if self.metadata_log is not None:
            self.metadata_log.close()
            self.metadata_log = None
        if self._metadata_lock is not None:
            self._metadata_lock.close()
            self._metadata_lock = None


def _describe(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset}-{snapshot_id.epoch} (end offset {snapshot_id.end_offset})"
