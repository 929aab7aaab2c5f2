"""The Python blocks (```python) of docs/spark.md, run as written, in
order, in one Python process with one SparkSession ``spark`` on
``local[*]`` (the doc's ``spark``; its table says local[*] reads the
store directly): the doc's paths (/data/..., /srv/archive) are mapped
into a directory of the test, which is the process's working directory.

The store the blocks read, /data/store, is made first with xs: two
streams matching ``events:*`` and one that does not.  What each block
writes (the copy, the streaming sink's stream, the group's progress) is
checked with xs.  The archive the last block reads is made by the doc's
``xs archive`` example, on the user's store (XS_DB: another store, with
the 2001 entries below the example's cut, over the UTC days 2023-11-14
to 18, that its output implies), run by a shell while the first blocks
run; it must print what the doc shows.

A Python block that cannot run here would be listed in NOT_RUN with the
reason (none is); a block that is neither run nor listed fails
test_every_python_block_is_run_or_listed, as does Python written as an
indented block, which this test would not see."""
import ast
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pytest

from conftest import ROOT, run_xs, shell_path, spark_env, xs_json

DOC = os.path.join(ROOT, "docs", "spark.md")

# how each Python block is recognised (a text it holds), and what runs it
RUN = {"register(spark)": "batch", ".readStream.": "streaming", "spark.read.parquet(": "archive"}
# text -> why the block cannot run here (never silently skipped)
NOT_RUN: dict = {}

# below the cut of the doc's xs archive example (--before 1700300000000): 2023-11-14 .. 2023-11-18
WEB = ["%d-0" % (1700000000000 + i * 299000) for i in range(1001)]
APP = ["%d-0" % (1700000000500 + i * 299000) for i in range(1000)]
LATE = "1700400000000-0"               # above it: stays in the stream


