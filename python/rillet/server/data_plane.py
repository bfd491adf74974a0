"""The gRPC data plane: ProduceService and FetchService (Fetch, ListOffsets) over the
transport-agnostic :class:`~rillet.broker.replica_manager.ReplicaManager`.

Records arrive either as RecordBatch v2 bytes (the fast path: stored as they are, after
validation) or as structured records (the broker builds one batch per partition, so a client
in any language needs only protobuf). Fetches answer with batch bytes, or decoded records
when the request asks for ``structured``. Every error is per partition, with Kafka's code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import grpc

from rillet._core import BatchBuilder, decode_batches
from rillet.broker.replica_manager import FetchedPartition, FetchPartition, ReplicaManager
from rillet.errors import InvalidRequestError, KafkaError
from rillet.protocol import common_pb2, fetch_pb2, fetch_pb2_grpc, produce_pb2, produce_pb2_grpc
from rillet.protocol.errors import set_error
from rillet.types import TopicPartition

__all__ = ["FetchServicer", "ProduceServicer", "build_batch", "structured_records"]

Context = grpc.aio.ServicerContext[object, object]

_COMPRESSION: dict[int, str] = {
    common_pb2.COMPRESSION_TYPE_NONE: "none",
    common_pb2.COMPRESSION_TYPE_GZIP: "gzip",
    common_pb2.COMPRESSION_TYPE_SNAPPY: "snappy",
    common_pb2.COMPRESSION_TYPE_LZ4: "lz4",
    common_pb2.COMPRESSION_TYPE_ZSTD: "zstd",
}
DEFAULT_PARTITION_MAX_BYTES = 1 << 20
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
        failed: dict[TopicPartition, KafkaError] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition)
                try:
                    if bool(p.record_batches) == bool(p.records):
                        raise InvalidRequestError(
                            f"{tp}: send either record_batches or records, not both or neither"
                        )
                    entries[tp] = p.record_batches or build_batch(p.records, p.compression, now)
                except KafkaError as e:
                    failed[tp] = e
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else 30_000
        results = await self.replicas.append_records(entries, request.acks, timeout_ms)
        response = produce_pb2.ProduceResponse()
        by_topic: dict[str, produce_pb2.ProduceResponse.Topic] = {}
        for topic in request.topics:
            out = by_topic.get(topic.name)
            if out is None:
                out = by_topic[topic.name] = response.topics.add(name=topic.name)
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition)
                part = out.partitions.add(partition=p.partition)
                err = failed.get(tp)
                r = results.get(tp)
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
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    async def Fetch(
        self, request: fetch_pb2.FetchRequest, context: Context
    ) -> fetch_pb2.FetchResponse:
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
        response = fetch_pb2.FetchResponse()
        topics: dict[str, fetch_pb2.FetchResponse.Topic] = {}
        for tp, req in wanted.items():
            out = topics.get(tp.topic)
            if out is None:
                out = topics[tp.topic] = response.topics.add(name=tp.topic)
            self._fill(out.partitions.add(partition=tp.partition), results[tp], req, request)
        return response

    @staticmethod
    def _fill(
        part: fetch_pb2.FetchResponse.Partition,
        r: FetchedPartition,
        req: FetchPartition,
        request: fetch_pb2.FetchRequest,
    ) -> None:
        part.high_watermark = r.high_watermark
        part.last_stable_offset = r.last_stable_offset
        part.log_start_offset = r.log_start_offset
        part.preferred_read_replica = -1
        if r.error is not None:
            set_error(part, r.error)
            return
        if r.diverging_epoch is not None:
            part.diverging_epoch.epoch, part.diverging_epoch.end_offset = r.diverging_epoch
        if r.data is not None and r.data.size:
            data = r.data.read_all()
            if request.structured:
                part.records.extend(structured_records(data, req.fetch_offset))
            else:
                part.record_batches = data

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
