"""xs check as a monitoring system runs it: exit 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN, each at the right threshold of each check, on the
store tests/cli/test_metrics.py sets up (events/g: lag 2, lag 120 s,
2 pending, the oldest delivered 90 s ago; events/h: nothing behind;
jobs:dead: 2 dead letters of jobs/w; events' last entry 60 s old)."""
import json
import re
import shutil
import subprocess

import pytest

from tests.cli.test_metrics import make_scene, now_ms, xs

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return make_scene(tmp_path_factory.mktemp("check") / "db")


def check(db, *args):
    p = xs(db, "check", *args)
    assert b"Traceback" not in p.stderr
    return p


def code(db, *args):
    return check(db, *args).returncode


def test_no_threshold_is_ok_with_one_nagios_line(scene):
    p = check(scene)
    assert p.returncode == OK
    line = p.stdout.decode()
    assert line.count("\n") == 1
    assert line.startswith("XS OK - 4 streams, 3 groups checked | ")
    perf = line.split(" | ", 1)[1].split()
    labels = [x.split("=")[0] for x in perf]
    assert labels == ["lag", "lag_seconds", "pending", "oldest_pending_seconds", "dead_letters",
                      "last_entry_age_seconds", "store_full_percent"]
    for x in perf:      # label=value[unit];warn;crit;min
        assert re.fullmatch(r"[a-z_]+=[0-9.]+(s|%)?;[0-9.]*;[0-9.]*;0", x), x
    assert "lag=2;;;0" in perf and "pending=2;;;0" in perf and "dead_letters=2;;;0" in perf


@pytest.mark.parametrize("args,expect", [
    # --lag: events/g is 2 behind
    (["--lag-warn", "1"], WARNING), (["--lag-warn", "2"], OK), (["--lag-critical", "1", "--lag-warn", "0"], CRITICAL),
    (["--lag-critical", "2", "--lag-warn", "1"], WARNING),
    # --lag-seconds: its oldest undelivered entry is 120 s old
    (["--lag-seconds-warn", "100s"], WARNING), (["--lag-seconds-warn", "100"], WARNING),
    (["--lag-seconds-warn", "1h"], OK), (["--lag-seconds-critical", "1m30s"], CRITICAL),
    # --pending: 2
    (["--pending-warn", "1"], WARNING), (["--pending-warn", "2"], OK), (["--pending-critical", "1"], CRITICAL),
    # --oldest-pending-seconds: delivered 90 s ago
    (["--oldest-pending-seconds-warn", "80s"], WARNING), (["--oldest-pending-seconds-warn", "1h"], OK),
    (["--oldest-pending-seconds-critical", "60"], CRITICAL),
    # --dead-letters: 2 in jobs:dead
    (["--dead-letters-warn", "1"], WARNING), (["--dead-letters-warn", "2"], OK),
    (["--dead-letters-critical", "1"], CRITICAL),
    # --last-entry-age-seconds: events' last entry is 60 s old
    (["events", "--last-entry-age-seconds-warn", "30s"], WARNING),
    (["events", "--last-entry-age-seconds-warn", "1h"], OK),
    (["events", "--last-entry-age-seconds-critical", "45s"], CRITICAL),
    # --store-full-percent: a little above 0
    (["--store-full-percent-warn", "0"], WARNING), (["--store-full-percent-warn", "99"], OK),
    (["--store-full-percent-critical", "0"], CRITICAL),
])
def test_each_threshold_gives_its_exit_code(scene, args, expect):
    p = check(scene, *args)
    assert p.returncode == expect, p.stdout + p.stderr
    assert p.stdout.decode().startswith("XS %s - " % ("OK", "WARNING", "CRITICAL")[expect])


def test_the_worst_state_wins_and_the_line_names_it(scene):
    p = check(scene, "--lag-warn", "1", "--pending-critical", "1")
    assert p.returncode == CRITICAL
    assert p.stdout.decode().startswith("XS CRITICAL - pending 2 > 1 (events, group g); 1 more | ")


