"""INFO's dirty counter and latencystats, side by side with redis-server
(issue 26, item 9): the same commands on ``xs serve`` and on a real
redis-server (the ``redis`` fixture), compared step by step:
``rdb_changes_since_last_save`` (Redis's dirty counter: a change per
entry deleted, acknowledged ..., nothing for a command that changed
nothing), ``INFO latencystats`` (its lines' format, which commands it
lists) and the two CONFIG settings that drive it."""
import re

import pytest

from tests.harness.served import Served
from xstream_cli.server.stats import hist_index, hist_percentile

redis_py = pytest.importorskip("redis")


@pytest.fixture
def both(tmp_path, redis):
    """(xs serve client, redis-server client), one connection each."""
    s = Served(tmp_path / "store")
    ours = s.client(single_connection_client=True)
    theirs = redis_py.Redis(port=redis.port, single_connection_client=True)
    ours.observer = s.client()                        # INFO from outside the script's MULTI
    theirs.observer = redis_py.Redis(port=redis.port)
    theirs.flushall()
    theirs.config_set("latency-tracking", "yes")
    theirs.config_set("latency-tracking-info-percentiles", "50 99 99.9")
    yield ours, theirs
    theirs.config_set("latency-tracking", "yes")
    theirs.config_set("latency-tracking-info-percentiles", "50 99 99.9")
    theirs.close()
    ours.close()
    s.stop()


def _call(r, line):
    """The reply to ``line`` (split on spaces), an error as its text."""
    r.connection.send_command(*line.split())       # unparsed: redis-py's reply callbacks left out
    try:
        return r.connection.read_response()
    except redis_py.ResponseError as e:
        return "error: %s" % e


def _dirty(r):
    return r.observer.info("persistence")["rdb_changes_since_last_save"]


# ------------------------------------------------------------------ dirty

DIRTY_SCRIPT = [
    "XADD s 1-1 f v", "XADD s 2-1 f v", "XADD s 3-1 f v", "XADD s 4-1 f v",
    "XADD s MAXLEN 3 5-1 f v",                            # 1, what it trimmed adds nothing
    "XADD s 1-1 f v",                                     # an error: 0
    "XADD nostream NOMKSTREAM * f v",                     # null: 0
    "XLEN s", "XRANGE s - +", "XREAD STREAMS s 0",
    "XGROUP CREATE s g 0", "XGROUP CREATE s g 0",
    "XGROUP CREATECONSUMER s g alice", "XGROUP CREATECONSUMER s g alice",
    "XGROUP CREATECONSUMER s g bob",
    "XREADGROUP GROUP g alice COUNT 2 STREAMS s >",      # 1 for both entries
    "XREADGROUP GROUP g alice STREAMS s 0",               # the PEL: 0
    "XREADGROUP GROUP g alice NOACK COUNT 1 STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS s >",               # nothing new: 0
    "XADD s 6-1 f v", "XADD s 7-1 f v", "XADD s 8-1 f v",
    "XREADGROUP GROUP g alice STREAMS s >",
    "XACK s g 3-1 4-1 99-1",                              # 2
    "XACK s g 3-1",                                       # 0
    "XCLAIM s g bob 0 6-1 7-1",                           # 2
    "XCLAIM s g bob 0 6-1 JUSTID",
    "XDEL s 6-1 7-1 99-1",                                # 2
    "XAUTOCLAIM s g alice 0 0",                           # 1 claimed, 2 deleted
    "XTRIM s MAXLEN 1",                                   # 2 (3-1 .. 5-1 left; 5-1 stays)
    "XTRIM s MAXLEN 1",                                   # 0
    "XSETID s 99-0", "XGROUP SETID s g 0",
    "XREADGROUP GROUP g carol STREAMS s 0",               # carol made by her first read: 1, though it read nothing
    "XCLAIM s g dave 0 99-1",                             # dave made: 1
    "XAUTOCLAIM s g erin 0 0 COUNT 1",                    # erin made, plus what it claimed
    "XGROUP DELCONSUMER s g alice", "XGROUP DESTROY s g", "XGROUP DESTROY s g",
    "XGROUP CREATE t g2 $ MKSTREAM",
    "XADD a * f v", "XADD b * f v",
    "EXPIRE a 100", "EXPIRE nothing 100", "PERSIST a", "PERSIST a",
    "RENAME a c", "COPY c d", "COPY c d",
    "DEL s nothing b", "UNLINK c d", "DEL nothing",
    "MULTI", "XADD m 1-1 f v", "XADD m 2-1 f v", "XDEL m 1-1 2-1", "XLEN m", "EXEC",
    "XADD e 1-1 f v", "XADD e2 1-1 f v",
    "CONFIG RESETSTAT",                                   # the dirty counter is not a statistic
    "FLUSHDB",                                            # one per key removed: 4
    "FLUSHALL",                                           # none left: 0
]


