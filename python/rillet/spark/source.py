"""The ``rillet`` PySpark data source: batch reads, streaming reads and writes of topics, with
the options and the schema of Spark's Kafka source and sink.

Planning (which ranges to read) runs on the driver with a :class:`~rillet.Consumer` for
metadata and ListOffsets; each ``InputPartition`` is one offset range of one
topic-partition, read on an executor by :func:`rillet.spark.fetch.read_range`, which yields
Arrow record batches built in Rust.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql import datasource as _ds
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rillet.spark.fetch import read_range
from rillet.spark.options import SourceOptions, parse_sink_options, parse_source_options
from rillet.spark.planning import (
    Narrowing,
    OffsetRange,
    PartitionOffsets,
    check_data_loss,
    offsets_from_json,
    offsets_to_json,
    open_consumer,
    resolve_offsets,
    split_ranges,
    topic_partitions,
)
from rillet.spark.worker import prepare_executor

__all__ = [
    "FILTER_PUSHDOWN_AVAILABLE",
    "RilletDataSource",
    "RilletDataSourceWithPushdown",
    "RilletRangePartition",
    "kafka_schema",
]

_log = logging.getLogger(__name__)

# pyspark.sql.datasource.Filter and DataSourceReader.pushFilters arrived in PySpark 4.1.
FILTER_PUSHDOWN_AVAILABLE = hasattr(_ds, "Filter")


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (``KafkaRecordToRowConverter``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            )
        )
    return StructType(fields)


class RilletRangePartition(InputPartition):
    """One offset range of one topic-partition: ``from_offset <= offset < until_offset``."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


def _read(partition: InputPartition | None, opts: SourceOptions) -> Iterator[Any]:
    prepare_executor()
    if partition is None:  # Spark reads a query with no ranges through one empty partition
        return iter(())
    assert isinstance(partition, RilletRangePartition)
    return read_range(partition.range, opts)


class RilletDataSource(DataSource):
    """``spark.read.format("rillet")``, ``readStream`` and ``write`` (see the README)."""

    @classmethod
    def name(cls) -> str:
        return "rillet"

    def schema(self) -> StructType:
        value = str(self.options.get("includeHeaders", "false")).strip().lower()
        return kafka_schema(value == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return RilletBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RilletStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rillet.spark.sink import RilletBatchWriter

        if overwrite:
            raise ValueError(
                "rillet sink: save mode Overwrite is not allowed (a topic is append-only); use "
                "mode('append')"
            )
        return RilletBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rillet.spark.sink import RilletStreamWriter

        return RilletStreamWriter(parse_sink_options(self.options), schema)


class RilletDataSourceWithPushdown(RilletDataSource):
    """The same source, with a batch reader that implements ``pushFilters`` (PySpark >= 4.1
    with ``spark.sql.python.filterPushdown.enabled=true``; Spark refuses a reader with
    ``pushFilters`` when that conf is off)."""

    def reader(self, schema: StructType) -> DataSourceReader:
        return RilletPushdownBatchReader(parse_source_options(self.options, streaming=False))


class RilletBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.narrowing = Narrowing()

    def plan_ranges(self) -> list[OffsetRange]:
        opts = self.opts
        with open_consumer(opts) as consumer:
            tps = [tp for tp in topic_partitions(consumer, opts) if self.narrowing.keep(tp)]
            if not tps:
                return []
            earliest = consumer.beginning_offsets(tps)
            latest = consumer.end_offsets(tps)
            common: dict[str, Any] = {"earliest": earliest, "latest": latest}
            start = resolve_offsets(
                consumer,
                tps,
                opts.starting,
                option=_option_name(opts.starting.kind, "starting"),
                starting=True,
                by_timestamp_strategy=opts.starting_by_timestamp_strategy,
                **common,
            )
            end = resolve_offsets(
                consumer,
                tps,
                opts.ending,
                option=_option_name(opts.ending.kind, "ending"),
                starting=False,
                **common,
            )
            for tp in tps:
                if start[tp] > end[tp]:
                    raise ValueError(
                        f"rillet data source: the starting offset {start[tp]} of {tp} is after "
                        f"its ending offset {end[tp]} (options 'startingOffsets'/"
                        "'endingOffsets' and their timestamp forms)"
                    )
            ranges = check_data_loss(
                [OffsetRange(tp.topic, tp.partition, start[tp], end[tp]) for tp in tps],
                earliest,
                latest,
                fail_on_data_loss=opts.fail_on_data_loss,
            )
            ranges = self.narrowing.apply(consumer, ranges)
        return split_ranges(ranges, opts.min_partitions)

    def partitions(self) -> Sequence[InputPartition]:
        return [RilletRangePartition(r) for r in self.plan_ranges()]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition, self.opts)


