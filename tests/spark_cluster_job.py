"""A batch job for the standalone-cluster test (tests/spark/test_spark_cluster.py):
run as ``python tests/spark_cluster_job.py MASTER_URL STORE [SERVED_URL]``;
reads every ``ev:*`` stream with executor reads and with a driver-side
read, writes per-user counts back to the stream ``counts``, reads the
store by a path only the driver can resolve (both ways), and, given
SERVED_URL (a store served by ``xs serve``), reads it and writes its
counts with option ``url`` only; prints one JSON line with what it saw.  Its own process: a second SparkContext cannot live in
the test process."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(master, db, served=None):
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from storage.spark import register
    spark = (SparkSession.builder.master(master).appName("xs-cluster-test")
             .config("spark.ui.enabled", "false")
             .config("spark.executor.memory", "512m")
             .config("spark.cores.max", "1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.executorEnv.PYTHONPATH", ROOT)
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .config("spark.task.maxFailures", "1")
             .getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        df = (spark.read.format("xstream").option("path", db).option("stream", "ev:*")
              .option("partitions", "3").load())
        per_stream = {r["stream"]: r["count"] for r in df.groupBy("stream").count().collect()}
        counts = (df.groupBy(F.col("fields")["user"].alias("user")).count()
                  .select(F.create_map(F.lit("user"), F.col("user"), F.lit("n"), F.col("count").cast("string"))
                          .alias("fields")))
        counts.write.format("xstream").option("path", db).option("stream", "counts").mode("append").save()
        driver = (spark.read.format("xstream").option("path", db).option("stream", "ev:*")
                  .option("driver_read", "true").option("partitions", "2").load())
        # The store by a path relative to the driver's working directory: only
        # the driver can open it (an executor runs in its own directory),
        # as on a cluster whose executors are on other hosts.
        rel = os.path.relpath(db)
        driver_only = (spark.read.format("xstream").option("path", rel).option("stream", "ev:*")
                       .option("driver_read", "true").load().count())
        try:
            spark.read.format("xstream").option("path", rel).option("stream", "ev:*").load().count()
            executors_rel = "read"
        except Exception as e:
            executors_rel = "failed: cannot open store" if "cannot open store %s" % rel in str(e) else str(e)
        net = {}
        if served:                  # the executors get a URL, never a store path
            ndf = spark.read.format("xstream").option("url", served).option("stream", "ev:*").load()
            net["url_per_stream"] = {r["stream"]: r["count"] for r in ndf.groupBy("stream").count().collect()}
            net["url_sources"] = sorted({r["source"] for r in ndf.select("source").distinct().collect()})
            (ndf.groupBy(F.col("fields")["user"].alias("user")).count()
             .select(F.create_map(F.lit("user"), F.col("user"), F.lit("n"), F.col("count").cast("string"))
                     .alias("fields"))
             .write.format("xstream").option("url", served).option("stream", "counts").mode("append").save())
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        print(json.dumps({**net, "per_stream": per_stream, "driver_read_count": driver.count(),
                          "driver_read_ids": [r["id"] for r in driver.where("stream = 'ev:a'").orderBy("ms", "seq").limit(3).collect()],
                          "executors": executors, "master": spark.sparkContext.master,
                          "driver_read_relative": driver_only, "executor_read_relative": executors_rel}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
