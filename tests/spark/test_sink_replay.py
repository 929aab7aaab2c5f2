"""The streaming sink (``writeStream.format("xstream")``,
storage/spark/writing.py ``sink_plan``) stays exactly-once when Spark
replays a micro-batch split differently from the first time (a restart
with another ``partitions``, repartition or coalesce): a task's marker
names its rows (their digests) and its query run, so a replayed task
drops exactly the rows the batch's earlier tasks added and adds the
rest.  In the path mode and over the network (xs serve and redis-server
alike); the writer driven directly (``write_batch``) and through real
streaming queries restarted from their checkpoints.  Skipped without
pyspark."""
import os
import random

import pytest

pytest.importorskip("pyspark")
redis_py = pytest.importorskip("redis")

from conftest import new_store  # noqa: E402
from conftest import xs_json as xs  # noqa: E402
from tests.spark.test_spark_network import redis_server, serve  # noqa: E402,F401 (fixtures)


class PathSink:
    """The sink writing to a store on this host (option path)."""

    def __init__(self, db):
        self.db = db
        self.options = {"path": str(db)}

    def _read(self, stream):
        from storage.options import RangeOptions
        from storage.store import Store
        if not os.path.exists(str(self.db)):
            return []
        s = Store(str(self.db), readonly=True)
        try:
            return s.run(lambda tx: tx.range(stream.encode(), RangeOptions((0, 0), (2 ** 64 - 1, 2 ** 64 - 1))))
        finally:
            s.close()

    def values(self, stream="out"):
        return [dict(zip(f[0::2], f[1::2]))[b"k"].decode() for _, f in self._read(stream) or []]

    def markers(self, progress):
        return [dict(zip(f[0::2], f[1::2])) for _, f in self._read(progress) or []]

    def add(self, stream, id, *fields):
        xs(self.db, "XADD %s %s %s" % (stream, id, " ".join(fields)))

    def ids(self, stream):
        return ["%d-%d" % i for i, _ in self._read(stream) or []]

    def delete(self, stream, ids):
        xs(self.db, "XDEL %s %s" % (stream, " ".join(ids)))


class NetSink:
    """The sink writing over the network (option url) to a server."""

    def __init__(self, url, r):
        self.r = r
        self.options = {"url": url}

    def values(self, stream="out"):
        return [f[b"k"].decode() for _, f in self.r.xrange(stream)]

    def markers(self, progress):
        return [f for _, f in self.r.xrange(progress)]

    def add(self, stream, id, *fields):
        self.r.execute_command("XADD", stream, id, *fields)

    def ids(self, stream):
        return [i.decode() for i, _ in self.r.xrange(stream)]

    def delete(self, stream, ids):
        self.r.xdel(stream, *ids)


@pytest.fixture(params=["path", "xs-serve", "redis-server"])
def sink(request, tmp_path):
    if request.param == "path":
        return PathSink(tmp_path / "db")
    if request.param == "redis-server":
        r = request.getfixturevalue("redis_server")
        return NetSink(r.url, r)
    s = request.getfixturevalue("serve")(new_store(tmp_path / "served-db"))
    return NetSink("redis://127.0.0.1:%d" % s.port, redis_py.Redis(port=s.port))


def writer(sink, producer="p1"):
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    from storage.spark import XStreamStreamWriter
    schema = StructType([StructField("fields", MapType(StringType(), StringType())),
                         StructField("id", StringType())])
    return XStreamStreamWriter(dict(sink.options, stream="out", producer=producer), schema)


def rows(values, ids=None):
    return iter([{"fields": {"k": v}, "id": None if ids is None else ids[n]} for n, v in enumerate(values)])


def split(values, sizes):
    out, at = [], 0
    for n in sizes:
        out.append(values[at:at + n])
        at += n
    assert at == len(values)
    return out


def write(w, batch, run, tasks, only=None):
    """Tasks ``tasks`` (lists of values) of ``batch`` in query run ``run``,
    those numbered in ``only`` (default: all); (added, dropped, skipped) of each."""
    got = []
    for p, values in enumerate(tasks):
        if only is None or p in only:
            c = w.write_batch(batch, p, rows(values), run)
            got.append((c.rows, c.dropped, c.skipped))
    return got


