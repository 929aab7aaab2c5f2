"""The Spark data source ``xstream`` (storage/spark/reading.py, writing.py): batch reads of
what xs wrote, ranges, partitions, globs, binary values, and batch
writes read back through xs.  Skipped without pyspark."""
import datetime

import pytest

pyspark = pytest.importorskip("pyspark")

from conftest import run_xs, xs_json  # noqa: E402
from storage.ids import U64  # noqa: E402
from storage.spark import split_range  # noqa: E402

xs = xs_json


def read(spark, db, stream, **opts):
    r = spark.read.format("xstream").option("path", str(db)).option("stream", stream)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def ids_of(df):
    return [r.id for r in df.orderBy("ms", "seq").collect()]


# ================================================================ planning


@pytest.mark.parametrize("first,last,length,n", [
    ((5, 3), (5, 9), 7, 4), ((0, 0), (99, 0), 100, 7), ((10, U64), (11, 0), 2, 3),
    ((1, 0), (1000, 5), 3, 10), ((0, 0), (U64, U64), 10, 4), ((7, 1), (7, 1), 1, 5)])
def test_split_range_covers_the_range_exactly_once_in_order(first, last, length, n):
    parts = split_range(first, last, length, n)
    assert 1 <= len(parts) <= n and len(parts) <= length
    assert parts[0][0] == first and parts[-1][1] == last
    for (lo, hi), (nlo, _) in zip(parts, parts[1:]):
        assert lo <= hi
        assert nlo == ((hi[0] + 1, 0) if hi[1] == U64 else (hi[0], hi[1] + 1))   # adjacent: no gap, no overlap
    assert parts[-1][0] <= parts[-1][1]


# ================================================================= reading


def test_read_what_xs_wrote_ids_fields_duplicates_and_times(spark, tmp_path):
    db = tmp_path / "db"
    xs(db, "XADD s 1700000000123-1 user alice n 1",
       "XADD s 1700000000123-2 a x b y a z",
       'XADD s 1700000000200-0 msg "two\\nlines"')
    rows = read(spark, db, "s", fields_list="true").orderBy("ms", "seq").collect()
    assert [r.id for r in rows] == ["1700000000123-1", "1700000000123-2", "1700000000200-0"]
    assert [(r.stream, r.ms, r.seq) for r in rows] == [("s", 1700000000123, 1), ("s", 1700000000123, 2),
                                                       ("s", 1700000000200, 0)]
    assert rows[0].ts == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000)   # session time zone UTC
    assert rows[0].fields == {"user": "alice", "n": "1"}
    assert rows[1].fields == {"a": "z", "b": "y"}                               # last value wins in the map
    assert [(f.name, f.value) for f in rows[1].fields_list] == [("a", "x"), ("b", "y"), ("a", "z")]
    assert rows[2].fields == {"msg": "two\nlines"}
    assert "fields_list" not in read(spark, db, "s").columns


def test_non_utf8_values_fail_the_default_read_and_come_back_with_binary(spark, tmp_path):
    db = tmp_path / "db"
    xs(db, 'XADD bin 1-1 f "\\xff\\xfeok" g plain')
    with pytest.raises(Exception) as e:
        read(spark, db, "bin").collect()
    assert "is not UTF-8" in str(e.value) and "binary=true" in str(e.value)
    rows = read(spark, db, "bin", binary="true", fields_list="true").collect()
    assert rows[0].fields == {"f": bytearray(b"\xff\xfeok"), "g": bytearray(b"plain")}
    assert [(bytes(f.name), bytes(f.value)) for f in rows[0].fields_list] == [(b"f", b"\xff\xfeok"),
                                                                             (b"g", b"plain")]


def test_ids_too_big_for_a_long_give_null_ms_seq_and_ts_past_9999_is_null(spark, tmp_path):
    db = tmp_path / "db"
    xs(db, "XADD e 253402300799999-9223372036854775807 k a", "XADD e 253402300800000-9223372036854775808 k b",
       "XADD e 9223372036854775808-0 k c", "XADD e 18446744073709551615-18446744073709551615 k d")
    rows = read(spark, db, "e").collect()
    assert [(r.id, r.ms, r.seq, r.ts) for r in rows] == [
        ("253402300799999-9223372036854775807", 253402300799999, 9223372036854775807,
         datetime.datetime(9999, 12, 31, 23, 59, 59, 999000)),
        ("253402300800000-9223372036854775808", 253402300800000, None, None),
        ("9223372036854775808-0", None, 0, None),
        ("18446744073709551615-18446744073709551615", None, None, None)]


