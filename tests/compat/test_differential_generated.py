"""Differential tests on generated scripts (larger streams, many keys, many
consumers), SCAN iteration compared as sets, and the invariants of
approximate trimming (`~`), which may legitimately differ from Redis on
streams larger than 100 entries."""
import pytest
from test_differential import compare, redis_cli_text, split_args, text_norm, xs_json, xs_run


def adds(key, n, start=1, fields="f v"):
    return ["XADD %s %d-0 %s" % (key, i, fields) for i in range(start, start + n)]


GENERATED = {
    "large_stream_xrange_count_pages": adds("s", 250) + [
        "XLEN s", "XRANGE s - + COUNT 7", "XRANGE s (100-0 + COUNT 5", "XREVRANGE s + - COUNT 3",
        "XRANGE s 120 130", "XREVRANGE s (200 (190", "XRANGE s 249 +",
    ],
    "large_stream_exact_maxlen_trim": adds("s", 250) + [
        "XTRIM s MAXLEN 100", "XLEN s", "XRANGE s - + COUNT 1", "XADD s MAXLEN = 10 251-0 f v",
        "XRANGE s - +", "XINFO STREAM s",
    ],
    "large_stream_exact_minid_trim": adds("s", 250) + [
        "XTRIM s MINID 201", "XLEN s", "XRANGE s - + COUNT 1", "XADD s MINID = 245 251-0 f v",
        "XRANGE s - +",
    ],
    "large_stream_xdel_many_then_info": adds("s", 120) + [
        "XDEL s " + " ".join("%d-0" % i for i in range(1, 121, 3)), "XLEN s",
        "XRANGE s - + COUNT 4", "XINFO STREAM s",
    ],
    "large_pel_xautoclaim_cursor_walk": adds("s", 60) + [
        "XGROUP CREATE s g 0", "XREADGROUP GROUP g bob STREAMS s >",
        "XDEL s 5-0 6-0 7-0 30-0",
        "XAUTOCLAIM s g alice 0 0 COUNT 10", "XAUTOCLAIM s g alice 0 11-0 COUNT 10",
        "XAUTOCLAIM s g alice 0 25-0 COUNT 10 JUSTID", "XAUTOCLAIM s g alice 0 50-0",
        "XPENDING s g", "XPENDING s g - + 5 alice", "XPENDING s g (20 + 3 bob",
    ],
    "many_consumers_in_xinfo": adds("s", 12) + ["XGROUP CREATE s g 0"] + [
        "XREADGROUP GROUP g c%d COUNT 1 STREAMS s >" % i for i in range(12)
    ] + ["XINFO GROUPS s", "XINFO CONSUMERS s g", "XPENDING s g", "XINFO STREAM s FULL",
         "XINFO STREAM s FULL COUNT 3"],
    "many_groups_in_xinfo_groups": adds("s", 3) + [
        "XGROUP CREATE s g%02d %d-0" % (i, i % 4) for i in range(12)
    ] + ["XINFO GROUPS s", "XINFO STREAM s"],
    "many_streams_xread": sum((adds("k%d" % i, 2) for i in range(15)), []) + [
        "XREAD COUNT 1 STREAMS " + " ".join("k%d" % i for i in range(15)) + " 0" * 15,
        "XREAD STREAMS " + " ".join("k%d" % i for i in range(15)) + " 1-0" * 15,
    ],
    "many_keys_exists_del_keys": sum((adds("k%d" % i, 1) for i in range(15)), []) + [
        "KEYS k1*", "EXISTS " + " ".join("k%d" % i for i in range(20)),
        "DEL " + " ".join("k%d" % i for i in range(0, 20, 2)), "KEYS *", "KEYS k?",
        "EXISTS k1 k1 k2 k3",
    ],
    "many_streams_xreadgroup": sum((adds("k%d" % i, 2) for i in range(11)), []) + [
        "XGROUP CREATE k%d g 0" % i for i in range(11)
    ] + [
        "XREADGROUP GROUP g c COUNT 1 STREAMS " + " ".join("k%d" % i for i in range(11)) + " >" * 11,
        "XREADGROUP GROUP g c STREAMS " + " ".join("k%d" % i for i in range(11)) + " 0" * 11,
    ],
    "many_fields_entry": ["XADD s 1-0 " + " ".join("f%d v%d" % (i, i) for i in range(40)),
                          "XRANGE s - +", "XREAD STREAMS s 0"],
}