def doc_text():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def python_blocks(text):
    """[(line number of the block's first line, code)] of every ```python block."""
    return [(text[:m.start(1)].count("\n") + 1, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```$", text, re.S | re.M)]


def indented_blocks(text):
    """The indented (4 spaces) code blocks outside fences, dedented."""
    text = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    return [textwrap.dedent(m.group(0)) for m in re.finditer(r"(?:^    .*\n?)+", text, re.M)
            if text[:m.start()].endswith("\n\n")]


def kind(code):
    names = [v for k, v in RUN.items() if k in code] + [k for k in NOT_RUN if k in code]
    assert len(names) == 1, "docs/spark.md: a Python block must match one of RUN or NOT_RUN:\n%s" % code
    return names[0]


def test_every_python_block_is_run_or_listed():
    text = doc_text()
    blocks = python_blocks(text)
    kinds = [kind(code) for _, code in blocks]
    assert sorted(kinds) == sorted(set(RUN.values()) | set(NOT_RUN)), "each of RUN and NOT_RUN names one block"
    for block in indented_blocks(text):
        try:
            ast.parse(block)
        except SyntaxError:
            continue                    # a shell example
        raise AssertionError("docs/spark.md shows Python as an indented block; make it a ```python block, "
                             "which tests/spark/test_spark_docs.py runs:\n" + block)


# ------------------------------------------------------------ the Python process

DRIVER = r'''
import ast, contextlib, io, json, sys, traceback
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[*]").appName("docs/spark.md")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
         .config("spark.python.authenticate.socketTimeout", "120s").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
ns = {"__name__": "__main__", "spark": spark}
def reply(r):
    sys.__stdout__.write("@@reply %s\n" % json.dumps(r, default=repr))
    sys.__stdout__.flush()
reply({"ready": True})
for line in sys.stdin:
    req, out, values = json.loads(line), io.StringIO(), []
    try:
        with contextlib.redirect_stdout(out):           # as in the interpreter: each statement in turn
            for node in ast.parse(req["code"], req["file"]).body:
                if isinstance(node, ast.Expr):
                    values.append(eval(compile(ast.Expression(node.value), req["file"], "eval"), ns))
                else:
                    exec(compile(ast.Module([node], []), req["file"], "exec"), ns)
        if req["keep"]:
            ns["_values"] = values                       # the values of the block's expressions
        reply({"stdout": out.getvalue(), "value": values[-1] if values else None})
    except BaseException:
        reply({"stdout": out.getvalue(), "error": traceback.format_exc()})
'''


class Python:
    """A Python process holding ``spark``, which runs code sent to it."""

    def __init__(self, cwd, env, log):
        self.log, self.err = log, open(log, "wb")
        self.proc = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            assert self._reply().get("ready")
        except BaseException:
            self.close()
            raise

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith(b"@@reply "):
                self.lines.put(json.loads(line[8:]))
        self.lines.put(None)

    def _reply(self, timeout=600):
        try:
            r = self.lines.get(timeout=timeout)
        except queue.Empty:
            r = None
        assert r is not None, "the Python process died or hung; its log:\n" + self.tail()
        return r

    def tail(self):
        with open(self.log, "rb") as f:
            return f.read()[-4000:].decode("utf-8", "replace")

    def run(self, code, file="<test>", keep=False):
        """Run ``code``; the value of its last expression statement."""
        self.proc.stdin.write((json.dumps({"code": code, "file": file, "keep": keep}) + "\n").encode())
        self.proc.stdin.flush()
        r = self._reply()
        assert "error" not in r, "%s failed:\n%s\n%s" % (file, code, r["error"])
        return r["value"]

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.err.close()


# ------------------------------------------------------------------- the test

def fields(db, *streams):
    """The entries' field lists of ``streams``, as a multiset."""
    return Counter(tuple(f) for s in streams for _, f in xs_json(db, "XRANGE %s - +" % s)[0])


def group(db, stream, name):
    return [g for g in xs_json(db, "XINFO GROUPS " + stream)[0] if g["name"] == name][0]


def seed(db):
    """events:web and events:app (and a stream not matched by events:*),
    made with xs; the field lists of events:*."""
    lines = ["XADD events:web %s user u%d action %s" % (i, n % 7, "click" if n % 3 else "view")
             for n, i in enumerate(WEB)]
    lines += ["XADD events:app %s user u%d action %s" % (i, n % 5, "view" if n % 4 else "click")
              for n, i in enumerate(APP)]
    lines += ["XADD events:web %s user u1 action click" % LATE, "XADD events:app %s user u2 action view" % LATE,
              "XADD other 1-1 user u0 action click"]
    assert run_xs(db, lines).returncode == 0
    events = fields(db, "events:web", "events:app")
    assert sum(events.values()) == len(WEB) + len(APP) + 2
    return events


class ArchiveExample:
    """The doc's xs archive example, started by a shell on the user's
    store; ``check()`` waits for it: it prints what the doc shows."""

    def __init__(self, text, local, work, env):
        m = re.search(r"^    \$ (xs archive .*)\n    (archived .*)$", text, re.M)
        assert m, "docs/spark.md no longer shows an xs archive example with its output"
        self.db, self.shown = env["XS_DB"], local(m.group(2)) + "\n"
        seed(self.db)
        self.proc = subprocess.Popen(["bash", "-c", local(m.group(1))], cwd=str(work), env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def check(self):
        out, err = self.proc.communicate(timeout=600)
        assert self.proc.returncode == 0, err.decode("utf-8", "replace")[-3000:]
        assert out.decode() == self.shown
        assert xs_json(self.db, "XRANGE events:web - +", "XRANGE events:app - +") == [
            [[LATE, ["user", "u1", "action", "click"]]], [[LATE, ["user", "u2", "action", "view"]]]]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def test_the_python_blocks_of_docs_spark_md_run_as_written(tmp_path):
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    env = dict(os.environ, **spark_env(), PATH=shell_path(tmp_path), XS_DB=str(tmp_path / "users-store"))
    if not env.get("JAVA_HOME") and not shutil.which("java"):
        pytest.skip("no Java found (Spark needs Java 17+; set JAVA_HOME)")
    text = doc_text()
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    db = work / "data" / "store"

    def local(s):
        return s.replace("/data/", "%s/data/" % work).replace("/srv/archive", "%s/srv/archive" % work)

    events = seed(db)
    archive = ArchiveExample(text, local, work, env)     # its own JVM: while the blocks before it run
    try:
        py = Python(str(work), env, str(tmp_path / "spark.log"))
        try:
            for line, code in python_blocks(text):
                if kind(code) in NOT_RUN:
                    continue
                if kind(code) == "archive":
                    archive.check()
                # "\n" * ...: the doc's own line numbers in a traceback
                py.run("\n" * (line - 1) + local(code), file="docs/spark.md", keep=True)
                CHECKS[kind(code)](py, db, events)
        finally:
            py.close()
    finally:
        archive.stop()


def check_batch(py, db, events):
    """The copy holds every entry's fields; nothing went back to events:*."""
    assert fields(db, "copy") == events
    assert xs_json(db, "XLEN events:web", "XLEN events:app") == [len(WEB) + 1, len(APP) + 1]


def check_streaming(py, db, events):
    """The sink's stream holds every entry once; the group follows Spark,
    one micro-batch behind until Spark plans the next one."""
    rows = "q.processAllAvailable()\nsum(p['numInputRows'] for p in q.recentProgress)"
    assert py.run("import pyspark.sql.streaming\nq = _values[-1]\n"
                  "assert isinstance(q, pyspark.sql.streaming.StreamingQuery)\n" + rows) == sum(events.values())
    assert fields(db, "clean:events") == events
    assert xs_json(db, "XADD events:web 1700500000000-0 user u3 action click")[0] == "1700500000000-0"
    assert py.run(rows) == sum(events.values()) + 1
    assert xs_json(db, "XLEN clean:events") == [sum(events.values()) + 1]
    web, app = group(db, "events:web", "spark"), group(db, "events:app", "spark")
    assert (web["last-delivered-id"], web["lag"], web["pending"]) == (LATE, 1, 0)     # the last batch: not yet
    assert (app["last-delivered-id"], app["lag"], app["pending"]) == (LATE, 0, 0)
    assert [c["name"] for c in xs_json(db, "XINFO CONSUMERS events:web spark")[0]] == ["daily-job"]
    assert len(xs_json(db, "KEYS spark-sink:*")[0]) == 1                   # the sink's progress stream
    py.run("q.stop()")


def check_archive(py, db, events):
    """Spark reads one stream's days, pyarrow the whole archive."""
    days = "sorted(str(r.date) for r in _values[0].select('date').distinct().collect())"
    assert py.run("_values[0].count(), %s" % days) == [len(WEB), ["2023-11-%d" % d for d in range(14, 19)]]
    assert py.run("_values[1].count_rows(), sorted(set(_values[1].to_table(['stream']).column('stream')"
                  ".to_pylist()))") == [len(WEB) + len(APP), ["events:app", "events:web"]]


# what checks a block after it ran
CHECKS = {"batch": check_batch, "streaming": check_streaming, "archive": check_archive}
