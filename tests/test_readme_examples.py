"""The README's shell examples for pipes, tail and import, run as written
by bash (the worker and crontab examples have their own tests in
test_worker.py and test_trim_porcelain.py).  Each example must appear in
the README word for word, so the README cannot drift from what is run."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()


@pytest.fixture
def sh(tmp_path):
    """Run a bash line with `xs` on PATH (this checkout) and XS_DB set to
    a fresh store; returns (stdout, stderr, exit status)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    xs = bindir / "xs"
    xs.write_text('#!/bin/sh\nexec "%s" -m xstream_cli "$@"\n' % sys.executable)
    xs.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")), XS_DB=str(tmp_path / "store"),
               PYTHONPATH=ROOT, LC_ALL="C.UTF-8")

    def run(line, stdin=b""):
        p = subprocess.run(["bash", "-o", "pipefail", "-c", line], input=stdin, capture_output=True, env=env,
                           cwd=str(tmp_path), timeout=120)
        return p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), p.returncode
    return run


def in_readme(line):
    assert line in README, "the README no longer shows: %s" % line
    return line


def test_the_using_it_lines_run(sh):
    out, err, code = sh(in_readme("xs XADD events '*' user alice action login"))
    assert code == 0 and out.strip().endswith("-0"), err
    out, err, code = sh(in_readme("printf 'XADD s * a 1\\nXLEN s\\n' | xs"))
    assert code == 0 and out.splitlines()[-1] == "1", err
    line = in_readme("xs --json XREAD COUNT 10 STREAMS events 0 | jq .")
    if shutil.which("jq") is None:
        line = line.replace(" | jq .", "")
    out, err, code = sh(line)
    assert code == 0, err
    assert "alice" in out and json.loads(out)["events"][0][1] == ["user", "alice", "action", "login"]


def test_the_import_lines_run(sh):
    out, err, code = sh(in_readme("""printf '%s\\n' '{"user":"u1","n":3}' | xs import --stream events"""))
    assert code == 0, err
    out, err, code = sh("producer() { printf 'user=u2 action=click\\nuser=u3 note=\"two words\"\\n'; }; "
                        + in_readme("producer | xs import --stream events --format kv -"))
    assert code == 0, err
    out, _, _ = sh("xs --json XRANGE events - +")
    assert [e[1] for e in json.loads(out)] == [["user", "u1", "n", "3"], ["user", "u2", "action", "click"],
                                               ["user", "u3", "note", "two words"]]


def test_tail_json_into_import_copies_and_tail_greps_utf8(sh):
    sh("xs XADD s '*' city München a 1 && xs XADD s '*' city Paris")
    out, err, code = sh(in_readme("xs tail --json s | xs --db other import"))
    assert code == 0, err
    a, _, _ = sh("xs --json XRANGE s - +")
    b, _, _ = sh("xs --db other --json XRANGE s - +")
    assert a == b and "München" in a
    out, err, code = sh(in_readme("xs tail s | grep München"))
    assert code == 0 and out.count("\n") == 1 and "city=München" in out, (out, err)
