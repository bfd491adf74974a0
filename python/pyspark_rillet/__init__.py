"""Lets PySpark find the ``rillet`` data source by itself.

PySpark (4.0 and later) registers the ``DefaultSource`` of every top-level module whose name
starts with ``pyspark_``, so with Rillet installed ``spark.read.format("rillet")`` works
without calling :func:`rillet.spark.register`. Filter pushdown is registered only by
``rillet.spark.register(spark, filter_pushdown=True)``, because PySpark refuses a source with
``pushFilters`` unless ``spark.sql.python.filterPushdown.enabled`` is set.
"""

from rillet.spark.source import RilletDataSource as DefaultSource

__all__ = ["DefaultSource"]