# Redis before 7.4 (#13251) added 1 for an XREADGROUP of the PEL too, and
# its XCLAIM made the consumer only when it claimed something; xs has
# 7.4's rules (and 8.x's, t_stream.c xclaimCommand): reading history
# changes nothing, XCLAIM makes its consumer (1) whatever it claims
SINCE_7_4 = {"XREADGROUP GROUP g alice STREAMS s 0": 0, "XREADGROUP GROUP g carol STREAMS s 0": 1,
             "XCLAIM s g dave 0 99-1": 1}


def test_rdb_changes_since_last_save_counts_each_change_as_redis_does(both):
    """After each command of a script of stream and keyspace commands,
    ``rdb_changes_since_last_save`` grows by as much on xs serve as on
    redis-server: XDEL / XTRIM / XACK / XCLAIM / XAUTOCLAIM / DEL by what
    they changed, XREADGROUP by one per stream served new entries, a
    command that changed nothing (or failed) by 0, CONFIG RESETSTAT not
    resetting it."""
    ours, theirs = both
    steps = []
    for line in DIRTY_SCRIPT:
        before = (_dirty(ours), _dirty(theirs))
        replies = (_call(ours, line), _call(theirs, line))
        after = (_dirty(ours), _dirty(theirs))
        steps.append((line, after[0] - before[0], after[1] - before[1], replies))
    version = tuple(int(x) for x in theirs.info("server")["redis_version"].split(".")[:2])
    if version < (7, 4):
        steps = [(line, ours_, SINCE_7_4.get(line, theirs_), r) for line, ours_, theirs_, r in steps]
    differ = [s for s in steps if s[1] != s[2]]
    assert not differ, "\n".join("%s: xs %+d, redis %+d (%r)" % s for s in differ)
    deltas = {line: d for line, d, _, _ in steps}
    # the script does reach the counts above 1 that a "1 per write" rule misses
    assert deltas["XDEL s 6-1 7-1 99-1"] == 2 and deltas["FLUSHDB"] == 4
    assert deltas["EXEC"] == 4 and deltas["XACK s g 3-1"] == 0
    assert deltas["XREADGROUP GROUP g carol STREAMS s 0"] == 1 and deltas["XCLAIM s g dave 0 99-1"] == 1


def test_flushall_adds_the_keys_it_removed_and_resetstat_keeps_the_counter(both):
    ours, theirs = both
    for r in (ours, theirs):
        for k in ("x", "y", "z"):
            r.xadd(k, {"f": "v"})
    before = [_dirty(ours), _dirty(theirs)]
    for r in (ours, theirs):
        r.execute_command("FLUSHALL")
        r.config_resetstat()
    assert [_dirty(ours) - before[0], _dirty(theirs) - before[1]] == [3, 3]


# ---------------------------------------------------------- latencystats

LATENCY_LINE = re.compile(r"^latency_percentiles_usec_([a-z|\-]+):(p[0-9.]+=[0-9]+\.[0-9]{3}(,|$))*$")

LATENCY_SCRIPT = [
    "PING", "ECHO hi", "XADD s 1-1 f v", "XADD s 1-1 f v", "XLEN s", "XRANGE s - +",
    "XGROUP CREATE s g 0", "XGROUP NOPE s", "XGROUP CREATE", "XREADGROUP GROUP g c STREAMS s >",
    "XREADGROUP GROUP nog c STREAMS s >", "CLIENT ID", "CONFIG GET maxclients", "DBSIZE",
    "MULTI", "XADD s 2-1 f v", "XLEN s", "EXEC", "DEL s", "TYPE s",
]


def _latency(r, section="latencystats"):
    """INFO latencystats as {command: {percentile: usec}} (the raw lines checked first)."""
    text = _call(r, "INFO " + section).decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("latency_percentiles_usec_"):
            m = LATENCY_LINE.match(line)
            assert m, line
            fields = line.split(":", 1)[1]
            out[m.group(1)] = {k: float(v) for k, v in (f.split("=") for f in fields.split(",") if f)}
    return out


