"""Structured Streaming through the ``xstream`` data source
(storage/spark/streaming.py): a query restarted from its checkpoint sees every
entry exactly once, ``maxEntriesPerTrigger`` bounds micro-batches, a
consumer group shows Spark's progress (lag 0 after the commit), the
driver-side stream reader, and the sink writing nothing twice when a
micro-batch is replayed.  Skipped without pyspark."""
import os

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable  # noqa: E402

from conftest import xs_json as xs  # noqa: E402


def stream_df(spark, db, stream, **opts):
    r = spark.readStream.format("xstream").option("path", str(db)).option("stream", stream)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def available_now(start):
    """Run the query ``start()`` starts to its end (Trigger.AvailableNow);
    the query.  Spark gives a new Python process 10 s (fixed) to connect
    back; on an overloaded machine that can fail before anything ran, and
    the query is then simply restarted from its checkpoint, as a user would."""
    from pyspark.errors import StreamingQueryException
    for attempt in range(3):
        q = start()
        try:
            q.awaitTermination()
            return q
        except StreamingQueryException as e:
            if "Python worker failed to connect back" not in str(e) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def run_to_parquet(spark, df, out, ckpt):
    """One Trigger.AvailableNow run into a Parquet sink (exactly-once); the
    numbers of input rows of its micro-batches."""
    q = available_now(lambda: df.writeStream.format("parquet").option("path", str(out))
                      .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def parquet_ids(spark, out):
    return sorted((r.stream, r.id) for r in spark.read.parquet(str(out)).select("stream", "id").collect())


def group_info(db, stream, group):
    (groups,) = xs(db, "XINFO GROUPS " + stream)
    return [g for g in groups if g["name"] == group][0]


def expected(db, *streams):
    out = []
    for s in streams:
        (entries,) = xs(db, "XRANGE %s - +" % s)
        out.extend((s, e[0]) for e in entries)
    return sorted(out)


@pytest.mark.parametrize("driver_read", ["false", "true"])
def test_restart_from_checkpoint_reads_every_entry_exactly_once_and_the_group_shows_lag_0(
        spark, tmp_path, driver_read):
    db, out, ckpt = tmp_path / "db", tmp_path / "out", tmp_path / "ckpt"
    xs(db, *["XADD ev:%s * n %d" % ("ab"[i % 2], i) for i in range(23)], "XADD other * n x")
    df = stream_df(spark, db, "ev:*", maxEntriesPerTrigger="10", group="spark", consumer="job1",
                   driver_read=driver_read, partitions="2")
    sizes = run_to_parquet(spark, df, out, ckpt)
    assert parquet_ids(spark, out) == expected(db, "ev:a", "ev:b")
    assert sizes == [10, 10, 3]                             # at most maxEntriesPerTrigger per micro-batch
    # Spark commits micro-batch N to the source when it plans N+1: the group trails by the last batch
    groups = [group_info(db, s, "spark") for s in ("ev:a", "ev:b")]
    assert sum(g["lag"] for g in groups) == sizes[-1]
    assert all(g["pending"] == 0 and g["consumers"] == 1 for g in groups)

    # more entries, in the old streams and in a new one matching the glob; restart from the checkpoint
    xs(db, *["XADD ev:%s * n %d" % ("abc"[i % 3], 100 + i) for i in range(15)])
    sizes = run_to_parquet(spark, df, out, ckpt)
    got = parquet_ids(spark, out)
    assert len(got) == len(set(got)) == 38                  # no duplicates ...
    assert got == expected(db, "ev:a", "ev:b", "ev:c")      # ... and no gaps
    assert sum(group_info(db, s, "spark")["lag"] for s in ("ev:a", "ev:b", "ev:c")) == sizes[-1]
    assert [r["name"] for r in xs(db, "XINFO GROUPS other")[0]] == []


def test_start_dollar_reads_only_new_entries_with_the_batch_schema(spark, tmp_path):
    db, out, ckpt = tmp_path / "db", tmp_path / "out", tmp_path / "ckpt"
    xs(db, "XADD s 5-0 old 1")
    df = stream_df(spark, db, "s", start="$", fields_list="true")
    batch = spark.read.format("xstream").option("path", str(db)).option("stream", "s") \
        .option("fields_list", "true").load()
    assert df.schema == batch.schema
    assert run_to_parquet(spark, df, out, ckpt) == []
    xs(db, "XADD s 6-0 new 1 new 2")
    assert run_to_parquet(spark, df, out, ckpt) == [1]
    rows = spark.read.parquet(str(out)).collect()
    assert [(r.id, r.fields, [tuple(f) for f in r.fields_list]) for r in rows] == \
        [("6-0", {"new": "2"}, [("new", "1"), ("new", "2")])]


def test_sink_writes_nothing_twice_when_spark_replays_a_micro_batch(spark, tmp_path):
    db, ckpt = tmp_path / "db", tmp_path / "ckpt"
    xs(db, *["XADD in * n %d" % i for i in range(12)])

    def run():
        q = available_now(lambda: stream_df(spark, db, "in", maxEntriesPerTrigger="5").select("fields")
                          .writeStream.format("xstream").option("path", str(db)).option("stream", "out")
                          .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        return [(p["batchId"], p["numInputRows"]) for p in q.recentProgress]

    assert [n for _, n in run() if n] == [5, 5, 2]
    (out,) = xs(db, "XRANGE out - +")
    assert [e[1][1] for e in out] == [str(i) for i in range(12)]
    # as if the driver died after the sink wrote batch 2 but before Spark recorded it: Spark replays batch 2
    for f in ("2", ".2.crc"):
        if os.path.exists(str(ckpt / "commits" / f)):
            os.remove(str(ckpt / "commits" / f))
    assert (2, 2) in run()                                  # the replay really ran through the sink
    (out,) = xs(db, "XRANGE out - +")
    assert [e[1][1] for e in out] == [str(i) for i in range(12)]


def test_the_sink_task_is_idempotent_per_batch_and_partition(tmp_path):
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    from storage.spark import XStreamStreamWriter
    db = tmp_path / "db"
    schema = StructType([StructField("fields", MapType(StringType(), StringType()))])
    w = XStreamStreamWriter({"path": str(db), "stream": "out", "producer": "p1"}, schema)
    rows = [{"fields": {"k": str(i)}} for i in range(3)]
    assert (w.write_batch(7, 0, iter(rows)).rows, w.write_batch(7, 0, iter(rows)).skipped) == (3, True)
    assert w.write_batch(7, 1, iter(rows[:1])).rows == 1     # another task of the same batch
    assert w.write_batch(8, 0, iter(rows[:2])).rows == 2     # the next batch
    assert w.write_batch(8, 0, iter(rows[:2])).skipped
    (out,) = xs(db, "XRANGE out - +")
    assert [e[1][1] for e in out] == ["0", "1", "2", "0", "0", "1"]
    with pytest.raises(ValueError) as e:                     # an older batch after a newer one: another query
        w.write_batch(3, 0, iter(rows))
    assert "already records micro-batch 8" in str(e.value)
    other = XStreamStreamWriter({"path": str(db), "stream": "out", "producer": "p2"}, schema)
    assert other.write_batch(3, 0, iter(rows)).rows == 3     # a different producer is independent


def test_commit_moves_the_group_to_the_offset_and_lag_to_0(tmp_path):
    from storage.spark import XStreamStreamReader
    from storage.spark.options import _ReadPlan
    db = tmp_path / "db"
    xs(db, *["XADD g:%d * n %d" % (i % 2, i) for i in range(9)], "XGROUP CREATE g:0 grp 0")
    reader = XStreamStreamReader(_ReadPlan({"path": str(db), "stream": "g:*", "group": "grp",
                                            "consumer": "c1"}, streaming=True))
    start = reader.initialOffset()
    assert start == {"g:0": "0-0", "g:1": "0-0"}             # g:0's group; g:1's created at start
    assert group_info(db, "g:1", "grp")["lag"] == 4
    end = reader.latestOffset(start, ReadAllAvailable())
    (a_last,), (b_last,) = [[xs(db, "XINFO STREAM g:%d" % i)[0]["last-generated-id"]] for i in (0, 1)]
    assert end == {"g:0": a_last, "g:1": b_last}
    (mid,) = xs(db, "XRANGE g:0 - + COUNT 2")
    reader.commit({"g:0": mid[1][0], "g:1": end["g:1"]})
    assert group_info(db, "g:0", "grp")["lag"] == 3          # 5 entries, 2 delivered
    assert group_info(db, "g:1", "grp")["lag"] == 0
    reader.commit(end)
    g = group_info(db, "g:0", "grp")
    assert (g["lag"], g["entries-read"], g["last-delivered-id"], g["consumers"]) == (0, 5, a_last, 1)
    reader.commit(start)                                     # never moves a group back
    assert group_info(db, "g:0", "grp")["last-delivered-id"] == a_last


@pytest.mark.parametrize("opts,text", [
    ({"end": "5"}, "unknown streaming read option(s) end"),
    ({"start": "soon"}, "option start='soon' of a streaming read must be -, $ or an entry ID"),
    ({"maxEntriesPerTrigger": "0"}, "option maxentriespertrigger must be a positive integer"),
    ({"consumer": "c"}, "option 'consumer' needs option 'group'"),
])
def test_bad_streaming_options_give_a_clear_error(tmp_path, opts, text):
    from pyspark.sql.datasource import CaseInsensitiveDict

    from storage.spark import XStreamDataSource
    ds = XStreamDataSource(CaseInsensitiveDict({"path": str(tmp_path / "db"), "stream": "s", **opts}))
    with pytest.raises(ValueError) as e:
        ds.streamReader(None)
    assert str(e.value).startswith("xstream: " + text)


def test_the_sink_needs_a_producer_or_a_checkpoint(tmp_path):
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    from storage.spark import XStreamStreamWriter
    schema = StructType([StructField("fields", MapType(StringType(), StringType()))])

    def writer(**opts):
        return XStreamStreamWriter(CaseInsensitiveDict({"path": str(tmp_path / "db"), "stream": "out", **opts}),
                                   schema)
    with pytest.raises(ValueError) as e:
        writer()
    assert "option 'producer'" in str(e.value)
    a, b = writer(checkpointLocation="/ck/a"), writer(checkpointLocation="/ck/b")
    assert a.progress.startswith("spark-sink:") and a.progress != b.progress