TEN = [str(i) for i in range(10)]


def test_a_batch_written_as_2_tasks_and_replayed_as_3_or_as_1_adds_nothing_again(sink):
    w = writer(sink)
    assert write(w, 5, "run-a", split(TEN, [5, 5])) == [(5, 0, False), (5, 0, False)]
    assert write(w, 5, "run-b", split(TEN, [3, 4, 3])) == [(0, 3, False), (0, 4, False), (0, 3, False)]
    assert write(w, 5, "run-c", [TEN]) == [(0, 10, False)]
    assert write(w, 5, "run-c", [TEN]) == [(0, 0, True)]            # a retried task of the same run
    assert sink.values() == TEN


@pytest.mark.parametrize("replay", [[3, 4, 3], [10], [1, 9], [7, 3]])
def test_a_batch_cut_short_and_replayed_with_another_split_adds_each_row_once(sink, replay):
    w = writer(sink)
    assert write(w, 5, "run-a", split(TEN, [5, 5]), only=[0]) == [(5, 0, False)]   # task 1 never committed
    write(w, 5, "run-b", split(TEN, replay))
    assert sink.values() == TEN


def test_equal_rows_in_one_batch_are_counted_not_merged(sink):
    batch = ["x", "x", "x", "y", "x"]
    w = writer(sink)
    write(w, 2, "run-a", split(batch, [2, 3]), only=[0])             # x x added; x y x lost with the driver
    assert write(w, 2, "run-b", [["x"], ["x"], ["x", "y", "x"]]) == [(0, 1, False), (0, 1, False),
                                                                   (3, 0, False)]
    assert sorted(sink.values()) == sorted(batch)
    write(w, 2, "run-c", [batch[::-1]])                              # all of it again, in another order
    assert sorted(sink.values()) == sorted(batch)


def test_a_replay_of_a_replay_cut_short_stays_exact(sink):
    w = writer(sink)
    write(w, 9, "run-a", split(TEN, [4, 6]), only=[1])
    write(w, 9, "run-b", split(TEN, [2, 2, 2, 2, 2]), only=[0, 3])
    write(w, 9, "run-c", split(TEN, [3, 7]), only=[1])
    write(w, 9, "run-d", split(TEN, [6, 4]))
    assert sorted(sink.values()) == TEN
    write(w, 10, "run-d", [["next"]])                                # the next batch drops batch 9's markers
    assert [m[b"partition"] for m in sink.markers(w.progress)] == [b"0"]


def test_a_task_that_drops_rows_with_explicit_ids_adds_the_others(sink):
    w = writer(sink)
    ids = ["%d-1" % i for i in range(1, 11)]
    w.write_batch(1, 0, rows(TEN[:4], ids[:4]), "run-a")
    c = w.write_batch(1, 0, rows(TEN, ids), "run-b")                  # re-adding 1-1 .. 4-1 would be refused
    assert (c.rows, c.dropped) == (6, 4)
    assert sink.values() == TEN


def test_a_retried_task_with_other_rows_in_the_same_run_fails_and_adds_nothing(sink):
    w = writer(sink)
    w.write_batch(3, 0, rows(TEN[:5]), "run-a")
    with pytest.raises(ValueError, match=r"task 0 ran again in the same query run with other rows \(5 rows, now 4\)"):
        w.write_batch(3, 0, rows(TEN[:4]), "run-a")
    assert sink.values() == TEN[:5]


def test_a_marker_of_an_older_xs_is_trusted_only_for_its_own_task(sink):
    w = writer(sink)
    sink.add("out", "*", "k", "0")
    sink.add("out", "*", "k", "1")
    sink.add(w.progress, "4-*", "partition", "0", "rows", "2")       # as an xs before row digests wrote it
    assert write(w, 4, "run-b", [["0", "1"]]) == [(0, 0, True)]       # same task, same count: as before
    with pytest.raises(ValueError, match="partly written by an older xs .* task 1 \\(3 rows\\) does not match"):
        w.write_batch(4, 1, rows(["2", "3", "4"]), "run-b")
    assert sink.values() == ["0", "1"]