def test_latencystats_lists_the_commands_redis_lists_in_its_format(both):
    """INFO latencystats after the same commands (some failing, some
    refused): a ``latency_percentiles_usec_<command>:p50=..,p99=..,p99.9=..``
    line for the same commands and subcommands as redis-server (refused
    calls have none), each value with 3 decimals and the top of an
    HdrHistogram bucket of 2 significant digits, as Redis prints them."""
    ours, theirs = both
    for r in (ours, theirs):
        r.config_resetstat()
        for line in LATENCY_SCRIPT:
            _call(r, line)
    mine, redis_ = _latency(ours), _latency(theirs)
    assert set(mine) == set(redis_)
    assert {"xadd", "xgroup|create", "client|id", "config|get", "exec", "config|resetstat"} <= set(mine)
    for stats in (mine, redis_):
        for name, ps in stats.items():
            assert list(ps) == ["p50", "p99", "p99.9"], name
            assert ps["p50"] <= ps["p99"] <= ps["p99.9"]
            for usec in ps.values():
                ns = round(usec * 1000)
                assert hist_index(ns) != hist_index(ns + 1), (name, usec)   # a bucket's top value


def test_latencystats_only_with_its_name_or_all_and_cleared_by_resetstat(both):
    ours, theirs = both
    for r in (ours, theirs):
        r.ping()
        text = [_call(r, " ".join(["INFO"] + list(s))).decode()
                for s in ((), ("default",), ("all",), ("everything",), ("latencystats",), ("default", "latencystats"))]
        assert ["# Latencystats" in t for t in text] == [False, False, True, True, True, True]
        assert "latency_percentiles_usec_ping:" in text[2]
        r.config_resetstat()
        assert set(_latency(r)) == {"config|resetstat"}


def test_latency_tracking_config_as_redis(both):
    """CONFIG GET / SET latency-tracking and
    latency-tracking-info-percentiles: the defaults, what they print, and
    the errors for bad values, word for word as redis-server's."""
    ours, theirs = both
    for pattern in ("latency-tracking", "latency-tracking-info-percentiles", "latency-tracking*"):
        assert ours.config_get(pattern) == theirs.config_get(pattern)
    for value in ("0 50 100", "99.99 25", "", "50", "1e1 0.5", "abc", "101", "-1", "50 abc", "nan", "inf",
                  "50,99", " 50", "1_0"):
        replies = [_set(r, "latency-tracking-info-percentiles", value) for r in both]
        assert replies[0] == replies[1], value
        assert ours.config_get("latency-tracking-info-percentiles") == \
            theirs.config_get("latency-tracking-info-percentiles"), value
    for r in both:
        r.config_set("latency-tracking-info-percentiles", "0 50 100")
        r.ping()
    assert list(_latency(ours)["ping"]) == list(_latency(theirs)["ping"]) == ["p0", "p50", "p100"]
    for value in ("no", "maybe", "NO", "yes", "1"):
        replies = [_set(r, "latency-tracking", value) for r in both]
        assert replies[0] == replies[1], value
        assert ours.config_get("latency-tracking") == theirs.config_get("latency-tracking"), value
    for r in both:
        r.config_set("latency-tracking", "no")
        r.ping()
        assert _latency(r) == {}                       # the section's title alone
        r.config_set("latency-tracking", "yes")
        assert "ping" in _latency(r)                   # kept while off, shown again


def _set(r, name, value):
    try:
        return r.config_set(name, value)
    except redis_py.ResponseError as e:
        return "error: %s" % e


def test_percentiles_are_hdr_histogram_bucket_tops():
    """The percentiles of the histogram as Redis's hdr_value_at_percentile
    gives them (values in ns; INFO prints them / 1000): 1 usec is 1.003,
    under 1 usec is 0.001."""
    def hist(*usecs):
        h = {}
        for u in usecs:
            i = hist_index(u * 1000)
            h[i] = h.get(i, 0) + 1
        return h
    assert hist_percentile(hist(1), 50) == 1003
    assert hist_percentile(hist(0), 50) == 1
    assert hist_percentile(hist(10), 99.9) == 10047
    h = hist(*([1] * 98 + [10, 1000]))
    assert [hist_percentile(h, p) for p in (50, 99, 99.9, 100)] == [1003, 10047, 1003519, 1003519]
    assert hist_percentile(h, 0) == 1000


def test_the_looked_up_buckets_are_hist_index_of_each_whole_microsecond():
    from xstream_cli.server import stats
    assert stats._US_BUCKET == [hist_index(u * 1000) for u in range(stats._US_BUCKETS)]
    s = stats.Stats()
    for usec in (0, 7, 4095, 4096, 250000):         # looked up, and computed past the table
        s._calls("xadd", [0, 0, 0, 0], 3, usec)
    assert s.latency["xadd"] == {hist_index(u * 1000): 3 for u in (0, 7, 4095, 4096, 250000)}
