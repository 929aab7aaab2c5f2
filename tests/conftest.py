"""Shared fixtures.

  store      a fresh storage.Store in tmp_path (library-level tests)
  run        run(script_lines or argv, mode="json") -> replies, through the
             real `xs` executable in script mode on a fresh store
  xs_cmd     the argv prefix that starts xs ([python, -m, xstream_cli])
  redis      a private redis-server on loopback (session-scoped); a small
             RESP3 client with .call(*args) and .flushall(); tests using it
             are skipped when redis-server is not installed
  spark      one SparkSession for the whole test session (local[2], UTC,
             the xstream data source registered); workers run this
             interpreter with the repository on PYTHONPATH; tests using it
             are skipped when pyspark is not installed; every JVM the
             Spark tests start gets SPARK_JVM_OPTS and maps the class-data
             archive the first one made (spark_jvm_env, spark_classes)
  xs_json(db, *lines)   helper: run xs script lines on db, the JSON replies
"""
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest


def _sigint_as_a_terminal_gives_it():
    """A test run started in the background of a shell without job
    control (``cmd &`` in a script, nohup, some CI runners) inherits
    SIGINT ignored, and every process it starts would too: the tests
    that press Ctrl-C on xs would then test nothing but an ignored
    signal.  Give this process (and so its children) the disposition an
    interactive run has: Python's KeyboardInterrupt handler here, the
    default in what it starts."""
    import signal
    try:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:          # not the main thread: leave it
        pass


_sigint_as_a_terminal_gives_it()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:            # tests import each other's helpers as tests.<tier>.<module>
    sys.path.insert(0, ROOT)
XS = [sys.executable, "-m", "xstream_cli"]


@pytest.fixture
def store(tmp_path):
    from storage.store import Store
    s = Store(str(tmp_path / "store"))
    yield s
    s.close()


def new_store(path):
    """Make an empty store at ``path`` (a read never creates one) and
    return ``path``."""
    from storage.store import Store
    Store(str(path), durable=False).close()
    return path


def shell_path(tmp_path):
    """A PATH on which ``xs`` is this checkout's (a small script in
    ``tmp_path/bin``) and ``python3`` the test's interpreter, as in an
    activated virtual environment: for examples run by a shell."""
    import shlex
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "xs").write_text("#!/bin/sh\nexec %s -m xstream_cli \"$@\"\n" % shlex.quote(sys.executable))
    (shim / "xs").chmod(0o755)
    return "%s:%s:%s" % (shim, os.path.dirname(sys.executable), os.environ.get("PATH", ""))


@pytest.fixture
def xs_cmd():
    return list(XS)


def run_xs(db, lines, mode="json", env=None, timeout=60):
    """Run xs in script mode with ``lines`` on stdin; returns the
    CompletedProcess (bytes)."""
    data = b"".join((l if isinstance(l, bytes) else l.encode()) + b"\n" for l in lines)
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(XS + ["--db", str(db), "--" + mode], input=data, capture_output=True,
                          timeout=timeout, env=e, cwd=ROOT)


@pytest.fixture
def run(tmp_path):
    """run(lines) -> list of JSON replies from a fresh store (per test)."""
    db = tmp_path / "xs-store"

    def _run(lines, mode="json"):
        p = run_xs(db, lines, mode)
        if mode != "json":
            return p.stdout
        return [json.loads(l) for l in p.stdout.decode("utf-8", "surrogateescape").splitlines() if l.strip()]
    _run.db = db
    return _run


def _json_text(raw):
    """Bytes as xs --json writes them: a string if UTF-8, else {"b64": ...}."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        import base64
        return {"b64": base64.b64encode(raw).decode("ascii")}


def json_key(k):
    """A map key as xs --json writes it: UTF-8 text, each other byte as
    the surrogate escape U+DC80..U+DCFF (reversible, render._key)."""
    if isinstance(k, dict) and set(k) == {"b64"}:
        import base64
        return base64.b64decode(k["b64"]).decode("utf-8", "surrogateescape")
    return k if isinstance(k, str) else json.dumps(k)


class Resp3:
    """Minimal RESP3 client giving replies in xs's JSON shape."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.buf = b""
        self.call("HELLO", "3")

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self._read()

    def flushall(self):
        self.call("FLUSHALL")

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return {"error": rest.decode()}
        if t == b":":
            return int(rest)
        if t in (b"$", b"=", b"!"):
            n = int(rest)
            if n < 0:
                return None
            raw = self._exact(n)
            if t == b"$":
                return _json_text(raw)          # as xs --json writes a byte string
            data = raw.decode("utf-8", "surrogateescape")
            if t == b"=":
                data = data[4:]
            return {"error": data} if t == b"!" else data
        if t in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        if t in (b"%", b"|"):
            m = {}
            for _ in range(int(rest)):
                k = self._read()
                m[json_key(k)] = self._read()
            return m
        if t == b"_":
            return None
        if t == b",":
            return float(rest)
        if t == b"#":
            return rest == b"t"
        if t == b"(":
            return int(rest)
        raise ValueError("unknown RESP type %r" % line)


