"""xs archive's Spark job and its verification: a SparkSession whose
log goes to DIR/_xs_archive.log, the job that writes the planned entries
as Parquet, and the read-back that checks the staged files against the
plan (pyspark and pyarrow are imported here, lazily)."""
import os
import threading
import urllib.parse

from storage.spark.archive.common import LOG, ROWS_PER_PARTITION, ArchiveError, id_text, parse_id_text
from storage.spark.archive.directory import _fix_mode


def _glob_escape(name):
    """A stream name as a glob matching only itself (the data source reads
    a name with glob characters as a glob)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in name)


def open_log(adir):
    """DIR/_xs_archive.log for writing, emptied: this user's own file,
    opened without following a link and checked before it is truncated
    (never a path to something else, such as the store's data file)."""
    try:
        fd = adir.open_file(LOG, os.O_WRONLY | os.O_CREAT)
    except OSError as e:
        raise ArchiveError("cannot write Spark's log %s: %s" % (adir.label(LOG), e.strerror or e))
    os.ftruncate(fd, 0)
    return fd


class _StderrToLog:
    """Send file descriptor 2 to the open file ``fd`` while a JVM starts,
    so its log lines (and those of its Python workers, which inherit its
    stderr) go to the log, not to the user's terminal."""

    def __init__(self, fd):
        self.fd = fd

    def __enter__(self):
        self.saved = os.dup(2)
        os.dup2(self.fd, 2)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)


def spark_session(master, log_fd, root=None, jvm=None):
    """A SparkSession for archiving (local[*] unless ``master``); the
    JVM's stderr goes to the open file ``log_fd``; ``jvm``: the run's
    SparkJvm, which launches the JVM and stops it with the run."""
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if root is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)
    old_umask = os.umask(0o077)     # the JVM and its workers make what they write private
    try:
        spark = _start_spark(master, log_fd, jvm)
    finally:
        os.umask(old_umask)
    from storage.spark.source import register
    register(spark)
    return spark


