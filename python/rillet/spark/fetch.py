"""Executor side: read one offset range with plain Fetch requests and turn the fetched
RecordBatch v2 bytes into Arrow record batches in Rust (``rillet._core.decode_arrow``). Python
handles one fetch response (up to ``rillet.fetch.max.bytes``) at a time, never a record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import grpc

from rillet._core import decode_arrow
from rillet.client.cluster import ClusterMetadata
from rillet.client.configs import parse_bootstrap
from rillet.errors import KafkaError, KafkaTimeoutError, OffsetOutOfRangeError, error_for_code
from rillet.protocol import fetch_pb2, fetch_pb2_grpc
from rillet.spark.options import SourceOptions
from rillet.spark.planning import DataLossError, OffsetRange, open_consumer
from rillet.types import TopicPartition

__all__ = ["read_range"]

_log = logging.getLogger(__name__)


def read_range(r: OffsetRange, opts: SourceOptions) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es of the records of ``r``, in offset order."""
    tp = TopicPartition(r.topic, r.partition)
    cluster = ClusterMetadata(parse_bootstrap(opts.bootstrap_servers), opts.request_timeout_ms)
    try:
        offset = r.from_offset
        while offset < r.until_offset:
            try:
                p = _fetch(cluster, tp, offset, opts)
            except OffsetOutOfRangeError:
                offset = _after_out_of_range(tp, offset, r.until_offset, opts)
                continue
            if not p.record_batches:
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
            batch, next_offset = decode_arrow(
                p.record_batches,
                r.topic,
                r.partition,
                offset,
                r.until_offset,
                include_headers=opts.include_headers,
            )
            if batch.num_rows:
                yield batch
            if next_offset <= offset:
                raise KafkaError(f"{tp}: the fetch at offset {offset} made no progress")
            offset = next_offset
    finally:
        cluster.close()


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
) -> fetch_pb2.FetchResponse.Partition:
    """One Fetch of ``tp`` at ``offset`` from its leader, retrying retriable errors (with a
    metadata refresh) until ``rillet.request.timeout.ms``."""
    deadline = time.monotonic() + opts.request_timeout_ms / 1000
    last: Exception | None = None
    while time.monotonic() < deadline:
        address = cluster.leader_address(tp)
        if address is None:
            try:
                cluster.refresh([tp.topic])
            except KafkaError as e:
                last = e
            address = cluster.leader_address(tp)
            err = cluster.topic_error(tp.topic)
            if err is not None and not err.retriable:
                raise err
            if address is None:
                time.sleep(0.1)
                continue
        request = fetch_pb2.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=opts.fetch_max_bytes)
        request.topics.add(name=tp.topic).partitions.add(
            partition=tp.partition, fetch_offset=offset, partition_max_bytes=opts.fetch_max_bytes
        )
        stub = fetch_pb2_grpc.FetchServiceStub(cluster.channel(address))
        try:
            response = stub.Fetch(request, timeout=max(deadline - time.monotonic(), 0.001))
        except grpc.RpcError as e:
            last = e
            time.sleep(0.1)
            try:
                cluster.refresh([tp.topic])
            except KafkaError as refresh_error:
                last = refresh_error
            continue
        if response.error_code:
            raise error_for_code(response.error_code)(response.error_message)
        p = response.topics[0].partitions[0]
        if not p.error_code:
            return p
        err = error_for_code(p.error_code)(p.error_message or f"fetch of {tp} at {offset}")
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