@pytest.fixture(scope="session")
def redis():
    binary = shutil.which("redis-server")
    if not binary:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = tempfile.mkdtemp(prefix="xs-test-redis-")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", d],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = None
    for _ in range(200):
        try:
            client = Resp3(port)
            break
        except OSError:
            time.sleep(0.05)
    if client is None:
        proc.kill()
        pytest.fail("redis-server did not start")
    client.port = port
    yield client
    proc.kill()
    proc.wait()
    shutil.rmtree(d, ignore_errors=True)


def xs_json(db, *lines):
    """Run xs script lines on the store ``db``; the JSON replies (fails the
    test when xs exits non-zero)."""
    p = run_xs(db, list(lines))
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.decode("utf-8", "surrogateescape").splitlines() if l.strip()]


# The JVMs the tests start (each SparkSession's driver, spark-submit's
# launcher, a cluster's executors) live seconds and run little: C2's
# compiler threads and G1's threads are then mostly overhead.  C1 only and
# the serial collector cut a Spark start's CPU by about a third (measured:
# 35-40 CPU-s -> 23-24 for a session and its first jobs, on 2 cores),
# which the other test processes of a small CI machine get instead.
# Nothing a test checks depends on the JIT or the collector.
SPARK_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# Loading and verifying Spark's classes is most of a JVM's start (a
# session and its first job: 13-14 s here).  The first Spark test makes a
# class-data archive of them (JDK 13+: -XX:ArchiveClassesAtExit) and every
# Spark JVM after it maps the archive instead: 6.5 s.  A JVM whose class
# path differs (spark-submit's launcher, a cluster's master, worker and
# executors) cannot use it and starts as before; -Xlog:disable keeps its
# notice about that (and every other JVM log line below an error) out of
# the output the tests read.
SPARK_CLASSES = []        # [path of the archive, or None if it could not be made]
# Making it takes about as long as eight JVM starts save: it is made only
# when this many tests of the Spark unit are selected (the whole unit is
# over 100; a single test is quicker without it).
SPARK_CLASSES_FROM = 20
_spark_tests = [0]        # tests of the Spark unit selected (pytest_collection_finish)


def spark_java_options():
    """SPARK_JVM_OPTS, with the class-data archive once there is one."""
    if SPARK_CLASSES and SPARK_CLASSES[0]:
        return SPARK_JVM_OPTS + " -XX:SharedArchiveFile=%s -Xlog:disable -Xlog:all=error:stderr" % SPARK_CLASSES[0]
    return SPARK_JVM_OPTS


def spark_jvm_env():
    """Environment that gives every Spark JVM started under it (also by a
    subprocess: xs archive, an example, a benchmark) spark_java_options();
    what the user already set is kept."""
    env = {}
    opts = spark_java_options()
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:     # pyspark's arguments to spark-submit
        env["PYSPARK_SUBMIT_ARGS"] = ('--driver-java-options "%s" --conf "spark.executor.extraJavaOptions=%s" '
                                      'pyspark-shell' % (opts, SPARK_JVM_OPTS))
    if "SPARK_LAUNCHER_OPTS" not in os.environ:     # spark-submit's own launcher JVM
        env["SPARK_LAUNCHER_OPTS"] = SPARK_JVM_OPTS
    return env


_DUMP_JOB = """
import sys
from pyspark.sql import SparkSession
s = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
df = s.createDataFrame([(i, "u%d" % (i % 3), {"k": str(i)}) for i in range(100)],
                       "n long, user string, fields map<string,string>")
df.groupBy("user").count().orderBy("user").collect()
df.write.partitionBy("user").parquet(sys.argv[1])
s.read.parquet(sys.argv[1]).agg({"n": "max"}).collect()
jvm = s.sparkContext._gateway.proc
s.stop()
jvm.stdin.close()        # the JVM exits when its stdin closes: it then writes the archive
jvm.wait(timeout=300)
"""


