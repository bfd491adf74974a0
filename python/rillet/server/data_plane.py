"""The gRPC data plane: ProduceService and FetchService (Fetch, ListOffsets) over the
transport-agnostic :class:`~rillet.broker.replica_manager.ReplicaManager`.

Records arrive either as RecordBatch v2 bytes (the fast path: stored as they are, after
validation) or as structured records (the broker builds one batch per partition, so a client
in any language needs only protobuf). Fetches answer with batch bytes, or decoded records
when the request asks for ``structured``. Every error is per partition, with Kafka's code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from rillet._core import (
    BatchBuilder,
    FetchDataInfo,
    decode_batches,
    decode_produce_request,
    encode_fetch_response,
)
from rillet.broker.replica_manager import FetchedPartition, FetchPartition, ReplicaManager
from rillet.errors import InvalidRequestError, KafkaError
from rillet.protocol import common_pb2, fetch_pb2, fetch_pb2_grpc, produce_pb2, produce_pb2_grpc
from rillet.protocol.errors import error_to_wire, set_error
from rillet.types import TopicPartition

__all__ = [
    "FetchServicer",
    "ProduceServicer",
    "add_fetch_servicer",
    "add_produce_servicer",
    "build_batch",
    "structured_records",
]


Context = grpc.aio.ServicerContext[object, object]

_COMPRESSION: dict[int, str] = {
    common_pb2.COMPRESSION_TYPE_NONE: "none",
    common_pb2.COMPRESSION_TYPE_GZIP: "gzip",
    common_pb2.COMPRESSION_TYPE_SNAPPY: "snappy",
    common_pb2.COMPRESSION_TYPE_LZ4: "lz4",
    common_pb2.COMPRESSION_TYPE_ZSTD: "zstd",
}
# A produce request as add_produce_servicer reads it: its wire bytes and what
# decode_produce_request read of them.
ProduceWire = tuple[bytes, tuple[int, int, str | None, bool, list[tuple[str, int, int, int]]]]
DEFAULT_PARTITION_MAX_BYTES = 1 << 20
# encode_fetch_response's partition: (partition, error code, error message, high watermark,
# last stable offset, log start offset, diverging epoch, preferred read replica, data).
FetchedPartitionOut = tuple[
    int, int, str, int, int, int, tuple[int, int] | None, int, FetchDataInfo | None
]
DEFAULT_FETCH_MAX_BYTES = 50 << 20


def build_batch(records: Iterable[common_pb2.Record], compression: int, now_ms: int) -> bytes:
    """One RecordBatch v2 from structured records (absent timestamps mean now)."""
    codec = _COMPRESSION.get(compression)
    if codec is None:
        raise InvalidRequestError(f"unknown compression type {compression}")
    builder = BatchBuilder(codec)
    for r in records:
        builder.append(
            r.timestamp_ms if r.HasField("timestamp_ms") else now_ms,
            r.key if r.HasField("key") else None,
            r.value if r.HasField("value") else None,
            [(h.key, h.value if h.HasField("value") else None) for h in r.headers],
        )
    return builder.build()


def structured_records(data: bytes, from_offset: int) -> list[common_pb2.Record]:
    """Decoded records at or after ``from_offset`` from fetched batch bytes."""
    out: list[common_pb2.Record] = []
    for batch in decode_batches(data, allow_partial=True):
        ts_type = (
            common_pb2.TIMESTAMP_TYPE_LOG_APPEND_TIME
            if batch.timestamp_type == "LogAppendTime"
            else common_pb2.TIMESTAMP_TYPE_CREATE_TIME
        )
        epoch = batch.partition_leader_epoch
        for r in batch.records:
            if r.offset < from_offset or batch.is_control:
                continue
            out.append(
                common_pb2.Record(
                    key=r.key,
                    value=r.value,
                    headers=[common_pb2.Header(key=k, value=v) for k, v in r.headers],
                    timestamp_ms=r.timestamp,
                    offset=r.offset,
                    timestamp_type=ts_type,
                    leader_epoch=epoch if epoch >= 0 else None,
                )
            )
    return out


class ProduceServicer(produce_pb2_grpc.ProduceServiceServicer):
    """Produce takes a request as :func:`add_produce_servicer` reads it: its wire bytes with
    each partition's batches located in place (``decode_produce_request``), so they go to the
    log without being copied out; a request with structured records is decoded by the
    generated classes. A ``ProduceRequest`` message works too."""

    def __init__(self, replicas: ReplicaManager, clock: Callable[[], int]) -> None:
        self.replicas = replicas
        self.clock = clock

    async def Produce(  # takes wire bytes too (see add_produce_servicer)
        self, request: produce_pb2.ProduceRequest | ProduceWire, context: Context
    ) -> produce_pb2.ProduceResponse:
        if isinstance(request, tuple):
            data, (acks, timeout_ms, _, structured, parts) = request
            if structured:
                request = produce_pb2.ProduceRequest.FromString(data)
            else:
                view = memoryview(data)
                entries = [(t, p, view[start:end]) for t, p, start, end in parts]
                return await self._produce(entries, acks, timeout_ms)
        now = self.clock()
        items: list[tuple[str, int, bytes | memoryview | KafkaError]] = []
        for topic in request.topics:
            for p in topic.partitions:
                if bool(p.record_batches) == bool(p.records):
                    err = InvalidRequestError(
                        f"{TopicPartition(topic.name, p.partition)}: send either record_batches "
                        "or records, not both or neither"
                    )
                    items.append((topic.name, p.partition, err))
                    continue
                try:
                    records = p.record_batches or build_batch(p.records, p.compression, now)
                except KafkaError as e:
                    items.append((topic.name, p.partition, e))
                    continue
                items.append((topic.name, p.partition, records))
        return await self._produce(items, request.acks, request.timeout_ms)

    async def _produce(
        self,
        items: Sequence[tuple[str, int, bytes | memoryview | KafkaError]],
        acks: int,
        timeout_ms: int,
    ) -> produce_pb2.ProduceResponse:
        """Append each entry (topic, partition, its batches or what refused them) and answer
        for each, in the request's order."""
        entries: dict[TopicPartition, bytes | memoryview] = {}
        refused: list[KafkaError | None] = []
        for topic, partition, records in items:
            tp = TopicPartition(topic, partition)
            if isinstance(records, KafkaError):
                refused.append(records)
            elif tp in entries:
                refused.append(
                    InvalidRequestError(
                        f"{tp} is listed more than once in the request; send its batches one "
                        "after the other in one record_batches"
                    )
                )
            elif not len(records):
                refused.append(InvalidRequestError(f"{tp}: the entry has no record batches"))
            else:
                entries[tp] = records
                refused.append(None)
        results = await self.replicas.append_records(
            entries, acks, timeout_ms if timeout_ms > 0 else 30_000
        )
        response = produce_pb2.ProduceResponse()
        by_topic: dict[str, produce_pb2.ProduceResponse.Topic] = {}
        for (topic, partition, _), err in zip(items, refused, strict=True):
            out = by_topic.get(topic)
            if out is None:
                out = by_topic[topic] = response.topics.add(name=topic)
            part = out.partitions.add(partition=partition)
            r = results.get(TopicPartition(topic, partition)) if err is None else None
            if err is None and r is not None:
                err = r.error
            if err is not None:
                set_error(part, err)
                part.base_offset = part.log_append_time_ms = part.log_start_offset = -1
            elif r is not None:
                part.base_offset = r.base_offset
                part.log_append_time_ms = r.log_append_time_ms
                part.log_start_offset = r.log_start_offset
        return response


