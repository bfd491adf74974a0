"""The ``rillet`` PySpark data source against a real broker process and a local[2] Spark:
batch reads (schema, counts and checksums, offset and timestamp ranges, assign, headers,
minPartitions, pushed-down filters, bad options), a restarted availableNow stream, and a
write read back."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow", reason="the rillet Spark source needs pyarrow")
pyspark = pytest.importorskip(
    "pyspark", minversion="4.0", reason="the rillet Spark source needs PySpark >= 4.0"
)

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

import rillet.spark  # noqa: E402
from rillet.client.consumer import Consumer  # noqa: E402
from rillet.client.producer import Producer  # noqa: E402
from rillet.security.certs import make_ca, make_cert  # noqa: E402
from rillet.spark.source import FILTER_PUSHDOWN_AVAILABLE, kafka_schema  # noqa: E402
from rillet.types import TopicPartition  # noqa: E402
from tests.support.server_process import ServerProcess  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    # Spark's Python workers and py4j leave sockets to the garbage collector.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

TOPIC = "orders"
PARTITIONS = 3
PER_PARTITION = 200
BASE_TS = 1_700_000_000_000

# (partition, offset) -> (key, value, timestamp_ms, headers)
Expected = dict[tuple[int, int], tuple[bytes | None, bytes, int, list[tuple[str, bytes | None]]]]


class _QuickRetentionServer(ServerProcess):
    """Retention checked every 200 ms, for the data loss test's topic."""

    def argv(self) -> list[str]:
        return [*super().argv(), "--override", "log.retention.check.interval.ms=200"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = _QuickRetentionServer(tmp_path_factory.mktemp("spark") / "data")
    s.start()
    yield s
    s.kill()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rillet-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    rillet.spark.register(session, filter_pushdown=FILTER_PUSHDOWN_AVAILABLE)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def orders(server: ServerProcess) -> Expected:
    """PARTITIONS x PER_PARTITION records: values of varying length, a null key every 7th,
    headers on every other record (one with a null value), timestamps 10 ms apart."""
    # Old timestamps: keep them from time-based retention.
    server.create_topic(TOPIC, PARTITIONS, **{"retention.ms": "-1"})
    expected: Expected = {}
    with Producer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=20) as p:
        futures = []
        for i in range(PARTITIONS * PER_PARTITION):
            partition = i % PARTITIONS
            key = None if i % 7 == 0 else b"key-%d" % i
            value = b"v%d-" % i + b"x" * (i % 97)
            ts = BASE_TS + (i // PARTITIONS) * 10
            headers: list[tuple[str, bytes | None]] = (
                [("h", b"%d" % i), ("null", None)] if i % 2 else []
            )
            f = p.send(TOPIC, value, key=key, partition=partition, timestamp_ms=ts, headers=headers)
            futures.append((f, key, value, ts, headers))
        p.flush()
        for f, key, value, ts, headers in futures:
            m = f.get(30)
            expected[(m.partition, m.offset)] = (key, value, ts, headers)
    return expected


def read(spark: SparkSession, server: ServerProcess, **options: str) -> DataFrame:
    reader = spark.read.format("rillet").option("kafka.bootstrap.servers", server.bootstrap)
    if not {"subscribe", "assign", "subscribePattern"} & set(options):
        reader = reader.option("subscribe", TOPIC)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def keys(df: DataFrame) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_schema_is_spark_kafka_sources(
    spark: SparkSession, server: ServerProcess, orders: Expected
) -> None:
    assert read(spark, server).schema == kafka_schema(False)
    with_headers = read(spark, server, includeHeaders="true").schema
    assert with_headers == kafka_schema(True)
    assert with_headers["headers"].dataType == ArrayType(
        StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    )


def test_full_scan_counts_and_checksums(
    spark: SparkSession, server: ServerProcess, orders: Expected
) -> None:
    df = read(spark, server)
    rows = df.collect()
    assert len(rows) == len(orders)
    got = {
        (r.partition, r.offset): (r.key, r.value, int(r.timestamp.timestamp() * 1000)) for r in rows
    }
    assert got == {k: (v[0], v[1], v[2]) for k, v in orders.items()}
    assert {r.topic for r in rows} == {TOPIC}
    assert {r.timestampType for r in rows} == {0}
    total = df.selectExpr("sum(length(value)) AS n").collect()[0].n
    assert total == sum(len(v[1]) for v in orders.values())
    per_partition = {
        r.partition: r.n
        for r in df.groupBy("partition").count().withColumnRenamed("count", "n").collect()
    }
    assert per_partition == {p: PER_PARTITION for p in range(PARTITIONS)}


def test_offset_ranges(spark: SparkSession, server: ServerProcess, orders: Expected) -> None:
    df = read(
        spark,
        server,
        startingOffsets=json.dumps({TOPIC: {"0": 5, "1": -2, "2": 150}}),
        endingOffsets=json.dumps({TOPIC: {"0": 20, "1": -1, "2": 151}}),
    )
    want = [(0, o) for o in range(5, 20)] + [(1, o) for o in range(PER_PARTITION)] + [(2, 150)]
    assert keys(df) == want


def test_timestamp_ranges(spark: SparkSession, server: ServerProcess, orders: Expected) -> None:
    start, end = BASE_TS + 500, BASE_TS + 1000  # offsets 50..99 of each partition
    want = sorted(k for k, v in orders.items() if start <= v[2] < end)
    assert len(want) == 50 * PARTITIONS
    df = read(spark, server, startingTimestamp=str(start), endingTimestamp=str(end))
    assert keys(df) == want
    by_partition = {str(p): start for p in range(PARTITIONS)}
    by_partition["1"] = BASE_TS + 1900  # offsets 190..
    df = read(
        spark,
        server,
        startingOffsetsByTimestamp=json.dumps({TOPIC: by_partition}),
        endingOffsetsByTimestamp=json.dumps({TOPIC: {str(p): end for p in range(PARTITIONS)}}),
        # partition 1 starts after it ends: refused, so end it at the latest offset instead
        endingOffsets="latest",
    )
    with pytest.raises(Exception, match="starting offset 190"):
        df.collect()
    df = read(
        spark,
        server,
        startingOffsetsByTimestamp=json.dumps({TOPIC: by_partition}),
    )
    assert keys(df) == sorted(
        k for k, v in orders.items() if v[2] >= (BASE_TS + 1900 if k[0] == 1 else start)
    )


def test_assign(spark: SparkSession, server: ServerProcess, orders: Expected) -> None:
    df = read(spark, server, assign=json.dumps({TOPIC: [0, 2]}))
    assert keys(df) == sorted(k for k in orders if k[0] in (0, 2))


def test_subscribe_pattern(spark: SparkSession, server: ServerProcess, orders: Expected) -> None:
    df = read(spark, server, subscribePattern="ord.*")
    assert df.count() == len(orders)
    assert read(spark, server, subscribePattern="nothing-.*").count() == 0


def test_include_headers(spark: SparkSession, server: ServerProcess, orders: Expected) -> None:
    rows = read(spark, server, includeHeaders="true").collect()
    got = {(r.partition, r.offset): [(h.key, h.value) for h in r.headers or []] for r in rows}
    assert got == {k: v[3] for k, v in orders.items()}


def test_min_partitions_splits_ranges(
    spark: SparkSession, server: ServerProcess, orders: Expected
) -> None:
    assert read(spark, server).rdd.getNumPartitions() == PARTITIONS
    df = read(spark, server, minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
    assert keys(df) == sorted(orders)


@pytest.mark.skipif(not FILTER_PUSHDOWN_AVAILABLE, reason="filter pushdown needs PySpark >= 4.1")
@pytest.mark.parametrize(
    "condition",
    [
        "partition = 1",
        "partition IN (0, 2) AND offset >= 17 AND offset < 40",
        "offset = 3",
        "offset > 190 OR partition = 0",  # not pushable: Spark evaluates it
        "offset <= 4 AND topic = 'orders'",
        "topic = 'other'",
        f"timestamp >= timestamp_millis({BASE_TS + 1500}) AND partition = 2",
        f"timestamp > timestamp_millis({BASE_TS + 1505}) AND timestamp < timestamp_millis"
        f"({BASE_TS + 1800})",
        f"timestamp = timestamp_millis({BASE_TS + 10})",
    ],
)
def test_pushed_filters_give_the_unpushed_answer(
    spark: SparkSession, server: ServerProcess, orders: Expected, condition: str
) -> None:
    pushed = keys(read(spark, server).where(condition))
    # The same condition over the collected, unfiltered rows (no pushdown possible).
    everything = spark.createDataFrame(read(spark, server).collect(), kafka_schema(False))
    unpushed = keys(everything.where(condition))
    assert pushed == unpushed


@pytest.mark.skipif(not FILTER_PUSHDOWN_AVAILABLE, reason="filter pushdown needs PySpark >= 4.1")
def test_pushed_filters_leave_the_plan(
    spark: SparkSession, server: ServerProcess, orders: Expected
) -> None:
    df = read(spark, server).where("partition = 1 AND offset >= 10")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "= 1)" not in plan and ">= 10)" not in plan, plan
    assert keys(df) == [(1, o) for o in range(10, PER_PARTITION)]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscrbe": TOPIC}, "subscrbe"),
        ({"startingOffsets": "latest"}, "startingOffsets"),
        ({"endingOffsets": "earliest"}, "endingOffsets"),
        ({"startingOffsets": json.dumps({TOPIC: {"0": -1, "1": 0, "2": 0}})}, "startingOffsets"),
        ({"endingOffsets": json.dumps({TOPIC: {"0": -2, "1": 0, "2": 0}})}, "endingOffsets"),
        ({"startingOffsets": json.dumps({TOPIC: {"0": 0}})}, "startingOffsets"),
        ({"startingOffsets": "{not json"}, "startingOffsets"),
        ({"minPartitions": "zero"}, "minPartitions"),
        ({"includeHeaders": "yes"}, "includeHeaders"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"assign": json.dumps({TOPIC: [0]}), "subscribe": TOPIC}, "subscribe"),
        ({"assign": json.dumps({TOPIC: [7]})}, "assign"),
        ({"subscribePattern": "(unclosed"}, "subscribePattern"),
        ({"startingTimestamp": str(BASE_TS + 10**9)}, "startingTimestamp"),
    ],
)
def test_bad_option_names_it(
    spark: SparkSession,
    server: ServerProcess,
    orders: Expected,
    options: dict[str, str],
    named: str,
) -> None:
    with pytest.raises(Exception, match=f"option '{named}'"):
        read(spark, server, **options).collect()