def test_spark_sql_sees_one_map_key_per_field_with_its_last_value(spark, tmp_path):
    from pyspark.sql import functions as F
    db = tmp_path / "db"
    # an entry whose fields hold newlines is stored apart from the text-form ones: both in one read
    xs(db, "XADD m 1-0 a x b y a z", 'XADD m 2-0 a "1\\n2" a 3 c "\\n"', "XADD m 3-0 b q")
    df = read(spark, db, "m", fields_list="true").orderBy("id")
    got = df.select("id", F.col("fields")["a"].alias("a"), F.map_keys("fields").alias("k"),
                    F.size("fields_list").alias("n")).collect()
    assert [tuple(r) for r in got] == [("1-0", "z", ["a", "b"], 3), ("2-0", "3", ["a", "c"], 3),
                                       ("3-0", None, ["b"], 1)]
    assert [r.fields for r in df.collect()] == [{"a": "z", "b": "y"}, {"a": "3", "c": "\n"}, {"b": "q"}]
    assert [(f.name, f.value) for f in df.collect()[1].fields_list] == [("a", "1\n2"), ("a", "3"), ("c", "\n")]


def test_every_stored_form_reads_back_as_xrange_gives_it(spark, tmp_path):
    db = tmp_path / "db"
    # runs of one field set, more field sets than a stream interns (records beside shaped entries),
    # duplicate names, a field with a newline (the binary record form), a control byte, sequence
    # numbers wider than 32 bits
    xs(db, *["XADD f %d-%d f%d %d g x" % (1 + i, 4294967290 + i if i % 2 else i, i // 3 % 11, i) for i in range(40)],
       "XADD f 100-0 a x a y", 'XADD f 101-0 m "1\\n2" n z', 'XADD f 102-0 c "\\x0f"',
       "XADD f 103-18446744073709551615 f0 last g x")
    want = xs(db, "XRANGE f - +")[0]
    rows = read(spark, db, "f", fields_list="true", partitions="3").orderBy("ms", "seq").collect()
    assert [[r.id, [x for p in r.fields_list for x in (p.name, p.value)]] for r in rows] == want
    assert rows[40].fields == {"a": "y"} and rows[41].fields == {"m": "1\n2", "n": "z"}
    assert (rows[-1].ms, rows[-1].seq, rows[-1].fields) == (103, None, {"f0": "last", "g": "x"})


def test_a_partition_is_read_in_bounded_batches_covering_every_entry_once(spark, tmp_path):
    from storage.spark import XStreamReader
    from storage.spark.options import _ReadPlan
    db = tmp_path / "db"
    xs(db, *["XADD many %d-%d i %d" % (1 + i // 4, i % 4, i) for i in range(23456)])
    reader = XStreamReader(_ReadPlan({"path": str(db), "stream": "many", "chunk": "999"}))
    (part,) = reader.partitions()
    sizes = [b.num_rows for b in reader.read(part)]
    assert sum(sizes) == 23456 and max(sizes) <= 10000 and len(sizes) == 3    # never the whole partition at once
    df = read(spark, db, "many", chunk="999")
    assert df.count() == 23456
    assert df.selectExpr("count(distinct id)", "sum(cast(fields['i'] as long))").first() == (23456,
                                                                                                23456 * 23455 // 2)


def test_start_end_and_exclusive_bounds(spark, tmp_path):
    db = tmp_path / "db"
    xs(db, *["XADD r %d-%d k v" % (ms, seq) for ms in range(1, 6) for seq in range(2)])
    assert ids_of(read(spark, db, "r", start="2", end="3")) == ["2-0", "2-1", "3-0", "3-1"]
    assert ids_of(read(spark, db, "r", start="(2-0", end="(4-1")) == ["2-1", "3-0", "3-1", "4-0"]
    assert ids_of(read(spark, db, "r", start="4-1")) == ["4-1", "5-0", "5-1"]
    assert ids_of(read(spark, db, "r", end="(1-1")) == ["1-0"]
    assert ids_of(read(spark, db, "r", start="5", end="2")) == []
    assert ids_of(read(spark, db, "missing")) == []


def test_partitions_cover_every_row_exactly_once(spark, tmp_path):
    db = tmp_path / "db"
    lines = ["XADD big %d-%d i %d" % (1000 + 3 * i, 0, i) for i in range(1500)]
    lines += ["XADD big 9000-%d i bunched%d" % (s, s) for s in range(300)]   # one ms, many entries
    xs(db, *lines)
    df = read(spark, db, "big", partitions="4", chunk="97")
    assert df.rdd.getNumPartitions() == 4
    from pyspark.sql.functions import spark_partition_id
    rows = df.select("id", spark_partition_id().alias("p")).collect()
    got = [r.id for r in rows]
    assert len(got) == 1800 and len(set(got)) == 1800
    assert set(got) == {"%d-0" % (1000 + 3 * i) for i in range(1500)} | {"9000-%d" % s for s in range(300)}
    per = {}
    for r in rows:
        per.setdefault(r.p, []).append(r.id)
    assert len(per) == 4 and max(len(v) for v in per.values()) < 1800
    # a sub-range split too
    sub = read(spark, db, "big", partitions="3", start="(1003", end="1099")
    assert sorted(r.id for r in sub.collect()) == ["%d-0" % ms for ms in range(1006, 1100, 3)]


def test_glob_reads_matching_streams_only(spark, tmp_path):
    db = tmp_path / "db"
    xs(db, "XADD orders:eu 1-0 a 1", "XADD orders:us 2-0 a 2", "XADD orders:us 3-0 a 3",
       "XADD other 4-0 a 4", "XADD orders 5-0 a 5")
    rows = read(spark, db, "orders:*", partitions="2").collect()
    assert sorted((r.stream, r.id) for r in rows) == [("orders:eu", "1-0"), ("orders:us", "2-0"),
                                                      ("orders:us", "3-0")]
    assert sorted(r.stream for r in read(spark, db, "o[rt]*").collect()) == \
        ["orders", "orders:eu", "orders:us", "orders:us", "other"]


# ================================================================= writing


def test_write_then_xrange_via_xs(spark, tmp_path):
    db = tmp_path / "db"
    df = spark.createDataFrame([({"user": "ann", "n": "1"},), ({"user": "bob"},)], "fields map<string,string>")
    df.coalesce(1).write.format("xstream").option("path", str(db)).option("stream", "out").mode("append").save()
    (reply,) = xs(db, "XRANGE out - +")
    assert len(reply) == 2
    assert sorted(dict(zip(e[1][0::2], e[1][1::2])).get("user") for e in reply) == ["ann", "bob"]
    assert {"user": "ann", "n": "1"} in [dict(zip(e[1][0::2], e[1][1::2])) for e in reply]


def test_explicit_ids_routing_and_fields_list(spark, tmp_path):
    db = tmp_path / "db"
    rows = [("a", "5-1", {"k": "v1"}), ("b", "7", {"k": "v2"}), (None, "8-*", {"k": "v3"}), ("a", None, {"k": "v4"})]
    df = spark.createDataFrame(rows, "stream string, id string, fields map<string,string>")
    # one task: explicit IDs must reach each stream in increasing order
    df.coalesce(1).write.format("xstream").option("path", str(db)).option("stream", "dflt").mode("append").save()
    a, b, d = xs(db, "XRANGE a - +", "XRANGE b - +", "XRANGE dflt - +")
    assert a[0] == ["5-1", ["k", "v1"]] and len(a) == 2 and a[1][1] == ["k", "v4"]
    assert b == [["7-0", ["k", "v2"]]]
    assert d == [["8-0", ["k", "v3"]]]
    lst = spark.createDataFrame([("9-0", [("x", "1"), ("x", "2")])],
                                "id string, fields_list array<struct<name:string,value:string>>")
    lst.write.format("xstream").option("path", str(db)).option("stream", "dflt").mode("append").save()
    assert xs(db, "XRANGE dflt 9 9") == [[["9-0", ["x", "1", "x", "2"]]]]


def test_read_write_round_trip_keeps_ids_duplicates_and_bytes(spark, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    xs(src, 'XADD s 3-3 a 1 a 2 b "\\x00\\xff"', "XADD s 4-0 c d")
    df = read(spark, src, "s", binary="true", fields_list="true")
    df.write.format("xstream").option("path", str(dst)).mode("append").save()
    assert run_xs(dst, ["XRANGE s - +"], "raw").stdout == run_xs(src, ["XRANGE s - +"], "raw").stdout


def test_a_failed_batch_is_rolled_back_and_earlier_batches_stay(spark, tmp_path):
    db = tmp_path / "db"
    xs(db, "XADD s 10-0 k v")
    df = spark.createDataFrame([("11-0", {"k": "a"}), ("12-0", {"k": "b"}), ("13-0", {"k": "c"}), ("1-0", {"k": "d"})],
                               "id string, fields map<string,string>")
    w = df.coalesce(1).write.format("xstream").option("path", str(db)).option("stream", "s").option("batch_size", "2")
    with pytest.raises(Exception) as e:
        w.mode("append").save()
    assert "equal or smaller than the target stream top item" in str(e.value)
    assert [x[0] for x in xs(db, "XRANGE s - +")[0]] == ["10-0", "11-0", "12-0"]


# ================================================================== errors


@pytest.mark.parametrize("opts,text", [
    ({"partitions": "0"}, "option partitions must be a positive integer"),
    ({"start": "abc"}, "option start='abc' is not a stream ID"),
    ({"binary": "maybe"}, "option binary must be true or false"),
    ({"partiton": "2"}, "unknown read option(s) partiton"),
])
def test_bad_read_options_give_a_clear_error(spark, tmp_path, opts, text):
    db = tmp_path / "db"
    xs(db, "XADD s 1-0 a 1")
    with pytest.raises(Exception) as e:
        read(spark, db, "s", **opts).collect()
    msg = str(e.value)
    assert "xstream: " + text in msg
    assert "at org.apache.spark" not in msg     # the Python error, not a JVM stack trace


def test_bad_writes_give_a_clear_error(spark, tmp_path):
    db = tmp_path / "db"
    df = spark.createDataFrame([({"k": "v"},)], "fields map<string,string>")
    with pytest.raises(Exception) as e:
        df.write.format("xstream").option("path", str(db)).mode("append").save()
    assert "xstream: option 'stream' or a 'stream' column is required" in str(e.value)
    with pytest.raises(Exception) as e:
        df.write.format("xstream").option("path", str(db)).option("stream", "s").mode("overwrite").save()
    assert "only mode('append') is supported" in str(e.value)
    bad = spark.createDataFrame([("nope", {"k": "v"})], "id string, fields map<string,string>")
    with pytest.raises(Exception) as e:
        bad.write.format("xstream").option("path", str(db)).option("stream", "s").mode("append").save()
    assert "xstream: id 'nope' is not an XADD ID" in str(e.value)


def _writer(db, batch_size):
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    from storage.spark import XStreamWriter
    schema = StructType([StructField("stream", StringType()), StructField("id", StringType()),
                         StructField("fields", MapType(StringType(), StringType()))])
    return XStreamWriter({"path": str(db), "batch_size": str(batch_size)}, schema)


FAR = 99999999999999


def test_a_write_mixing_automatic_and_given_ids_adds_what_one_xadd_at_a_time_adds(tmp_path):
    # runs of automatic IDs take the bulk path (Txn.add_auto_many); the
    # IDs after a far-future given ID are that ID's next sequences
    db = tmp_path / "db"
    rows = [("a", "%d-0" % FAR, "0", 0), ("b", "%d-0" % FAR, "1", 0), ("a", None, "2", 1), ("a", "*", "3", 2),
            ("b", None, "4", 1), ("a", None, "5", 3), ("b", "%d-5" % FAR, "6", 5), ("b", None, "7", 6),
            ("a", None, "8", 4)]
    got = _writer(db, 4).write(iter({"stream": s, "id": i, "fields": {"n": n}} for s, i, n, _ in rows))
    assert got.rows == 9
    ref = tmp_path / "ref"
    xs(ref, *["XADD %s %d-%d n %s" % (s, FAR, seq, n) for s, _, n, seq in rows])
    for key in ("a", "b"):
        assert xs(db, "XRANGE %s - +" % key) == xs(ref, "XRANGE %s - +" % key)
        assert xs(db, "XINFO STREAM %s" % key) == xs(ref, "XINFO STREAM %s" % key)


def test_a_row_the_bulk_path_refuses_rolls_its_batch_back_with_an_error_naming_it(tmp_path):
    db = tmp_path / "db"
    w = _writer(db, 2)
    w.write(iter([{"stream": "s", "id": None, "fields": {"n": "0"}}, {"stream": "s", "id": None, "fields": {"n": "1"}}]))
    top = "%d-%d" % (U64, U64)
    with pytest.raises(ValueError) as e:
        w.write(iter([{"stream": "s", "id": top, "fields": {"n": "2"}}, {"stream": "s", "id": "*", "fields": {"n": "3"}}]))
    assert "adding to stream 's' (id *): ERR The stream has exhausted the last possible ID" in str(e.value)
    assert "this batch of 2 rows was rolled back, earlier batches stay" in str(e.value)
    assert [f[1] for _, f in xs(db, "XRANGE s - +")[0]] == ["0", "1"]


# ========================================================= driver-side reads


def test_driver_read_gives_the_same_rows_as_executor_reads(spark, tmp_path):
    db = tmp_path / "db"
    xs(db, *["XADD d:%d %d-%d i %d" % (i % 2, 10 + i // 3, i % 3, i) for i in range(60)])
    normal = read(spark, db, "d:*", partitions="3", fields_list="true")
    driver = read(spark, db, "d:*", partitions="3", fields_list="true", driver_read="true")
    assert driver.schema == normal.schema
    assert driver.rdd.getNumPartitions() == normal.rdd.getNumPartitions() == 6
    key = ["stream", "ms", "seq"]
    assert driver.orderBy(key).collect() == normal.orderBy(key).collect()
    assert driver.count() == 60
