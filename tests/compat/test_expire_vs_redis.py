"""Key expiry on a real clock, side by side with redis-server (issue 26,
item 4): a stream past its TTL answers every command as a missing key,
in a process other than the one that set the TTL; TTL and PTTL count
down as Redis's do; the TTL travels through xs save / restore and xs
export / import; xs ls shows it, xs trim frees what is left on disk,
xs serve reports it in INFO keyspace.  Clock-free replies and errors:
tests/diffcases/13-expire.txt; the engine's bookkeeping:
tests/engine/test_expire.py."""
import json
import subprocess
import time

from tests.conftest import XS, run_xs, xs_json

SETUP = ["XADD s 1-0 f v", "XADD s 2-0 f v", "XGROUP CREATE s g 0", "XREADGROUP GROUP g alice COUNT 1 STREAMS s >",
         "XADD other 1-0 f v"]

AFTER = ["EXISTS s", "TYPE s", "XLEN s", "XRANGE s - +", "XREVRANGE s + -", "XREAD STREAMS s 0",
         "XINFO STREAM s", "XINFO GROUPS s", "XPENDING s g", "XREADGROUP GROUP g alice STREAMS s >",
         "XACK s g 1-0", "XCLAIM s g bob 0 1-0", "XDEL s 1-0", "XTRIM s MAXLEN 0", "XGROUP CREATE s h 0",
         "KEYS *", "EXISTS other", "TTL s", "PTTL s", "EXPIRETIME s", "PERSIST s", "EXPIRE s 100",
         "RENAME s t", "COPY s t", "DEL s",
         "XADD s 7-0 f new", "XRANGE s - +", "XINFO GROUPS s", "TTL s"]


def _redis(redis, lines):
    return [redis.call(*line.split()) for line in lines]


def _sleep_past(deadline_ms):
    while time.time() * 1000 <= deadline_ms + 20:
        time.sleep(0.02)


def test_an_expired_stream_answers_as_a_missing_key_as_in_redis(redis, tmp_path):
    redis.flushall()
    db = str(tmp_path / "s.xs")
    _redis(redis, SETUP)
    xs_json(db, *SETUP)
    assert redis.call("PEXPIRE", "s", "1000") == 1
    assert xs_json(db, "PEXPIRE s 1000", "EXISTS s") == [1, 1]    # this process sets it; another sees it expire
    set_at = time.time() * 1000                                    # both TTLs were set before this
    _sleep_past(set_at + 1000 + 100)
    want = _redis(redis, AFTER)
    p = run_xs(db, AFTER)                       # exits 1: some replies are errors
    got = [json.loads(x) for x in p.stdout.decode().splitlines()]
    assert len(got) == len(AFTER), p.stderr
    for line, w, g in zip(AFTER, want, got):
        assert g == w, (line, g, w)


def test_ttl_and_pttl_count_down_as_in_redis(redis, tmp_path):
    redis.flushall()
    db = str(tmp_path / "s.xs")
    redis.call("XADD", "s", "1-0", "f", "v")
    xs_json(db, "XADD s 1-0 f v")
    redis.call("EXPIRE", "s", "100")
    xs_json(db, "EXPIRE s 100")
    time.sleep(0.3)
    for _ in range(2):
        (ttl, pttl) = xs_json(db, "TTL s", "PTTL s")
        want_ttl, want_pttl = redis.call("TTL", "s"), redis.call("PTTL", "s")
        assert abs(ttl - want_ttl) <= 1 and 95_000 < pttl < 100_000 and abs(pttl - want_pttl) < 3000
    assert redis.call("PEXPIRE", "s", "1600") == 1 and redis.call("TTL", "s") == 2
    assert xs_json(db, "PEXPIRE s 1600", "TTL s") == [1, 2]             # 1.6 s rounds to 2, as in Redis


