"""The client's view of the cluster: brokers and partition leaders from MetadataService, and
one gRPC channel per broker, with the data-plane calls that move record batches as wire bytes
(:meth:`ClusterMetadata.produce_call`, :meth:`ClusterMetadata.fetch_call`).

Each partition's leader comes with its leader epoch (KIP-320). A response that names an
older epoch than the client already knows (from a broker whose metadata is behind, say one
cut off from the controller) leaves that partition as it was, so the client is never sent
back to a deposed leader.

Thread safe: the producer's ``send()`` callers and its sender thread share one instance.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from rillet._core import FetchResponseView, decode_fetch_response
from rillet.client.kafka_connection import AUTHENTICATION_FAILURES, KafkaConnection
from rillet.client.sasl import ClientSasl
from rillet.client.security import open_channel, refusal, unreachable
from rillet.errors import (
    InvalidConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    SslAuthenticationError,
    error_for_code,
)
from rillet.protocol import fetch_pb2, metadata_pb2, metadata_pb2_grpc, produce_pb2
from rillet.security.tls import ClientTls
from rillet.types import TopicPartition

__all__ = [
    "GRPC_OPTIONS",
    "TRANSPORTS",
    "ClusterMetadata",
    "FetchedResponse",
    "read_fetch_response",
]

TRANSPORTS = ("auto", "grpc", "kafka")
METADATA_API_KEY = 3
# Metadata from v9 (flexible) to v12 (topic ids), as Kafka's own clients ask it.
METADATA_VERSIONS = (9, 12)

PRODUCE_METHOD = "/rillet.v1.ProduceService/Produce"
FETCH_METHOD = "/rillet.v1.FetchService/Fetch"

# A fetch response as fetch_call answers it: its bytes, and what decode_fetch_response read
# of them (each partition's batches located in the bytes, not copied out).
FetchedResponse = tuple[bytes, FetchResponseView]
if TYPE_CHECKING:
    ProduceCall = grpc.UnaryUnaryMultiCallable[bytes, produce_pb2.ProduceResponse]
    FetchCall = grpc.UnaryUnaryMultiCallable[fetch_pb2.FetchRequest, FetchedResponse]


def read_fetch_response(data: bytes) -> FetchedResponse:
    """The Fetch response deserializer: record batches stay in ``data``, located by range."""
    return data, decode_fetch_response(data)


# Large messages and windows: one produce or fetch request carries many partitions' batches.
GRPC_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_send_message_length", 128 << 20),
    ("grpc.max_receive_message_length", 128 << 20),
    ("grpc.http2.lookahead_bytes", 16 << 20),
    ("grpc.http2.max_frame_size", (16 << 20) - 1),
    ("grpc.http2.bdp_probe", 1),
    ("grpc.keepalive_time_ms", 30_000),
]


@dataclass
class _Snapshot:
    brokers: dict[int, str] = field(default_factory=dict)
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    leader_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    partitions: dict[str, list[int]] = field(default_factory=dict)
    errors: dict[str, KafkaError] = field(default_factory=dict)
    topic_ids: dict[uuid.UUID, str] = field(default_factory=dict)
    cluster_id: str = ""
    controller_id: int = -1
    updated_ms: int = 0


@dataclass
class _TopicMetadata:
    name: str
    error: KafkaError | None
    topic_id: bytes
    partitions: list[tuple[int, int, int]]  # (partition, leader id, leader epoch)


class ClusterMetadata:
    """``transport`` is how metadata and the producer's records travel: ``grpc`` (the
    brokers' gRPC listeners), ``kafka`` (their Kafka listeners, in Kafka's protocol; the other
    calls then reach gRPC through the Kafka listener's relay), or ``auto``: Kafka's protocol
    when the bootstrap servers are Kafka listeners, gRPC when they are gRPC listeners (which
    close a connection that opens with Kafka's ApiVersions). ``auto`` settles on the first
    metadata answer, and :attr:`transport` then says which. With ``sasl``, both transports
    authenticate (:mod:`rillet.client.sasl`, :mod:`rillet.client.grpc_sasl`)."""

    def __init__(
        self,
        bootstrap: list[str],
        request_timeout_ms: int = 30_000,
        transport: str = "grpc",
        client_id: str = "rillet",
        tls: ClientTls | None = None,
        sasl: ClientSasl | None = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise InvalidConfigurationError(
                f"Invalid value {transport} for configuration transport: "
                f"String must be one of: {', '.join(TRANSPORTS)}"
            )
        self.bootstrap = bootstrap
        self.request_timeout_ms = request_timeout_ms
        self.tls = tls
        self.sasl = sasl
        self.transport = transport
        self.client_id = client_id
        # Sent with produce and fetch calls: a broker's client quotas go by client id.
        self.call_metadata: tuple[tuple[str, str], ...] = (("client-id", client_id),)
        self._lock = threading.Lock()
        self._snapshot = _Snapshot()
        self._channels: dict[str, grpc.Channel] = {}
        self._kafka: dict[str, KafkaConnection] = {}
        self._produce_calls: dict[str, ProduceCall] = {}
        self._fetch_calls: dict[str, FetchCall] = {}
        self._topics: set[str] = set()

    def channel(self, address: str) -> grpc.Channel:
        with self._lock:
            ch = self._channels.get(address)
            if ch is None:
                ch = self._channels[address] = open_channel(
                    address, self.tls, GRPC_OPTIONS, self.sasl
                )
            return ch

    def produce_call(self, address: str) -> ProduceCall:
        """ProduceService.Produce on ``address``, taking a request's wire bytes as they are
        (``encode_produce_request`` writes them)."""
        call = self._produce_calls.get(address)
        if call is None:
            call = self._produce_calls[address] = self.channel(address).unary_unary(
                PRODUCE_METHOD,
                request_serializer=None,
                response_deserializer=produce_pb2.ProduceResponse.FromString,
                _registered_method=True,  # type: ignore[call-arg]  # grpc's stubs lack it
            )
        return call

    def fetch_call(self, address: str) -> FetchCall:
        """FetchService.Fetch on ``address``, answering a :data:`FetchedResponse`: record
        batches are decoded from the response bytes, never copied out of them."""
        call = self._fetch_calls.get(address)
        if call is None:
            call = self._fetch_calls[address] = self.channel(address).unary_unary(
                FETCH_METHOD,
                request_serializer=fetch_pb2.FetchRequest.SerializeToString,
                response_deserializer=read_fetch_response,
                _registered_method=True,  # type: ignore[call-arg]  # grpc's stubs lack it
            )
        return call

    def kafka_connection(self, address: str) -> KafkaConnection:
        """The Kafka-protocol connection to the broker at ``address`` (a Kafka listener)."""
        with self._lock:
            conn = self._kafka.get(address)
            if conn is None:
                conn = self._kafka[address] = KafkaConnection(
                    address, self.client_id, self.request_timeout_ms, self.tls, self.sasl
                )
            return conn

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
            self._produce_calls, self._fetch_calls = {}, {}
            connections, self._kafka = list(self._kafka.values()), {}
        for ch in channels:
            ch.close()
        for conn in connections:
            conn.close()

    # -- refresh ---------------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None, allow_auto_create: bool = False) -> None:
        """Fetch metadata for ``topics`` (plus every topic asked for before; None: all)."""
        with self._lock:
            if topics is not None:
                self._topics.update(topics)
            wanted = sorted(self._topics) if topics is not None else []
            known = list(self._snapshot.brokers.values())
        last: Exception | None = None
        for address in [*known, *self.bootstrap]:
            transport = self.transport
            if transport != "grpc":
                try:
                    self._apply_kafka(
                        self.kafka_connection(address).call(
                            METADATA_API_KEY,
                            METADATA_VERSIONS,
                            {
                                "topics": None if topics is None else [{"name": t} for t in wanted],
                                "allow_auto_topic_creation": allow_auto_create,
                            },
                        )
                    )
                    self.transport = "kafka"
                    return
                except KafkaError as e:
                    last = e
                    if transport == "kafka":
                        continue
                    # auto: not a Kafka listener (it closed on ApiVersions), or unreachable.
            stub = metadata_pb2_grpc.MetadataServiceStub(self.channel(address))
            request = metadata_pb2.MetadataRequest(
                topics=wanted, allow_auto_topic_creation=allow_auto_create
            )
            try:
                self._apply_grpc(stub.Metadata(request, timeout=self.request_timeout_ms / 1000))
            except grpc.RpcError as e:
                last = unreachable(address, e, self.tls)
                if refusal(e) is not None:
                    raise last from None
                continue
            self.transport = "grpc"
            return
        if isinstance(last, (SslAuthenticationError, *AUTHENTICATION_FAILURES)):
            raise last
        raise KafkaTimeoutError(f"could not reach any broker of {self.bootstrap}: {last}")

    def _apply_grpc(self, r: metadata_pb2.MetadataResponse) -> None:
        self._apply(
            r.cluster_id,
            r.controller_id,
            {b.node_id: f"{b.host}:{b.port}" for b in r.brokers},
            [
                _TopicMetadata(
                    t.name,
                    error_for_code(t.error_code)(t.error_message) if t.error_code else None,
                    bytes(t.topic_id),
                    [(p.partition, p.leader_id, p.leader_epoch) for p in t.partitions],
                )
                for t in r.topics
            ],
        )

    def _apply_kafka(self, r: dict[str, Any]) -> None:
        self._apply(
            r.get("cluster_id") or "",
            r.get("controller_id", -1),
            {b["node_id"]: f"{b['host']}:{b['port']}" for b in r["brokers"]},
            [
                _TopicMetadata(
                    t["name"],
                    error_for_code(t["error_code"])() if t["error_code"] else None,
                    t["topic_id"].bytes if t.get("topic_id") is not None else b"",
                    [
                        (p["partition_index"], p["leader_id"], p.get("leader_epoch", -1))
                        for p in t["partitions"]
                    ],
                )
                for t in r["topics"]
            ],
        )

    def _apply(
        self,
        cluster_id: str,
        controller_id: int,
        brokers: dict[int, str],
        topics: list[_TopicMetadata],
    ) -> None:
        snap = _Snapshot(cluster_id=cluster_id, controller_id=controller_id, brokers=brokers)
        with self._lock:
            old = self._snapshot
        for t in topics:
            if t.error is not None:
                snap.errors[t.name] = t.error
                continue
            snap.partitions[t.name] = sorted(p for p, _, _ in t.partitions)
            if len(t.topic_id) == 16 and any(t.topic_id):
                snap.topic_ids[uuid.UUID(bytes=t.topic_id)] = t.name
            for partition, leader_id, leader_epoch in t.partitions:
                tp = TopicPartition(t.name, partition)
                known = old.leader_epochs.get(tp, -1)
                if leader_epoch < known and old.leaders.get(tp, -1) in snap.brokers:
                    # Stale: keep the newer leader already known (KIP-320).
                    snap.leaders[tp], snap.leader_epochs[tp] = old.leaders[tp], known
                else:
                    snap.leaders[tp], snap.leader_epochs[tp] = leader_id, leader_epoch
        snap.updated_ms = time.monotonic_ns() // 1_000_000
        with self._lock:
            self._snapshot = snap

    # -- queries ---------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._snapshot.cluster_id

    def brokers(self) -> dict[int, str]:
        return dict(self._snapshot.brokers)

    def partitions_for(self, topic: str) -> list[int] | None:
        return self._snapshot.partitions.get(topic)

    def topic_error(self, topic: str) -> KafkaError | None:
        return self._snapshot.errors.get(topic)

    def topics(self) -> list[str]:
        return sorted(self._snapshot.partitions)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id, as last seen in metadata."""
        return self._snapshot.topic_ids.get(topic_id)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        for topic_id, name in self._snapshot.topic_ids.items():
            if name == topic:
                return topic_id
        return None

    def leader_address(self, tp: TopicPartition) -> str | None:
        snap = self._snapshot
        leader = snap.leaders.get(tp, -1)
        return snap.brokers.get(leader) if leader >= 0 else None

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        """The leader epoch of ``tp``'s leader as last known (None: unknown)."""
        epoch = self._snapshot.leader_epochs.get(tp, -1)
        return epoch if epoch >= 0 else None

    def age_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000 - self._snapshot.updated_ms

    def wait_for_topic(self, topic: str, timeout_ms: int, allow_auto_create: bool) -> list[int]:
        """The partitions of ``topic``, refreshing metadata until they are known."""
        deadline = time.monotonic() + timeout_ms / 1000
        backoff = 0.05
        while True:
            parts = self.partitions_for(topic)
            if parts:
                return parts
            self.refresh([topic], allow_auto_create)
            parts = self.partitions_for(topic)
            if parts:
                return parts
            err = self.topic_error(topic)
            if err is not None and not err.retriable:
                raise err
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(
                    f"Topic {topic} not present in metadata after {timeout_ms} ms."
                )
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
