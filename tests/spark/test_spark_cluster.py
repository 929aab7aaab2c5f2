"""The ``xstream`` data source on a small standalone Spark cluster: a
master and one worker started from the pyspark package in their own
JVMs (stopped at the end, also on failure), and a batch job submitted
to it from a separate process (tests/spark_cluster_job.py): executor
reads and a write, and driver-side reads, also of a store that only the
driver can open; and a read and a write with option url only, through
``xs serve`` (the executors never get a store path).  Skipped without
pyspark or Java."""
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

pyspark = pytest.importorskip("pyspark")

from conftest import ROOT, SPARK_JVM_OPTS, spark_env  # noqa: E402
from conftest import xs_json as xs  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.5)
    return False


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:PORT with one worker (1 core, 1 GB)."""
    env = dict(os.environ)
    env.update(spark_env())
    java = os.path.join(env["JAVA_HOME"], "bin", "java") if env.get("JAVA_HOME") else shutil.which("java")
    if not java:
        pytest.skip("no Java found (set JAVA_HOME)")
    package = os.path.dirname(os.path.abspath(pyspark.__file__))
    # The worker builds each executor's command from SPARK_HOME (the package:
    # jars/ is there) and needs the Scala version, which a distribution's
    # scripts would export and the pip package has no file to tell.
    core = glob.glob(os.path.join(package, "jars", "spark-core_*.jar"))
    scala = os.path.basename(core[0]).split("_")[1].split("-")[0] if core else "2.13"
    daemon_env = dict(env, SPARK_HOME=package, SPARK_SCALA_VERSION=scala)
    cp = os.path.join(package, "jars", "*")
    port = free_port()
    logs = []
    procs = []

    def start(cls, *args):
        log = open(str(tmp_path / (cls.rsplit(".", 1)[1] + ".log")), "wb")
        logs.append(log)
        p = subprocess.Popen([java, "-Xmx256m"] + SPARK_JVM_OPTS.split() +
                             ["-Dspark.master.rest.enabled=false", "-cp", cp, cls] + list(args),
                             env=daemon_env, stdout=log,
                             stderr=subprocess.STDOUT, cwd=str(tmp_path))
        procs.append(p)
        return p

    try:
        master = start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                       "--webui-port", str(free_port()))
        assert wait_port(port, master), (tmp_path / "Master.log").read_text(errors="replace")
        start("org.apache.spark.deploy.worker.Worker", "spark://127.0.0.1:%d" % port, "--host", "127.0.0.1",
              "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
              "--work-dir", str(tmp_path / "work"))
        yield "spark://127.0.0.1:%d" % port, env
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def test_batch_read_and_write_on_a_standalone_cluster(cluster, tmp_path):
    from tests.harness.served import Served
    url, env = cluster
    db = tmp_path / "db"
    lines = ["XADD ev:%s * user u%d" % ("ab"[i % 2], i % 3) for i in range(300)]
    xs(db, *lines)
    served_db = tmp_path / "served"            # another store, reached by the executors over the network only
    xs(served_db, *lines[:120])
    served = Served(served_db)
    try:
        served_url = "redis://127.0.0.1:%d" % served.port
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "spark_cluster_job.py"), url, str(db),
                            served_url], capture_output=True, env=env, timeout=600, cwd=str(tmp_path))
    finally:
        served.stop()
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    got = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert got["master"] == url and got["executors"] == 1      # really ran on the cluster's executor
    assert got["per_stream"] == {"ev:a": 150, "ev:b": 150}
    assert got["driver_read_count"] == 300
    # a store only the driver can open: driver_read works, executor reads cannot
    assert got["driver_read_relative"] == 300
    assert got["executor_read_relative"] == "failed: cannot open store"
    (first,) = xs(db, "XRANGE ev:a - + COUNT 3")
    assert got["driver_read_ids"] == [e[0] for e in first]
    (counts,) = xs(db, "XRANGE counts - +")
    assert sorted((e[1][1], e[1][3]) for e in counts) == [("u0", "100"), ("u1", "100"), ("u2", "100")]
    # the url mode on the cluster: read and written by the executors through xs serve
    assert got["url_per_stream"] == {"ev:a": 60, "ev:b": 60} and got["url_sources"] == [served_url]
    (counts,) = xs(served_db, "XRANGE counts - +")
    assert sorted((e[1][1], e[1][3]) for e in counts) == [("u0", "40"), ("u1", "40"), ("u2", "40")]
