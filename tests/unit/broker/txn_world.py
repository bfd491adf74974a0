"""A broker's transaction components over real logs, without a process (no tests here):
a ReplicaManager with ``__transaction_state`` and data topics led by broker 1, the marker
writer, the marker channel, the verifier and the transaction coordinator's driver, a
virtual clock, producer ids from a counter, and metadata changes applied by hand.
Followers (broker 2, 3) exist only in the metadata: a test moves the high watermark by
fetching as them (:meth:`TxnWorld.replicate`)."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rillet._core import BatchBuilder, decode_batches
from rillet.broker.replica_manager import FetchPartition, ReplicaManager
from rillet.broker.transaction_coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from rillet.broker.txn_broker_clients import BrokerClients, MarkerErrors, TxnMarkerEntry
from rillet.broker.txn_marker_channel import TxnMarkerChannel
from rillet.broker.txn_marker_writer import TxnMarkerWriter
from rillet.broker.txn_verification import TxnVerifier
from rillet.controller import CreatableTopic, TopicResult
from rillet.coordinator.end_txn_marker import COMMIT
from rillet.coordinator.transaction import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    TransactionCoordinatorConfig,
)
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
TXN0 = TopicPartition(TRANSACTION_STATE_TOPIC, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Counter:
    """Producer ids 1000, 1001, ... (the ProducerIdManager's async interface)."""

    def __init__(self) -> None:
        self.ids = itertools.count(1000)

    async def generate_producer_id(self) -> int:
        return next(self.ids)


class Controller:
    """The ControllerChannel calls the driver makes: CreateTopics, recorded."""

    def __init__(self) -> None:
        self.created: list[CreatableTopic] = []

    async def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[TopicResult]:
        self.created.extend(topics)
        return [TopicResult(t.name) for t in topics]


class FakeClient:
    """A TxnBrokerClient that records requests and answers with ``answer`` (a function of
    the request), or raises it when it is an exception."""

    def __init__(self, broker_id: int, address: str) -> None:
        self.broker_id = broker_id
        self.address = address
        self.markers: list[list[TxnMarkerEntry]] = []
        self.verifications: list[list[AddPartitionsToTxnRequest]] = []
        self.marker_answer: Callable[[Sequence[TxnMarkerEntry]], list[MarkerErrors]] = lambda ms: [
            dict.fromkeys(m.partitions) for m in ms
        ]
        self.verify_answer: Callable[
            [Sequence[AddPartitionsToTxnRequest]], list[AddPartitionsToTxnResponse]
        ] = lambda rs: [
            AddPartitionsToTxnResponse(r.transactional_id, dict.fromkeys(r.partitions)) for r in rs
        ]
        self.gate: asyncio.Event | None = None  # when set, requests wait for it
        self.closed = False

    async def write_txn_markers(
        self, markers: Sequence[TxnMarkerEntry], timeout_ms: int
    ) -> list[MarkerErrors]:
        self.markers.append(list(markers))
        if self.gate is not None:
            await self.gate.wait()
        return self.marker_answer(markers)

    async def add_partitions_to_txn(
        self, transactions: Sequence[AddPartitionsToTxnRequest], timeout_ms: int
    ) -> list[AddPartitionsToTxnResponse]:
        self.verifications.append(list(transactions))
        if self.gate is not None:
            await self.gate.wait()
        return self.verify_answer(transactions)

    async def close(self) -> None:
        self.closed = True


def endpoint(broker_id: int) -> tuple[BrokerEndpoint, ...]:
    return (BrokerEndpoint("PLAINTEXT", "localhost", 9090 + broker_id),)


class TxnWorld:
    """Broker 1's transaction components. ``replicas`` are the replicas of every partition
    (broker 1 leads); ``topics`` the data topics and their partition counts."""

    def __init__(
        self,
        log_manager: LogManager,
        *,
        replicas: tuple[int, ...] = (1,),
        topics: Mapping[str, int] | None = None,
        txn_partitions: int = 1,
        config: Mapping[str, object] | None = None,
        with_state_topic: bool = True,
    ) -> None:
        self.clock = Clock()
        self.log_manager = log_manager
        self.rm = ReplicaManager(1, log_manager, self.clock)
        self.controller = Controller()
        self.clients: dict[int, FakeClient] = {}
        self.brokers = BrokerClients(
            lambda b: f"localhost:{9090 + b}" if b in self._broker_ids else None,
            self._connect,
        )
        self._broker_ids = set(replicas) | {1}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.image = MetadataImage()
        self._offset = 0
        self.config = TransactionCoordinatorConfig.from_properties(
            {"transaction.state.log.num.partitions": txn_partitions, **(config or {})}
        )
        self.verifier = TxnVerifier(
            1,
            self.rm,
            lambda: self.image,
            self.brokers,
            None,
            num_partitions=txn_partitions,
            request_timeout_ms=1000,
        )
        self.writer = TxnMarkerWriter(
            self.rm, self.clock, guards=self.verifier.guards, timeout_ms=1000
        )
        self.channel = TxnMarkerChannel(
            1, lambda: self.image, self.brokers, self.writer.write_txn_markers
        )
        self.coordinator = TransactionCoordinator(
            1,
            self.rm,
            log_manager,
            self.controller,  # type: ignore[arg-type]
            self.config,
            self.clock,
            producer_ids=Counter(),
            markers=self.channel,
            replication_factor=len(replicas),
            min_isr=1,
            commit_timeout_ms=1000,
            retry_backoff_ms=10,
        )
        self.verifier.local = self.coordinator.add_partitions_to_txn
        records: list[MetadataRecord] = []
        for b in sorted(self._broker_ids):
            records += [
                RegisterBrokerRecord(b, uuid.UUID(int=10 + b), 1, endpoint(b), None, True),
                UnfenceBrokerRecord(b, 1),
            ]
        all_topics = dict(topics if topics is not None else {"t": 2})
        if with_state_topic:
            all_topics[TRANSACTION_STATE_TOPIC] = txn_partitions
        for name, n in all_topics.items():
            records += self.topic_records(name, n, replicas)
        self.apply(records)

    def _connect(self, broker_id: int, address: str) -> FakeClient:
        client = self.clients.get(broker_id)
        if client is None:
            client = self.clients[broker_id] = FakeClient(broker_id, address)
        return client

    def topic_records(
        self, name: str, partitions: int, replicas: tuple[int, ...]
    ) -> list[MetadataRecord]:
        tid = self.topic_ids.setdefault(name, uuid.UUID(int=100 + len(self.topic_ids)))
        out: list[MetadataRecord] = [TopicRecord(name, tid)]
        for i in range(partitions):
            out.append(PartitionRecord(tid, i, replicas, replicas, replicas[0]))
        return out

    def apply(self, records: Iterable[MetadataRecord]) -> None:
        """Replay metadata records: the ReplicaManager acts, then the coordinator."""
        delta = MetadataDelta(self.image)
        for r in records:
            self._offset += 1
            delta.replay(self._offset, r)
        self.image = delta.apply()
        self.rm.apply_partition_changes(delta.partition_changes(), self.image)
        self.coordinator.on_metadata(self.image)

    def move_leader(self, topic: str, partition: int, leader: int) -> None:
        self.apply([PartitionChangeRecord(self.topic_ids[topic], partition, leader=leader)])

    async def loaded(self, *indexes: int) -> None:
        """Wait until the coordinator serves these ``__transaction_state`` partitions."""
        wanted = set(indexes or (0,))
        for _ in range(500):
            if wanted <= set(self.coordinator.coordinated_partitions()):
                return
            await asyncio.sleep(0.002)
        raise AssertionError(f"partitions {wanted} not loaded")

    async def replicate(self, *followers: int) -> None:
        """Every follower fetches every partition up to its log end (the HW follows)."""
        for tp, p in list(self.rm.partitions.items()):
            if p.is_leader:
                for f in followers:
                    if f in p.replicas:
                        await self.rm.fetch(
                            {tp: FetchPartition(p.log.log_end_offset, 1 << 20)}, replica_id=f
                        )

    def batches(self, tp: TopicPartition) -> list[Any]:
        log = self.rm.partitions[tp].log
        return decode_batches(log.read(log.log_start_offset, 1 << 24).read_all())

    def markers(self, tp: TopicPartition) -> list[tuple[int, int, str]]:
        """(producer id, producer epoch, COMMIT/ABORT) of each control batch of ``tp``."""
        out = []
        for b in self.batches(tp):
            if b.is_control:
                (r,) = b.records
                kind = "COMMIT" if int.from_bytes(r.key[2:4], "big") == COMMIT else "ABORT"
                out.append((b.producer_id, b.producer_epoch, kind))
        return out

    def produce_batch(
        self, producer_id: int, epoch: int, seq: int = 0, value: bytes = b"v"
    ) -> bytes:
        b = BatchBuilder(
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=True,
        )
        b.append(self.clock(), None, value)
        return b.build()

    async def close(self) -> None:
        await self.coordinator.close()
        await self.channel.close()
        await self.verifier.close()
        await self.brokers.close()
