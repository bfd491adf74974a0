"""FetchService messages (``fetch.proto``) to and from the domain: Fetch and ListOffsets.

A fetch response is written in Rust (``encode_fetch_response``): each partition's record
batches are read from the log's files straight into their place in the response, one copy
from the page cache. A request that asks for ``structured`` records gets them decoded into
protobuf messages instead, for clients without a RecordBatch decoder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rillet._core import (
    AbortedTransaction,
    FetchResponsePartition,
    decode_batches,
    decode_fetch_response,
    encode_fetch_response,
)
from rillet.broker.replica_fetcher import LeaderFetchResult, ReplicaFetchRequest
from rillet.broker.replica_manager import (
    FetchedPartition,
    FetchPartition,
    ListedOffset,
    ListOffsetsPartitions,
)
from rillet.errors import KafkaError
from rillet.protocol.errors import error_from_wire, error_to_wire, set_error
from rillet.protocol.gen.v1 import common_pb2, fetch_pb2
from rillet.types import TopicPartition

__all__ = [
    "DEFAULT_FETCH_MAX_BYTES",
    "DEFAULT_PARTITION_MAX_BYTES",
    "FetchQuery",
    "fetch_request_from_pb",
    "fetch_response_bytes",
    "list_offsets_request_from_pb",
    "list_offsets_response",
    "replica_fetch_request_to_pb",
    "replica_fetch_results_from_bytes",
    "structured_fetch_response",
    "structured_records",
]

# A request's partition_max_bytes or max_bytes of 0 (unset) means these.
DEFAULT_PARTITION_MAX_BYTES = 1 << 20
DEFAULT_FETCH_MAX_BYTES = 50 << 20


@dataclass(frozen=True, slots=True)
class FetchQuery:
    """A fetch request in the domain's terms (the arguments of ``BrokerApis.handle_fetch``,
    with the wire's defaults applied)."""

    wanted: dict[TopicPartition, FetchPartition]
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    structured: bool


def fetch_request_from_pb(request: fetch_pb2.FetchRequest) -> FetchQuery:
    replica_id = request.replica_id if request.HasField("replica_id") else -1
    # Followers read to the log end whatever the request says.
    read_committed = (
        request.isolation_level == fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED and replica_id < 0
    )
    wanted: dict[TopicPartition, FetchPartition] = {}
    for topic in request.topics:
        for p in topic.partitions:
            wanted[TopicPartition(topic.name, p.partition)] = FetchPartition(
                p.fetch_offset,
                p.partition_max_bytes or DEFAULT_PARTITION_MAX_BYTES,
                p.current_leader_epoch if p.HasField("current_leader_epoch") else None,
                p.last_fetched_epoch if p.HasField("last_fetched_epoch") else None,
                read_committed=read_committed,
            )
    return FetchQuery(
        wanted,
        replica_id=replica_id,
        max_wait_ms=max(request.max_wait_ms, 0),
        min_bytes=max(request.min_bytes, 1),
        max_bytes=request.max_bytes or DEFAULT_FETCH_MAX_BYTES,
        structured=request.structured,
    )


def fetch_response_bytes(
    wanted: Mapping[TopicPartition, FetchPartition],
    results: Mapping[TopicPartition, FetchedPartition],
) -> bytes:
    """The FetchResponse's wire bytes, partitions in the request's order. A read_committed
    read's aborted transactions go with its records (``aborted_transactions``)."""
    topics: dict[str, list[FetchResponsePartition]] = {}
    for tp in wanted:
        r = results[tp]
        code, message = (0, "") if r.error is None else error_to_wire(r.error)
        topics.setdefault(tp.topic, []).append(
            FetchResponsePartition(
                tp.partition,
                error_code=code,
                error_message=message,
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                diverging_epoch=r.diverging_epoch,
                preferred_read_replica=-1,  # none: read from the leader
                records=r.data if r.error is None and r.data is not None and r.data.size else None,
            )
        )
    return encode_fetch_response(list(topics.items()))


