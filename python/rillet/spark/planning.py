"""Driver-side planning: which topic-partitions a query reads, where each range starts and
ends (resolved with ListOffsets, by offset or by timestamp), how pushed-down filters narrow the
ranges, and how ``minPartitions`` splits them.

Nothing here touches Spark; every function takes a :class:`~rillet.Consumer` (used for
metadata and ListOffsets only, never to fetch records).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rillet.client.consumer import Consumer
from rillet.spark.options import EARLIEST, LATEST, OffsetSpec, RilletOptionError, SourceOptions
from rillet.types import TopicPartition

__all__ = [
    "Narrowing",
    "OffsetRange",
    "PartitionOffsets",
    "check_data_loss",
    "offsets_from_json",
    "offsets_to_json",
    "open_consumer",
    "resolve_offsets",
    "split_ranges",
    "topic_partitions",
]

PartitionOffsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class OffsetRange:
    """Records ``from_offset <= offset < until_offset`` of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(self.until_offset - self.from_offset, 0)


def open_consumer(opts: SourceOptions) -> Consumer:
    return Consumer(
        dict(opts.security),
        bootstrap_servers=opts.bootstrap_servers,
        request_timeout_ms=opts.request_timeout_ms,
        client_id="rillet-spark",
    )


def topic_partitions(consumer: Consumer, opts: SourceOptions) -> list[TopicPartition]:
    """The partitions named by ``subscribe``, ``subscribePattern`` or ``assign``. As with
    Spark's Kafka source, a subscribed topic that does not exist contributes nothing; an
    assigned partition that does not exist is an error."""
    if opts.assign:
        out: list[TopicPartition] = []
        for topic, parts in opts.assign:
            existing = consumer.partitions_for_topic(topic) or set()
            missing = sorted(set(parts) - existing)
            if missing:
                raise RilletOptionError(
                    f"rillet data source option 'assign': topic {topic!r} has no partition "
                    f"{missing} (it has {sorted(existing)})"
                )
            out.extend(TopicPartition(topic, p) for p in parts)
        return out
    if opts.subscribe_pattern is not None:
        pattern = re.compile(opts.subscribe_pattern)
        topics = sorted(
            t for t in consumer.topics() if not t.startswith("__") and pattern.fullmatch(t)
        )
    else:
        topics = list(opts.subscribe)
    return [
        TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())
    ]


def resolve_offsets(
    consumer: Consumer,
    tps: list[TopicPartition],
    spec: OffsetSpec,
    *,
    option: str,
    starting: bool,
    by_timestamp_strategy: str = "error",
    earliest: Mapping[TopicPartition, int] | None = None,
    latest: Mapping[TopicPartition, int] | None = None,
) -> PartitionOffsets:
    """Resolve ``spec`` to an offset per partition. JSON specs must name exactly the
    partitions read (Spark's rule); -2 and -1 mean the log start and the high watermark."""
    if not tps:
        return {}
    earliest = earliest if earliest is not None else consumer.beginning_offsets(tps)
    latest = latest if latest is not None else consumer.end_offsets(tps)
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if spec.kind in ("offsets", "timestamps"):
        given = {
            TopicPartition(t, p): v
            for t, parts in spec.partition_map().items()
            for p, v in parts.items()
        }
        if set(given) != set(tps):
            missing = sorted(str(tp) for tp in set(tps) - set(given))
            extra = sorted(str(tp) for tp in set(given) - set(tps))
            detail = "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"not read by this query: {', '.join(extra)}" if extra else "",
                )
                if part
            )
            raise RilletOptionError(
                f"rillet data source option '{option}': it must name every partition the "
                f"query reads ({detail})"
            )
        if spec.kind == "offsets":
            out: PartitionOffsets = {}
            for tp, v in given.items():
                out[tp] = earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v
            return out
        times = given
    else:
        times = {tp: spec.timestamp for tp in tps}
    found = consumer.offsets_for_times(times)
    out = {}
    for tp in tps:
        hit = found.get(tp)
        if hit is not None:
            out[tp] = hit.offset
        elif starting and by_timestamp_strategy == "error":
            raise RilletOptionError(
                f"rillet data source option '{option}': no record of {tp} has a timestamp at "
                f"or after {times[tp]} (set startingOffsetsByTimestampStrategy=latest to start "
                "such partitions at the latest offset)"
            )
        else:
            out[tp] = latest[tp]
    return out