def test_random_splits_crashes_and_restarts_add_each_row_exactly_once(tmp_path):
    """Many batches, each cut short by crashed runs with random splits,
    some tasks retried, then finished by a run with yet another split:
    the output is the input, row for row (values repeat on purpose)."""
    rnd = random.Random(37)
    sink = PathSink(tmp_path / "db")
    w = writer(sink)
    want = []
    for batch in range(40):
        values = [str(rnd.randrange(6)) for _ in range(rnd.randrange(1, 25))]
        want += values
        for run in range(rnd.randrange(4)):                       # crashed runs
            rnd.shuffle(values)                                   # a split need not keep the order either
            cuts = sorted(rnd.sample(range(1, len(values) + 1), rnd.randrange(min(4, len(values)))))
            tasks = split(values, [b - a for a, b in zip([0] + cuts, cuts + [len(values)]) if b > a])
            for p in rnd.sample(range(len(tasks)), rnd.randrange(len(tasks) + 1)):
                for _ in range(rnd.randrange(1, 3)):              # a retried task adds nothing again
                    w.write_batch(batch, p, rows(tasks[p]), "run-%d" % run)
        cuts = sorted(rnd.sample(range(1, len(values)), rnd.randrange(min(4, len(values)))))
        tasks = split(values, [b - a for a, b in zip([0] + cuts, cuts + [len(values)])])
        for p in rnd.sample(range(len(tasks)), len(tasks)):
            w.write_batch(batch, p, rows(tasks[p]), "last")
        assert sorted(sink.values()) == sorted(want), batch


# ------------------------------------------------- real streaming queries


@pytest.mark.parametrize("mode", ["path", "url"])
def test_a_query_restarted_with_other_partitions_writes_each_row_exactly_once(spark, tmp_path, serve, mode):  # noqa: F811
    """A micro-batch written by 3 tasks, one of which never committed (its
    rows and marker gone: the driver died first), replayed by a restart
    with partitions=2 (its tasks hold rows of the lost one and of the
    others), then once more with partitions=4 after a crash that came
    after all the tasks had committed."""
    from tests.spark.test_spark_streaming import available_now, stream_df
    src, dst, ckpt = tmp_path / "src", tmp_path / "dst", tmp_path / "ckpt"
    xs(src, *["XADD in %d-0 k %d" % (i, i) for i in range(1, 41)])
    if mode == "path":
        sink = PathSink(dst)
    else:
        s = serve(new_store(dst))
        sink = NetSink("redis://127.0.0.1:%d" % s.port, redis_py.Redis(port=s.port))
    want = [str(i) for i in range(1, 41)]

    def run(partitions):
        w = stream_df(spark, src, "in", partitions=str(partitions)).select("fields").writeStream.format("xstream")
        for k, v in sink.options.items():
            w = w.option(k, v)
        q = available_now(lambda: w.option("stream", "out").option("producer", "restart")
                          .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        return [(p["batchId"], p["numInputRows"]) for p in q.recentProgress]

    def forget_commit():                          # the driver died before Spark recorded batch 0
        for f in ("0", ".0.crc"):
            if os.path.exists(str(ckpt / "commits" / f)):
                os.remove(str(ckpt / "commits" / f))

    assert (0, 40) in run(3)
    progress = writer(sink, "restart").progress
    marks = sink.markers(progress)
    assert sorted(int(m[b"rows"]) for m in marks) == [13, 13, 14]    # 3 tasks: ms 1-13, 14-26, 27-40
    gone = [i for i, v in zip(sink.ids("out"), sink.values()) if int(v) >= 27]
    (mark_id,) = [i for i, m in zip(sink.ids(progress), marks) if m[b"partition"] == b"2"]
    assert len(gone) == 14
    sink.delete("out", gone)                      # task 2 never committed
    sink.delete(progress, [mark_id])
    forget_commit()
    assert (0, 40) in run(2)                      # task 0 holds ms 1-20, task 1 ms 21-40
    assert sorted(sink.values(), key=int) == want
    forget_commit()
    assert (0, 40) in run(4)
    assert sorted(sink.values(), key=int) == want