def _conf(master):
    from pyspark import SparkConf
    return (SparkConf().setMaster(master or "local[*]").setAppName("xs archive")
            .set("spark.ui.enabled", "false")
            .set("spark.sql.session.timeZone", "UTC")
            .set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"))


def _start_spark(master, log_fd, jvm=None):
    with _StderrToLog(log_fd):
        from pyspark.sql import SparkSession
        conf = _conf(master)
        if jvm is not None:
            jvm.launch(conf, log_fd)        # the run's own JVM (else: the process's, as getOrCreate finds it)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    return spark


# ================================================================ the run's JVM

MARK = "XS_ARCHIVE_JVM"     # in the environment of the run's JVM and of every process it starts
GRACE = 3.0                 # seconds a JVM has to exit on SIGTERM before SIGKILL


def _sweep(marker, grace):
    """Kill every process whose environment holds ``marker`` (bytes,
    NAME=VALUE): SIGTERM, then SIGKILL after ``grace`` seconds (at once
    when 0), until none is left (at most ``grace`` + 5 s).  Self-contained:
    the watchdog runs its source."""
    import os
    import signal
    import time

    def marked():
        found: list = []
        try:
            names = os.listdir("/proc")
        except OSError:
            return found
        for d in names:
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % d, "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if marker in env.split(b"\0"):
                found.append(int(d))
        return found

    start = time.monotonic()
    termed = set()
    while True:
        pids = marked()
        if not pids:
            return
        now = time.monotonic() - start
        if now > grace + 5:
            return
        for pid in pids:
            if now >= grace or pid not in termed:
                try:
                    os.kill(pid, signal.SIGKILL if now >= grace else signal.SIGTERM)
                except OSError:
                    pass
                termed.add(pid)
        time.sleep(0.05)


def _watchdog(marker):
    """The watchdog's main: wait for EOF on stdin (the run ended or died,
    even by SIGKILL), then kill what is left of its JVM at once."""
    import os
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            if not os.read(0, 512):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    _sweep(os.fsencode(marker), 0)


class Terminated(BaseException):
    """SIGTERM or SIGHUP while Spark ran: raised in the main thread so
    that the JVM is stopped and the run unwinds as on Ctrl-C (then the
    caller dies of ``signum``)."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class SparkJvm:
    """Spark's JVM for one run, tied to it: launched (through pyspark's
    launch_gateway) in a session of its own, so a terminal's Ctrl-C and
    hangup reach xs only, with stdout and stderr in the run's log; its
    environment and that of every process it starts (the Python workers)
    holds MARK=<random token>, by which ``stop`` finds and kills them all.
    A watchdog process (its own session too) holds the read end of a pipe
    only this process writes: when the run ends or dies (even SIGKILLed)
    it reads EOF and kills whatever still holds the token.  While the
    JVM lives, SIGTERM and SIGHUP raise Terminated and pyspark's SIGINT
    handler (which calls the JVM from a signal handler) is not kept:
    Ctrl-C raises KeyboardInterrupt as it does elsewhere in xs."""

    def __init__(self):
        import uuid
        self.token = uuid.uuid4().hex
        self.marker = "%s=%s" % (MARK, self.token)
        self.proc = None                # the JVM's Popen, once launched
        self.ours = False               # pyspark's gateway is ours to forget when the JVM is gone
        self.watchdog = None
        self.pipe = None
        self.saved: dict = {}
        self.quiet = None

    def __enter__(self):
        self._quiet_logging()
        self._handle_signals()
        self._start_watchdog()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _quiet_logging(self):
        """py4j and pyspark log their tracebacks through the root logger
        (which, unconfigured, prints them): while the JVM lives, a root
        without handlers gets a NullHandler."""
        import logging
        root = logging.getLogger()
        if not root.handlers:
            self.quiet = logging.NullHandler()
            root.addHandler(self.quiet)

    def _handle_signals(self):
        import signal
        import threading
        if threading.current_thread() is not threading.main_thread():
            return

        def terminated(signum, frame):
            raise Terminated(signum)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                self.saved[sig] = signal.signal(sig, terminated)
        self.saved[signal.SIGINT] = signal.getsignal(signal.SIGINT)

    def _start_watchdog(self):
        import inspect
        import subprocess
        import sys
        try:
            code = "import sys\n%s\n%s\n_watchdog(sys.argv[1])\n" % (inspect.getsource(_sweep),
                                                                      inspect.getsource(_watchdog))
        except (OSError, TypeError):        # no source to run: stop() still kills the JVM, unless xs is killed
            return
        r, w = os.pipe()                    # both ends close on exec: the watchdog gets r as its stdin only
        try:
            self.watchdog = subprocess.Popen([sys.executable, "-I", "-c", code, self.marker], stdin=r,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True, cwd="/")
        except OSError:
            os.close(w)
            return
        finally:
            os.close(r)
        self.pipe = w

    def launch(self, conf, log_fd):
        """Launch the JVM for ``conf`` and make it pyspark's (what
        SparkSession.builder.getOrCreate() then uses), unless this
        process has a gateway already (a SparkContext of the caller's:
        it is used, as getOrCreate would)."""
        from pyspark import SparkContext
        from pyspark.java_gateway import launch_gateway
        if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
            return
        old = os.environ.get(MARK)
        os.environ[MARK] = self.token
        try:
            gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True, "stdout": log_fd,
                                                         "stderr": log_fd})
        finally:
            if old is None:
                os.environ.pop(MARK, None)
            else:
                os.environ[MARK] = old
        self.proc = gateway.proc
        self.ours = True
        try:
            SparkContext(conf=conf, gateway=gateway)
        finally:
            self._restore_sigint()

    def _restore_sigint(self):
        """SparkContext installs a SIGINT handler that calls the JVM (from
        inside a call to the JVM: py4j's tracebacks): the previous one
        comes back."""
        import signal
        if signal.SIGINT in self.saved:
            try:
                signal.signal(signal.SIGINT, self.saved[signal.SIGINT])
            except (ValueError, TypeError):
                pass

    def stop(self, spark=None):
        """Stop Spark (``spark``: stopped first, cleanly) and end the JVM
        and every process it started, whatever happened; restore what
        was changed.  A Ctrl-C, SIGTERM or SIGHUP meanwhile waits (some
        seconds at most), then is delivered again, to the handlers of
        before the run.  Raises nothing else."""
        import signal
        import threading
        held = {}
        pending = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                try:
                    held[sig] = signal.signal(sig, lambda signum, frame: pending.append(signum))
                except (ValueError, OSError):
                    pass
        try:
            self._end(spark)
        finally:
            for sig, h in held.items():
                try:
                    signal.signal(sig, self.saved.get(sig, h))
                except (ValueError, OSError, TypeError):
                    pass
            self.saved = {}
            if self.quiet is not None:
                import logging
                logging.getLogger().removeHandler(self.quiet)
                self.quiet = None
            if pending:
                os.kill(os.getpid(), pending[0])

    def _end(self, spark):
        import signal
        import subprocess
        import warnings
        if spark is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    spark.stop()
                except Exception:
                    pass
        accumulators = _quiet_accumulators() if self.ours else None
        if self.proc is not None:
            try:
                self.proc.stdin.close()         # the JVM exits on EOF (pyspark's gateway server)
                self.proc.wait(GRACE if spark is not None else 0.2)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                except OSError:
                    pass
        _sweep(os.fsencode(self.marker), GRACE)     # the JVM, its workers, or a JVM still starting
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if accumulators is not None:
            try:
                accumulators.shutdown()
            except Exception:
                pass
        if self.ours:
            _forget_gateway()
        if self.pipe is not None:
            os.close(self.pipe)
            self.pipe = None
        if self.watchdog is not None:
            try:
                self.watchdog.wait(GRACE + 6)
            except subprocess.TimeoutExpired:
                self.watchdog.kill()
                self.watchdog.wait()
            self.watchdog = None


def _quiet_accumulators():
    """pyspark's accumulator server (a thread of this process the JVM
    talks to) prints a traceback when the JVM goes away mid-talk: not
    once it is ours to stop.  Returns it, or None."""
    try:
        from pyspark import SparkContext
        sc = SparkContext._active_spark_context
        server = getattr(sc, "_accumulatorServer", None) if sc is not None else None
        if server is not None:
            server.handle_error = lambda request, address: None
        return server
    except Exception:
        return None


def _forget_gateway():
    """pyspark's state once our JVM is gone: no session, no context, no
    gateway (the next run launches a JVM of its own)."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
        gateway = SparkContext._gateway
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        if gateway is not None:
            gateway.close()
    except Exception:
        pass