def test_missing_bootstrap_names_it(spark: SparkSession) -> None:
    with pytest.raises(Exception, match=r"option 'kafka\.bootstrap\.servers'"):
        spark.read.format("rillet").option("subscribe", TOPIC).load().collect()


def test_data_loss_past_the_end_fails_unless_told_not_to(
    spark: SparkSession, server: ServerProcess, orders: Expected
) -> None:
    ending = json.dumps({TOPIC: {"0": PER_PARTITION + 5, "1": 1, "2": 1}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, server, endingOffsets=ending).collect()
    df = read(spark, server, endingOffsets=ending, failOnDataLoss="false")
    assert df.count() == PER_PARTITION + 2


def test_data_deleted_by_retention_fails_unless_told_not_to(
    spark: SparkSession, server: ServerProcess
) -> None:
    topic = "shrinking"
    server.create_topic(topic, 1, **{"segment.bytes": "1024", "retention.bytes": "1024"})
    with Producer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=0) as p:
        for i in range(300):
            p.send(topic, b"r%03d-" % i + b"x" * 60, partition=0).get(30)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=server.bootstrap) as c:
        deadline = time.monotonic() + 30
        while c.beginning_offsets([tp])[tp] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        log_start = c.beginning_offsets([tp])[tp]
    assert 0 < log_start < 300
    from_zero = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, server, subscribe=topic, startingOffsets=from_zero).collect()
    df = read(spark, server, subscribe=topic, startingOffsets=from_zero, failOnDataLoss="false")
    offsets = sorted(r.offset for r in df.select("offset").collect())
    assert offsets == list(range(offsets[0], 300)) and offsets[0] >= log_start
    assert read(spark, server, subscribe=topic).count() == 300 - offsets[0]


