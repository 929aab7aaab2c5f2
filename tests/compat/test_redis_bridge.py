"""xs export --to redis:// and xs import --from redis:// against a
private redis-server: entry IDs, stream metadata, groups, consumers and
the PEL (owners, delivery times and counts) survive both ways."""
import json

import pytest

from tests.cli.test_snapshot import NOW, frozen_clock, invoke, session  # noqa: F401

BUILD = [
    [b"XADD", b"s", b"1-1", b"a", b"1", b"b", b"2", b"a", b"3"],
    [b"XADD", b"s", b"2-0", b"x", b"y"],
    [b"XADD", b"s", b"3-0", b"\xff\xfe", b"\x00bin"],
    [b"XADD", b"s", b"4-0", b"x", b"w"],
    [b"XADD", b"s", b"5-0", b"x", b"v"],
    [b"XDEL", b"s", b"2-0"],
    [b"XGROUP", b"CREATE", b"s", b"g1", b"0"],
    [b"XGROUP", b"CREATE", b"s", b"g2", b"$", b"ENTRIESREAD", b"3"],
    [b"XGROUP", b"CREATE", b"s", b"g3", b"1-1"],
    [b"XREADGROUP", b"GROUP", b"g1", b"alice", b"COUNT", b"2", b"STREAMS", b"s", b">"],
    [b"XREADGROUP", b"GROUP", b"g1", b"bob", b"COUNT", b"5", b"STREAMS", b"s", b">"],
    [b"XCLAIM", b"s", b"g1", b"carol", b"0", b"5-0", b"TIME", b"1699999990000", b"RETRYCOUNT", b"7"],
    [b"XGROUP", b"CREATECONSUMER", b"s", b"g2", b"erin"],
    [b"XADD", b"empty", b"9-9", b"k", b"v"],
    [b"XDEL", b"empty", b"9-9"],
    [b"XSETID", b"empty", b"10-0", b"ENTRIESADDED", b"50", b"MAXDELETEDID", b"9-9"],
]
STREAMS = ["s", "empty"]


@pytest.fixture
def r(redis):
    redis.flushall()
    yield redis
    redis.flushall()


def url(redis):
    return "redis://127.0.0.1:%d" % redis.port


def comparable(full, redis7=True):
    """XINFO STREAM FULL without what cannot be carried over: consumer
    seen/active times (Redis sets them on XCLAIM), radix-tree internals,
    xs's nacked-count (Redis 7 has no XNACK) and the idmp-* fields that
    Redis 8.6+ shows for every stream (the 7.0 test server has none)."""
    full = dict(full)
    drop = ("radix-tree-keys", "radix-tree-nodes")
    if redis7:
        drop += ("idmp-duration", "idmp-maxsize", "pids-tracked", "iids-tracked", "iids-added", "iids-duplicates")
    for k in drop:
        full.pop(k, None)
    groups = []
    for g in full.get("groups", []):
        g = dict(g)
        g.pop("nacked-count", None)
        g["consumers"] = [{k: v for k, v in c.items() if k not in ("seen-time", "active-time")}
                          for c in g["consumers"]]
        groups.append(g)
    full["groups"] = groups
    return full


def xs_json(s, *argv):
    return json.loads(s.render(s.execute([a if isinstance(a, bytes) else a.encode() for a in argv])))


def build(db):
    s = session(db)
    for argv in BUILD:
        assert not hasattr(s.execute(argv), "text"), argv
    return s


def test_export_to_redis_preserves_ids_metadata_groups_and_pel(tmp_path, r):
    s = build(tmp_path / "src")
    res = invoke(["--db", str(tmp_path / "src"), "export", "--to", url(r)])
    assert res.exit_code == 0, res.stderr
    assert "exported 2 streams, 4 entries" in res.stderr
    for name in STREAMS:
        assert r.call("XRANGE", name, "-", "+") == xs_json(s, "XRANGE", name, "-", "+")
        want = comparable(xs_json(s, "XINFO", "STREAM", name, "FULL"))
        got = comparable(r.call("XINFO", "STREAM", name, "FULL"))
        assert got == want
        assert r.call("XPENDING", name, "g1") == xs_json(s, "XPENDING", name, "g1") if name == "s" else True


def test_export_to_redis_refuses_existing_keys_unless_replace(tmp_path, r):
    build(tmp_path / "src")
    r.call("XADD", "s", "1-0", "theirs", "1")
    res = invoke(["--db", str(tmp_path / "src"), "export", "--to", url(r)])
    assert res.exit_code == 1 and "already exists" in res.stderr
    assert r.call("XLEN", "s") == 1
    res = invoke(["--db", str(tmp_path / "src"), "export", "--to", url(r), "--replace", "s"])
    assert res.exit_code == 0, res.stderr
    assert r.call("XLEN", "s") == 4
    assert r.call("EXISTS", "empty") == 0