def _make_spark_classes(directory):
    """The class-data archive of a small Spark job run under the tests'
    options, or None (no Java 13+, a user's own PYSPARK_SUBMIT_ARGS, the
    job failing): the tests then start their JVMs without it."""
    if "PYSPARK_SUBMIT_ARGS" in os.environ or "SPARK_LAUNCHER_OPTS" in os.environ:
        return None
    target = os.path.join(str(directory), "spark-classes.jsa")
    partial = target + ".part"
    env = dict(os.environ, **spark_env())
    env["PYSPARK_SUBMIT_ARGS"] = ('--driver-java-options "%s -XX:ArchiveClassesAtExit=%s -Xlog:disable" '
                                  'pyspark-shell' % (SPARK_JVM_OPTS, partial))
    try:
        p = subprocess.run([sys.executable, "-c", _DUMP_JOB, os.path.join(str(directory), "spark-classes-job")],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0 or not os.path.isfile(partial):
        return None
    os.replace(partial, target)      # whole, or not there: the JVM maps what it finds
    return target


@pytest.fixture(scope="session")
def spark_classes(tmp_path_factory):
    """The class-data archive every Spark JVM of this test session maps
    (SPARK_CLASSES), made once, before the first Spark JVM; removed at
    the end (it is about 150 MB)."""
    pytest.importorskip("pyspark")
    if not SPARK_CLASSES:
        if _spark_tests[0] < SPARK_CLASSES_FROM or (not os.environ.get("JAVA_HOME") and not shutil.which("java")):
            SPARK_CLASSES.append(None)
        else:
            SPARK_CLASSES.append(_make_spark_classes(tmp_path_factory.mktemp("spark-classes")))
    yield SPARK_CLASSES[0]
    if SPARK_CLASSES[0]:
        try:
            os.unlink(SPARK_CLASSES[0])
        except OSError:
            pass


def spark_env():
    """Environment for Spark's Python workers (and Spark subprocesses): this
    interpreter, and the repository importable; spark_jvm_env()."""
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    env.update(spark_jvm_env())
    if not os.environ.get("JAVA_HOME") and not shutil.which("java"):
        for d in ("/usr/lib/jvm/java-17-openjdk-amd64", "/usr/lib/jvm/java-17-openjdk-arm64",
                  "/usr/lib/jvm/default-java"):
            if os.path.exists(os.path.join(d, "bin", "java")):
                env["JAVA_HOME"] = d
                break
    return env


@pytest.fixture(autouse=True)
def _spark_jvm_options(request, monkeypatch):
    """The Spark unit's tests start their JVMs with SPARK_JVM_OPTS (only
    these variables: a subprocess such as xs archive must still find its
    own way to this interpreter and the repository)."""
    if work_scope(request.node.nodeid) == SPARK_SCOPE:
        if importlib.util.find_spec("pyspark") is not None:
            request.getfixturevalue("spark_classes")
        for k, v in spark_jvm_env().items():
            monkeypatch.setenv(k, v)


@pytest.fixture(scope="session")
def spark(spark_classes):
    """One local[2] SparkSession per test session, xstream registered."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    os.environ.update(spark_env())
    if not os.environ.get("JAVA_HOME") and not shutil.which("java"):
        pytest.skip("no Java found (Spark needs Java 17+; set JAVA_HOME)")
    from pyspark.sql import SparkSession

    from storage.spark import register
    s = (SparkSession.builder.master("local[2]").appName("xs-test")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.default.parallelism", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.python.authenticate.socketTimeout", "120s")    # slow, busy CI machines
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    register(s)
    yield s
    s.stop()


TIERS = ("unit", "engine", "cli", "serve", "compat", "system", "spark")


SPARK_SCOPE = "Spark: one test process, one JVM"


def work_scope(nodeid):
    """What pytest-xdist hands one test process at a time under the test
    command's ``--dist loadfile``: a file, except that every test that
    starts Spark (tests/spark and the Spark benchmark) is one unit, so two
    JVMs never compete for a small machine's cores."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/spark/") or (path == "benchmarks/test_benchmarks_run.py" and nodeid.endswith("[spark]")):
        return SPARK_SCOPE
    return path


def pytest_collection_modifyitems(config, items):
    """Each test is marked with its tier, the folder it is in (tests/unit,
    tests/engine, ...): ``pytest -m "unit or engine"`` is the inner loop.

    The Spark unit (work_scope) goes first: it is the longest, so it starts
    at once in one process while the others share out the files, instead of
    being the tail of the run."""
    for item in items:
        parts = os.path.relpath(str(item.fspath), ROOT).split(os.sep)
        if len(parts) > 2 and parts[0] == "tests" and parts[1] in TIERS:
            item.add_marker(getattr(pytest.mark, parts[1]))
    items.sort(key=lambda item: work_scope(item.nodeid) != SPARK_SCOPE)


def pytest_collection_finish(session):
    """How many tests of the Spark unit run (after -k, -m and the like)."""
    _spark_tests[0] = sum(1 for item in session.items if work_scope(item.nodeid) == SPARK_SCOPE)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with work_scope's units (pytest-xdist's
    ``loadgroup`` would do this with marks, but pytest 9 drops its group
    suffix from the node IDs)."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ScopeScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return work_scope(nodeid)

    return ScopeScheduling(config, log)
