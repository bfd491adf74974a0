"""Spark reads and writes Rillet topics: a PySpark Python data source named ``rillet`` with
the options and the schema of Spark's Kafka source and sink.

    import rillet.spark
    rillet.spark.register(spark)
    df = (spark.read.format("rillet")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "orders")
          .load())

Needs PySpark >= 4.0 and pyarrow (``pip install 'rillet[spark]'``); filter pushdown needs
PySpark >= 4.1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rillet.spark.options import RilletOptionError
from rillet.spark.planning import DataLossError
from rillet.spark.source import (
    FILTER_PUSHDOWN_AVAILABLE,
    RilletDataSource,
    RilletDataSourceWithPushdown,
    kafka_schema,
)
from rillet.spark.worker import prepare_worker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DataLossError",
    "RilletDataSource",
    "RilletOptionError",
    "kafka_schema",
    "register",
]

_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

# Spark's Python workers import this package to run the source (see rillet.spark.worker).
prepare_worker()


def register(spark: SparkSession, *, filter_pushdown: bool | None = None) -> None:
    """Register the ``rillet`` format with ``spark``.

    Filters on ``partition``, ``topic`` and ``offset`` (and lower bounds on ``timestamp``)
    narrow the fetched offset ranges when PySpark supports pushdown (>= 4.1) and
    ``spark.sql.python.filterPushdown.enabled`` is true. ``filter_pushdown=None`` follows
    that conf as it is now; True also sets it; False registers the source without pushdown.
    """
    if filter_pushdown is None:
        enabled = str(spark.conf.get(_PUSHDOWN_CONF, "false")).lower() == "true"
        filter_pushdown = FILTER_PUSHDOWN_AVAILABLE and enabled
    elif filter_pushdown:
        if not FILTER_PUSHDOWN_AVAILABLE:
            raise RuntimeError("filter pushdown needs PySpark >= 4.1")
        spark.conf.set(_PUSHDOWN_CONF, "true")
    source = RilletDataSourceWithPushdown if filter_pushdown else RilletDataSource
    spark.dataSource.register(source)
