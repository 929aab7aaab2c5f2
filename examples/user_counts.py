"""Per-user counts over an event stream, written back to a stream: a
complete Spark job on an xs store through the ``xstream`` data source.

    python examples/user_counts.py --db STORE --source events --target user_counts
                                   [--master local[2]] [--start ID] [--end ID]

Events are entries with a ``user`` field (``XADD events * user u123
action click ...``); entries without one are counted under user "-".
``--source`` is a stream name or a glob (``events:*``).  For each user,
one entry is appended to ``--target`` (in user order):

    user u123  events 42  clicks 17  first <id>  last <id>

``events``: how many entries of the user were read; ``clicks``: how many
of them had ``action click``; ``first`` / ``last``: the IDs of the user's
first and last entry (the smallest and largest ID: entries of several
streams are compared by ID).  ``--start`` / ``--end`` bound the read
(XRANGE syntax, ``(`` for exclusive).  Each run appends a new set of
counts: read the latest with ``xs XREVRANGE user_counts + - COUNT N``.

Needs the ``spark`` extra (pyspark, pyarrow) and Java 17.  The store
must be on the host that runs the executors (``local[...]``, or a
cluster whose workers run on the store's host); see the README's
Apache Spark section.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Per-user counts of an xs event stream, written back to a stream.")
    ap.add_argument("--db", required=True, help="the xs store (a directory)")
    ap.add_argument("--source", required=True, help="stream name or glob to read (events, events:*)")
    ap.add_argument("--target", required=True, help="stream to append the counts to")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--start", default="-", help="first ID to read (default -)")
    ap.add_argument("--end", default="+", help="last ID to read (default +)")
    ap.add_argument("--partitions", type=int, default=2, help="read partitions per stream (default 2)")
    return ap.parse_args(argv)


def session(master):
    """A SparkSession whose Python workers run this interpreter and can
    import ``storage`` (the data source's module) from this checkout."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(master).appName("xs user counts")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def user_counts(spark, db, source, start="-", end="+", partitions=2):
    """A DataFrame of (user, events, clicks, first, last) over the
    entries of ``source``, one row per user, in user order."""
    from pyspark.sql import functions as F
    events = (spark.read.format("xstream").option("path", db).option("stream", source)
              .option("start", start).option("end", end).option("partitions", partitions).load())
    user = F.coalesce(F.col("fields")["user"], F.lit("-"))
    click = F.when(F.col("fields")["action"] == "click", 1).otherwise(0)
    # IDs compare by (ms, seq), not as text: min/max of the struct
    key = F.struct(F.col("ms"), F.col("seq"), F.col("id"))
    return (events.groupBy(user.alias("user"))
            .agg(F.count(F.lit(1)).alias("events"), F.sum(click).alias("clicks"),
                 F.min(key)["id"].alias("first"), F.max(key)["id"].alias("last"))
            .orderBy("user"))


def as_entries(counts):
    """The counts as rows the data source writes: a ``fields`` map."""
    from pyspark.sql import functions as F
    return counts.select(F.create_map(
        F.lit("user"), F.col("user"),
        F.lit("events"), F.col("events").cast("string"),
        F.lit("clicks"), F.col("clicks").cast("string"),
        F.lit("first"), F.col("first"),
        F.lit("last"), F.col("last")).alias("fields"))


def main(argv=None):
    args = parse_args(argv)
    try:
        import storage.spark  # noqa: F401
    except ImportError:
        sys.path.insert(0, ROOT)            # run from a checkout that is not installed
    from storage.spark import register
    spark = session(args.master)
    try:
        register(spark)
        counts = user_counts(spark, args.db, args.source, args.start, args.end, args.partitions).cache()
        n = counts.count()
        # one partition: the entries are appended in user order, in one task
        (as_entries(counts).coalesce(1).write.format("xstream").option("path", args.db)
         .option("stream", args.target).mode("append").save())
        print("%d users written to %s" % (n, args.target))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
