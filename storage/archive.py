"""Archiving old entries to Parquet with Spark, then trimming them: the
engine of ``xs archive`` (pyspark and pyarrow are imported only here,
and only when a run needs them; no click, no rich).

What a run does, for the streams it is given and a cut ID (entries with
an ID below the cut go):

 1. lock       DIR/_xs_archive.lock (flock): one archiver per DIR at a time.
 2. recover    the manifest DIR/_xs_archive.json says what earlier runs
               did.  A run killed after its files were verified ("pending"
               in the manifest) is rolled forward: its remaining moves are
               made and it is committed.  Then DIR/_staging is removed
               (what killed runs left there was never committed).
 3. leftovers  per stream, the entries at or below its archived-through
               ID that are still in the stream (a run killed before its
               trim) are trimmed: they are in the archive already.
 4. plan       per stream, in one read transaction: the entries above its
               archived-through ID and below the cut: count, first, last.
 5. stage      a Spark job reads exactly [first, last] of each stream
               through the ``xstream`` data source (storage.spark) and
               writes Parquet partitioned ``stream=NAME/date=YYYY-MM-DD``
               (the UTC day of the ID's ms) into DIR/_staging/RUN/data.
 6. verify     the staged files are read back (pyarrow, the ``id`` column, a file at a time):
               per stream the row count, the first and last IDs and that
               no ID is there twice (IDs strictly increase within a file,
               files do not overlap) must be what step 4 planned.  Unique
               IDs, all from the stream, inside [first, last], as many as
               the stream held there: exactly the planned entries.  Then
               every staged file is fsynced.
 7. pending    the manifest records the run as pending: its per-stream
               first/last/rows and every move (staged path -> final path).
 8. move       each file is renamed to DIR/stream=NAME/date=D/FIRST_LAST.parquet
               (FIRST, LAST: the file's first and last IDs, ``ms-seq``), so
               a name says which entries a file holds and the same rows
               always get the same name; the directories are fsynced.
 9. commit     the manifest records, per stream, the archived-through ID
               (the last ID archived) and the run's first/last/rows, and
               drops "pending".
10. trim       one write transaction removes, in every stream, the entries
               at or below its archived-through ID: XTRIM MINID with the
               ID right after it, exact, KEEPREF (pending entries of groups
               keep their PEL entries, as XTRIM does).  The data source
               read no entry above the planned last one, and IDs only
               grow, so this removes exactly the archived entries; it is
               XTRIM MINID cut when the stream holds an entry at or above
               the cut, and when it does not, an entry a producer adds
               below the cut during the run stays for the next run.
               Before trimming, the transaction checks that the entries
               it removes lie inside the stream's last archived run (a
               stream deleted and made again with smaller IDs is refused,
               not trimmed).
11. clean      DIR/_staging/RUN is removed.

Manifest writes are atomic (a temporary file, fsync, rename, fsync of
DIR), so the manifest is always the old one or the new one.

Killed at any point, no entry is lost and a re-run converges without
duplicate rows:

* before 7 (planning, the Spark job, verifying): only DIR/_staging/RUN
  exists; the stream is untouched.  The re-run removes the staging
  directory and archives the same entries again.
* between 7 and 9 (pending recorded, some or all files moved): every
  entry of the run is in a verified file, in staging or in place; the
  re-run finishes the moves (a file already moved is skipped) and
  commits, before it plans anything, so the entries are never staged
  twice.  Nothing was trimmed.  A re-run killed while finishing the
  moves leaves the same state: the next one goes on.
* between 9 and 10 (committed, not trimmed): the entries are in the
  archive and in the stream; the re-run's step 3 trims them and step 4
  starts above the archived-through ID, so nothing is written twice.
* during 10: one transaction: all trimmed or none.
* after 10 (staging not yet removed): the re-run removes it.

An entry is thus always in the stream, the archive or both.  Each named
step can be made to kill the process (SIGKILL, for the tests) with the
environment variable ``XS_ARCHIVE_KILL_AT=STEP``, STEP one of
``KILL_POINTS``: planned (after 4), staged (after 5), verified (after
6), pending (after 7), recovering (after the first move of step 2),
moving (after the first move of 8), moved (after 8), committed (after
9), trimmed (after 10).

Archive layout: ``DIR/stream=NAME/date=YYYY-MM-DD/FIRST_LAST.parquet``,
NAME escaped as Spark escapes partition values (``:`` is ``%3A``), so
``spark.read.parquet(DIR)`` gives columns id, ms, seq, ts, fields (and
fields_list with ``fields_list=True``), stream, date.  ``fields`` is a
map: a field name given twice in one entry keeps its last value there;
``fields_list`` keeps every field in order.  Values must be UTF-8 (the
data source's rule): an entry that is not fails the run before anything
is trimmed.
"""
import errno
import fcntl
import json
import os
import shutil
import signal
import threading
import time
import urllib.parse
import uuid

