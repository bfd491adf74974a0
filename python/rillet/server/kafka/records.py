"""Produce, Fetch and ListOffsets over Kafka's protocol: request dicts to the
transport-agnostic handlers (:class:`~rillet.broker.apis.BrokerApis`) and their results to
response dicts. Produced record batches pass through as the bytes the client sent; fetched
ones are never read by the broker: the response leaves their place empty and the listener
sends them from the segment files with ``sendfile``.

Fetch keeps incremental fetch sessions (KIP-227) in a
:class:`~rillet.server.kafka.fetch_sessions.FetchSessionCache`, as Kafka's broker does: a
full fetch with session epoch 0 creates a session (its id is the answer's ``session_id``; 0
when the cache has no room), incremental ones name only the partitions that changed and are
answered only with those that have news, and a session error is the answer's top-level
error code (see that module). Topic ids (Fetch v13+) are looked up in the metadata image.
As in Kafka, a partition of an unknown topic id (UNKNOWN_TOPIC_ID), absent from the metadata
(UNKNOWN_TOPIC_OR_PARTITION), or kept in a session under the id of a topic since deleted and
made again (INCONSISTENT_TOPIC_ID) is answered without being read, and does not cut the
others' long poll short; a request with nothing to read is answered at once.

With an authorizer, Produce needs WRITE on each topic (and on the transactional id of a
transactional batch), a consumer's Fetch READ on each topic, a follower's Fetch
CLUSTER_ACTION on the cluster, and ListOffsets DESCRIBE on each topic; a topic denied is
answered TOPIC_AUTHORIZATION_FAILED, the others as usual.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from rillet._core import FileRegion
from rillet.broker.apis import BrokerApis, ProduceEntry
from rillet.broker.replica_manager import (
    FetchedPartition,
    FetchPartition,
    ListedOffset,
    ListOffsetsPartitions,
)
from rillet.errors import (
    ClusterAuthorizationFailedError,
    InconsistentTopicIdError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from rillet.metadata.image import MetadataImage
from rillet.security.acls import AclOperation, ResourceType
from rillet.server.kafka.fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    TOPIC_ID_VERSION,
    FetchSessionCache,
    PartitionRequest,
    PartitionResult,
    TopicIdPartition,
)
from rillet.server.kafka.request import KafkaRequest
from rillet.types import TopicPartition

__all__ = ["fetch", "list_offsets", "produce"]

Body = dict[str, Any]

_ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1


def _code(err: Any) -> int:
    return err.code if err is not None else 0


# -- Produce ------------------------------------------------------------------------------


def _topic_denied(topic: str) -> TopicAuthorizationFailedError:
    return TopicAuthorizationFailedError(f"Not authorized to access topics: [{topic}]")


async def produce(apis: BrokerApis, req: KafkaRequest) -> Body | None:
    """The response, or None for acks=0 (Kafka sends none)."""
    body = req.body
    txn_id = body.get("transactional_id")
    txn_denied = (
        TransactionalIdAuthorizationFailedError(f"Not authorized to use transactional id {txn_id}")
        if txn_id is not None
        and not req.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
        else None
    )
    entries: list[ProduceEntry] = []
    for topic in body["topic_data"]:
        name = topic["name"]
        denied: KafkaError | None = txn_denied
        if denied is None and not req.allowed(AclOperation.WRITE, ResourceType.TOPIC, name):
            denied = _topic_denied(name)
        for p in topic["partition_data"]:
            records = p["records"]
            entries.append(
                (
                    name,
                    p["index"],
                    denied
                    if denied is not None
                    else records
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


async def fetch(
    apis: BrokerApis,
    version: int,
    body: Body,
    sessions: FetchSessionCache,
    sender: KafkaRequest | None = None,
) -> tuple[Body, list[list[FileRegion]]]:
    """The response, with each partition's non-empty record set left as its size (an int,
    for :func:`rillet._core.kafka_encode_response_spliced`), and those record sets' file
    regions in the order they come in the response, for ``sendfile``. The request's fetch
    session (if any) is looked up, updated or created in ``sessions``. ``sender`` (the
    decoded request, with who sent it) is what topics are authorized against."""
    image = apis.image()
    clock = apis.replicas.clock
    read_committed = body.get("isolation_level", 0) == READ_COMMITTED
    replica_id = body.get("replica_id", -1)
    if version >= 15:
        replica_id = (body.get("replica_state") or {}).get("replica_id", -1)
    by_id = version >= TOPIC_ID_VERSION
    if (
        sender is not None
        and replica_id >= 0
        and not sender.allowed_on_cluster(AclOperation.CLUSTER_ACTION)
    ):
        denied = ClusterAuthorizationFailedError("Not authorized to fetch as a replica")
        return {"error_code": denied.code, "session_id": 0, "responses": []}, []
    readable: dict[str, bool] = {}

    def may_read(topic: str) -> bool:
        if sender is None or replica_id >= 0:
            return True
        if topic not in readable:
            readable[topic] = sender.allowed(AclOperation.READ, ResourceType.TOPIC, topic)
        return readable[topic]

    def topic_name(topic_id: uuid.UUID) -> str | None:
        known = image.topics_by_id.get(topic_id)
        return known.name if known is not None else None

    fetch_data, forgotten = _requested(body, by_id, topic_name)
    context = sessions.new_context(
        version,
        body.get("session_id", INVALID_SESSION_ID),
        body.get("session_epoch", FINAL_EPOCH),
        replica_id >= 0,
        fetch_data,
        forgotten,
        topic_name,
        clock(),
    )

    targets = context.partitions()
    wanted: dict[TopicPartition, FetchPartition] = {}
    reads: dict[TopicIdPartition, TopicPartition] = {}
    unread: dict[TopicIdPartition, int] = {}  # answered with this error, without a read
    for tp, req in targets:
        if tp.topic is None:
            unread[tp] = UnknownTopicIdError.code
            continue
        if not may_read(tp.topic):
            unread[tp] = TopicAuthorizationFailedError.code
            continue
        error = _unreadable(image, tp.topic, tp)
        if error is not None:
            unread[tp] = error
            continue
        reads[tp] = read = TopicPartition(tp.topic, tp.partition)
        wanted[read] = FetchPartition(
            req.fetch_offset,
            req.max_bytes,
            current_leader_epoch=_epoch(req.current_leader_epoch),
            last_fetched_epoch=_epoch(req.last_fetched_epoch),
            read_committed=read_committed,
        )
    fetched = (
        await apis.handle_fetch(
            wanted,
            replica_id=replica_id,
            max_wait_ms=body["max_wait_ms"],
            min_bytes=body["min_bytes"],
            max_bytes=body.get("max_bytes", 0x7FFF_FFFF),
        )
        if wanted
        else {}
    )

    # Each partition's response, its record set's regions, and what the session compares.
    parts: dict[TopicIdPartition, tuple[Body, list[FileRegion] | None]] = {}
    results: list[tuple[TopicIdPartition, PartitionResult]] = []
    for tp, _ in targets:
        size = 0
        if tp in unread:
            part, regions = _unread(tp.partition, unread[tp]), None
        else:
            r = fetched[reads[tp]]
            part, regions = _fetched(version, tp.partition, r, read_committed)
            size = r.size
        parts[tp] = part, regions
        results.append(
            (
                tp,
                PartitionResult(
                    part["error_code"],
                    part["high_watermark"],
                    part["last_stable_offset"],
                    part["log_start_offset"],
                    size,
                    "diverging_epoch" in part,
                ),
            )
        )
    answer = context.respond(results, clock())

    responses, record_sets = _by_topic(answer.partitions, parts, by_id)
    response = {
        "error_code": answer.error_code,
        "session_id": answer.session_id,
        "responses": responses,
    }
    return response, record_sets


def _requested(
    body: Body, by_id: bool, topic_name: Callable[[uuid.UUID], str | None]
) -> tuple[dict[TopicIdPartition, PartitionRequest], list[TopicIdPartition]]:
    """A Fetch request's partitions with their parameters, and its forgotten partitions;
    from v13 their topics are ids, named when the metadata knows them."""

    def topic(t: Body) -> tuple[uuid.UUID, str | None]:
        if by_id:
            topic_id = t.get("topic_id") or _ZERO_UUID
            return topic_id, topic_name(topic_id)
        return _ZERO_UUID, t["topic"]

    fetch_data: dict[TopicIdPartition, PartitionRequest] = {}
    for t in body["topics"]:
        topic_id, name = topic(t)
        for p in t["partitions"]:
            fetch_data[TopicIdPartition(topic_id, name, p["partition"])] = PartitionRequest(
                p["fetch_offset"],
                p["partition_max_bytes"],
                p.get("log_start_offset", -1),
                p.get("current_leader_epoch", -1),
                p.get("last_fetched_epoch", -1),
            )
    forgotten = [
        TopicIdPartition(*topic(t), index)
        for t in body.get("forgotten_topics_data") or ()
        for index in t["partitions"]
    ]
    return fetch_data, forgotten


def _by_topic(
    answered: list[TopicIdPartition],
    parts: Mapping[TopicIdPartition, tuple[Body, list[FileRegion] | None]],
    by_id: bool,
) -> tuple[list[Body], list[list[FileRegion]]]:
    """The answered partitions' responses grouped by topic (in the order topics first come),
    and their record sets' regions in the same order."""
    grouped: dict[uuid.UUID | str | None, list[TopicIdPartition]] = {}
    for tp in answered:
        grouped.setdefault(tp.topic_id if by_id else tp.topic, []).append(tp)
    responses = []
    record_sets: list[list[FileRegion]] = []
    for tps in grouped.values():
        for tp in tps:
            regions = parts[tp][1]
            if regions is not None:
                record_sets.append(regions)
        out: Body = {"partitions": [parts[tp][0] for tp in tps]}
        if by_id:
            out["topic_id"] = tps[0].topic_id
        else:
            out["topic"] = tps[0].topic
        responses.append(out)
    return responses, record_sets


