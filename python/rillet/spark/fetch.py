"""Executor side: read one offset range with plain Fetch requests and turn the fetched
RecordBatch v2 bytes into Arrow record batches in Rust (``rillet._core.decode_arrow``). Python
handles one fetch response (up to ``rillet.fetch.max.bytes``) at a time, never a record.

Responses are read in place (the batches are decoded from the response's own bytes), and the
next fetch goes out before the current response is decoded, so the broker reads the next
stretch of the log while this one becomes Arrow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc

from rillet._core import decode_arrow
from rillet.client.cluster import ClusterMetadata, FetchedResponse
from rillet.client.configs import parse_bootstrap
from rillet.client.security import tls_from_properties
from rillet.errors import KafkaError, KafkaTimeoutError, OffsetOutOfRangeError
from rillet.protocol import fetch_pb2
from rillet.protocol.errors import error_from_wire
from rillet.spark.options import SourceOptions
from rillet.spark.planning import DataLossError, OffsetRange, open_consumer
from rillet.types import TopicPartition

__all__ = ["read_range"]

_log = logging.getLogger(__name__)


def read_range(r: OffsetRange, opts: SourceOptions) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es of the records of ``r``, in offset order."""
    tp = TopicPartition(r.topic, r.partition)
    cluster = _cluster(opts)
    offset = r.from_offset
    ahead: _Ahead | None = None
    while offset < r.until_offset:
        try:
            data, p = _fetched(cluster, tp, offset, opts, ahead)
        except OffsetOutOfRangeError:
            offset = _after_out_of_range(tp, offset, r.until_offset, opts)
            ahead = None
            continue
        ahead = None
        if p.end <= p.start:
            # Planned below the high watermark, yet nothing there: truncated.
            message = (
                f"{tp}: no records at offset {offset} though the query planned to read up "
                f"to {r.until_offset} (high watermark {p.high_watermark}); the log was "
                "truncated"
            )
            if opts.fail_on_data_loss:
                raise DataLossError(message + ". Set failOnDataLoss=false to skip this")
            _log.warning("%s; skipping the rest of the range", message)
            return
        if offset < p.next_offset < r.until_offset:
            ahead = _Ahead(p.next_offset, _send(cluster, tp, p.next_offset, opts))
        decoded = decode_arrow(
            data,
            r.topic,
            r.partition,
            offset,
            r.until_offset,
            include_headers=opts.include_headers,
            start=p.start,
            end=p.end,
        )
        if decoded.batch.num_rows:
            yield decoded.batch
        if decoded.next_offset <= offset:
            raise KafkaError(f"{tp}: the fetch at offset {offset} made no progress")
        offset = decoded.next_offset


# One ClusterMetadata (its channels, connections and metadata) per cluster for the life of
# the worker process: Spark reuses a Python worker for task after task, and a new channel
# per task cost a connection, an HTTP/2 handshake and a metadata round trip each time.
_CLUSTERS: dict[tuple[str, int, tuple[tuple[str, str], ...]], ClusterMetadata] = {}


def _cluster(opts: SourceOptions) -> ClusterMetadata:
    key = (opts.bootstrap_servers, opts.request_timeout_ms, opts.security)
    cluster = _CLUSTERS.get(key)
    if cluster is None:
        cluster = _CLUSTERS[key] = ClusterMetadata(
            parse_bootstrap(opts.bootstrap_servers),
            opts.request_timeout_ms,
            tls=tls_from_properties(dict(opts.security)),
        )
    return cluster


class _Partition(NamedTuple):
    """What a fetch answered for the one partition it asked for."""

    error: KafkaError | None
    high_watermark: int
    start: int  # the partition's batches are data[start:end]
    end: int
    next_offset: int  # after the last whole batch (-1: none)


@dataclass
class _Ahead:
    """A fetch sent before the response before it was decoded."""

    offset: int
    future: Any  # grpc.Future of a FetchedResponse