from storage import ids
from storage.options import RangeOptions, TrimOptions

MANIFEST = "_xs_archive.json"
LOCK = "_xs_archive.lock"
LOG = "_xs_archive.log"
STAGING = "_staging"
FORMAT = 1
KILL_ENV = "XS_ARCHIVE_KILL_AT"
KILL_POINTS = ("planned", "staged", "verified", "pending", "recovering", "moving", "moved", "committed", "trimmed")
ROWS_PER_PARTITION = 250000      # entries per Spark read partition (at most 64 per stream)


class ArchiveError(Exception):
    """The archive cannot be made or is not what it should be; the text
    says why and what was left as it was."""


# ------------------------------------------------------------------ small parts

def id_text(i):
    return "%d-%d" % tuple(i)


def parse_id_text(text):
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


def kill_point(step):
    """SIGKILL this process at ``step`` when XS_ARCHIVE_KILL_AT names it
    (tests of kill safety; see the module's docstring)."""
    if os.environ.get(KILL_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def partition_dir_name(stream):
    """``stream=NAME`` with NAME escaped as Spark escapes a partition value."""
    out = []
    for ch in stream:
        if ord(ch) < 0x20 or ch in '"#%\'*/:=?\\\x7f{[]^':
            out.append("%%%02X" % ord(ch))
        else:
            out.append(ch)
    return "stream=" + "".join(out)


def _glob_escape(name):
    """A stream name as a glob matching only itself (the data source reads
    a name with glob characters as a glob)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in name)


# ------------------------------------------------------------------ the manifest

def empty_manifest():
    return {"format": FORMAT, "streams": {}, "pending": None}


def load_manifest(directory):
    """The manifest of ``directory`` (an empty one when there is none)."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return empty_manifest()
    except (OSError, ValueError) as e:
        raise ArchiveError("cannot read the archive's manifest %s: %s" % (path, e))
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("streams"), dict):
        raise ArchiveError("%s is not an xs archive manifest of format %d" % (path, FORMAT))
    return doc


def save_manifest(directory, doc):
    """Replace the manifest atomically and durably."""
    path = os.path.join(directory, MANIFEST)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(directory)


# ------------------------------------------------------------------ planning

class StreamPlan:
    """What one stream has for this run."""
    __slots__ = ("name", "through", "leftover", "rows", "first", "last")

    def __init__(self, name, through, leftover, rows, first, last):
        self.name = name            # str
        self.through = through      # (ms, seq) archived through before this run, or None
        self.leftover = leftover    # entries at or below ``through`` still in the stream
        self.rows = rows            # entries to archive now (above ``through``, below the cut)
        self.first = first          # their first and last IDs, (ms, seq), or None
        self.last = last


def scan(tx, raw, lo, hi, chunk=10000):
    """(count, first, last) of the entries of stream ``raw`` with IDs in
    [lo, hi], read ``chunk`` at a time (public verbs only)."""
    n, first, last = 0, None, None
    while lo <= hi:
        got = tx.range(raw, RangeOptions(lo, hi, chunk))
        if not got:
            break
        if first is None:
            first = _id(got[0][0])
        last = _id(got[-1][0])
        n += len(got)
        if len(got) < chunk or last >= ids.MAX_ID:
            break
        lo = ids.incr(last)
    return n, first, last