def test_scope_group_and_globs(scene):
    assert code(scene, "--group", "h", "--lag-warn", "0", "--pending-warn", "0") == OK
    assert code(scene, "--group", "g", "--lag-warn", "0") == WARNING
    assert code(scene, "jobs*", "--lag-warn", "0", "--pending-warn", "0") == OK       # jobs/w is done
    assert code(scene, "--group", "g", "--dead-letters-warn", "0") == OK              # none from g
    assert code(scene, "--group", "w", "--dead-letters-warn", "0") == WARNING


@pytest.mark.parametrize("args,reason", [
    (["nope"], "no such stream: nope"),
    (["nothing*"], "no stream matches nothing*"),
    (["--group", "nope"], "no group nope on the streams checked"),
    (["jobs:dead", "events", "--group", "g"], "no group g on stream jobs:dead"),
])
def test_unknown_with_the_reason(scene, args, reason):
    p = check(scene, *args)
    assert p.returncode == UNKNOWN
    assert p.stdout.decode() == "XS UNKNOWN - %s\n" % reason


def test_a_missing_store_is_unknown_and_not_made(tmp_path):
    db = tmp_path / "nostore"
    p = check(db)
    assert p.returncode == UNKNOWN
    assert p.stdout.decode().startswith("XS UNKNOWN - ") and "no such store" in p.stdout.decode()
    assert not db.exists()
    p = check(db, "--format", "json")
    doc = json.loads(p.stdout)
    assert p.returncode == UNKNOWN and doc["status"] == "UNKNOWN" and doc["code"] == 3


@pytest.mark.parametrize("args", [["--lag-warn", "x"], ["--lag-seconds-warn", "5 parsecs"],
                                  ["--store-full-percent-warn", "101"], ["--bogus"], ["--format", "xml"]])
def test_a_wrong_command_line_is_unknown(scene, args):
    p = check(scene, *args)
    assert p.returncode == UNKNOWN and p.stdout == b""
    assert p.stderr.startswith((b"xs: ", b"Usage: "))


def test_json_text_and_prometheus_formats(scene):
    before = now_ms()
    p = check(scene, "--format", "json", "--lag-warn", "1", "--lag-seconds-critical", "100s")
    after = now_ms()
    assert p.returncode == CRITICAL
    doc = json.loads(p.stdout)
    assert doc["status"] == "CRITICAL" and doc["code"] == 2 and doc["streams"] == 4 and doc["groups"] == 3
    probs = {(x["check"], x["status"]): x for x in doc["problems"]}
    assert probs[("lag", "WARNING")] == {"status": "WARNING", "check": "lag", "stream": "events", "group": "g",
                                         "value": 2, "threshold": 1}
    ls = probs[("lag-seconds", "CRITICAL")]
    e3 = int(scene.ids[2].split("-")[0])
    assert ls["threshold"] == 100 and (before - e3) / 1000 <= ls["value"] <= (after - e3) / 1000
    p = check(scene, "--format", "text", "--lag-warn", "1")
    lines = p.stdout.decode().splitlines()
    assert p.returncode == WARNING
    assert lines == ["WARNING: lag 2 > 1 (events, group g)", "  WARNING: lag 2 > 1 (events, group g)"]
    p = check(scene, "--format", "prometheus", "--lag-warn", "1")
    assert p.returncode == WARNING
    text = p.stdout.decode()
    assert "xs_check_status 1\n" in text
    assert 'xs_check_problem_value{check="lag",stream="events",group="g",state="warning"} 2\n' in text
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=p.stdout, capture_output=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr


def test_outfile(scene, tmp_path):
    out = tmp_path / "check.txt"
    p = check(scene, "--lag-warn", "1", "--outfile", str(out))
    assert p.returncode == WARNING and p.stdout == b""
    assert out.read_text().startswith("XS WARNING - lag 2 > 1 (events, group g) | ")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["check.txt"]