def test_import_from_redis_round_trips_exactly(tmp_path, r):
    s = build(tmp_path / "src")
    assert invoke(["--db", str(tmp_path / "src"), "export", "--to", url(r)]).exit_code == 0
    res = invoke(["--db", str(tmp_path / "dst"), "import", "--from", url(r)])
    assert res.exit_code == 0, res.stderr
    assert "imported 2 streams, 4 entries" in res.stderr
    d = session(tmp_path / "dst")
    for name in STREAMS:
        assert xs_json(d, "XRANGE", name, "-", "+") == xs_json(s, "XRANGE", name, "-", "+")
        assert comparable(xs_json(d, "XINFO", "STREAM", name, "FULL"), False) == \
            comparable(xs_json(s, "XINFO", "STREAM", name, "FULL"), False)
        assert xs_json(d, "XINFO", "GROUPS", name) == xs_json(s, "XINFO", "GROUPS", name)
    for q in (["XPENDING", "s", "g1"], ["XPENDING", "s", "g1", "-", "+", "10"],
              ["XPENDING", "s", "g3", "-", "+", "10"]):
        assert xs_json(d, *q) == xs_json(s, *q)


def test_import_from_redis_of_a_redis_built_stream(tmp_path, r):
    """Data that never saw xs: built with redis commands, imported, then
    compared with what redis itself says."""
    r.call("XADD", "ev", "100-1", "k", "v", "k", "v2")
    r.call("XADD", "ev", "100-2", "k", "v")
    r.call("XADD", "ev", "200-0", "k", "v")
    r.call("XDEL", "ev", "100-2")
    r.call("XGROUP", "CREATE", "ev", "grp", "0")
    r.call("XREADGROUP", "GROUP", "grp", "w1", "COUNT", "1", "STREAMS", "ev", ">")
    r.call("XCLAIM", "ev", "grp", "w2", "0", "200-0", "FORCE", "JUSTID", "RETRYCOUNT", "3", "TIME", str(NOW - 5))
    res = invoke(["--db", str(tmp_path / "dst"), "import", "--from", url(r), "ev"])
    assert res.exit_code == 0, res.stderr
    d = session(tmp_path / "dst")
    assert xs_json(d, "XRANGE", "ev", "-", "+") == r.call("XRANGE", "ev", "-", "+")
    assert comparable(xs_json(d, "XINFO", "STREAM", "ev", "FULL")) == \
        comparable(r.call("XINFO", "STREAM", "ev", "FULL"))


def test_import_from_redis_refuses_existing_streams_and_bad_urls(tmp_path, r):
    r.call("XADD", "s", "1-0", "a", "b")
    d = session(tmp_path / "dst")
    d.execute([b"XADD", b"s", b"5-0", b"mine", b"1"])
    res = invoke(["--db", str(tmp_path / "dst"), "import", "--from", url(r)])
    assert res.exit_code == 1 and "already exists" in res.stderr
    assert d.execute([b"XLEN", b"s"]) == 1
    res = invoke(["--db", str(tmp_path / "dst"), "import", "--from", url(r), "--replace"])
    assert res.exit_code == 0
    assert xs_json(d, "XRANGE", "s", "-", "+") == [["1-0", ["a", "b"]]]
    res = invoke(["--db", str(tmp_path / "dst"), "import", "--from", "redis://127.0.0.1:1"])
    assert res.exit_code == 1 and "cannot connect" in res.stderr and "Traceback" not in res.stderr
    res = invoke(["--db", str(tmp_path / "dst"), "import", "--from", url(r), "nosuch"])
    assert res.exit_code == 1 and "no such stream" in res.stderr


def test_export_carries_idmp_history_where_the_server_has_xidmprecord(tmp_path, r):
    """A Redis 8.8+ target (here `xs serve`, which has XIDMPRECORD) gets the
    producers' IDMP history: a retried XADD IDMP there is a duplicate.
    Redis 7.0 has no XIDMPRECORD: the history is counted as not carried."""
    from tests.conftest import run_xs
    from tests.harness.served import Served
    src = tmp_path / "src"
    # a real clock (a subprocess): IDMP history expires by entry ID age
    p = run_xs(src, ["XADD s IDMP p1 order-1 * f v", "XADD s IDMP p1 order-2 * f w",
                     "XADD s IDMP p2 order-3 * f x", "XCFGSET s IDMP-DURATION 600 IDMP-MAXSIZE 50",
                     "XADD s IDMP p1 order-1 * f v", "XADD s IDMP p2 order-3 * f x", "XDEL s 0-0",
                     "XINFO STREAM s"])
    assert p.returncode == 0, p.stderr
    replies = [json.loads(l) for l in p.stdout.decode().splitlines()]
    first, gone, hist = replies[0], replies[5], replies[7]
    assert run_xs(src, ["XDEL s %s" % gone]).returncode == 0          # p2's entry: not carried
    s = session(src)
    served = Served(tmp_path / "dst")
    try:
        res = invoke(["--db", str(src), "export", "--to", "redis://127.0.0.1:%d" % served.port])
        assert res.exit_code == 0, res.stderr
        c = served.client()
        info = c.execute_command("XINFO", "STREAM", "s")
        info = dict(zip(info[0::2], info[1::2]))
        assert (info[b"idmp-duration"], info[b"idmp-maxsize"], info[b"iids-tracked"]) == (600, 50, 1)
        assert hist["iids-tracked"] == 2
        n = c.xlen("s")
        dup = c.execute_command("XADD", "s", "IDMP", "p1", "order-1", "*", "f", "v")
        assert c.xlen("s") == n and dup.decode() == xs_json(s, "XRANGE", "s", "-", "+")[-1][0]
        assert first != dup.decode()     # the history recorded after XCFGSET, not before
    finally:
        served.stop()
    res = invoke(["--db", str(src), "export", "--to", url(r)])
    assert res.exit_code == 0, res.stderr
    assert "idmp" in res.stderr, res.stderr
