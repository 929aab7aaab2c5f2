"""The ``xstream`` data source's url mode (storage/spark/options.py,
storage/spark/network.py): stores read and written over the Redis
protocol, through ``xs serve`` and through a real ``redis-server`` (the
``redis`` fixture): the same rows as the path mode, several endpoints as
one source with a ``source`` column, a streaming query restarted from
its checkpoint (a replayed micro-batch re-read over the network), writes
in MULTI/EXEC blocks, and one-line errors naming the endpoint and the
stream.  Skipped without pyspark."""
import base64
import json
import os
import re
import shlex

import pytest

pytest.importorskip("pyspark")
redis_py = pytest.importorskip("redis")

from conftest import ROOT, XS, new_store  # noqa: E402
from conftest import xs_json as xs  # noqa: E402
from tests.harness.served import Served, free_port  # noqa: E402


@pytest.fixture
def serve():
    started = []

    def start(db, *args, **kw):
        s = Served(db, *args, **kw)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


@pytest.fixture
def redis_server(redis):
    """The session's redis-server, emptied; a redis-py client on it with ``.url``."""
    redis.flushall()
    r = redis_py.Redis(port=redis.port)
    r.url = "redis://127.0.0.1:%d" % redis.port
    yield r
    r.close()


@pytest.fixture(params=["xs-serve", "redis-server"])
def any_server(request, tmp_path, serve, redis_server):
    """(url, redis-py client) of an empty server of either kind: xs serve
    on a new store, or the session's redis-server."""
    if request.param == "redis-server":
        return redis_server.url, redis_server
    s = serve(new_store(tmp_path / "served-db"))
    return "redis://127.0.0.1:%d" % s.port, redis_py.Redis(port=s.port)


def read(spark, stream, **opts):
    r = spark.read.format("xstream").option("stream", stream)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def rows_of(df):
    """Sorted (stream, id, [(name, value), ...]) of a read with fields_list."""
    return sorted((r.stream, r.id, [(f.name, f.value) for f in r.fields_list]) for r in df.collect())


def copy_to(client, db, *streams):
    """The entries of ``streams`` of the store ``db``, added with the same IDs through ``client``."""
    pipe = client.pipeline(transaction=False)
    for s in streams:
        (entries,) = xs(db, "XRANGE %s - +" % s)
        for i, fields in entries:
            pipe.execute_command("XADD", s, i, *[base64.b64decode(f["b64"]) if isinstance(f, dict) else f
                                                for f in fields])
    pipe.execute()


