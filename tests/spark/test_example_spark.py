"""examples/user_counts.py, run as a user runs it, on a store of 3,000
entries in two streams: the per-user counts it writes back to the
target stream are those computed here from the same entries.  Skipped
without pyspark."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from conftest import ROOT, run_xs  # noqa: E402


def test_user_counts_example_writes_each_users_counts_to_the_target_stream(tmp_path):
    db = tmp_path / "db"
    lines, expect = [], {}
    for i in range(1500):
        for name, seq in (("events:web", 0), ("events:app", 1)):
            user = "u%d" % ((i * 7 + seq * 3) % 11)
            action = "click" if (i + seq) % 3 == 0 else "view"
            eid = "%d-%d" % (1_700_000_000_000 + i * 1000, seq)
            lines.append("XADD %s %s user %s action %s page /p%d" % (name, eid, user, action, i % 5))
            e = expect.setdefault(user, {"events": 0, "clicks": 0, "ids": []})
            e["events"] += 1
            e["clicks"] += action == "click"
            e["ids"].append((1_700_000_000_000 + i * 1000, seq))
    lines.append("XADD other 1-1 user u0 action click")          # not matched by events:*
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    p = subprocess.run([sys.executable, os.path.join("examples", "user_counts.py"), "--db", str(db),
                        "--source", "events:*", "--target", "user_counts"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "11 users written to user_counts"
    p = run_xs(db, ["XRANGE user_counts - +"])
    entries = json.loads(p.stdout)
    got = [dict(zip(f[0::2], f[1::2])) for _, f in entries]
    assert [g["user"] for g in got] == sorted(expect)                  # one entry per user, in user order
    for g in got:
        e = expect[g["user"]]
        assert g == {"user": g["user"], "events": str(e["events"]), "clicks": str(e["clicks"]),
                     "first": "%d-%d" % min(e["ids"]), "last": "%d-%d" % max(e["ids"])}
    assert sum(int(g["events"]) for g in got) == 3000
