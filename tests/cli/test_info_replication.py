"""xs info and replication (issue 41, item 5): when the store logs its
changes for a replica, xs info shows the change log and each registered
replica's lag -- the numbers of xs replicate --status -- in its lines
and in --json; a store without replicas shows nothing of it."""
import datetime
import json
import os
import subprocess

from conftest import ROOT, XS
from storage import changelog
from storage.store import Store


def xs(db, *args):
    p = subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, timeout=60, cwd=ROOT,
                       env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


def _store_with_replicas(tmp_path, acked):
    """A store with replicas "near" and "far" registered and three logged
    commits; "near" has acknowledged ``acked`` of them."""
    db = tmp_path / "db"
    xs(db, "XADD", "s", "*", "f", "v")
    s = Store(str(db))
    try:
        changelog.enable(s, "near")
        changelog.enable(s, "far")
    finally:
        s.close()
    for i in range(3):
        xs(db, "XADD", "s", "*", "f", str(i))
    if acked:
        s = Store(str(db))
        try:
            changelog.ack(s, "near", acked)
        finally:
            s.close()
    return db


PLAIN = ["path", "format", "streams", "entries", "data.mdb", "map size", "readers", "last txn"]


def _keys(text):
    """The names of xs info's lines (the path is the test's, which names replicas)."""
    return [k.strip() for k in _lines(text)]


def _lines(text):
    return dict(line.split("  ", 1) for line in text.splitlines())


def test_info_shows_the_change_log_and_each_replicas_lag_as_replicate_status_does(tmp_path):
    db = _store_with_replicas(tmp_path, acked=3)
    status = json.loads(xs(db, "replicate", "--status", "--json"))
    lines = {k.strip(): v.strip() for k, v in _lines(xs(db, "info")).items()}
    assert lines["change log"] == "last commit 3, %d B kept" % status["log_bytes"] and status["seq"] == 3
    near, far = (r for r in sorted(status["replicas"], key=lambda r: r["id"], reverse=True))
    when = datetime.datetime.fromtimestamp(near["acked_at"] / 1000.0).astimezone().isoformat(timespec="milliseconds")
    assert lines["replica near"] == "at commit 3, lag 0 commits, 0.000 s; last acknowledged %s" % when
    lag, acked = lines["replica far"].split("; last acknowledged ")
    assert lag.startswith("at commit 0, lag 3 commits, ") and lag.endswith(" s")
    assert float(lag.split(", ")[-1][:-2]) >= 0
    assert datetime.datetime.fromisoformat(acked).timestamp() * 1000 == far["acked_at"]


def test_info_json_has_the_replication_numbers_of_replicate_status(tmp_path):
    db = _store_with_replicas(tmp_path, acked=2)
    status = json.loads(xs(db, "replicate", "--status", "--json"))
    repl = json.loads(xs(db, "info", "--json"))["replication"]
    assert repl["seq"] == status["seq"] == 3 and repl["log_bytes"] == status["log_bytes"] > 0

    def steady(rows):        # lag_seconds grows with the clock between the two runs
        return [{k: v for k, v in r.items() if k != "lag_seconds"} for r in rows]
    assert steady(repl["replicas"]) == steady(status["replicas"])
    near = next(r for r in repl["replicas"] if r["id"] == "near")
    assert near["position"] == 2 and near["lag_commits"] == 1 and near["lag_seconds"] >= 0


def test_a_store_without_replicas_shows_nothing_of_replication(tmp_path):
    db = tmp_path / "db"
    xs(db, "XADD", "s", "*", "f", "v")
    assert _keys(xs(db, "info")) == PLAIN and "replication" not in json.loads(xs(db, "info", "--json"))
    s = Store(str(db))
    try:
        changelog.enable(s, "r")
        assert changelog.disable(s, "r")       # the last replica forgotten: the store logs nothing again
    finally:
        s.close()
    assert _keys(xs(db, "info")) == PLAIN
    assert "replication" not in json.loads(xs(db, "info", "--json"))