def seed(db):
    """Two streams matching ev:* (plain entries, a field given twice, a value
    with a newline: every stored form) and one that does not."""
    lines = ["XADD ev:%s %d-%d user u%d n %d" % ("ab"[i % 2], 1000 + i // 3, i % 3, i % 7, i) for i in range(450)]
    lines += ["XADD ev:a 5000-0 a x b y a z", 'XADD ev:b 5000-0 msg "two\\nlines" k v', "XADD other 1-1 k v"]
    xs(db, *lines)


# ============================================================ batch reads


def test_url_reads_the_rows_of_the_path_read_through_xs_serve_and_redis_server(spark, tmp_path, serve, redis_server):
    db = tmp_path / "db"
    seed(db)
    served = serve(db)
    want = rows_of(read(spark, "ev:*", path=str(db), fields_list="true"))
    assert len(want) == 452
    opts = dict(fields_list="true", partitions="3", chunk="23")          # pages of 23 in partitions of ~75
    via_xs = read(spark, "ev:*", url=served.url, **opts)
    assert via_xs.columns == ["stream", "id", "ms", "seq", "ts", "fields", "fields_list", "source"]
    assert via_xs.rdd.getNumPartitions() == 6                           # 3 per stream, as the path mode plans
    got = via_xs.collect()
    assert {r.source for r in got} == {served.url}
    assert sorted((r.stream, r.id, [(f.name, f.value) for f in r.fields_list]) for r in got) == want
    stats = redis_py.Redis(port=served.port).info("commandstats")
    assert stats["cmdstat_xs.page"]["calls"] >= 20 and "cmdstat_xrange" not in stats   # pages in stored form
    maps = {(r.stream, r.id): r.fields for r in got}
    assert maps[("ev:a", "5000-0")] == {"a": "z", "b": "y"}           # the map keeps the last value, as path does
    assert maps[("ev:b", "5000-0")] == {"msg": "two\nlines", "k": "v"}
    # the same entries in a redis-server
    copy_to(redis_server, db, "ev:a", "ev:b", "other")
    assert rows_of(read(spark, "ev:*", url=redis_server.url, **opts)) == want
    # start / end narrow the read as in the path mode
    narrow = dict(start="(1010-1", end="1100", fields_list="true", partitions="2")
    want = [r for r in want if r[0] == "ev:a" and (1010, 1) < tuple(map(int, r[1].split("-"))) < (1101, 0)]
    assert len(want) == 136
    assert rows_of(read(spark, "ev:a", url=redis_server.url, **narrow)) == want


def test_binary_values_read_over_the_network_as_in_the_path_mode(spark, tmp_path, serve, redis_server):
    db = tmp_path / "db"
    xs(db, 'XADD bin 1-1 f "\\xff\\xfeok" g plain', "XADD bin 2-0 f x f y")
    served = serve(db)
    copy_to(redis_server, db, "bin")
    with pytest.raises(Exception) as e:
        read(spark, "bin", url=served.url).collect()
    assert "is not UTF-8" in str(e.value) and "binary=true" in str(e.value)
    want = read(spark, "bin", path=str(db), binary="true", fields_list="true").orderBy("id").collect()
    for url in (served.url, redis_server.url):
        got = read(spark, "bin", url=url, binary="true", fields_list="true").orderBy("id").collect()
        assert [(r.id, r.fields, r.fields_list) for r in got] == [(r.id, r.fields, r.fields_list) for r in want]
        assert got[1].fields == {"f": bytearray(b"y")}


def test_two_served_stores_read_as_one_and_a_stopped_one_fails_the_read_naming_it(spark, tmp_path, serve):
    a_db, b_db = tmp_path / "edge-1", tmp_path / "edge-2"
    xs(a_db, *["XADD ev:%s %d-0 n a%d" % ("xy"[i % 2], i + 1, i) for i in range(30)])
    xs(b_db, *["XADD ev:x %d-0 n b%d" % (i + 1, i) for i in range(20)], "XADD nope * n 0")
    a, b = serve(a_db), serve(b_db, "--requirepass", "s3cret")
    url = "%s,redis://:s3cret@127.0.0.1:%d" % (a.url, b.port)         # a password in the URL never shows
    df = read(spark, "ev:*", url=url, partitions="2")
    assert df.rdd.getNumPartitions() == 6
    got = sorted((r.source, r.stream, r.fields["n"]) for r in df.collect())
    assert got == sorted([(a.url, "ev:%s" % "xy"[i % 2], "a%d" % i) for i in range(30)] +
                         [(b.url, "ev:x", "b%d" % i) for i in range(20)])
    b.stop()
    with pytest.raises(Exception) as e:
        read(spark, "ev:*", url=url).collect()
    assert re.search(r"xstream: redis://127\.0\.0\.1:%d: cannot connect \([^\n]*refused" % b.port, str(e.value))
    assert "s3cret" not in str(e.value)


# ============================================================ streaming


def test_streaming_over_url_restarts_from_its_checkpoint_replays_a_batch_from_the_network_and_moves_the_group(
        spark, tmp_path, serve):
    from test_spark_streaming import available_now
    a_db, b_db, out, ckpt = tmp_path / "a", tmp_path / "b", tmp_path / "out", tmp_path / "ckpt"
    xs(a_db, *["XADD ev:%s * n a%d" % ("pq"[i % 2], i) for i in range(8)])
    xs(b_db, *["XADD ev:p * n b%d" % i for i in range(4)])
    a, b = serve(a_db), serve(b_db)
    src = spark.readStream.format("xstream").option("url", "%s,%s" % (a.url, b.url)).option("stream", "ev:*") \
        .option("maxEntriesPerTrigger", "5").option("partitions", "2") \
        .option("group", "spark").option("consumer", "job1").load()

    def run():
        q = available_now(lambda: src.select("fields").writeStream.format("xstream").option("path", str(out))
                          .option("stream", "got").option("checkpointLocation", str(ckpt))
                          .trigger(availableNow=True).start())
        return [(p["batchId"], p["numInputRows"]) for p in q.recentProgress if p["numInputRows"]]

    def got():
        (entries,) = xs(out, "XRANGE got - +")
        return sorted(e[1][1] for e in entries)

    def groups():
        """(stream, lag, pending, consumers) of the group "spark" on both hosts."""
        out = []
        for served in (a, b):
            c = redis_py.Redis(port=served.port)
            for name in sorted(c.scan_iter("ev:*")):
                out.extend((name, g["lag"], g["pending"], g["consumers"]) for g in c.xinfo_groups(name)
                           if g["name"] == b"spark")
            c.close()
        return out

    assert [n for _, n in run()] == [5, 5, 2]
    # Spark commits micro-batch N to the source when it plans N+1: the groups trail by the last batch (2)
    assert sum(lag for _, lag, _, _ in groups()) == 2
    assert [(p, c) for _, _, p, c in groups()] == [(0, 1)] * 3
    assert got() == sorted(["a%d" % i for i in range(8)] + ["b%d" % i for i in range(4)])
    last = max(int(f) for f in os.listdir(str(ckpt / "offsets")) if f.isdigit())
    with open(str(ckpt / "offsets" / str(last))) as f:
        offset = json.loads(f.read().splitlines()[-1])
    assert set(offset) == {a.url, b.url} and set(offset[a.url]) == {"ev:p", "ev:q"}   # per endpoint and stream
    # more entries on both hosts and a new stream; the driver died after the sink wrote the last batch
    xs(a_db, *["XADD ev:r * n a%d" % i for i in range(8, 11)])
    xs(b_db, *["XADD ev:p * n b%d" % i for i in range(4, 7)])
    for f in (str(last), ".%d.crc" % last):
        if os.path.exists(str(ckpt / "commits" / f)):
            os.remove(str(ckpt / "commits" / f))
    done = run()
    assert done[0] == (last, 2)                          # the replayed batch, read again over the network
    assert sum(n for _, n in done[1:]) == 6
    assert got() == sorted(["a%d" % i for i in range(11)] + ["b%d" % i for i in range(7)])   # no loss, no repeat
    assert sum(lag for _, lag, _, _ in groups()) == done[-1][1]
    assert len(groups()) == 4


# ================================================================ writes


def test_network_write_then_read_back_on_xs_serve_and_redis_server(spark, tmp_path, serve, redis_server):
    db = new_store(tmp_path / "db")
    served = serve(db)
    rows = [("s1", None, {"k": "v%d" % i}) for i in range(10)] + [("s2", "5-1", {"k": "x"}), ("s2", "7-*", {"k": "y"})]
    df = spark.createDataFrame(rows, "stream string, id string, fields map<string,string>").coalesce(1)
    for target in (served.url, redis_server.url):
        df.write.format("xstream").option("url", target).option("batch_size", "4").mode("append").save()
        back = read(spark, "s*", url=target).collect()
        assert sorted(r.fields["k"] for r in back if r.stream == "s1") == sorted("v%d" % i for i in range(10))
        assert sorted((r.id, r.fields["k"]) for r in back if r.stream == "s2") == [("5-1", "x"), ("7-0", "y")]
        assert {r.source for r in back} == {target}
    # two tasks adding to one stream at once (automatic IDs: nothing watched, neither holds the other up)
    spark.range(300).selectExpr("map('i', string(id)) AS fields").repartition(2).write.format("xstream") \
        .option("url", served.url).option("stream", "many").option("batch_size", "7").mode("append").save()
    (many,) = xs(db, "XRANGE many - +")
    assert sorted(int(e[1][1]) for e in many) == list(range(300))
    (s1,) = xs(db, "XLEN s1")
    assert s1 == 10
    # a block with an ID below its stream's top fails whole, on redis-server too; earlier blocks stay
    bad = spark.createDataFrame([("s3", "1-1"), ("s3", "2-1"), ("s3", "3-1"), ("s3", "3-0"), ("s3", "4-1")],
                                "stream string, id string").selectExpr("stream", "id", "map('k', id) as fields")
    for target, length in ((served.url, lambda: xs(db, "XLEN s3")[0]), (redis_server.url,
                                                                         lambda: redis_server.xlen("s3"))):
        with pytest.raises(Exception) as e:
            bad.coalesce(1).write.format("xstream").option("url", target).option("batch_size", "2") \
                .mode("append").save()
        assert ("xstream: %s stream 's3': adding id 3-0: ERR The ID specified in XADD is equal or smaller than the "
                "target stream top item; nothing of this block of 2 rows was added" % target) in str(e.value)
        assert length() == 2                                  # the first block (1-1, 2-1) only


# ============================================================= bad input


def test_wrong_password_unreachable_endpoint_and_not_a_stream_are_one_line_errors(spark, tmp_path, serve,
                                                                                   redis_server):
    db = tmp_path / "db"
    xs(db, "XADD s 1-1 k v")
    locked = serve(db, "--requirepass", "secret")
    assert read(spark, "s", url=locked.url, password="secret").count() == 1
    assert read(spark, "s", url="redis://:secret@127.0.0.1:%d" % locked.port).count() == 1
    with pytest.raises(Exception) as e:
        read(spark, "s", url=locked.url, password="hunter2x").collect()
    assert re.search(r"xstream: %s: authentication failed \([^\n]*\)" % re.escape(locked.url), str(e.value))
    assert "hunter2x" not in str(e.value)
    nowhere = "redis://127.0.0.1:%d" % free_port()
    with pytest.raises(Exception) as e:
        read(spark, "s", url=nowhere, connect_timeout="2").collect()
    assert re.search(r"xstream: %s: cannot connect \([^\n]*\)" % re.escape(nowhere), str(e.value))
    redis_server.set("k", "v")
    with pytest.raises(Exception) as e:
        read(spark, "k", url=redis_server.url).collect()
    assert "xstream: %s: key 'k' is not a stream (it is a string)" % redis_server.url in str(e.value)
    assert read(spark, "missing", url=redis_server.url).count() == 0     # as the path mode: nothing to read


def test_a_stream_deleted_between_planning_and_reading_fails_naming_endpoint_and_stream(tmp_path, serve,
                                                                                          redis_server):
    from storage.spark import XStreamReader
    from storage.spark.options import _ReadPlan
    db = tmp_path / "db"
    xs(db, *["XADD t:%d %d-0 k v" % (i % 2, i + 1) for i in range(10)])
    served = serve(db)
    copy_to(redis_server, db, "t:0", "t:1")
    for url, delete in ((served.url, lambda: xs(db, "DEL t:1")), (redis_server.url,
                                                                  lambda: redis_server.delete("t:1"))):
        reader = XStreamReader(_ReadPlan({"url": url, "stream": "t:*", "chunk": "2"}))
        parts = reader.partitions()
        assert [p.stream for p in parts] == [b"t:0", b"t:1"]
        delete()
        assert sum(b.num_rows for b in reader.read(parts[0])) == 5
        with pytest.raises(ValueError) as e:
            list(reader.read(parts[1]))
        assert str(e.value) == "xstream: %s stream 't:1': deleted since the read was planned" % url


@pytest.mark.parametrize("opts,text", [
    ({"path": "/x"}, "give option path (a store on the executors' host) or option url"),
    ({"driver_read": "true"}, "option driver_read is for option path"),
    ({"connect_timeout": "0"}, "option connect_timeout must be a positive number of seconds"),
    ({"url": "http://h:1"}, "url 'http://h:1': an endpoint is redis://host:port"),
    ({"url": "redis://h:1,,redis://h:2"}, "option url='redis://h:1,,redis://h:2' has an empty endpoint"),
])
def test_bad_url_options_give_a_clear_error(opts, text):
    from pyspark.sql.datasource import CaseInsensitiveDict

    from storage.spark import XStreamDataSource
    ds = XStreamDataSource(CaseInsensitiveDict({"url": "redis://127.0.0.1:1", "stream": "s", **opts}))
    with pytest.raises(ValueError) as e:
        ds.reader(None)
    assert str(e.value).startswith("xstream: " + text)
    ds = XStreamDataSource(CaseInsensitiveDict({"path": "/x", "stream": "s", "password": "p"}))
    with pytest.raises(ValueError) as e:
        ds.reader(None)
    assert str(e.value) == "xstream: option(s) password need option url"


# ======================================================== the doc's example


def test_the_two_host_example_of_docs_spark_md_runs_as_written(spark, tmp_path, serve):
    """docs/spark.md, "Reading over the network": its ``xs serve`` line
    run for edge-1 and edge-2 (their stores and password file in
    tmp_path, loopback ports for 6380, 127.0.0.1 for 0.0.0.0), then its
    Python block as written, with ``spark`` (hosts and paths mapped)."""
    with open(os.path.join(ROOT, "docs", "spark.md"), encoding="utf-8") as f:
        text = f.read().split("## Reading over the network", 1)[1].split("\n## ", 1)[0]
    (line,) = re.findall(r"^    \$ (xs .* serve .*) &$", text, re.M)
    (code,) = re.findall(r"^```py\n(.*?)^```$", text, re.S | re.M)
    ports = {}
    for host, lines in (("edge-1", ["XADD events:web 1-1 user a", "XADD events:web 2-1 user b",
                                    "XADD events:app 3-1 user a", "XADD other 4-1 user c"]),
                        ("edge-2", ["XADD events:web %d-0 user u%d" % (i + 1, i) for i in range(5)])):
        edge = tmp_path / host
        edge.mkdir()
        xs(edge / "events.xs", *lines)
        (edge / "redis.pass").write_text("pa55-for-both\n")
        ports[host] = free_port()
        argv = shlex.split(line.replace("/srv/edge/", "%s/" % edge).replace("0.0.0.0", "127.0.0.1")
                           .replace("6380", str(ports[host])))
        serve(edge, port=ports[host], argv=XS + argv[1:])
    for host, port in ports.items():
        code = code.replace("%s:6380" % host, "127.0.0.1:%d" % port)
    exec(compile(code.replace("/srv/edge/", "%s/" % (tmp_path / "edge-1")), "docs/spark.md", "exec"),
         {"spark": spark})
    (summary,) = xs(tmp_path / "edge-1" / "events.xs", "XRANGE events-summary - +")
    got = sorted((f["source"], f["stream"], f["entries"]) for f in (dict(zip(e[1][0::2], e[1][1::2]))
                                                                    for e in summary))
    url = "redis://127.0.0.1:%d"
    assert got == sorted([(url % ports["edge-1"], "events:web", "2"), (url % ports["edge-1"], "events:app", "1"),
                          (url % ports["edge-2"], "events:web", "5")])
