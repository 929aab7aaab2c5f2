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


def spark_session(master, log_fd, root=None):
    """A SparkSession for archiving (local[*] unless ``master``); the
    JVM's stderr goes to the open file ``log_fd``."""
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
        spark = _start_spark(master, log_fd)
    finally:
        os.umask(old_umask)
    from storage.spark.source import register
    register(spark)
    return spark


def _start_spark(master, log_fd):
    with _StderrToLog(log_fd):
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master(master or "local[*]").appName("xs archive")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC")
                 .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    return spark


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
    import pyarrow.parquet as pq
    fd = adir.open_staged(data, rel)
    with os.fdopen(fd, "rb") as f:
        _fix_mode(fd, adir.file_mode)       # Spark wrote it under its own umask
        os.fsync(fd)
        return pq.read_table(f, columns=["id"]).column("id").to_pylist()


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
    entries as Parquet under ``out``; ArchiveError when it fails."""
    say("starting Spark (%s)" % (master or "local[*]"))
    log_fd = open_log(adir)
    try:
        try:
            spark = spark_session(master, log_fd)
        except Exception as e:
            raise ArchiveError("Spark did not start: %s (its log: %s)" % (spark_reason(e), adir.label(LOG)))
        try:
            say("writing Parquet")
            try:
                source = store_path if isinstance(store_path, dict) else {"path": os.path.abspath(store_path)}
                stage(spark, source, todo, out, fields_list,
                      (lambda d, t: say("writing Parquet", d, t)) if progress else None, binary)
            except Exception as e:
                raise ArchiveError("the Spark job failed: %s (nothing was trimmed; Spark's log: %s)" % (
                    _not_utf8(spark_reason(e), binary), adir.label(LOG)))
        finally:
            try:
                spark.stop()
            except Exception:
                pass
    finally:
        os.close(log_fd)