TEXT_GENERATED = ["many_consumers_in_xinfo_text", "many_streams_xread", "many_fields_entry",
                  "many_streams_xreadgroup", "large_pel_xautoclaim_justid_text"]
GENERATED["many_consumers_in_xinfo_text"] = adds("s", 12) + ["XGROUP CREATE s g 0"] + [
    "XREADGROUP GROUP g c%d COUNT 1 STREAMS s >" % i for i in range(12)] + ["XPENDING s g", "XINFO GROUPS s"]
GENERATED["large_pel_xautoclaim_justid_text"] = adds("s", 30) + [
    "XGROUP CREATE s g 0", "XREADGROUP GROUP g bob STREAMS s >", "XDEL s 3-0 4-0",
    "XAUTOCLAIM s g alice 0 0 COUNT 12 JUSTID", "XAUTOCLAIM s g alice 0 0 COUNT 12",
    "XCLAIM s g carol 0 1-0 2-0 5-0 6-0 7-0 8-0 9-0 10-0 11-0 12-0 JUSTID"]


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_script_replies_match_redis(name, redis, tmp_path):
    failures = compare(redis, tmp_path, GENERATED[name])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("flag", ["--raw", "--no-raw"])
@pytest.mark.parametrize("name", TEXT_GENERATED)
def test_generated_text_output_is_byte_identical_to_redis_cli(name, flag, redis, tmp_path):
    lines = GENERATED[name]
    want = text_norm(redis_cli_text(redis, lines, flag))
    got = text_norm(xs_run(tmp_path / "db", lines, flag.lstrip("-")).stdout)
    assert got == want


# ------------------------------------------------------------------- SCAN


def scan_all(call, extra=()):
    """Iterate SCAN to the end with ``call(args) -> reply``; returns
    (set of keys, number of calls)."""
    seen, cursor, calls = [], "0", 0
    while True:
        reply = call(["SCAN", cursor] + list(extra))
        calls += 1
        assert isinstance(reply, list) and len(reply) == 2, reply
        cursor, keys = reply
        seen.extend(keys)
        if cursor == "0" or calls > 500:
            return set(seen), calls


def xs_caller(db):
    def call(args):
        replies, err = xs_json(db, [" ".join(args)])
        assert len(replies) == 1, err
        return replies[0]
    return call


@pytest.mark.parametrize("extra", [(), ("COUNT", "3"), ("MATCH", "key:1*"), ("MATCH", "key:1*", "COUNT", "4"),
                                   ("TYPE", "stream", "COUNT", "7"), ("TYPE", "hash")],
                         ids=["plain", "count3", "match", "match_count4", "type_stream", "type_hash"])
def test_scan_iteration_visits_the_same_key_set_as_redis(extra, redis, tmp_path):
    lines = ["XADD key:%d 1-0 f v" % i for i in range(40)]
    redis.flushall()
    for l in lines:
        redis.call(*split_args(l.encode()))
    db = tmp_path / "db"
    xs_json(db, lines)
    want, _ = scan_all(lambda a: redis.call(*a), extra)
    got, _ = scan_all(xs_caller(db), extra)
    assert got == want


def test_scan_with_count_pages_through_in_several_calls(tmp_path):
    db = tmp_path / "db"
    xs_json(db, ["XADD key:%d 1-0 f v" % i for i in range(40)])
    keys, calls = scan_all(xs_caller(db), ("COUNT", "5"))
    assert len(keys) == 40 and calls > 1