class RilletPushdownBatchReader(RilletBatchReader):
    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        """Partition, topic and offset filters are pushed (the ranges implement them
        exactly). Timestamp lower bounds narrow the ranges but are returned, so Spark still
        evaluates them. Everything else is returned untouched."""
        unpushed = []
        for f in filters:
            if not _push_one(self.narrowing, f):
                unpushed.append(f)
        return unpushed


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _push_one(n: Narrowing, f: Any) -> bool:
    """Narrow ``n`` by ``f``; True when the ranges now implement ``f`` exactly."""
    column = getattr(f, "attribute", None)
    if not isinstance(column, tuple) or len(column) != 1:
        return False
    name = column[0]
    value: Any = getattr(f, "value", None)
    if name in ("partition", "topic"):
        wanted_type = int if name == "partition" else str
        values: list[Any]
        if isinstance(f, _ds.EqualTo):
            values = [value]
        elif isinstance(f, _ds.In):
            values = list(value)
        else:
            return False
        if not all(isinstance(v, wanted_type) and not isinstance(v, bool) for v in values):
            return False
        if name == "partition":
            n.partitions = set(values) if n.partitions is None else n.partitions & set(values)
        else:
            n.topics = set(values) if n.topics is None else n.topics & set(values)
        return True
    if name == "offset":
        v = _as_int(value)
        if v is None:
            return False
        if isinstance(f, _ds.EqualTo):
            lo, hi = v, v + 1
        elif isinstance(f, _ds.GreaterThan):
            lo, hi = v + 1, None
        elif isinstance(f, _ds.GreaterThanOrEqual):
            lo, hi = v, None
        elif isinstance(f, _ds.LessThan):
            lo, hi = None, v
        elif isinstance(f, _ds.LessThanOrEqual):
            lo, hi = None, v + 1
        else:
            return False
        if lo is not None:
            n.offset_from = max(n.offset_from, lo)
        if hi is not None:
            n.offset_until = min(n.offset_until, hi)
        return True
    if name == "timestamp" and isinstance(value, datetime.datetime) and value.tzinfo is not None:
        micros = _epoch_micros(value)
        if isinstance(f, _ds.GreaterThan):
            lo_ms = micros // 1000 + 1  # ts_ms * 1000 > micros
        elif isinstance(f, (_ds.GreaterThanOrEqual, _ds.EqualTo)):
            lo_ms = -(-micros // 1000)  # ts_ms * 1000 >= micros
        else:
            return False
        if lo_ms >= 0:
            n.timestamp_from_ms = max(n.timestamp_from_ms or 0, lo_ms)
    return False  # timestamp filters only narrow; Spark evaluates them


def _epoch_micros(value: datetime.datetime) -> int:
    delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _option_name(kind: str, which: str) -> str:
    return {
        "timestamp": f"{which}Timestamp",
        "timestamps": f"{which}OffsetsByTimestamp",
    }.get(kind, f"{which}Offsets")


class RilletStreamReader(DataSourceStreamReader):
    """Micro-batches over per-partition offsets, ``{"topic": {"0": 23}}`` as Spark's Kafka
    source checkpoints them. A batch reads ``start <= offset < end`` of each partition, so
    a query restarted from its checkpoint re-reads nothing and skips nothing.

    ``maxOffsetsPerTrigger`` caps each batch at that many offsets (split over partitions in
    proportion to their backlog). PySpark's Python stream reader API (4.0, 4.1) has no
    admission control: ``latestOffset()`` gets no start offset, so the cap is counted from
    the end of the batch Spark planned last (``partitions()``, which Spark calls first when a
    query restarts from its checkpoint) or, in a fresh query, from the starting offsets.
    With ``trigger(availableNow=True)`` Spark asks for ``latestOffset()`` once, so a capped
    run reads one batch and the next run goes on from there."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._last_end: PartitionOffsets | None = None
        self._start: PartitionOffsets | None = None

    def _starting_offsets(self) -> PartitionOffsets:
        """Resolved once per reader: Spark asks for ``latestOffset()`` before
        ``initialOffset()``, and with ``latest`` (the default) both must agree."""
        if self._start is None:
            opts = self.opts
            with open_consumer(opts) as consumer:
                tps = topic_partitions(consumer, opts)
                self._start = resolve_offsets(
                    consumer,
                    tps,
                    opts.starting,
                    option=_option_name(opts.starting.kind, "starting"),
                    starting=True,
                    by_timestamp_strategy=opts.starting_by_timestamp_strategy,
                )
        return dict(self._start)

    def initialOffset(self) -> dict[str, Any]:
        start = self._starting_offsets()
        if self._last_end is None:
            self._last_end = dict(start)
        return offsets_to_json(start)

    def latestOffset(self) -> dict[str, Any]:
        opts = self.opts
        if self._last_end is None:
            # A fresh query (a restarted one has called partitions() already): its first
            # batch starts at the starting offsets, which Spark asks for after this call.
            self._last_end = self._starting_offsets()
        with open_consumer(opts) as consumer:
            tps = topic_partitions(consumer, opts)
            latest = consumer.end_offsets(tps) if tps else {}
            base = self._last_end
            if base is not None:
                # Partitions that appeared since: read from their log start, as Spark does.
                new = [tp for tp in tps if tp not in base]
                if new:
                    base = {**base, **consumer.beginning_offsets(new)}
        if base is not None:
            # Never move an offset back (a partition whose log was truncated keeps its place).
            latest = {tp: max(v, base.get(tp, v)) for tp, v in latest.items()}
            for tp, v in base.items():
                latest.setdefault(tp, v)
            if opts.max_offsets_per_trigger is not None:
                latest = _cap(base, latest, opts.max_offsets_per_trigger)
        return offsets_to_json(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        opts = self.opts
        start_offsets = offsets_from_json(start)
        end_offsets = offsets_from_json(end)
        self._last_end = dict(end_offsets)
        tps = sorted(end_offsets)
        if not tps:
            return []
        with open_consumer(opts) as consumer:
            earliest = consumer.beginning_offsets(tps)
            latest = consumer.end_offsets(tps)
        ranges = []
        for tp in tps:
            until = end_offsets[tp]
            begin = start_offsets.get(tp, earliest[tp])
            if begin > until:
                raise ValueError(f"rillet stream: {tp} would go back from {begin} to {until}")
            ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
        ranges = check_data_loss(ranges, earliest, latest, fail_on_data_loss=opts.fail_on_data_loss)
        return [RilletRangePartition(r) for r in split_ranges(ranges, opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(partition, self.opts)

    def commit(self, end: dict[str, Any]) -> None:
        # Offsets live in Spark's checkpoint; nothing is committed to the broker.
        self._last_end = offsets_from_json(end)


def _cap(base: PartitionOffsets, latest: PartitionOffsets, limit: int) -> PartitionOffsets:
    backlog = {tp: max(latest[tp] - base.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return latest
    out = {}
    for tp, v in latest.items():
        share = backlog[tp] * limit // total
        out[tp] = base.get(tp, v) + share if backlog[tp] else v
    # Integer shares can round every partition down to zero: give the rest in turn.
    left = limit - sum(out[tp] - base.get(tp, out[tp]) for tp in out)
    for tp in sorted(latest):
        if left <= 0:
            break
        room = latest[tp] - out[tp]
        step = min(room, left)
        out[tp] += step
        left -= step
    return out
