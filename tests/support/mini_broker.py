"""An in-process broker for client tests: the real gRPC data plane and MetadataService over a
real LogManager and ReplicaManager, on an asyncio loop in a background thread. The metadata
comes from a fixed image instead of the quorum (the server process tests cover that)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc

from rillet.broker.replica_manager import ReplicaManager
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.protocol import metadata_pb2_grpc
from rillet.server.data_plane import (
    FetchServicer,
    ProduceServicer,
    add_fetch_servicer,
    add_produce_servicer,
)
from rillet.server.metadata_api import MetadataServicer
from rillet.storage.log_manager import LogManager


class MiniBroker:
    def __init__(self, data_dir: Path, topics: dict[str, int]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.log_manager = LogManager([data_dir])
        self.log_manager.startup()
        self.replicas = ReplicaManager(1, self.log_manager, lambda: time.time_ns() // 1_000_000)
        self.image = MetadataImage()
        self.port = self._call(self._start())
        self.apply(
            [
                RegisterBrokerRecord(
                    1, uuid.UUID(int=1), 1, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", self.port),)
                ),
                UnfenceBrokerRecord(1, 1),
            ]
        )
        for name, n in topics.items():
            self.create_topic(name, n)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _call(self, coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(30)

    async def _start(self) -> int:
        self.server = grpc.aio.server()
        clock = self.replicas.clock
        add_produce_servicer(ProduceServicer(self.replicas, clock), self.server)
        add_fetch_servicer(FetchServicer(self.replicas), self.server)
        metadata_pb2_grpc.add_MetadataServiceServicer_to_server(
            MetadataServicer(lambda: self.image, "PLAINTEXT", "mini", lambda: 1, self._auto),
            self.server,
        )
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return port

    async def _auto(self, names: Sequence[str]) -> None:
        for n in names:
            self.create_topic(n, 1)

    def apply(self, records: list[MetadataRecord]) -> None:
        delta = MetadataDelta(self.image)
        for i, r in enumerate(records):
            delta.replay(self.image.offset + 1 + i, r)
        self.image = delta.apply()
        changes = delta.partition_changes()

        async def act() -> None:
            self.replicas.apply_partition_changes(changes, self.image)

        if threading.current_thread() is self.thread:
            self.replicas.apply_partition_changes(changes, self.image)
        else:
            self._call(act())

    def create_topic(self, name: str, partitions: int) -> None:
        tid = uuid.uuid4()
        self.apply(
            [TopicRecord(name, tid)]
            + [PartitionRecord(tid, p, (1,), (1,), 1) for p in range(partitions)]
        )

    def log(self, topic: str, partition: int) -> Any:
        return self.log_manager.get_log(topic, partition)

    def close(self) -> None:
        self._call(self.server.stop(None))
        self.replicas.shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
        self.log_manager.shutdown()