def _watch(spark, report, stop):
    """Report (done, total) tasks of the running job until ``stop``."""
    tracker = spark.sparkContext.statusTracker()
    while not stop.wait(0.5):
        done = total = 0
        try:
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info:
                    done += info.numCompletedTasks
                    total += info.numTasks
        except Exception:       # the tracker is advisory: never fail the run for it
            continue
        if total:
            report(done, total)


def stage(spark, source, plans, out, fields_list=False, report=None, binary=False):
    """Write the planned entries as Parquet under ``out``, partitioned by
    stream and date (``binary``: values as binary, not strings);
    ``source``: the data source's options that name the store (``path``,
    or ``url`` and its credentials)."""
    from pyspark.sql import functions as F
    frames = []
    for p in plans:
        parts = max(1, min(64, -(-p.rows // ROWS_PER_PARTITION)))
        r = spark.read.format("xstream")
        for k, v in source.items():
            r = r.option(k, v)
        r = (r.option("stream", _glob_escape(p.name))
             .option("start", id_text(p.first)).option("end", id_text(p.last)).option("partitions", parts))
        if fields_list:
            r = r.option("fields_list", "true")
        if binary:
            r = r.option("binary", "true")
        df = r.load()
        if "url" in source:
            df = df.drop("source")          # the url mode's column: an archive has the path mode's columns
        frames.append(df)
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    df = df.withColumn("date", F.date_format(F.col("ts"), "yyyy-MM-dd"))
    df = df.sortWithinPartitions("stream", "date", "ms", "seq")
    stop = threading.Event()
    watcher = None
    if report is not None:
        watcher = threading.Thread(target=_watch, args=(spark, report, stop), daemon=True)
        watcher.start()
    try:
        df.write.partitionBy("stream", "date").mode("errorifexists").parquet(out)
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()


def spark_reason(e):
    """One line saying why a Spark job failed (the data source's own
    ``xstream: ...`` message when there is one)."""
    text = str(e)
    for line in text.splitlines():
        i = line.find("xstream: ")
        if i >= 0:
            return line[i:].strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if "Exception:" in l or "Error:" in l:
            return l[:300]
    return (lines[0] if lines else type(e).__name__)[:300]


def staged_files(adir, data):
    """[(relative path, stream name)] of the Parquet files Spark wrote in
    DIR/``data`` (components), walked without following links."""
    top = adir.open_dirs(data, create=False)
    if top is None:
        raise ArchiveError("the Spark job did not write %s" % adir.label(*data))
    found = []
    try:
        for d, _, files, _ in os.fwalk(".", dir_fd=top):
            for f in files:
                if f.endswith(".parquet") and not f.startswith("."):
                    rel = os.path.normpath(os.path.join(d, f))
                    first = rel.split("/")[0]
                    if not first.startswith("stream=") or len(rel.split("/")) != 3:
                        raise ArchiveError("unexpected file %s in the staged archive" % rel)
                    found.append((rel, urllib.parse.unquote(first[len("stream="):])))
    finally:
        os.close(top)
    return sorted(found)


def _read_staged_ids(adir, data, rel):
    """The ``id`` column of a staged file, opened without following a
    link; the file gets the run's file mode (private: 0600, unless
    --mode) and is fsynced on the way."""
    fd = adir.open_staged(data, rel)
    with os.fdopen(fd, "rb") as f:
        _fix_mode(fd, adir.file_mode)       # Spark wrote it under its own umask
        os.fsync(fd)
        return parquet_ids(f)


def parquet_ids(f):
    """The ``id`` column of the Parquet file ``f``, read in this thread: Arrow's thread pools
    (pq.read_table's) can abort a process at exit (SIGABRT; apache/arrow#34314), xs archive's too."""
    import pyarrow.parquet as pq
    pf = pq.ParquetFile(f, pre_buffer=False)
    return pf.read(columns=["id"], use_threads=False).column("id").to_pylist()


def verify(adir, data, plans):
    """Read the staged files' IDs back (DIR/``data``, components) and
    check them against the plan, one file at a time (memory: one file's
    IDs): within a file IDs must strictly increase (the job sorts them),
    a stream's files must not overlap, and per stream the row count and
    the first and last IDs must be the planned ones.  Every file gets
    the run's file mode and is fsynced.  Returns [(relative path,
    stream, first, last, rows)] per file."""
    top = adir.open_dirs(data, create=False)
    try:
        done = top is not None and adir.lstat("_SUCCESS", top) is not None
    finally:
        if top is not None:
            os.close(top)
    if not done:
        raise ArchiveError("the Spark job did not finish writing %s" % adir.label(*data))
    by_name = {p.name: p for p in plans}
    spans: dict = {p.name: [] for p in plans}
    files = []
    for rel, name in staged_files(adir, data):
        if name not in by_name:
            raise ArchiveError("the staged archive holds a stream that was not planned: %r" % name)
        got = [parse_id_text(t) for t in _read_staged_ids(adir, data, rel)]
        if not got:
            continue
        if any(a >= b for a, b in zip(got, got[1:])):
            raise ArchiveError("verification failed: %s holds IDs out of order or twice.  Nothing was trimmed" % rel)
        files.append((rel, name, got[0], got[-1], len(got)))
        spans[name].append((got[0], got[-1], len(got)))
    for p in plans:
        s = sorted(spans[p.name])
        rows = sum(n for _, _, n in s)
        overlap = any(a[1] >= b[0] for a, b in zip(s, s[1:]))
        first = s[0][0] if s else None
        last = max(x[1] for x in s) if s else None
        if overlap or rows != p.rows or first != p.first or last != p.last:
            raise ArchiveError(
                "verification failed for stream %s: Parquet holds %d rows%s, %s..%s; the stream held %d, %s..%s "
                "(entries deleted while archiving?).  Nothing was trimmed" % (
                    p.name, rows, " in overlapping files" if overlap else "", first and id_text(first),
                    last and id_text(last), p.rows, id_text(p.first), id_text(p.last)))
    return files


def final_path(rel, first, last):
    """stream=NAME/date=D/FIRST_LAST.parquet for a staged file."""
    parts = rel.split("/")
    return "/".join(parts[:-1] + ["%s_%s.parquet" % (id_text(first), id_text(last))])


def _not_utf8(reason, binary):
    """The data source's hint names its own option; a person running
    xs archive needs the option of xs archive."""
    if not binary and "(read it with option binary=true)" in reason:
        return reason.replace("(read it with option binary=true)",
                              "(archive it with xs archive --binary, into a new directory: values then "
                              "become binary columns, losslessly)")
    return reason


def _spark_job(adir, master, store_path, todo, out, fields_list, progress, say, binary):
    """Start Spark (its log: DIR/_xs_archive.log) and write the planned
    entries as Parquet under ``out``; ArchiveError when it fails.  The
    JVM lives only as long as this call (SparkJvm): Ctrl-C
    (KeyboardInterrupt), SIGTERM or SIGHUP (Terminated) at any moment end
    it, and every process it started, before they propagate."""
    say("starting Spark (%s)" % (master or "local[*]"))
    log_fd = open_log(adir)
    try:
        jvm = SparkJvm()
        spark = None
        try:
            jvm.__enter__()
            try:
                spark = spark_session(master, log_fd, jvm=jvm)
            except Exception as e:
                raise ArchiveError("Spark did not start: %s (its log: %s)" % (spark_reason(e), adir.label(LOG)))
            say("writing Parquet")
            try:
                source = store_path if isinstance(store_path, dict) else {"path": os.path.abspath(store_path)}
                stage(spark, source, todo, out, fields_list,
                      (lambda d, t: say("writing Parquet", d, t)) if progress else None, binary)
            except Exception as e:
                raise ArchiveError("the Spark job failed: %s (nothing was trimmed; Spark's log: %s)" % (
                    _not_utf8(spark_reason(e), binary), adir.label(LOG)))
        except BaseException as e:
            # interrupted (or failed): the JVM is ended, not asked (a job may still run in it)
            jvm.stop(spark if isinstance(e, Exception) else None)
            raise
        jvm.stop(spark)
    finally:
        os.close(log_fd)