def _send(cluster: ClusterMetadata, tp: TopicPartition, offset: int, opts: SourceOptions) -> Any:
    """Send a Fetch of ``tp`` at ``offset`` to its leader without waiting (None: no leader
    known; the caller fetches again with retries)."""
    address = cluster.leader_address(tp)
    if address is None:
        return None
    request = fetch_pb2.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=opts.fetch_max_bytes)
    request.topics.add(name=tp.topic).partitions.add(
        partition=tp.partition, fetch_offset=offset, partition_max_bytes=opts.fetch_max_bytes
    )
    return cluster.fetch_call(address).future(request, timeout=opts.request_timeout_ms / 1000)


def _partition(response: FetchedResponse) -> tuple[bytes, _Partition]:
    data, view = response
    err = error_from_wire(view.error_code, view.error_message)
    if err is not None:
        raise err
    p = view.partitions[0]
    return data, _Partition(
        error_from_wire(p.error_code, p.error_message),
        p.high_watermark,
        p.records_start,
        p.records_end,
        p.next_offset,
    )


def _fetched(
    cluster: ClusterMetadata,
    tp: TopicPartition,
    offset: int,
    opts: SourceOptions,
    ahead: _Ahead | None,
) -> tuple[bytes, _Partition]:
    """The fetch at ``offset``: the one sent ahead if it was for this offset and worked,
    else a fetch with retries."""
    if ahead is not None and ahead.offset == offset and ahead.future is not None:
        try:
            data, p = _partition(ahead.future.result())
            if p.error is None:
                return data, p
        except (grpc.RpcError, KafkaError) as e:
            _log.debug("the fetch ahead of %s at %s failed (%s); fetching again", tp, offset, e)
    return _fetch(cluster, tp, offset, opts)


def _after_out_of_range(tp: TopicPartition, offset: int, until: int, opts: SourceOptions) -> int:
    """Where to go on after OFFSET_OUT_OF_RANGE at ``offset``: the log start when retention
    deleted the records (failOnDataLoss=false), else fail."""
    with open_consumer(opts) as consumer:
        log_start = consumer.beginning_offsets([tp])[tp]
        high_watermark = consumer.end_offsets([tp])[tp]
    if offset < log_start:
        message = (
            f"{tp}: offsets {offset} to {min(log_start, until)} are gone (the log start offset "
            f"is now {log_start}); some data may have been lost because they are not available "
            "any more"
        )
        if opts.fail_on_data_loss:
            raise DataLossError(message + ". Set failOnDataLoss=false to skip them")
        _log.warning("%s; skipping them", message)
        return min(log_start, until)
    message = (
        f"{tp}: offset {offset} is past the high watermark {high_watermark}; the log was truncated"
    )
    if opts.fail_on_data_loss:
        raise DataLossError(message + ". Set failOnDataLoss=false to skip this")
    _log.warning("%s; skipping the rest of the range", message)
    return until


def _fetch(
    cluster: ClusterMetadata, tp: TopicPartition, offset: int, opts: SourceOptions
) -> tuple[bytes, _Partition]:
    """One Fetch of ``tp`` at ``offset`` from its leader, retrying retriable errors (with a
    metadata refresh) until ``rillet.request.timeout.ms``."""
    deadline = time.monotonic() + opts.request_timeout_ms / 1000
    last: Exception | None = None
    while time.monotonic() < deadline:
        if cluster.leader_address(tp) is None:
            try:
                cluster.refresh([tp.topic])
            except KafkaError as e:
                last = e
            err = cluster.topic_error(tp.topic)
            if err is not None and not err.retriable:
                raise err
            if cluster.leader_address(tp) is None:
                time.sleep(0.1)
                continue
        future = _send(cluster, tp, offset, opts)
        if future is None:
            continue  # the leader went away meanwhile
        try:
            data, p = _partition(future.result())
        except grpc.RpcError as e:
            last = e
            time.sleep(0.1)
            try:
                cluster.refresh([tp.topic])
            except KafkaError as refresh_error:
                last = refresh_error
            continue
        if p.error is None:
            return data, p
        err = p.error
        if not err.message:
            err = type(err)(f"fetch of {tp} at {offset}")
        if isinstance(err, OffsetOutOfRangeError) or not err.retriable:
            raise err
        last = err
        time.sleep(0.1)
        try:
            cluster.refresh([tp.topic])
        except KafkaError as e:
            last = e
    raise KafkaTimeoutError(
        f"fetching {tp} at offset {offset} failed for {opts.request_timeout_ms} ms: {last}"
    )
