"""ProduceService messages (``produce.proto``) to and from the domain.

A produce request is read in place (``decode_produce_request``, in Rust): each partition's
``record_batches`` becomes a memoryview of the request's bytes, so the batches reach the log
without being copied out. A request that carries structured records instead is decoded by
the generated classes, and the broker builds one RecordBatch v2 per partition from them
(:func:`build_batch`), so a client in any language needs only protobuf.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rillet._core import BatchBuilder, ProduceRequestView, decode_produce_request
from rillet.broker.apis import ProduceEntry
from rillet.broker.replica_manager import ProducedPartition
from rillet.errors import InvalidRequestError, KafkaError
from rillet.protocol.errors import set_error
from rillet.protocol.gen.v1 import common_pb2, produce_pb2
from rillet.types import TopicPartition

__all__ = [
    "DEFAULT_PRODUCE_TIMEOUT_MS",
    "ProduceWire",
    "build_batch",
    "produce_request_from_pb",
    "produce_request_from_wire",
    "produce_response",
    "read_produce_request",
]

COMPRESSION: dict[int, str] = {
    common_pb2.COMPRESSION_TYPE_NONE: "none",
    common_pb2.COMPRESSION_TYPE_GZIP: "gzip",
    common_pb2.COMPRESSION_TYPE_SNAPPY: "snappy",
    common_pb2.COMPRESSION_TYPE_LZ4: "lz4",
    common_pb2.COMPRESSION_TYPE_ZSTD: "zstd",
}
# A request's timeout_ms of 0 (unset) means this.
DEFAULT_PRODUCE_TIMEOUT_MS = 30_000
# A produce request as the transport reads it: its wire bytes and what
# decode_produce_request read of them.
ProduceWire = tuple[bytes, ProduceRequestView]


def read_produce_request(data: bytes) -> ProduceWire:
    """The request deserializer of the Produce RPC: locate the batches, copy nothing."""
    return data, decode_produce_request(data)


def build_batch(records: Iterable[common_pb2.Record], compression: int, now_ms: int) -> bytes:
    """One RecordBatch v2 from structured records (absent timestamps mean now)."""
    codec = COMPRESSION.get(compression)
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


def produce_request_from_wire(
    wire: ProduceWire, now_ms: int
) -> tuple[list[ProduceEntry], int, int]:
    """``(entries, acks, timeout_ms)`` of a request read by :func:`read_produce_request`."""
    data, request = wire
    if request.structured:
        return produce_request_from_pb(produce_pb2.ProduceRequest.FromString(data), now_ms)
    view = memoryview(data)
    entries: list[ProduceEntry] = [
        (p.topic, p.partition, view[p.start : p.end]) for p in request.partitions
    ]
    return entries, request.acks, _timeout(request.timeout_ms)


def produce_request_from_pb(
    request: produce_pb2.ProduceRequest, now_ms: int
) -> tuple[list[ProduceEntry], int, int]:
    """``(entries, acks, timeout_ms)`` of a ProduceRequest message; a partition whose data
    cannot be used (both or neither of its fields, an unknown codec) carries the error."""
    entries: list[ProduceEntry] = []
    for topic in request.topics:
        for p in topic.partitions:
            if bool(p.record_batches) == bool(p.records):
                err = InvalidRequestError(
                    f"{TopicPartition(topic.name, p.partition)}: send either record_batches "
                    "or records, not both or neither"
                )
                entries.append((topic.name, p.partition, err))
                continue
            try:
                records = p.record_batches or build_batch(p.records, p.compression, now_ms)
            except KafkaError as e:
                entries.append((topic.name, p.partition, e))
                continue
            entries.append((topic.name, p.partition, records))
    return entries, request.acks, _timeout(request.timeout_ms)


def _timeout(timeout_ms: int) -> int:
    return timeout_ms if timeout_ms > 0 else DEFAULT_PRODUCE_TIMEOUT_MS


def produce_response(
    entries: Sequence[ProduceEntry], results: Sequence[ProducedPartition]
) -> produce_pb2.ProduceResponse:
    """One partition result per entry, grouped by topic in the request's order."""
    response = produce_pb2.ProduceResponse()
    by_topic: dict[str, produce_pb2.ProduceResponse.Topic] = {}
    for (topic, partition, _), r in zip(entries, results, strict=True):
        out = by_topic.get(topic)
        if out is None:
            out = by_topic[topic] = response.topics.add(name=topic)
        part = out.partitions.add(partition=partition)
        if r.error is not None:
            set_error(part, r.error)
            part.base_offset = part.log_append_time_ms = part.log_start_offset = -1
        else:
            part.base_offset = r.base_offset
            part.log_append_time_ms = r.log_append_time_ms
            part.log_start_offset = r.log_start_offset
            part.batch_base_offsets.extend(r.batch_base_offsets)
    return response