def _xs(db, *argv, stdin=None):
    p = subprocess.run(XS + ["--db", db] + list(argv), input=stdin, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


def test_the_ttl_survives_save_and_restore_and_export_and_import(tmp_path):
    db, snap = str(tmp_path / "a.xs"), str(tmp_path / "a.snap")
    at = int(time.time() * 1000) + 3_600_000
    xs_json(db, *SETUP, "PEXPIREAT s %d" % at)
    _xs(db, "save", snap)
    _xs(str(tmp_path / "b.xs"), "restore", snap)
    assert xs_json(str(tmp_path / "b.xs"), "PEXPIRETIME s", "PEXPIRETIME other") == [at, -1]
    lines = _xs(db, "export", "--meta")
    stream_line = [json.loads(x) for x in lines.splitlines() if '"type":"stream"' in x.replace(" ", "")]
    assert sorted((x["stream"], x.get("expire-at")) for x in stream_line) == [("other", None), ("s", at)]
    _xs(str(tmp_path / "c.xs"), "import", stdin=lines.encode())
    assert xs_json(str(tmp_path / "c.xs"), "PEXPIRETIME s", "PEXPIRETIME other") == [at, -1]


def test_a_snapshot_restored_after_the_time_leaves_the_stream_expired(tmp_path):
    db, snap = str(tmp_path / "a.xs"), str(tmp_path / "a.snap")
    at = int(time.time() * 1000) + 400
    xs_json(db, *SETUP, "PEXPIREAT s %d" % at)
    _xs(db, "save", snap)
    _sleep_past(at)
    _xs(str(tmp_path / "b.xs"), "restore", snap)
    assert xs_json(str(tmp_path / "b.xs"), "KEYS *") == [["other"]]


def test_ls_shows_the_ttl_and_trim_frees_expired_streams(tmp_path):
    db = str(tmp_path / "a.xs")
    xs_json(db, "XADD keep 1-0 f v", "XADD soon 1-0 f v", "EXPIRE soon 7200", "XADD gone 1-0 f v",
            "PEXPIRE gone 100")
    rows = {r["stream"]: r for r in json.loads(_xs(db, "ls", "--json"))}
    assert rows["keep"]["ttl_ms"] is None and 7_000_000 < rows["soon"]["ttl_ms"] <= 7_200_000
    text = _xs(db, "ls")
    assert text.splitlines()[0].split()[-2:] == ["EXPIRES", "IN"]
    time.sleep(0.3)
    text = _xs(db, "ls")
    assert [line.split()[0] for line in text.splitlines()[1:]] == ["keep", "soon"]
    assert [line.split()[-1] for line in text.splitlines()[1:]] == ["-", "1h"]
    assert "expired: would remove 1 stream past their TTL" in _xs(db, "trim", "--max-len", "10", "--dry-run")
    out = json.loads(_xs(db, "trim", "--max-len", "10", "--json"))
    assert out["expired_streams"] == 1
    assert json.loads(_xs(db, "trim", "--max-len", "10", "--json"))["expired_streams"] == 0


def test_serve_reports_streams_with_a_ttl_in_info_keyspace(tmp_path):
    from tests.harness.served import Served
    s = Served(tmp_path / "store")
    try:
        r = s.client()
        r.xadd("a", {"f": "v"})
        r.xadd("b", {"f": "v"})
        assert r.expire("a", 100) is True and 99 <= r.ttl("a") <= 100
        assert r.info("keyspace") == {"db0": {"keys": 2, "expires": 1, "avg_ttl": 0}}
        assert r.persist("a") is True and r.info("keyspace")["db0"]["expires"] == 0
        assert r.pexpire("b", 1) is True
        time.sleep(0.05)
        assert r.exists("b") == 0 and r.dbsize() == 1
    finally:
        s.stop()


def test_one_shot_commands_see_the_ttl_another_process_set(tmp_path):
    db = str(tmp_path / "a.xs")
    run_xs(db, ["XADD s 1-0 f v"])
    p = subprocess.run(XS + ["--db", db, "PEXPIRE", "s", "200"], capture_output=True, timeout=60)
    assert p.stdout == b"1\n"
    time.sleep(0.3)
    p = subprocess.run(XS + ["--db", db, "XLEN", "s"], capture_output=True, timeout=60)
    assert p.stdout == b"0\n"
