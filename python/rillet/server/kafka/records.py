"""Produce, Fetch and ListOffsets over Kafka's protocol: request dicts to the
transport-agnostic handlers (:class:`~rillet.broker.apis.BrokerApis`) and their results to
response dicts. Produced record batches pass through as the bytes the client sent; fetched
ones are never read by the broker: the response leaves their place empty and the listener
sends them from the segment files with ``sendfile``.

Fetch sessions (KIP-227) are not kept: every answer has session id 0, which tells a client
the broker keeps no session, so it sends every partition in each request (as a Kafka broker
out of session slots answers). Topic ids (Fetch v13+) are looked up in the metadata image;
an unknown one is answered UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import uuid
from typing import Any

from rillet._core import FileRegion
from rillet.broker.apis import BrokerApis, ProduceEntry
from rillet.broker.replica_manager import FetchPartition, ListOffsetsPartitions
from rillet.errors import InvalidRequestError, UnknownTopicIdError
from rillet.types import TopicPartition

__all__ = ["fetch", "list_offsets", "produce"]

Body = dict[str, Any]

_ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1


def _code(err: Any) -> int:
    return err.code if err is not None else 0


# -- Produce ------------------------------------------------------------------------------


async def produce(apis: BrokerApis, version: int, body: Body) -> Body | None:
    """The response, or None for acks=0 (Kafka sends none)."""
    entries: list[ProduceEntry] = []
    for topic in body["topic_data"]:
        for p in topic["partition_data"]:
            records = p["records"]
            entries.append(
                (
                    topic["name"],
                    p["index"],
                    records
                    if records is not None
                    else InvalidRequestError("a produce request's records must not be null"),
                )
            )
    acks = body["acks"]
    results = await apis.handle_produce(
        entries, acks, body["timeout_ms"], body.get("transactional_id")
    )
    if acks == 0:
        return None
    by_topic: dict[str, list[Body]] = {}
    for (topic, partition, _), r in zip(entries, results, strict=True):
        by_topic.setdefault(topic, []).append(
            {
                "index": partition,
                "error_code": _code(r.error),
                "base_offset": r.base_offset,
                "log_append_time_ms": r.log_append_time_ms,
                "log_start_offset": r.log_start_offset,
                "error_message": r.error.message if r.error is not None else None,
            }
        )
    return {
        "responses": [
            {"name": name, "partition_responses": parts} for name, parts in by_topic.items()
        ]
    }


# -- Fetch --------------------------------------------------------------------------------


async def fetch(apis: BrokerApis, version: int, body: Body) -> tuple[Body, list[list[FileRegion]]]:
    """The response, with each partition's non-empty record set left as its size (an int,
    for :func:`rillet._core.kafka_encode_response_spliced`), and those record sets' file
    regions in the order they come in the response, for ``sendfile``."""
    image = apis.image()
    read_committed = body.get("isolation_level", 0) == READ_COMMITTED
    replica_id = body.get("replica_id", -1)
    if version >= 15:
        replica_id = (body.get("replica_state") or {}).get("replica_id", -1)
    wanted: dict[TopicPartition, FetchPartition] = {}
    # Per requested topic: its name (None for an unknown id), id, and partitions, in order.
    topics: list[tuple[str | None, uuid.UUID, list[int]]] = []
    for t in body["topics"]:
        topic_id = t.get("topic_id") or _ZERO_UUID
        name: str | None = t.get("topic")
        if version >= 13:
            known = image.topics_by_id.get(topic_id)
            name = known.name if known is not None else None
        partitions = []
        for p in t["partitions"]:
            partitions.append(p["partition"])
            if name is None:
                continue
            leader_epoch = p.get("current_leader_epoch", -1)
            last_fetched = p.get("last_fetched_epoch", -1)
            wanted[TopicPartition(name, p["partition"])] = FetchPartition(
                p["fetch_offset"],
                p["partition_max_bytes"],
                current_leader_epoch=leader_epoch if leader_epoch >= 0 else None,
                last_fetched_epoch=last_fetched if last_fetched >= 0 else None,
                read_committed=read_committed,
            )
        topics.append((name, topic_id, partitions))
    results = await apis.handle_fetch(
        wanted,
        replica_id=replica_id,
        max_wait_ms=body["max_wait_ms"],
        min_bytes=body["min_bytes"],
        max_bytes=body.get("max_bytes", 0x7FFF_FFFF),
    )
    responses = []
    record_sets: list[list[FileRegion]] = []
    for name, topic_id, partitions in topics:
        out = []
        for index in partitions:
            if name is None:
                unknown = UnknownTopicIdError(f"no topic has the id {topic_id}")
                out.append({"partition_index": index, "error_code": unknown.code})
                continue
            r = results[TopicPartition(name, index)]
            data = r.data
            aborted = None
            if read_committed and data is not None and data.aborted_transactions is not None:
                aborted = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset}
                    for a in data.aborted_transactions
                ]
            part: Body = {
                "partition_index": index,
                "error_code": _code(r.error),
                "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": aborted,
                "records": b"",
            }
            if data is not None and data.size:
                part["records"] = data.size
                record_sets.append(data.regions)
            if r.diverging_epoch is not None and version >= 12:
                epoch, end_offset = r.diverging_epoch
                part["diverging_epoch"] = {"epoch": epoch, "end_offset": end_offset}
            out.append(part)
        topic: Body = {"partitions": out}
        if version >= 13:
            topic["topic_id"] = topic_id
        else:
            topic["topic"] = name
        responses.append(topic)
    return {"error_code": 0, "session_id": 0, "responses": responses}, record_sets


# -- ListOffsets --------------------------------------------------------------------------


def list_offsets(apis: BrokerApis, version: int, body: Body) -> Body:
    replica_id = body.get("replica_id", -1)
    wanted = ListOffsetsPartitions(
        {
            TopicPartition(t["name"], p["partition_index"]): p["timestamp"]
            for t in body["topics"]
            for p in t["partitions"]
        },
        read_committed=body.get("isolation_level", 0) == READ_COMMITTED and replica_id < 0,
    )
    results = apis.handle_list_offsets(wanted)
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    _listed(
                        p["partition_index"],
                        results[TopicPartition(t["name"], p["partition_index"])],
                    )
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
    }


def _listed(index: int, r: Any) -> Body:
    return {
        "partition_index": index,
        "error_code": _code(r.error),
        "timestamp": r.timestamp,
        "offset": r.offset,
        "leader_epoch": r.leader_epoch,
    }
