"""The streaming sink over the network (``writeStream.format("xstream")
.option("url", ...)``, storage/spark/network.py ``Conn.add_once``):
exactly once without a shared file system, on ``xs serve`` and on a real
``redis-server`` alike -- a retried task, a replayed micro-batch and two
attempts of one task at once each add the task's rows once; a task whose
rows the server would refuse adds nothing, marker included."""
import threading

import pytest

pytest.importorskip("pyspark")
redis_py = pytest.importorskip("redis")

from conftest import new_store  # noqa: E402
from conftest import xs_json as xs  # noqa: E402
from tests.spark.test_spark_network import any_server, redis_server, serve  # noqa: E402,F401 (fixtures)


def writer(url, producer="p1"):
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    from storage.spark import XStreamStreamWriter
    schema = StructType([StructField("fields", MapType(StringType(), StringType())),
                         StructField("id", StringType())])
    return XStreamStreamWriter({"url": url, "stream": "out", "producer": producer}, schema)


def rows(*values, ids=None):
    return [{"fields": {"k": v}, "id": None if ids is None else ids[n]} for n, v in enumerate(values)]


def values(r, stream="out"):
    return [f[b"k"].decode() for _, f in r.xrange(stream)]


def test_a_task_adds_its_rows_once_however_often_it_runs(any_server):  # noqa: F811 (the fixture)
    url, r = any_server
    w = writer(url)
    first = w.write_batch(7, 0, iter(rows("0", "1", "2")))
    again = w.write_batch(7, 0, iter(rows("0", "1", "2")))   # a retried task, a replayed batch
    assert (first.rows, first.skipped, again.rows, again.skipped) == (3, False, 0, True)
    assert w.write_batch(7, 1, iter(rows("0"))).rows == 1      # another task of the same batch
    assert w.write_batch(8, 0, iter(rows("0", "1"))).rows == 2  # the next batch
    assert w.write_batch(8, 0, iter(rows("0", "1"))).skipped
    assert values(r) == ["0", "1", "2", "0", "0", "1"]
    (progress,) = [k for k in r.keys("spark-sink:*")]
    assert [i.split(b"-")[0] for i, _ in r.xrange(progress)] == [b"8"]   # batch 7's markers dropped with batch 8
    with pytest.raises(ValueError, match="already records micro-batch 8"):
        w.write_batch(3, 0, iter(rows("x")))                   # an older batch: another query, or a reset checkpoint
    assert writer(url, "p2").write_batch(3, 0, iter(rows("y"))).rows == 1   # another producer is independent
    assert values(r)[-1] == "y"


def test_a_task_the_server_would_refuse_in_part_adds_nothing_not_even_its_marker(any_server):  # noqa: F811 (the fixture)
    url, r = any_server
    r.xadd("out", {"k": "top"}, id="100-0")
    w = writer(url)
    with pytest.raises(ValueError, match="equal or smaller than the target stream top item"):
        w.write_batch(1, 0, iter(rows("a", "b", ids=["200-0", "50-0"])))
    assert values(r) == ["top"] and r.keys("spark-sink:*") == []
    assert w.write_batch(1, 0, iter(rows("a", "b", ids=["200-0", "300-0"]))).rows == 2
    assert values(r) == ["top", "a", "b"]


def test_two_attempts_of_one_task_at_once_add_its_rows_once(any_server):  # noqa: F811 (the fixture)
    url, r = any_server
    go = threading.Barrier(2)
    got = []

    def attempt():
        w = writer(url)
        go.wait()
        got.append(w.write_batch(4, 0, iter(rows(*[str(i) for i in range(200)]))))
    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted((c.rows, c.skipped) for c in got) == [(0, True), (200, False)]
    assert values(r) == [str(i) for i in range(200)]


def test_a_streaming_query_writes_over_the_network_and_a_replayed_batch_adds_nothing(spark, tmp_path, serve):  # noqa: F811
    import os

    from tests.spark.test_spark_streaming import available_now, stream_df
    src, ckpt = tmp_path / "src", tmp_path / "ckpt"
    xs(src, *["XADD in * n %d" % i for i in range(12)])
    s = serve(new_store(tmp_path / "dst"))
    url = "redis://127.0.0.1:%d" % s.port

    def run():
        q = available_now(lambda: stream_df(spark, src, "in", maxEntriesPerTrigger="5").select("fields")
                          .writeStream.format("xstream").option("url", url).option("stream", "out")
                          .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        return [(p["batchId"], p["numInputRows"]) for p in q.recentProgress]

    r = redis_py.Redis(port=s.port)
    assert [n for _, n in run() if n] == [5, 5, 2]
    assert [f[b"n"] for _, f in r.xrange("out")] == [b"%d" % i for i in range(12)]
    for f in ("2", ".2.crc"):      # the driver died after the sink wrote batch 2, before Spark recorded it
        if os.path.exists(str(ckpt / "commits" / f)):
            os.remove(str(ckpt / "commits" / f))
    assert (2, 2) in run()                                   # the replay ran through the sink
    assert [f[b"n"] for _, f in r.xrange("out")] == [b"%d" % i for i in range(12)]
