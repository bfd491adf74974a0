"""The gRPC data plane: ProduceService and FetchService (Fetch, ListOffsets) over the
transport-agnostic :class:`~rillet.broker.replica_manager.ReplicaManager`.

Records arrive either as RecordBatch v2 bytes (the fast path: stored as they are, after
validation) or as structured records (the broker builds one batch per partition, so a client
in any language needs only protobuf). Fetches answer with batch bytes, or decoded records
when the request asks for ``structured``. Every error is per partition, with Kafka's code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import grpc

from rillet._core import BatchBuilder, FetchDataInfo, decode_batches, encode_fetch_response
from rillet.broker.replica_manager import FetchedPartition, FetchPartition, ReplicaManager
from rillet.errors import InvalidRequestError, KafkaError
from rillet.protocol import common_pb2, fetch_pb2, fetch_pb2_grpc, produce_pb2, produce_pb2_grpc
from rillet.protocol.errors import error_to_wire, set_error
from rillet.types import TopicPartition

__all__ = [
    "FetchServicer",
    "ProduceServicer",
    "add_fetch_servicer",
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
    def __init__(self, replicas: ReplicaManager, clock: Callable[[], int]) -> None:
        self.replicas = replicas
        self.clock = clock

    async def Produce(
        self, request: produce_pb2.ProduceRequest, context: Context
    ) -> produce_pb2.ProduceResponse:
        now = self.clock()
        entries: dict[TopicPartition, bytes] = {}
        # What refused each of the request's partition entries, in order (None: appended).
        refused: list[KafkaError | None] = []
        for topic in request.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition)
                try:
                    if tp in entries:
                        raise InvalidRequestError(
                            f"{tp} is listed more than once in the request; send its batches "
                            "one after the other in one record_batches"
                        )
                    if bool(p.record_batches) == bool(p.records):
                        raise InvalidRequestError(
                            f"{tp}: send either record_batches or records, not both or neither"
                        )
                    entries[tp] = p.record_batches or build_batch(p.records, p.compression, now)
                    refused.append(None)
                except KafkaError as e:
                    refused.append(e)
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else 30_000
        results = await self.replicas.append_records(entries, request.acks, timeout_ms)
        response = produce_pb2.ProduceResponse()
        by_topic: dict[str, produce_pb2.ProduceResponse.Topic] = {}
        entry_errors = iter(refused)
        for topic in request.topics:
            out = by_topic.get(topic.name)
            if out is None:
                out = by_topic[topic.name] = response.topics.add(name=topic.name)
            for p in topic.partitions:
                part = out.partitions.add(partition=p.partition)
                err = next(entry_errors)
                r = results.get(TopicPartition(topic.name, p.partition)) if err is None else None
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