def plan_streams(tx, names, cut, manifest):
    """A StreamPlan per name (bytes, UTF-8) from one read transaction."""
    out = []
    for raw in names:
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError("stream name %r is not UTF-8: it cannot be a Parquet partition" % (raw,))
        rec = manifest["streams"].get(name)
        through = parse_id_text(rec["through"]) if rec else None
        leftover = scan(tx, raw, ids.MIN_ID, through)[0] if through is not None else 0
        lo = ids.incr(through) if through is not None and through < ids.MAX_ID else None
        if through is None:
            lo = ids.MIN_ID
        rows, first, last = 0, None, None
        if lo is not None and cut > ids.MIN_ID:
            rows, first, last = scan(tx, raw, lo, ids.decr(cut))
        out.append(StreamPlan(name, through, leftover, rows, first, last))
    return out


def _id(b):
    ms, _, seq = bytes(b).partition(b"-")
    return int(ms), int(seq)


# ------------------------------------------------------------------ trimming

def _check_trimmable(tx, raw, through, seg):
    """The entries at or below ``through`` in stream ``raw`` must lie in
    the last archived run ``seg`` ({"first", "last", "rows"})."""
    head = tx.range(raw, RangeOptions(ids.MIN_ID, through, 1))
    if not head:
        return 0
    n = scan(tx, raw, ids.MIN_ID, through)[0]
    first = _id(head[0][0])
    if seg is None or first < parse_id_text(seg["first"]) or n > seg["rows"]:
        raise ArchiveError(
            "stream %s holds %d entries at or below its archived-through ID %s (from %s) that are not "
            "those of its last archived run: was it deleted and made again?  Nothing was trimmed; archive it "
            "to another directory" % (raw.decode("utf-8", "replace"), n, id_text(through), id_text(first)))
    return n


def trim_archived(store, manifest, names):
    """One write transaction: remove from each stream of ``names`` (str)
    the entries at or below its archived-through ID.  Returns
    {name: removed}."""
    todo = [(n, manifest["streams"][n]) for n in names if n in manifest["streams"]]

    def trim_all(tx):
        removed = {}
        for name, rec in todo:
            raw = name.encode("utf-8")
            through = parse_id_text(rec["through"])
            if not _check_trimmable(tx, raw, through, rec.get("last_run")):
                continue
            if through >= ids.MAX_ID:
                removed[name] = tx.trim(raw, TrimOptions("maxlen", 0))
            else:
                removed[name] = tx.trim(raw, TrimOptions("minid", ids.incr(through)))
        return removed
    return store.run(trim_all, write=True)


# ------------------------------------------------------------------ recovery

class Lock:
    """DIR/_xs_archive.lock, held (flock) while a run works on DIR."""

    def __init__(self, directory):
        path = os.path.join(directory, LOCK)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self.fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ArchiveError("another xs archive is working on %s" % directory)
            raise

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _do_moves(directory, moves, step):
    """Rename each staged file into place (a file already moved is
    skipped); fsync the directories written to.  ``step``: the kill
    point after the first move."""
    dirs = set()
    for src, dst in moves:
        s, d = os.path.join(directory, src), os.path.join(directory, dst)
        if os.path.exists(s):
            os.makedirs(os.path.dirname(d), exist_ok=True)
            os.replace(s, d)
            dirs.add(os.path.dirname(d))
            kill_point(step)
        elif not os.path.exists(d):
            raise ArchiveError("archive %s: %s is in neither staging nor place; the manifest's pending run cannot "
                               "be finished (was the directory changed by hand?)" % (directory, dst))
    for d in sorted(dirs):
        _fsync_dir(d)
        _fsync_dir(os.path.dirname(d))
    _fsync_dir(directory)


def apply_pending(manifest):
    """The pending run becomes the last archived one (in memory)."""
    pending = manifest.get("pending")
    if pending:
        for name, seg in pending["streams"].items():
            rec = manifest["streams"].setdefault(name, {"rows": 0})
            rec["through"] = seg["last"]
            rec["rows"] = rec.get("rows", 0) + seg["rows"]
            rec["last_run"] = seg
    manifest["pending"] = None


