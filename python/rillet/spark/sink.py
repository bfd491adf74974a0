"""``df.write.format("rillet")`` and ``writeStream``: Spark's Kafka sink, on
:class:`~rillet.Producer`.

Columns as in Spark's Kafka sink: ``value`` (string or binary, required), and optionally
``key`` (string or binary), ``topic`` (string; the ``topic`` option overrides it),
``partition`` (int) and ``headers`` (array<struct<key string, value binary>>). Other
columns are ignored. Each Spark task sends its rows with its own producer (acks=all), flushes,
and fails with a message naming the topic and the first error if any record was not
acknowledged, so Spark retries the task (records acknowledged before the failure are written
again by the retry: at-least-once, as with Kafka).

With the option ``rillet.transactional.id.prefix`` the write is exactly once (for
read_committed readers): each task writes in a transaction of its own transactional id,
``<prefix>-<partition id>``, which it leaves open, and Spark's commit on the driver commits
every task's transaction (its abort aborts them). A retried task attempt takes the same
transactional id, which fences the failed attempt and aborts its transaction. Speculative
execution must stay off (``spark.speculation``, off by default): two attempts of one task
would fence each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    Row,
    StringType,
    StructType,
)

from rillet.client.producer import Producer
from rillet.client.producer.transactions import end_transaction
from rillet.client.security import tls_from_properties
from rillet.spark.options import RilletOptionError, SinkOptions

__all__ = ["RilletBatchWriter", "RilletStreamWriter", "check_sink_schema"]

_TEXT_OR_BINARY = (StringType, BinaryType)


def _headers_type_ok(t: DataType) -> bool:
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in t.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], _TEXT_OR_BINARY)
    )


def check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Refuse a DataFrame the sink cannot write, naming the column (Spark's rules)."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise ValueError("rillet sink: required attribute 'value' not found")
    checks: list[tuple[str, bool, str]] = [
        ("value", isinstance(types["value"], _TEXT_OR_BINARY), "string or binary"),
        ("key", isinstance(types.get("key"), _TEXT_OR_BINARY), "string or binary"),
        ("topic", isinstance(types.get("topic"), StringType), "string"),
        ("partition", isinstance(types.get("partition"), IntegerType), "int"),
        ("headers", _headers_type_ok(types.get("headers", StringType())), _HEADERS),
    ]
    for name, ok, wanted in checks:
        if name in types and not ok:
            raise ValueError(
                f"rillet sink: attribute '{name}' must be of type {wanted}, not "
                f"{types[name].simpleString()}"
            )
    if opts.topic is None and "topic" not in types:
        raise RilletOptionError(
            "rillet data source option 'topic': required when the DataFrame has no 'topic' column"
        )


_HEADERS = "array<struct<key:string,value:binary>>"


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    records: int
    # A transactional write: the task's open transaction, for the driver to end.
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return bytes(v)


class _TaskProducer:
    """One task's producer: send, then flush and check every acknowledgement."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        configs: dict[str, Any] = {"bootstrap.servers": opts.bootstrap_servers, "acks": "all"}
        configs.update(dict(opts.producer_configs))
        configs.update(dict(opts.security))
        self.transactional_id: str | None = None
        if opts.transactional_id_prefix is not None:
            self.transactional_id = f"{opts.transactional_id_prefix}-{_partition_id()}"
            configs["transactional.id"] = self.transactional_id
        self.producer = Producer(configs)
        if self.transactional_id is not None:
            self.producer.init_transactions()
            self.producer.begin_transaction()
        self.sent = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def _on_error(self, e: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = e

    def send(
        self,
        topic: str | None,
        key: Any,
        value: Any,
        partition: int | None,
        headers: list[Any] | None,
    ) -> None:
        topic = self.opts.topic or topic
        if topic is None:
            raise ValueError("rillet sink: a row has a null 'topic' and no 'topic' option is set")
        hdrs = [(h["key"], _bytes(h["value"])) for h in headers] if headers else None
        try:
            future = self.producer.send(
                topic, _bytes(value), key=_bytes(key), headers=hdrs, partition=partition
            )
        except Exception as e:
            raise RuntimeError(
                f"rillet sink: sending a record to topic {topic!r} failed: {e}"
            ) from e
        future.add_errback(self._on_error)
        self.sent += 1

    def finish(self) -> SinkCommitMessage:
        try:
            self.producer.flush()
        finally:
            self.producer.close()
        if self.failed:
            raise RuntimeError(
                f"rillet sink: {self.failed} of {self.sent} records were not acknowledged "
                f"(acks=all); the first error: {self.first_error!r}"
            ) from self.first_error
        ids = self.producer.producer_id_and_epoch
        if self.transactional_id is None or ids is None:
            return SinkCommitMessage(self.sent)
        # The transaction stays open: the driver commits it with the job.
        return SinkCommitMessage(self.sent, self.transactional_id, *ids)

    def abort(self) -> None:
        if self.transactional_id is not None:
            # If this fails, the coordinator aborts it at transaction.timeout.ms anyway.
            with contextlib.suppress(Exception):
                self.producer.abort_transaction()
        self.producer.close(0)


def _partition_id() -> int:
    """This task's partition of the write (the same for every attempt of the task)."""
    from pyspark import TaskContext  # only inside a Spark task

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def end_transactions(
    opts: SinkOptions, messages: list[WriterCommitMessage | None], committed: bool
) -> None:
    """The driver's half of a transactional write: commit (or abort) every task's
    transaction."""
    for m in messages:
        if isinstance(m, SinkCommitMessage) and m.transactional_id is not None:
            end_transaction(
                opts.bootstrap_servers,
                m.transactional_id,
                m.producer_id,
                m.producer_epoch,
                committed,
                tls=tls_from_properties(dict(opts.security)),
            )


def _write_arrow(opts: SinkOptions, batches: Iterator[Any]) -> SinkCommitMessage:
    task = _TaskProducer(opts)
    try:
        for batch in batches:
            n = batch.num_rows
            names = batch.schema.names

            def column(
                name: str, names: list[str] = names, batch: Any = batch, n: int = n
            ) -> list[Any]:
                if name in names:
                    return batch.column(names.index(name)).to_pylist()  # type: ignore[no-any-return]
                return [None] * n

            keys, values = column("key"), column("value")
            topics, partitions, headers = column("topic"), column("partition"), column("headers")
            for i in range(n):
                task.send(topics[i], keys[i], values[i], partitions[i], headers[i])
    except BaseException:
        task.abort()
        raise
    return task.finish()


def _write_rows(opts: SinkOptions, rows: Iterator[Row]) -> SinkCommitMessage:
    task = _TaskProducer(opts)
    try:
        for row in rows:
            d = row.asDict(recursive=True)
            task.send(
                d.get("topic"), d.get("key"), d.get("value"), d.get("partition"), d.get("headers")
            )
    except BaseException:
        task.abort()
        raise
    return task.finish()


class RilletBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write_arrow(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.opts, messages, committed=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.opts, messages, committed=False)


class RilletStreamWriter(DataSourceStreamWriter):
    """Each micro-batch's rows are sent and acknowledged before Spark commits the batch
    (at-least-once: a batch that is re-run after a failure is sent again)."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return _write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        end_transactions(self.opts, messages, committed=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        end_transactions(self.opts, messages, committed=False)
