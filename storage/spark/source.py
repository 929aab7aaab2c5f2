"""The Spark data source ``xstream``: batch reads and writes of a store from PySpark (Python Data Source API)

Register it once per session, then use the format by name::

    from storage.spark import register
    register(spark)
    df = (spark.read.format("xstream").option("path", "/data/store")
          .option("stream", "events:*").option("partitions", 4).load())
    (df.select("fields")          # with its stream and id columns, a row goes back to its own stream and ID
       .write.format("xstream").option("path", "/data/store").option("stream", "copy").mode("append").save())

This module is the data source itself (``XStreamDataSource``: which
reader or writer each use gets) and ``register``; each idea has a module
of its own, whose docstring is its reference:

    options.py     every option, checked on the driver; ``path`` or ``url``
                   (stores served over the network, network.py the wire)
    columns.py     the rows' columns: the schemas and the Arrow batches
    reading.py     the batch read: planning ID ranges, reading them;
                   ``driver_read`` (where executors cannot open the store)
    streaming.py   the streaming read: offsets, micro-batches, groups
    writing.py     the batch write and the exactly-once streaming sink

The names other modules, tests and users' jobs import from here (and,
through the package, from ``storage.spark``) are re-exported below.
"""
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import DataSource

from storage.spark.columns import LONG_MAX, _schema
from storage.spark.options import (
    NET_OPTIONS,
    READ_OPTIONS,
    STREAM_READ_OPTIONS,
    STREAM_WRITE_OPTIONS,
    WRITE_OPTIONS,
    XStreamError,
    _bool,
    _ReadPlan,
)
from storage.spark.reading import (
    XStreamNetPartition,
    XStreamPartition,
    XStreamReader,
    XStreamRowsPartition,
    plan_stream,
    split_range,
)
from storage.spark.streaming import (
    XStreamDriverStreamReader,
    XStreamNetStreamReader,
    XStreamStreamReader,
    batch_ranges,
    cap_ends,
    next_ends,
)
from storage.spark.writing import (
    BATCH_ID_PROPERTY,
    DIGEST,
    IGNORED_WRITE_COLUMNS,
    RUN_ID_PROPERTY,
    XStreamCommit,
    XStreamStreamCommit,
    XStreamStreamWriter,
    XStreamWriter,
    row_digest,
    sink_plan,
)

__all__ = [
    "NAME", "XStreamDataSource", "register",
    # re-exported: the names of each idea's module that others import from here
    "LONG_MAX", "NET_OPTIONS", "READ_OPTIONS", "STREAM_READ_OPTIONS", "WRITE_OPTIONS", "STREAM_WRITE_OPTIONS",
    "XStreamError", "XStreamPartition", "XStreamNetPartition", "XStreamRowsPartition", "XStreamReader",
    "plan_stream", "split_range", "XStreamStreamReader", "XStreamDriverStreamReader", "XStreamNetStreamReader",
    "next_ends", "cap_ends", "batch_ranges", "BATCH_ID_PROPERTY", "RUN_ID_PROPERTY", "IGNORED_WRITE_COLUMNS",
    "DIGEST", "XStreamCommit", "XStreamWriter", "XStreamStreamCommit", "XStreamStreamWriter", "row_digest",
    "sink_plan",
]

NAME = "xstream"


def register(spark):
    """Make ``spark.read.format("xstream")`` and ``df.write.format("xstream")`` available."""
    spark.dataSource.register(XStreamDataSource)


class XStreamDataSource(DataSource):
    """``format("xstream")``: which reader or writer each use gets (options:
    storage/spark/options.py; columns: storage/spark/columns.py)."""

    @classmethod
    def name(cls):
        return NAME

    def schema(self):
        return _schema(_bool(self.options, "binary"), _bool(self.options, "fields_list"),
                       bool(self.options.get("url")))

    def reader(self, schema):
        return XStreamReader(_ReadPlan(self.options))

    def writer(self, schema, overwrite):
        if overwrite:
            raise XStreamError("only mode('append') is supported: an xs stream is an append-only log")
        return XStreamWriter(self.options, schema)

    def streamReader(self, schema):
        plan = _ReadPlan(self.options, streaming=True)
        if plan.url:
            return XStreamNetStreamReader(plan)
        if plan.driver_read:
            # Spark then asks simpleStreamReader() (its documented fallback)
            raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED",
                                             messageParameters={"feature": "streamReader"})
        return XStreamStreamReader(plan)

    def simpleStreamReader(self, schema):
        return XStreamDriverStreamReader(_ReadPlan(self.options, streaming=True))

    def streamWriter(self, schema, overwrite):
        if overwrite:
            raise XStreamError("only the append output mode is supported: an xs stream is an append-only log")
        return XStreamStreamWriter(self.options, schema)