def _commit(directory, manifest):
    """Make the pending run the archived one (manifest written)."""
    apply_pending(manifest)
    save_manifest(directory, manifest)


def recover(directory, manifest):
    """Finish a pending run, then remove every staging directory.
    Returns the pending run's row count (0: there was none)."""
    pending = manifest.get("pending")
    rows = 0
    if pending:
        _do_moves(directory, pending["moves"], "recovering")
        rows = sum(s["rows"] for s in pending["streams"].values())
        _commit(directory, manifest)
    shutil.rmtree(os.path.join(directory, STAGING), ignore_errors=True)
    return rows


# ------------------------------------------------------------------ Spark

class _StderrToLog:
    """Send file descriptor 2 to ``path`` while a JVM starts, so its
    log lines (and those of its Python workers, which inherit its
    stderr) go to the log, not to the user's terminal."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.saved = os.dup(2)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        os.dup2(fd, 2)
        os.close(fd)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)


def spark_session(master, log_path, root=None):
    """A SparkSession for archiving (local[*] unless ``master``); the
    JVM's stderr goes to ``log_path``."""
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if root is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)
    with _StderrToLog(log_path):
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master(master or "local[*]").appName("xs archive")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC")
                 .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    from storage.spark import register
    register(spark)
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


def stage(spark, store_path, plans, out, fields_list=False, report=None):
    """Write the planned entries as Parquet under ``out``, partitioned by
    stream and date."""
    from pyspark.sql import functions as F
    frames = []
    for p in plans:
        parts = max(1, min(64, -(-p.rows // ROWS_PER_PARTITION)))
        r = (spark.read.format("xstream").option("path", store_path).option("stream", _glob_escape(p.name))
             .option("start", id_text(p.first)).option("end", id_text(p.last)).option("partitions", parts))
        if fields_list:
            r = r.option("fields_list", "true")
        frames.append(r.load())
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


# ------------------------------------------------------------------ verification

def staged_files(out):
    """[(relative path, stream name)] of the Parquet files Spark wrote."""
    found = []
    for d, _, files in os.walk(out):
        for f in files:
            if f.endswith(".parquet") and not f.startswith("."):
                rel = os.path.relpath(os.path.join(d, f), out)
                top = rel.split(os.sep)[0]
                if not top.startswith("stream="):
                    raise ArchiveError("unexpected file %s in the staged archive" % rel)
                found.append((rel, urllib.parse.unquote(top[len("stream="):])))
    return sorted(found)


def verify(out, plans):
    """Read the staged files' IDs back and check them against the plan,
    one file at a time (memory: one file's IDs): within a file IDs must
    strictly increase (the job sorts them), a stream's files must not
    overlap, and per stream the row count and the first and last IDs
    must be the planned ones.  Returns [(relative path, stream, first,
    last, rows)] per file."""
    import pyarrow.parquet as pq
    if not os.path.exists(os.path.join(out, "_SUCCESS")):
        raise ArchiveError("the Spark job did not finish writing %s" % out)
    by_name = {p.name: p for p in plans}
    spans = {p.name: [] for p in plans}
    files = []
    for rel, name in staged_files(out):
        if name not in by_name:
            raise ArchiveError("the staged archive holds a stream that was not planned: %r" % name)
        col = pq.read_table(os.path.join(out, rel), columns=["id"]).column("id").to_pylist()
        got = [parse_id_text(t) for t in col]
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
    parts = rel.split(os.sep)
    return os.path.join(*(parts[:-1] + ["%s_%s.parquet" % (id_text(first), id_text(last))]))


# ------------------------------------------------------------------ a whole run

class Result:
    """What a run did."""

    def __init__(self):
        self.recovered = 0          # rows of a killed run committed by this one
        self.archived = {}          # name -> rows written by this run
        self.trimmed = {}           # name -> entries removed
        self.files = 0
        self.dates = []             # dates of the files written
        self.first_last = {}        # name -> (first, last) written
        self.plans = []


def archive(open_store, store_path, names, cut, directory, master=None, fields_list=False, progress=None,
            dry_run=False):
    """Archive the entries of the streams ``names`` (bytes) below ``cut``
    ((ms, seq)) into ``directory``, then trim them (see the module's
    docstring).  ``open_store()`` opens the store for writing;
    ``progress(step, done, total)`` is told what happens.  Returns a
    Result; raises ArchiveError."""
    say = progress or (lambda step, done=None, total=None: None)
    res = Result()
    if dry_run:
        manifest = load_manifest(directory) if os.path.isdir(directory) else empty_manifest()
        apply_pending(manifest)         # a killed run's files are verified: a real run commits them first
        store = open_store()
        try:
            res.plans = store.run(lambda tx: plan_streams(tx, names, cut, manifest))
        finally:
            store.close()
        return res
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise ArchiveError("cannot make the archive directory %s: %s" % (directory, e.strerror or e))
    if not os.path.isdir(directory):
        raise ArchiveError("%s is not a directory" % directory)
    lock = Lock(directory)
    try:
        manifest = load_manifest(directory)
        res.recovered = recover(directory, manifest)
        str_names = [n.decode("utf-8", "replace") for n in names]
        store = open_store()
        try:
            say("trimming what an earlier run archived")
            res.trimmed = trim_archived(store, manifest, str_names)
            say("planning")
            plans = store.run(lambda tx: plan_streams(tx, names, cut, manifest))
        finally:
            store.close()
        res.plans = plans
        todo = [p for p in plans if p.rows]
        kill_point("planned")
        if not todo:
            return res
        run = "%s-%d-%s" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime()), os.getpid(), uuid.uuid4().hex[:8])
        stage_dir = os.path.join(directory, STAGING, run)
        out = os.path.join(stage_dir, "data")
        os.makedirs(stage_dir)
        say("starting Spark (%s)" % (master or "local[*]"))
        try:
            spark = spark_session(master, os.path.join(directory, LOG))
        except Exception as e:
            raise ArchiveError("Spark did not start: %s (its log: %s)" % (spark_reason(e),
                                                                        os.path.join(directory, LOG)))
        try:
            say("writing Parquet")
            try:
                stage(spark, os.path.abspath(store_path), todo, out, fields_list,
                      (lambda d, t: say("writing Parquet", d, t)) if progress else None)
            except Exception as e:
                raise ArchiveError("the Spark job failed: %s (nothing was trimmed; Spark's log: %s)" % (
                    spark_reason(e), os.path.join(directory, LOG)))
        finally:
            try:
                spark.stop()
            except Exception:
                pass
        kill_point("staged")
        say("verifying")
        files = verify(out, todo)
        for rel, _, _, _, _ in files:
            _fsync_file(os.path.join(out, rel))
        kill_point("verified")
        staged_rel = os.path.relpath(out, directory)
        moves = [(os.path.join(staged_rel, rel), final_path(rel, first, last)) for rel, _, first, last, _ in files]
        manifest["pending"] = {"run": run, "moves": moves, "streams": {
            p.name: {"first": id_text(p.first), "last": id_text(p.last), "rows": p.rows} for p in todo}}
        save_manifest(directory, manifest)
        kill_point("pending")
        say("moving %d files into place" % len(moves))
        _do_moves(directory, moves, "moving")
        kill_point("moved")
        _commit(directory, manifest)
        kill_point("committed")
        say("trimming")
        store = open_store()
        try:
            for name, n in trim_archived(store, manifest, [p.name for p in todo]).items():
                res.trimmed[name] = res.trimmed.get(name, 0) + n
        finally:
            store.close()
        kill_point("trimmed")
        shutil.rmtree(stage_dir, ignore_errors=True)
        try:
            os.rmdir(os.path.join(directory, STAGING))
        except OSError:
            pass
        res.archived = {p.name: p.rows for p in todo}
        res.first_last = {p.name: (p.first, p.last) for p in todo}
        res.files = len(files)
        res.dates = sorted({rel.split(os.sep)[1][len("date="):] for rel, _, _, _, _ in files})
        return res
    finally:
        lock.release()
