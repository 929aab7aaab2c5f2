"""The Redis 8.6 server settings stream-idmp-duration and
stream-idmp-maxsize: the IDMP-DURATION and IDMP-MAXSIZE a stream takes
when it is made (XCFGSET changes one stream's).  xs keeps them in the
store, like the node sizes, so every process agrees.  Redis 7.0 has no
such settings: these are spec cases from Redis 8.6's documentation and
its stream test suite ("CONFIG SET stream-idmp-duration and
stream-idmp-maxsize validation", "XINFO STREAM returns idmp-duration and
idmp-maxsize fields") (issue 26, item 2)."""
import json

import pytest

from conftest import new_store, run_xs


def xs_json(db, *lines):
    """The JSON replies of script ``lines`` on store ``db`` (made if
    missing), errors included."""
    if not db.exists():
        new_store(db)
    p = run_xs(db, list(lines))
    assert b"Traceback" not in p.stderr, p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]

RANGE = "ERR CONFIG SET failed (possibly related to argument '%s') - argument must be between %d and %d inclusive"


def test_the_idmp_settings_have_redis_defaults_and_glob_names(tmp_path):
    assert xs_json(tmp_path / "db", "CONFIG GET stream-idmp-*") == [
        {"stream-idmp-duration": "100", "stream-idmp-maxsize": "100"}]


@pytest.mark.parametrize("name,value,lo,hi", [
    ("stream-idmp-duration", "86401", 1, 86400), ("stream-idmp-duration", "100000", 1, 86400),
    ("stream-idmp-duration", "0", 1, 86400), ("stream-idmp-duration", "-1", 1, 86400),
    ("stream-idmp-duration", "-100", 1, 86400),
    ("stream-idmp-maxsize", "10001", 1, 10000), ("stream-idmp-maxsize", "50000", 1, 10000),
    ("stream-idmp-maxsize", "0", 1, 10000), ("stream-idmp-maxsize", "-1", 1, 10000),
])
def test_values_out_of_range_are_refused_with_redis_s_error_and_change_nothing(tmp_path, name, value, lo, hi):
    db = tmp_path / "db"
    assert xs_json(db, "CONFIG SET %s %s" % (name, value), "CONFIG GET %s" % name) == [
        {"error": RANGE % (name, lo, hi)}, {name: "100"}]


def test_the_boundaries_are_accepted_and_not_a_number_is_refused(tmp_path):
    db = tmp_path / "db"
    assert xs_json(db, "CONFIG SET stream-idmp-duration 86400", "CONFIG SET stream-idmp-maxsize 10000",
                   "CONFIG GET stream-idmp-*") == [
        "OK", "OK", {"stream-idmp-duration": "86400", "stream-idmp-maxsize": "10000"}]
    assert xs_json(db, "CONFIG SET stream-idmp-duration 1", "CONFIG SET stream-idmp-maxsize 1",
                   "CONFIG GET stream-idmp-*") == [
        "OK", "OK", {"stream-idmp-duration": "1", "stream-idmp-maxsize": "1"}]
    assert xs_json(db, "CONFIG SET stream-idmp-maxsize ten") == [
        {"error": "ERR CONFIG SET failed (possibly related to argument 'stream-idmp-maxsize') - "
                  "argument couldn't be parsed into an integer"}]


def _idmp(info):
    return info["idmp-duration"], info["idmp-maxsize"]


def test_a_new_stream_takes_the_settings_in_force_and_keeps_them(tmp_path):
    """Set in one process, used by the next; a stream made before keeps
    its values, XCFGSET still sets one stream's."""
    db = tmp_path / "db"
    xs_json(db, "XADD old IDMP p a * f v")
    assert xs_json(db, "CONFIG SET stream-idmp-duration 300 stream-idmp-maxsize 50") == ["OK"]
    xs_json(db, "XADD new IDMP p a * f v", "XGROUP CREATE empty g $ MKSTREAM")
    infos = xs_json(db, "XINFO STREAM old", "XINFO STREAM new", "XINFO STREAM empty")
    assert [_idmp(i) for i in infos] == [(100, 100), (300, 50), (300, 50)]
    xs_json(db, "XCFGSET new IDMP-MAXSIZE 7", "DEL old", "XADD old * f v")
    infos = xs_json(db, "XINFO STREAM new", "XINFO STREAM old")
    assert [_idmp(i) for i in infos] == [(300, 7), (300, 50)]     # made again: today's settings


def test_the_maxsize_of_a_new_stream_bounds_each_producer_s_history(tmp_path):
    db = tmp_path / "db"
    xs_json(db, "CONFIG SET stream-idmp-maxsize 2")
    ids = xs_json(db, "XADD s IDMP p i1 * f 1", "XADD s IDMP p i2 * f 2", "XADD s IDMP p i3 * f 3",
                  "XADD s IDMP p i1 * f again")
    assert len(set(ids)) == 4                    # i1 was forgotten: added again
    assert xs_json(db, "XINFO STREAM s")[0]["iids-tracked"] == 2


def test_xinfo_stops_counting_idmp_history_once_it_has_expired(tmp_path):
    """Redis drops expired IDMP history in the background (10 times a
    second), so XINFO's pids-tracked / iids-tracked fall once the window
    has passed; xs drops it when the producer is used again, and XINFO
    now leaves it out of its counts meanwhile (issue 26, item 3).
    iids-added and iids-duplicates are lifetime counters."""
    import time
    db = tmp_path / "db"
    first = xs_json(db, "XADD s * f 0", "XCFGSET s IDMP-DURATION 1", "XADD s IDMP p1 a * f 1",
                    "XADD s IDMP p1 a * f 1", "XADD s IDMP p2 b * f 2", "XINFO STREAM s")
    info = first[-1]
    assert (info["pids-tracked"], info["iids-tracked"], info["iids-added"], info["iids-duplicates"]) == (2, 2, 2, 1)
    time.sleep(1.3)
    info = xs_json(db, "XINFO STREAM s")[0]
    assert (info["pids-tracked"], info["iids-tracked"], info["iids-added"], info["iids-duplicates"]) == (0, 0, 2, 1)
    again = xs_json(db, "XADD s IDMP p1 a * f 1", "XINFO STREAM s")
    assert again[0] != first[2]                          # expired: added anew
    assert (again[1]["pids-tracked"], again[1]["iids-tracked"], again[1]["iids-added"]) == (1, 1, 3)