# ---------------------------------------------------- approximate trimming


@pytest.mark.parametrize("cmd,threshold,limit", [
    ("XTRIM s MAXLEN ~ 100", 100, 10000),
    ("XTRIM s MAXLEN ~ 0", 0, 10000),
    ("XTRIM s MAXLEN ~ 100 LIMIT 50", 100, 50),
    ("XTRIM s MAXLEN ~ 10 LIMIT 150", 10, 150),
    ("XTRIM s MAXLEN ~ 349", 349, 10000),
], ids=["maxlen100", "maxlen0", "maxlen100_limit50", "maxlen10_limit150", "maxlen349"])
def test_approx_maxlen_trim_keeps_threshold_and_respects_limit(cmd, threshold, limit, redis, tmp_path):
    lines = adds("s", 350) + [cmd, "XLEN s", "XRANGE s - + COUNT 1"]
    n = len(lines)
    redis.flushall()
    ref = [redis.call(*split_args(l.encode())) for l in lines]
    got, err = xs_json(tmp_path / "db", lines)
    assert len(got) == n, err
    for side in (ref, got):
        removed, length = side[-3], side[-2]
        assert isinstance(removed, int) and removed + length == 350
        assert length >= threshold
        assert removed <= limit
        first = side[-1][0][0] if side[-1] else None
        assert first == ("%d-0" % (removed + 1) if length else None), "removes the oldest entries"


@pytest.mark.parametrize("cmd,minid,limit", [
    ("XTRIM s MINID ~ 150", 150, 10000),
    ("XTRIM s MINID ~ 351", 351, 10000),
    ("XTRIM s MINID ~ 300 LIMIT 100", 300, 100),
], ids=["minid150", "minid_past_end", "minid300_limit100"])
def test_approx_minid_trim_never_removes_entries_at_or_above_minid(cmd, minid, limit, redis, tmp_path):
    lines = adds("s", 350) + [cmd, "XLEN s", "XRANGE s - + COUNT 1"]
    redis.flushall()
    ref = [redis.call(*split_args(l.encode())) for l in lines]
    got, err = xs_json(tmp_path / "db", lines)
    assert len(got) == len(lines), err
    for side in (ref, got):
        removed, length = side[-3], side[-2]
        assert removed + length == 350
        assert removed <= min(limit, minid - 1)
        if length:
            assert int(side[-1][0][0].split("-")[0]) == removed + 1


def test_approx_xadd_maxlen_keeps_threshold_on_large_stream(redis, tmp_path):
    lines = adds("s", 300) + ["XADD s MAXLEN ~ 50 301-0 f v", "XLEN s", "XADD s MAXLEN ~ 50 LIMIT 100 302-0 f v",
                              "XLEN s", "XINFO STREAM s"]
    redis.flushall()
    ref = [redis.call(*split_args(l.encode())) for l in lines]
    got, err = xs_json(tmp_path / "db", lines)
    assert len(got) == len(lines), err
    for side in (ref, got):
        assert side[-5] == "301-0" and side[-3] == "302-0"
        assert 50 <= side[-4] <= 301
        assert 50 <= side[-2] and side[-4] + 1 - side[-2] <= 100
        assert side[-1]["length"] == side[-2]
        assert side[-1]["entries-added"] == 302
        assert side[-1]["max-deleted-entry-id"] == "0-0"


def test_approx_trim_on_small_stream_matches_redis_exactly(redis, tmp_path):
    lines = adds("s", 90) + ["XTRIM s MAXLEN ~ 10", "XTRIM s MINID ~ 80", "XLEN s",
                             "XADD s MAXLEN ~ 5 91-0 f v", "XLEN s"]
    failures = compare(redis, tmp_path, lines)
    assert not failures, "\n".join(failures)