class FetchServicer(fetch_pb2_grpc.FetchServiceServicer):
    """Fetch answers with the response's wire bytes: record batches are read from the log's
    files straight into their place in the response (``encode_fetch_response``). Structured
    answers (decoded records, for clients without a RecordBatch decoder) are protobuf
    messages. Register with :func:`add_fetch_servicer`, whose serializer takes both."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    async def Fetch(  # type: ignore[override]  # answers wire bytes (see add_fetch_servicer)
        self, request: fetch_pb2.FetchRequest, context: Context
    ) -> fetch_pb2.FetchResponse | bytes:
        wanted: dict[TopicPartition, FetchPartition] = {}
        for topic in request.topics:
            for p in topic.partitions:
                wanted[TopicPartition(topic.name, p.partition)] = FetchPartition(
                    p.fetch_offset,
                    p.partition_max_bytes or DEFAULT_PARTITION_MAX_BYTES,
                    p.current_leader_epoch if p.HasField("current_leader_epoch") else None,
                    p.last_fetched_epoch if p.HasField("last_fetched_epoch") else None,
                )
        replica_id = request.replica_id if request.HasField("replica_id") else -1
        results = await self.replicas.fetch(
            wanted,
            replica_id=replica_id,
            max_wait_ms=max(request.max_wait_ms, 0),
            min_bytes=max(request.min_bytes, 1),
            max_bytes=request.max_bytes or DEFAULT_FETCH_MAX_BYTES,
        )
        if request.structured:
            return self._structured(wanted, results)
        topics: dict[str, list[FetchedPartitionOut]] = {}
        for tp in wanted:
            r = results[tp]
            code, message = (0, "") if r.error is None else error_to_wire(r.error)
            topics.setdefault(tp.topic, []).append(
                (
                    tp.partition,
                    code,
                    message,
                    r.high_watermark,
                    r.last_stable_offset,
                    r.log_start_offset,
                    r.diverging_epoch,
                    -1,  # preferred_read_replica: none, read from the leader
                    r.data if r.error is None and r.data is not None and r.data.size else None,
                )
            )
        return encode_fetch_response(list(topics.items()))

    @staticmethod
    def _structured(
        wanted: dict[TopicPartition, FetchPartition],
        results: dict[TopicPartition, FetchedPartition],
    ) -> fetch_pb2.FetchResponse:
        response = fetch_pb2.FetchResponse()
        topics: dict[str, fetch_pb2.FetchResponse.Topic] = {}
        for tp, req in wanted.items():
            out = topics.get(tp.topic)
            if out is None:
                out = topics[tp.topic] = response.topics.add(name=tp.topic)
            r = results[tp]
            part = out.partitions.add(partition=tp.partition)
            part.high_watermark = r.high_watermark
            part.last_stable_offset = r.last_stable_offset
            part.log_start_offset = r.log_start_offset
            part.preferred_read_replica = -1
            if r.error is not None:
                set_error(part, r.error)
                continue
            if r.diverging_epoch is not None:
                part.diverging_epoch.epoch, part.diverging_epoch.end_offset = r.diverging_epoch
            if r.data is not None and r.data.size:
                part.records.extend(structured_records(r.data.read_all(), req.fetch_offset))
        return response

    async def ListOffsets(
        self, request: fetch_pb2.ListOffsetsRequest, context: Context
    ) -> fetch_pb2.ListOffsetsResponse:
        wanted = {
            TopicPartition(t.name, p.partition): p.timestamp_ms
            for t in request.topics
            for p in t.partitions
        }
        results = self.replicas.list_offsets(wanted)
        response = fetch_pb2.ListOffsetsResponse()
        topics: dict[str, fetch_pb2.ListOffsetsResponse.Topic] = {}
        for tp, r in results.items():
            out = topics.get(tp.topic)
            if out is None:
                out = topics[tp.topic] = response.topics.add(name=tp.topic)
            part = out.partitions.add(
                partition=tp.partition,
                timestamp_ms=r.timestamp,
                offset=r.offset,
                leader_epoch=r.leader_epoch,
            )
            if r.error is not None:
                set_error(part, r.error)
        return response


def _read_produce_request(data: bytes) -> ProduceWire:
    return data, decode_produce_request(data)


def add_produce_servicer(servicer: ProduceServicer, server: grpc.aio.Server) -> None:
    """Register ProduceService as the generated ``add_ProduceServiceServicer_to_server``
    does, with a request deserializer that reads the request in place."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Produce": grpc.unary_unary_rpc_method_handler(
            servicer.Produce,
            request_deserializer=_read_produce_request,
            response_serializer=produce_pb2.ProduceResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("rillet.v1.ProduceService", handlers),)
    )
    server.add_registered_method_handlers("rillet.v1.ProduceService", handlers)


def _serialize_fetch_response(response: fetch_pb2.FetchResponse | bytes) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()


def add_fetch_servicer(servicer: FetchServicer, server: grpc.aio.Server) -> None:
    """Register FetchService as the generated ``add_FetchServiceServicer_to_server`` does,
    with a response serializer that passes Fetch's wire bytes through."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Fetch": grpc.unary_unary_rpc_method_handler(
            servicer.Fetch,
            request_deserializer=fetch_pb2.FetchRequest.FromString,
            response_serializer=_serialize_fetch_response,
        ),
        "ListOffsets": grpc.unary_unary_rpc_method_handler(
            servicer.ListOffsets,
            request_deserializer=fetch_pb2.ListOffsetsRequest.FromString,
            response_serializer=fetch_pb2.ListOffsetsResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("rillet.v1.FetchService", handlers),)
    )
    server.add_registered_method_handlers("rillet.v1.FetchService", handlers)
