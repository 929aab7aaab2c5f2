"""xs trim: --max-age / --max-len [--approx] retention, --dry-run,
-q, globs, --idle-consumers, errors, and the crontab lines of docs/guide.md."""
import hashlib
import json
import os
import re
import subprocess
import time

import pytest

from conftest import ROOT, XS, run_xs, shell_path


def xs(db, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, timeout=60, cwd=ROOT, env=e)


def script(db, lines):
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stdout + p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


def ids(db, stream):
    return [e[0] for e in script(db, ["XRANGE %s - +" % stream])[0]]


def now_ms():
    return int(time.time() * 1000)


def data_hash(db):
    with open(os.path.join(str(db), "data.mdb"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fill(db, stream, n, ms, value="v"):
    """``n`` entries ``ms-1`` ... ``ms-n``."""
    script(db, ["XADD %s %d-%d f %s" % (stream, ms, i, value) for i in range(1, n + 1)])


# ------------------------------------------------------------------ --max-age

def test_max_age_removes_exactly_the_entries_older_than_the_cutoff(tmp_path):
    db = tmp_path / "db"
    t = now_ms()
    old = [t - 3 * 3600_000, t - 31 * 60_000]            # 3h and 31min ago
    young = [t - 29 * 60_000, t - 60_000, t + 3600_000]  # 29min, 1min ago, and ahead of the clock
    script(db, ["XADD s %d-%d f x" % (ms, seq) for ms in old + young for seq in (0, 1)])
    p = xs(db, "trim", "s", "--max-age", "30m")
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode() == "s: removed 4, 6 left\ntotal: removed 4 from 1 stream, 6 left\n"
    assert ids(db, "s") == ["%d-%d" % (ms, seq) for ms in young for seq in (0, 1)]
    assert script(db, ["XLEN s"]) == [6]


@pytest.mark.parametrize("spec,ms", [("7d", 7 * 86400_000), ("12h", 12 * 3600_000), ("90s", 90_000),
                                     ("1h30m", 90 * 60_000), ("2w", 14 * 86400_000)])
def test_duration_units(tmp_path, spec, ms):
    db = tmp_path / "db"
    t = now_ms()
    script(db, ["XADD s %d-0 f old" % (t - ms - 20_000), "XADD s %d-0 f new" % (t - ms + 20_000)])
    p = xs(db, "trim", "--max-age", spec, "-q")
    assert p.returncode == 0 and p.stdout == b"" and p.stderr == b""
    assert ids(db, "s") == ["%d-0" % (t - ms + 20_000)]


def test_500ms(tmp_path):
    db = tmp_path / "db"
    t = now_ms()
    script(db, ["XADD s %d-0 f old" % (t - 60_000), "XADD s %d-0 f new" % (t + 60_000)])
    assert xs(db, "trim", "--max-age", "500ms", "-q").returncode == 0
    assert ids(db, "s") == ["%d-0" % (t + 60_000)]


# ------------------------------------------------------------------ --max-len

def test_max_len_keeps_the_last_n(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 250, 1000)
    p = xs(db, "trim", "--max-len", "42", "s")
    assert p.returncode == 0 and p.stdout.decode().startswith("s: removed 208, 42 left\n")
    assert ids(db, "s") == ["1000-%d" % i for i in range(209, 251)]


def test_max_len_approx_removes_whole_nodes_only(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 250, 1000)
    p = xs(db, "trim", "--max-len", "42", "--approx", "s")
    assert p.returncode == 0 and p.stdout.decode().startswith("s: removed 200, 50 left\n")
    assert ids(db, "s")[0] == "1000-201"


def test_more_than_one_batch_ends_exactly_where_xtrim_would(tmp_path):
    """Batches of 10000 per transaction, then the exact remainder."""
    db = tmp_path / "db"
    p = subprocess.run(XS + ["--db", str(db), "--no-sync"], input=b"".join(b"XADD s 5-%d f v\n" % i
                                                                             for i in range(1, 25_051)),
                       capture_output=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0
    p = xs(db, "trim", "--max-len", "7", "s", "--json")
    out = json.loads(p.stdout)
    assert out["removed"] == 25_043 and out["left"] == 7
    assert ids(db, "s") == ["5-%d" % i for i in range(25_044, 25_051)]


def test_max_age_and_max_len_together_remove_what_either_would(tmp_path):
    db = tmp_path / "db"
    t = now_ms()
    script(db, ["XADD s %d-%d f x" % (t - 3600_000, i) for i in range(1, 4)] +
           ["XADD s %d-%d f x" % (t, i) for i in range(1, 6)])
    assert xs(db, "trim", "--max-age", "1m", "--max-len", "10", "-q").returncode == 0
    assert len(ids(db, "s")) == 5                   # the age criterion wins
    assert xs(db, "trim", "--max-age", "1m", "--max-len", "2", "-q").returncode == 0
    assert ids(db, "s") == ["%d-4" % t, "%d-5" % t]  # the length criterion wins


# ------------------------------------------------------------------ --dry-run

@pytest.mark.parametrize("opts", [["--max-age", "30m"], ["--max-len", "42"], ["--max-len", "42", "--approx"],
                                  ["--max-age", "30m", "--approx"], ["--max-age", "30m", "--max-len", "60"],
                                  ["--max-len", "0", "--approx"], ["--max-age", "30m", "--max-len", "130", "--approx"]])
@pytest.mark.parametrize("policy", [[], ["--drop-unacked"]])
def test_dry_run_changes_nothing_and_predicts_the_real_run(tmp_path, opts, policy):
    db = tmp_path / "db"
    t = now_ms()
    fill(db, "a", 150, t - 3600_000)
    fill(db, "a", 95, t)
    fill(db, "b", 30, t - 3600_000)
    # group g: 100 entries acknowledged, 20 pending, the rest not delivered
    script(db, ["XGROUP CREATE a g 0", "XREADGROUP GROUP g c COUNT 120 STREAMS a >",
                "XACK a g " + " ".join("%d-%d" % (t - 3600_000, i) for i in range(1, 101))])
    opts = opts + policy
    before = (script(db, ["XRANGE a - +", "XRANGE b - +", "XLEN a", "XLEN b", "XINFO CONSUMERS a g"]),
              data_hash(db))
    dry = xs(db, "trim", "--dry-run", "--json", *opts)
    assert dry.returncode == 0, dry.stderr
    after = (script(db, ["XRANGE a - +", "XRANGE b - +", "XLEN a", "XLEN b", "XINFO CONSUMERS a g"]),
             data_hash(db))
    for x in (before[0][-1], after[0][-1]):
        for c in x:
            c.pop("idle"), c.pop("inactive")
    assert after == before
    predicted = json.loads(dry.stdout)
    assert predicted["dry_run"] is True
    real = json.loads(xs(db, "trim", "--json", *opts).stdout)
    assert real["dry_run"] is False
    predicted.pop("dry_run"), real.pop("dry_run")
    assert real == predicted
    assert real["removed"] > 0


def test_dry_run_text(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 10, 1000)
    p = xs(db, "trim", "--max-len", "4", "--dry-run")
    assert p.stdout.decode() == "s: would remove 6, 4 left\ntotal: would remove 6 from 1 stream, 4 left\n"
    assert script(db, ["XLEN s"]) == [10]


# ------------------------------------------------------------------ -q, globs, many streams

def test_quiet_prints_nothing_on_success_but_reports_failure(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 10, 1000)
    p = xs(db, "trim", "--max-len", "3", "-q")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"")
    assert script(db, ["XLEN s"]) == [3]
    p = xs(db, "trim", "--max-len", "3", "-q", "nope")
    assert p.returncode == 1 and p.stdout == b"" and p.stderr == b"xs: no such stream: nope\n"


def test_globs_select_streams_as_keys_does(tmp_path):
    db = tmp_path / "db"
    for s in ("log:a", "log:b", "logx", "metrics"):
        fill(db, s, 5, 1000)
    p = xs(db, "trim", "--max-len", "1", "log:*", "m?trics")
    assert p.returncode == 0
    assert p.stdout.decode().splitlines() == ["log:a: removed 4, 1 left", "log:b: removed 4, 1 left",
                                              "metrics: removed 4, 1 left",
                                              "total: removed 12 from 3 streams, 3 left"]
    assert script(db, ["XLEN log:a", "XLEN log:b", "XLEN logx", "XLEN metrics"]) == [1, 1, 5, 1]
    p = xs(db, "trim", "--max-len", "0", "nothing:*")     # a glob may match nothing
    assert p.returncode == 0 and p.stdout == b"total: removed 0 from 0 streams, 0 left\n"


def test_no_stream_means_all_and_a_stream_named_twice_counts_once(tmp_path):
    db = tmp_path / "db"
    fill(db, "a", 5, 1000)
    fill(db, "b", 7, 1000)
    p = xs(db, "trim", "--max-len", "2")
    assert p.stdout.decode().splitlines()[-1] == "total: removed 8 from 2 streams, 4 left"
    p = xs(db, "trim", "--max-len", "1", "a", "a", "a*")
    assert p.stdout.decode().splitlines() == ["a: removed 1, 1 left", "total: removed 1 from 1 stream, 1 left"]


# ------------------------------------------------------------------ --idle-consumers

def test_idle_consumers_without_pending_entries_are_deleted(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 5, 1000)
    fill(db, "t", 5, 1000)
    script(db, ["XGROUP CREATE s g 0", "XGROUP CREATE s h 0", "XGROUP CREATE t g 0",
                "XGROUP CREATECONSUMER s g idle",                    # idle, nothing pending: goes
                "XREADGROUP GROUP g busy COUNT 2 STREAMS s >",        # idle but owns 2 entries: stays
                "XREADGROUP GROUP h drained COUNT 1 STREAMS s >",     # idle, acked everything: goes
                "XACK s h 1000-1",
                "XGROUP CREATECONSUMER t g other"])                  # another stream, not selected
    time.sleep(2.2)
    dry = xs(db, "trim", "s", "--idle-consumers", "2s", "--dry-run")
    assert dry.stdout.decode().splitlines()[0] == "s: would delete idle consumers g/idle, h/drained"
    start = time.monotonic()
    script(db, ["XGROUP CREATECONSUMER s g fresh"])                  # not idle long enough: stays
    p = xs(db, "trim", "s", "--idle-consumers", "2s", "--json")
    quick = time.monotonic() - start < 2.0       # else "fresh" is idle long enough too (a loaded machine)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    deleted = [(c["group"], c["consumer"]) for c in out["streams"][0]["consumers_deleted"]]
    if quick:
        assert deleted == [("g", "idle"), ("h", "drained")]
    assert ("g", "idle") in deleted and ("h", "drained") in deleted and ("g", "busy") not in deleted
    assert all(c["idle_ms"] > 2000 for c in out["streams"][0]["consumers_deleted"])
    assert out["consumers_deleted"] == len(deleted) and out["removed"] == 0 and out["left"] == 5
    left = script(db, ["XINFO CONSUMERS s g", "XINFO CONSUMERS s h", "XINFO CONSUMERS t g", "XPENDING s g"])
    assert sorted(c["name"] for c in left[0]) == ["busy"] + ([] if ("g", "fresh") in deleted else ["fresh"])
    assert left[1] == [] and [c["name"] for c in left[2]] == ["other"]
    assert left[3][0] == 2                       # busy's entries are still pending


def test_idle_consumers_text_summary(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 5, 1000)
    script(db, ["XGROUP CREATE s g $", "XGROUP CREATECONSUMER s g c"])
    time.sleep(0.3)
    p = xs(db, "trim", "--idle-consumers", "100ms", "--max-len", "2")
    assert p.stdout.decode().splitlines() == ["s: removed 3, 2 left; deleted idle consumer g/c",
                                              "total: removed 3 from 1 stream, 2 left; deleted 1 idle consumer"]
    p = xs(db, "trim", "--idle-consumers", "100ms")
    assert p.stdout.decode().splitlines() == ["s: no idle consumers", "total: 1 stream; deleted 0 idle consumers"]


# ------------------------------------------------------------------ errors

def test_an_unknown_stream_named_explicitly_fails_before_anything_changes(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 5, 1000)
    p = xs(db, "trim", "--max-len", "1", "s", "nope", "nada")
    assert p.returncode == 1 and p.stdout == b""
    assert p.stderr == b"xs: no such stream: nope\nxs: no such stream: nada\n"
    assert script(db, ["XLEN s"]) == [5]


@pytest.mark.parametrize("args", [["--max-age", "7"], ["--max-age", "7x"], ["--max-age", "-1d"],
                                  ["--max-age", ""], ["--max-age", "1.5h"], ["--idle-consumers", "soon"],
                                  ["--max-len", "-1"], ["--max-len", "ten"], [], ["--approx"]])
def test_usage_errors_exit_2_with_one_line(tmp_path, args):
    db = tmp_path / "db"
    fill(db, "s", 5, 1000)
    p = xs(db, "trim", *args)
    assert p.returncode == 2, p
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xs: ") and b"Traceback" not in p.stderr
    if args and args[0] in ("--max-age", "--idle-consumers"):
        assert "bad duration" in lines[0] and args[0] in lines[0]
    assert script(db, ["XLEN s"]) == [5]


def test_a_missing_store_is_an_error_and_is_not_created(tmp_path):
    db = tmp_path / "none"
    p = xs(db, "trim", "--max-age", "7d", "-q")
    assert p.returncode == 1 and p.stderr.startswith(b"xs: ") and b"no such store" in p.stderr
    assert not db.exists()


# ------------------------------------------------------- docs/guide.md's crontab

def _crontab():
    text = open(os.path.join(ROOT, "docs", "guide.md"), encoding="utf-8").read()
    block = text.split("<!-- crontab example -->", 2)
    assert len(block) == 3, "docs/guide.md's crontab example is marked by <!-- crontab example --> twice"
    env, commands = {}, []
    for line in block[1].splitlines():
        line = line.strip()
        m = re.match(r"^([A-Z_]+)=(\S+)$", line)
        if m:
            env[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^(\S+\s+){5}(xs .*)$", line)
        if m:
            commands.append(m.group(2))
    return env, commands


def test_the_readme_crontab_lines_run_as_shown(tmp_path):
    env, commands = _crontab()
    assert "XS_DB" in env and "xs trim --max-age 7d -q" in commands
    db = tmp_path / "db"
    t = now_ms()
    day = 86400_000
    script(db, ["XADD events %d-0 f old" % (t - 8 * day), "XADD events %d-0 f recent" % (t - 6 * day),
                "XADD events * f now", "XGROUP CREATE events g 0", "XGROUP CREATECONSUMER events g c",
                "XREADGROUP GROUP g c STREAMS events >", "XACK events g %d-0" % (t - 8 * day)])
    e = dict(os.environ, PATH=shell_path(tmp_path), XS_DB=str(db),
             PYTHONPATH=ROOT)
    for cmd in commands:                 # exactly as cron would run them: sh -c LINE
        p = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, env=e, timeout=60, cwd=str(tmp_path))
        assert (p.returncode, p.stdout, p.stderr) == (0, b"", b""), (cmd, p)
    rows = script(db, ["XRANGE events - +"])[0]
    assert [r[1][1] for r in rows] == ["recent", "now"]


# ------------------------------------------------- work no group has done

def _mailer(db):
    """10 entries; group mailer has read 4 (2 of them acknowledged): 2
    pending, 6 not yet delivered."""
    script(db, ["XADD s 1-%d n %d" % (i, i) for i in range(1, 11)]
           + ["XGROUP CREATE s mailer 0", "XREADGROUP GROUP mailer c COUNT 4 STREAMS s >", "XACK s mailer 1-1 1-2"])


def test_trim_keeps_entries_a_group_has_not_acknowledged_and_says_so(tmp_path):
    db = tmp_path / "db"
    _mailer(db)
    p = xs(db, "trim", "--max-len", "3")
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    assert p.stdout.decode() == ("s: removed 2, 8 left; kept 5 not acknowledged (group mailer: 3 not yet delivered, "
                                 "2 pending)\ntotal: removed 2 from 1 stream, 8 left; kept 5 not acknowledged\n")
    assert ids(db, "s") == ["1-%d" % i for i in range(3, 11)]
    pending = script(db, ["XPENDING s mailer"])[0]
    assert pending[0] == 2


def test_trim_dry_run_counts_the_work_it_would_take_from_each_group(tmp_path):
    db = tmp_path / "db"
    _mailer(db)
    script(db, ["XGROUP CREATE s audit $"])
    before = data_hash(db)
    p = xs(db, "trim", "--max-len", "3", "--dry-run", "--drop-unacked")
    assert p.returncode == 0 and p.stderr == b"", p.stderr
    assert p.stdout.decode().splitlines()[0] == (
        "s: would remove 7, 3 left; would take work not done (group mailer: 3 not yet delivered, 2 pending)")
    assert data_hash(db) == before
    p = xs(db, "trim", "--max-len", "3", "--dry-run", "--json")
    doc = json.loads(p.stdout)
    assert (doc["removed"], doc["left"], doc["kept"], doc["drop_unacked"]) == (2, 8, 5, False)
    assert doc["streams"][0]["groups"] == [{"group": "mailer", "undelivered": 3, "pending": 2}]


def test_trim_drop_unacked_removes_them_and_warns_on_stderr_even_when_quiet(tmp_path):
    db = tmp_path / "db"
    _mailer(db)
    p = xs(db, "trim", "--max-len", "3", "--drop-unacked", "-q")
    assert p.returncode == 0 and p.stdout == b""
    assert p.stderr == b"xs: s: removed work not done: group mailer: 3 not yet delivered, 2 pending\n"
    assert ids(db, "s") == ["1-8", "1-9", "1-10"]


def test_trim_of_a_stream_without_groups_is_unchanged_by_the_policy(tmp_path):
    db = tmp_path / "db"
    fill(db, "s", 250, 5)
    p = xs(db, "trim", "--max-len", "10", "--approx")
    assert p.stdout.decode().startswith("s: removed 200, 50 left\n"), p.stdout


def test_the_guides_trim_example_prints_what_it_shows(tmp_path):
    text = open(os.path.join(ROOT, "docs", "guide.md"), encoding="utf-8").read()
    m = re.search(r"\n    \$ xs trim --max-len 3 --dry-run\n((?:    .+\n)+)", text)
    assert m, "the guide's xs trim --dry-run example"
    shown = "".join(line[4:] + "\n" for line in m.group(1).splitlines())
    db = tmp_path / "db"
    script(db, ["XADD events 1-%d n %d" % (i, i) for i in range(1, 11)]
           + ["XGROUP CREATE events mailer 0", "XREADGROUP GROUP mailer c COUNT 4 STREAMS events >",
              "XACK events mailer 1-1 1-2"])
    p = xs(db, "trim", "--max-len", "3", "--dry-run")
    assert p.stdout.decode() == shown


def test_quiet_still_names_on_stderr_what_a_forgotten_group_kept(tmp_path):
    """With the documented cron line (-q), a group nobody reads stops
    retention; one stderr line per stream says so, naming the group, so
    cron mails it.  Streams without held-back work stay silent."""
    db = tmp_path / "db"
    old = now_ms() - 10 * 86_400_000
    fill(db, "events", 5, old)
    fill(db, "other", 3, old)
    script(db, ["XGROUP CREATE events forgotten 0"])
    p = xs(db, "trim", "--max-age", "7d", "-q")
    assert p.returncode == 0 and p.stdout == b""
    assert p.stderr == b"xs: events: kept 5 not acknowledged (group forgotten: 5 not yet delivered)\n"
    assert len(ids(db, "events")) == 5 and ids(db, "other") == []