def check_data_loss(
    ranges: Iterable[OffsetRange],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """Ranges that start below the log start offset (deleted by retention) fail the query
    with failOnDataLoss, else start at the log start; ranges that end past the high watermark
    (truncated) likewise fail or end at the high watermark."""
    out: list[OffsetRange] = []
    for r in ranges:
        tp = TopicPartition(r.topic, r.partition)
        start, end = r.from_offset, r.until_offset
        log_start = earliest.get(tp, 0)
        if start < log_start:
            if fail_on_data_loss:
                raise DataLossError(
                    f"offsets {start} to {log_start} of {tp} are gone (the log start offset is "
                    f"{log_start}); some data may have been lost because they are not available "
                    "any more (deleted by retention). Set the option failOnDataLoss=false to "
                    "skip them"
                )
            start = log_start
        high_watermark = latest.get(tp)
        if high_watermark is not None and end > high_watermark:
            if fail_on_data_loss:
                raise DataLossError(
                    f"{tp} ends at offset {high_watermark}, before the requested end {end} "
                    "(the log was truncated, or endingOffsets is past the end). Set the option "
                    "failOnDataLoss=false to read up to the end"
                )
            end = high_watermark
        out.append(OffsetRange(r.topic, r.partition, start, max(start, end)))
    return out


class DataLossError(RuntimeError):
    """Records a query should read are no longer in the log (failOnDataLoss=true)."""


@dataclass
class Narrowing:
    """What pushed-down filters allow: topics, partitions, an offset interval, and a lower
    bound on timestamps (ms). Offsets and partitions narrow exactly; a timestamp lower bound
    T narrows a range to start at ListOffsets(T), the first offset whose timestamp is >= T,
    which every matching record is at or after. Upper timestamp bounds cannot narrow: a
    later record may carry an earlier timestamp."""

    topics: set[str] | None = None
    partitions: set[int] | None = None
    offset_from: int = 0
    offset_until: int = 2**63 - 1
    timestamp_from_ms: int | None = None
    notes: list[str] = field(default_factory=list)

    def keep_topic(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    def keep(self, tp: TopicPartition) -> bool:
        return self.keep_topic(tp.topic) and (
            self.partitions is None or tp.partition in self.partitions
        )

    def apply(self, consumer: Consumer, ranges: list[OffsetRange]) -> list[OffsetRange]:
        out = []
        for r in ranges:
            if not self.keep(TopicPartition(r.topic, r.partition)):
                continue
            start = max(r.from_offset, self.offset_from)
            end = min(r.until_offset, self.offset_until)
            if start < end:
                out.append(OffsetRange(r.topic, r.partition, start, end))
        if self.timestamp_from_ms is not None and out:
            found = consumer.offsets_for_times(
                {TopicPartition(r.topic, r.partition): self.timestamp_from_ms for r in out}
            )
            narrowed = []
            for r in out:
                hit = found.get(TopicPartition(r.topic, r.partition))
                if hit is None:
                    continue  # every record is older
                start = max(r.from_offset, hit.offset)
                if start < r.until_offset:
                    narrowed.append(OffsetRange(r.topic, r.partition, start, r.until_offset))
            out = narrowed
        return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges; with ``min_partitions``, split each range into
    ceil(size * min_partitions / total) pieces of near-equal size, so there are at least
    ``min_partitions`` ranges whenever there are that many records."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = min(r.size, math.ceil(r.size * min_partitions / total))
        step, extra = divmod(r.size, pieces)
        start = r.from_offset
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{"topic": {"0": 23}}, the shape of Spark's Kafka source offsets."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {
        TopicPartition(topic, int(p)): int(offset)
        for topic, parts in value.items()
        for p, offset in parts.items()
    }