def _unreadable(image: MetadataImage, topic: str, tp: TopicIdPartition) -> int | None:
    """The error a partition of a known topic is answered with before any read (Kafka's
    ``KafkaApis`` and ``ReplicaManager`` checks), or None to read it: a partition the
    metadata does not have, or a session's topic id that is no longer its name's (the topic
    was deleted and made again)."""
    if image.partition(topic, tp.partition) is None:
        return UnknownTopicOrPartitionError.code
    if tp.topic_id != _ZERO_UUID and image.topic_ids.get(topic) != tp.topic_id:
        return InconsistentTopicIdError.code
    return None


def _epoch(epoch: int) -> int | None:
    return epoch if epoch >= 0 else None


def _unread(index: int, error_code: int) -> Body:
    """A partition answered without a read (Kafka's ``FetchResponse.partitionResponse``)."""
    return {
        "partition_index": index,
        "error_code": error_code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "records": b"",
    }


def _fetched(
    version: int, index: int, r: FetchedPartition, read_committed: bool
) -> tuple[Body, list[FileRegion] | None]:
    """A read partition's response, with its record set's size in place of the records and
    its regions (None when it has none)."""
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
    regions = None
    if data is not None and data.size:
        part["records"] = data.size
        regions = data.regions
    if r.diverging_epoch is not None and version >= 12:
        epoch, end_offset = r.diverging_epoch
        part["diverging_epoch"] = {"epoch": epoch, "end_offset": end_offset}
    return part, regions


# -- ListOffsets --------------------------------------------------------------------------


def list_offsets(apis: BrokerApis, req: KafkaRequest) -> Body:
    version, body = req.version, req.body
    replica_id = body.get("replica_id", -1)
    denied = {
        t["name"]
        for t in body["topics"]
        if not req.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t["name"])
    }
    wanted = ListOffsetsPartitions(
        {
            TopicPartition(t["name"], p["partition_index"]): p["timestamp"]
            for t in body["topics"]
            if t["name"] not in denied
            for p in t["partitions"]
        },
        read_committed=body.get("isolation_level", 0) == READ_COMMITTED and replica_id < 0,
    )
    results = apis.handle_list_offsets(wanted)
    for t in body["topics"]:
        if t["name"] in denied:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                results[tp] = ListedOffset(_topic_denied(t["name"]))
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    _listed(
                        version,
                        p["partition_index"],
                        results[TopicPartition(t["name"], p["partition_index"])],
                    )
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
    }


def _listed(version: int, index: int, r: Any) -> Body:
    out: Body = {
        "partition_index": index,
        "error_code": _code(r.error),
        "timestamp": r.timestamp,
        "offset": r.offset,
    }
    if version >= 4:
        out["leader_epoch"] = r.leader_epoch
    return out