def _produce(server: ServerProcess, topic: str, start: int, n: int, partitions: int) -> None:
    with Producer(bootstrap_servers=server.bootstrap, acks="all") as p:
        for i in range(start, start + n):
            p.send(topic, b"s%d" % i, partition=i % partitions)
        p.flush()


def _run_available_now(
    spark: SparkSession,
    server: ServerProcess,
    topic: str,
    out: Path,
    checkpoint: Path,
    **options: str,
) -> None:
    reader = (
        spark.readStream.format("rillet")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def test_stream_available_now_restarted_from_checkpoint_sees_every_record_once(
    spark: SparkSession, server: ServerProcess, tmp_path: Path
) -> None:
    topic = "stream"
    server.create_topic(topic, 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _produce(server, topic, 0, 300, 2)
    _run_available_now(spark, server, topic, out, checkpoint)
    first = spark.read.parquet(str(out)).collect()
    assert len(first) == 300
    _produce(server, topic, 300, 250, 2)
    _run_available_now(spark, server, topic, out, checkpoint)
    _run_available_now(spark, server, topic, out, checkpoint)  # nothing new: no batch
    rows = spark.read.parquet(str(out)).collect()
    got = sorted((r.partition, r.offset, r.value) for r in rows)
    assert len(got) == len(set(got)) == 550
    want = sorted((i % 2, i // 2, f"s{i}") for i in range(550))
    assert got == want


def test_write_reads_back_identically(spark: SparkSession, server: ServerProcess) -> None:
    topic = "written"
    server.create_topic(topic, 2)
    rows: list[tuple[Any, ...]] = [
        (
            None if i % 5 == 0 else f"k{i}",
            b"value-%d" % i * (i % 4 + 1),
            i % 2,
            [("n", b"%d" % i)] if i % 3 else [],
        )
        for i in range(400)
    ]
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("partition", IntegerType()),
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            ),
        ]
    )
    df = spark.createDataFrame(rows, schema).repartition(3)
    (
        df.write.format("rillet")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    back = read(spark, server, subscribe=topic, includeHeaders="true").collect()
    got = [
        (
            None if r.key is None else r.key.decode(),
            bytes(r.value),
            r.partition,
            [(h.key, bytes(h.value)) for h in r.headers or []],
        )
        for r in back
    ]

    def sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return (row[0] or "", row[1], row[2])

    assert sorted(got, key=sort_key) == sorted(
        [(k, v, p, list(h)) for k, v, p, h in rows], key=sort_key
    )
    # Per partition, one task's records keep their order: offsets are dense.
    for p in (0, 1):
        assert sorted(r.offset for r in back if r.partition == p) == list(range(200))


def test_write_without_value_or_topic_is_refused(
    spark: SparkSession, server: ServerProcess
) -> None:
    df = spark.createDataFrame([("a",)], "key STRING")
    with pytest.raises(Exception, match="'value'"):
        df.write.format("rillet").option("kafka.bootstrap.servers", server.bootstrap).option(
            "topic", "t"
        ).mode("append").save()
    df = spark.createDataFrame([("a",)], "value STRING")
    with pytest.raises(Exception, match="option 'topic'"):
        df.write.format("rillet").option("kafka.bootstrap.servers", server.bootstrap).mode(
            "append"
        ).save()


def _wait_for_rows(query: Any, n: int, timeout_s: float = 90) -> list[int]:
    """Batch sizes of ``query`` once it has read ``n`` rows in all."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert query.exception() is None, query.exception()
        sizes = [p["numInputRows"] for p in query.recentProgress]
        if sum(sizes) >= n:
            return sizes
        time.sleep(0.2)
    raise AssertionError(f"the query read {sum(sizes)} of {n} rows in {timeout_s} s")


def test_stream_max_offsets_per_trigger_and_restart(
    spark: SparkSession, server: ServerProcess, tmp_path: Path
) -> None:
    topic = "capped"
    server.create_topic(topic, 3)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start() -> Any:
        return (
            spark.readStream.format("rillet")
            .option("kafka.bootstrap.servers", server.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "100")
            .load()
            .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="100 milliseconds")
            .start()
        )

    _produce(server, topic, 0, 450, 3)
    query = start()
    try:
        sizes = _wait_for_rows(query, 450)
    finally:
        query.stop()
    assert max(sizes) <= 100 and sum(sizes) == 450, sizes
    _produce(server, topic, 450, 330, 3)
    query = start()
    try:
        sizes = _wait_for_rows(query, 330)
    finally:
        query.stop()
    assert max(sizes) <= 100 and sum(sizes) == 330, sizes
    got = sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect())
    assert got == sorted((i % 3, i // 3, f"s{i}") for i in range(780))


def test_stream_starts_at_latest_by_default(
    spark: SparkSession, server: ServerProcess, tmp_path: Path
) -> None:
    topic = "from-latest"
    server.create_topic(topic, 2)
    _produce(server, topic, 0, 40, 2)
    query = (
        spark.readStream.format("rillet")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("subscribe", topic)
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("memory")
        .queryName("from_latest")
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)
        _produce(server, topic, 40, 10, 2)
        _wait_for_rows(query, 10)
    finally:
        query.stop()
    values = sorted(r.value for r in spark.sql("SELECT value FROM from_latest").collect())
    assert values == sorted(f"s{i}" for i in range(40, 50))


def test_stream_write_copies_a_topic(
    spark: SparkSession, server: ServerProcess, tmp_path: Path
) -> None:
    server.create_topic("copy-src", 2)
    server.create_topic("copy-dst", 1)
    _produce(server, "copy-src", 0, 120, 2)
    query = (
        spark.readStream.format("rillet")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("subscribe", "copy-src")
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("key", "value", "headers")
        .writeStream.format("rillet")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("topic", "copy-dst")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    values = sorted(bytes(r.value) for r in read(spark, server, subscribe="copy-dst").collect())
    assert values == sorted(b"s%d" % i for i in range(120))


def test_write_failure_fails_the_task_with_a_clear_message(
    spark: SparkSession, server: ServerProcess
) -> None:
    server.create_topic("two-partitions", 2)
    df = spark.createDataFrame([("v", 0), ("w", 5)], "value STRING, partition INT")
    with pytest.raises(Exception, match=r"rillet sink: sending a record to topic 'two-partitions'"):
        (
            df.write.format("rillet")
            .option("kafka.bootstrap.servers", server.bootstrap)
            .option("topic", "two-partitions")
            .mode("append")
            .save()
        )


def _values(server: ServerProcess, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value of ``topic`` a consumer with ``isolation`` reads up to its end offsets."""
    c = Consumer(
        bootstrap_servers=server.bootstrap, isolation_level=isolation, auto_offset_reset="earliest"
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    end = c.end_offsets(tps)
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline
            out += [r.value or b"" for rs in c.poll(timeout_ms=500).values() for r in rs]
    finally:
        c.close()
    return out


def test_a_transactional_write_is_committed_with_the_job(
    spark: SparkSession, server: ServerProcess
) -> None:
    server.create_topic("txn-written", 2)
    df = spark.createDataFrame(
        [(f"v{i}", i % 2) for i in range(300)], "value STRING, partition INT"
    ).repartition(3)
    (
        df.write.format("rillet")
        .option("kafka.bootstrap.servers", server.bootstrap)
        .option("topic", "txn-written")
        .option("rillet.transactional.id.prefix", "spark-job-1")
        .mode("append")
        .save()
    )
    committed = _values(server, "txn-written", 2, "read_committed")
    assert sorted(committed) == sorted(b"v%d" % i for i in range(300))
    # Each task's transaction was committed by the driver: no transaction is left open.
    assert sorted(_values(server, "txn-written", 2, "read_uncommitted")) == sorted(committed)


def test_a_failed_transactional_write_leaves_nothing_for_read_committed_readers(
    spark: SparkSession, server: ServerProcess
) -> None:
    server.create_topic("txn-failed", 2)
    rows = [(f"ok{i}", 0) for i in range(50)] + [("bad", 5)]
    df = spark.createDataFrame(rows, "value STRING, partition INT").coalesce(1)
    with pytest.raises(Exception, match="rillet sink"):
        (
            df.write.format("rillet")
            .option("kafka.bootstrap.servers", server.bootstrap)
            .option("topic", "txn-failed")
            .option("rillet.transactional.id.prefix", "spark-job-2")
            .mode("append")
            .save()
        )
    assert _values(server, "txn-failed", 2, "read_committed") == []


def test_registered_without_pushdown_gives_the_same_answer(
    spark: SparkSession, server: ServerProcess, orders: Expected
) -> None:
    rillet.spark.register(spark, filter_pushdown=False)
    try:
        df = read(spark, server).where("partition = 1 AND offset >= 190")
        assert keys(df) == [(1, o) for o in range(190, PER_PARTITION)]
    finally:
        rillet.spark.register(spark, filter_pushdown=FILTER_PUSHDOWN_AVAILABLE)


def test_pyspark_finds_the_source_without_register(
    server: ServerProcess, orders: Expected, tmp_path: Path
) -> None:
    # A fresh Spark (its own process) that never calls rillet.spark.register: PySpark looks
    # up the DefaultSource of the top-level pyspark_rillet module by itself.
    script = tmp_path / "auto.py"
    script.write_text(
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]')"
        ".config('spark.ui.enabled', 'false').getOrCreate()\n"
        "df = (spark.read.format('rillet')\n"
        f"      .option('kafka.bootstrap.servers', '{server.bootstrap}')\n"
        f"      .option('subscribe', '{TOPIC}').load())\n"
        "print('COUNT', df.count())\n"
        "spark.stop()\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"COUNT {len(orders)}" in done.stdout


def test_tls_options_reach_every_client_of_a_write_and_a_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A broker whose client listener is SSL: ``kafka.security.protocol`` and
    ``kafka.ssl.*`` take a transactional write (its tasks' producers and the driver's
    commit) and a read (planning and the tasks' fetches) there."""
    ca = make_ca(tmp_path / "certs")
    node = make_cert(ca, tmp_path / "certs", "node")
    tls_server = ServerProcess(
        tmp_path / "data",
        overrides={
            "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(node.keystore),
        },
    )
    tls_server.start()
    options = {
        "kafka.bootstrap.servers": tls_server.bootstrap,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }
    try:
        df = spark.createDataFrame([(b"secret-%d" % i,) for i in range(50)], "value binary")
        (
            df.write.format("rillet")
            .options(**options)
            .option("topic", "tls-written")
            .option("rillet.transactional.id.prefix", "tls-job")
            .mode("append")
            .save()
        )
        back = spark.read.format("rillet").options(**options).option("subscribe", "tls-written")
        values = sorted(bytes(r.value) for r in back.load().collect())
        assert values == sorted(b"secret-%d" % i for i in range(50))
        plain = spark.read.format("rillet").option("subscribe", "tls-written")
        with pytest.raises(Exception, match=r"TLS|closes plaintext"):
            plain.option("kafka.bootstrap.servers", tls_server.bootstrap).load().collect()
    finally:
        tls_server.kill()