def replica_fetch_request_to_pb(request: ReplicaFetchRequest) -> fetch_pb2.FetchRequest:
    """A follower's fetch (``replica_id`` and broker epoch set)."""
    out = fetch_pb2.FetchRequest(
        replica_id=request.replica_id,
        replica_epoch=request.broker_epoch,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
    )
    topics: dict[str, fetch_pb2.FetchRequest.Topic] = {}
    for tp, p in request.partitions.items():
        topic = topics.get(tp.topic)
        if topic is None:
            topic = topics[tp.topic] = out.topics.add(name=tp.topic)
        part = topic.partitions.add(
            partition=tp.partition,
            fetch_offset=p.fetch_offset,
            partition_max_bytes=p.max_bytes,
            log_start_offset=p.log_start_offset,
            current_leader_epoch=p.current_leader_epoch,
        )
        if p.last_fetched_epoch is not None:
            part.last_fetched_epoch = p.last_fetched_epoch
    return out


def replica_fetch_results_from_bytes(
    data: bytes,
) -> dict[TopicPartition, LeaderFetchResult] | KafkaError:
    """A FetchResponse's partitions as a follower uses them, their batches as views into
    ``data``; or the response's own error. Malformed bytes raise CorruptRecordError."""
    response = decode_fetch_response(data)
    err = error_from_wire(response.error_code, response.error_message)
    if err is not None:
        return err
    view = memoryview(data)
    return {
        TopicPartition(p.topic, p.partition): LeaderFetchResult(
            error_from_wire(p.error_code, p.error_message),
            p.high_watermark,
            p.log_start_offset,
            p.diverging_epoch,
            view[p.records_start : p.records_end],
        )
        for p in response.partitions
    }


def structured_fetch_response(
    wanted: Mapping[TopicPartition, FetchPartition],
    results: Mapping[TopicPartition, FetchedPartition],
) -> fetch_pb2.FetchResponse:
    """The FetchResponse with decoded records instead of batch bytes."""
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
        aborted = r.aborted_transactions
        if aborted:
            part.aborted_transactions.extend(
                fetch_pb2.FetchResponse.AbortedTransaction(
                    producer_id=t.producer_id, first_offset=t.first_offset
                )
                for t in aborted
            )
        if r.data is not None and r.data.size:
            part.records.extend(structured_records(r.data.read_all(), req.fetch_offset, aborted))
    return response


def structured_records(
    data: bytes, from_offset: int, aborted: list[AbortedTransaction] | None = None
) -> list[common_pb2.Record]:
    """Decoded records at or after ``from_offset`` from fetched batch bytes; with the
    ``aborted`` transactions of a read_committed read, their batches left out (for clients
    that do not parse batches, the broker applies the consumer's rule: Kafka's
    CompletedFetch)."""
    out: list[common_pb2.Record] = []
    # (first offset, producer id) of aborted transactions not reached yet; producers inside
    # one. Per batch, not per record.
    pending = sorted(((t.first_offset, t.producer_id) for t in aborted or ()), reverse=True)
    open_aborted: set[int] = set()
    for batch in decode_batches(data, allow_partial=True):
        if pending or open_aborted:
            while pending and pending[-1][0] <= batch.last_offset:
                open_aborted.add(pending.pop()[1])
            if batch.is_control:
                if batch.records and _is_abort_marker(batch.records[0].key):
                    open_aborted.discard(batch.producer_id)
                continue
            if batch.is_transactional and batch.producer_id in open_aborted:
                continue
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


def _is_abort_marker(key: bytes | None) -> bool:
    """A control record key of type ABORT (version int16, type int16: 0 is ABORT)."""
    return key is not None and len(key) >= 4 and key[2:4] == b"\x00\x00"


def list_offsets_request_from_pb(
    request: fetch_pb2.ListOffsetsRequest,
) -> ListOffsetsPartitions:
    """Each partition's wanted timestamp (-2 earliest, -1 latest, -3 max timestamp), and the
    request's isolation level (a replica's request reads uncommitted)."""
    replica_id = request.replica_id if request.HasField("replica_id") else -1
    return ListOffsetsPartitions(
        {
            TopicPartition(t.name, p.partition): p.timestamp_ms
            for t in request.topics
            for p in t.partitions
        },
        read_committed=(
            request.isolation_level == fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED and replica_id < 0
        ),
    )


def list_offsets_response(
    results: Mapping[TopicPartition, ListedOffset],
) -> fetch_pb2.ListOffsetsResponse:
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
