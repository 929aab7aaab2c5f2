"""Archiving old entries to Parquet with Spark, then trimming them: the
engine of ``xs archive`` (pyspark and pyarrow are imported only here,
and only when a run needs them; no click, no rich).

What a run does, for the streams it is given and a cut ID (entries with
an ID below the cut go):

 0. open       DIR is opened once and every entry in it is reached from
               that descriptor without following a link (ArchiveDir).
               Unless --shared-dir, DIR must be the user's own and
               writable by nobody else; either way xs's own entries in it
               (lock, log, manifest, staging) must be the user's own
               regular files / directories, and a manifest is checked
               for shape (IDs, counts, digests; every move a relative,
               normalised path from this run's staging area to an
               archive file's name inside DIR) before it is obeyed.
 1. lock       DIR/_xs_archive.lock (flock): one archiver per DIR at a time.
 2. recover    the manifest DIR/_xs_archive.json says what earlier runs
               did, and which store it belongs to (the store's identity,
               storage.verbs.settings.identity): a manifest of another store is
               refused, so two stores never share DIR.  A run killed after its files were verified ("pending"
               in the manifest) is rolled forward: its remaining moves are
               made and it is committed.  Then DIR/_staging is removed
               (what killed runs left there was never committed).
 3. leftovers  per stream, the entries at or below its archived-through
               ID that are still in the stream (a run killed before its
               trim) are trimmed: they are in the archive already.
 4. plan       per stream, in one read transaction: the entries above its
               archived-through ID and below the cut: count, first, last,
               and a SHA-256 of their IDs and fields (the run's digest).
               Work a consumer group has not done stays: a stream's cut
               is lowered to the oldest ID any of its groups has not
               acknowledged (its oldest pending ID, or the ID after its
               last-delivered one), and the plan's Hold says what stayed,
               group by group (``drop_unacked``: the cut stays, and the
               Hold says what the run takes).
 5. stage      a Spark job (under umask 077) reads exactly [first, last]
               of each stream through the ``xstream`` data source
               (storage.spark) and writes Parquet partitioned
               ``stream=NAME/date=YYYY-MM-DD`` (the UTC day of the ID's
               ms) into DIR/_staging/RUN/data.  Spark writes by path, so
               when another user can rename entries in DIR (--shared-dir:
               its owner, or anyone who may write in it unless it is
               sticky) it writes into a private directory of this user's
               instead (private_staging: 0700, in TMPDIR, every directory
               above it this user's or root's), and after step 6 the
               files are copied into DIR/_staging/RUN/data through
               descriptors (copy_in): a link swapped in for _staging is
               refused, and nothing reaches a directory of theirs.
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
               it removes are exactly those of the stream's last archived
               run: the same count and digest.  Anything else (a stream
               made again, another store's stream of the same name,
               entries deleted since) is refused, not trimmed.  A stream
               in which a group now needs one of them (made, or moved
               back, while Spark ran) is left whole, unless
               ``drop_unacked``: its entries are in the archive and the
               stream, and a later run's step 3 trims them once the
               group is done.
11. clean      DIR/_staging/RUN is removed.

Manifest writes are atomic (a temporary file of a random name made
exclusively, fsync, rename, fsync of DIR), so the manifest is always the
old one or the new one.  What xs writes in DIR is private (directories
0700, files 0600), as the store is, unless a run is given another mode
(``mode``, ``xs archive --mode``; ``mode_problem`` says which are
allowed): then each directory the run makes (DIR itself, when missing,
and the stream=/date= directories) gets ``mode`` and each file it makes
or puts in place (Parquet files, the manifest, which every write makes
anew, and the lock and the log when it makes them) ``mode`` without
the execute bits, exactly, whatever the umask.  What earlier runs made
keeps its mode; missing parents of DIR are made as ``mkdir -p`` makes
them; the staging area, which a run removes when it ends, stays 0700.

Spark's JVM (job.SparkJvm) lives no longer than step 5: it runs in a
session of its own (a terminal's Ctrl-C and hangup reach xs only), its
output goes to DIR/_xs_archive.log, and it and every process it starts
are ended when the step ends, when Ctrl-C (KeyboardInterrupt) or SIGTERM
or SIGHUP (job.Terminated) interrupts it, and, through a watchdog
process, when xs itself is killed.

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

An entry is thus always in the stream, the archive or both.

Over the network (``xs archive --url``): ``open_store()`` gives a
``NetStore`` (a server through storage.spark.network), Spark reads with
the data source's url mode, the manifest's store is the endpoint
(``url:redis://host:port``, no password), and step 10's transaction is
a MULTI/EXEC of the XTRIMs, sent after the checked entries were read
with their streams WATCHed (a change meanwhile: checked and sent again).
The kill points and what a re-run does are the same.  Each named
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
``fields_list`` keeps every field in order.  Values are strings and
must be UTF-8 (the data source's rule): an entry that is not fails the
run before anything is trimmed, and the message says to archive with
``binary=True`` (``xs archive --binary``), which writes every value as
binary, losslessly.  One directory holds one kind of values (the
manifest's ``values``: "string" or "binary", set by its first run), so
that ``spark.read.parquet(DIR)`` reads every file with one schema; a run
of the other kind is refused before anything is written.

The package's modules, by idea: ``common`` (file names, kill points,
ArchiveError, ID texts), ``directory`` (ArchiveDir: DIR reached through
descriptors; modes; the lock; moves; private staging), ``manifest``
(its shape, atomic writes, recovery of a pending run), ``plan`` (what to
archive and keep for consumer groups, and the checked trim: public
transaction verbs only, no pyspark), ``net`` (NetStore, for --url),
``job`` (the Spark job and the verification of its files); this module
runs them in order (``archive``).  Every name is importable from here.
"""
import os
import shutil
import time
import uuid

from storage.spark.archive.common import (
    DEFAULT_MODE,
    FORMAT,
    FORMATS,
    KILL_ENV,
    KILL_POINTS,
    LOCK,
    LOG,
    MANIFEST,
    MANIFEST_MAX,
    ROWS_PER_PARTITION,
    SHARED_HINT,
    STAGING,
    ArchiveError,
    _id,
    id_text,
    kill_point,
    parse_id_text,
    partition_dir_name,
)
from storage.spark.archive.directory import (
    _O_DIR,
    _O_NOFOLLOW,
    STAGE_PREFIX,
    ArchiveDir,
    Lock,
    _alive,
    _do_moves,
    _fix_mode,
    _sweep_private_staging,
    check_local,
    check_mode,
    copy_in,
    mode_problem,
    others_can_rename,
    private_staging,
)
from storage.spark.archive.job import (
    MARK,
    SparkJvm,
    Terminated,
    _glob_escape,
    _not_utf8,
    _read_staged_ids,
    _spark_job,
    _start_spark,
    _StderrToLog,
    _watch,
    final_path,
    open_log,
    spark_reason,
    spark_session,
    stage,
    staged_files,
    verify,
)
from storage.spark.archive.manifest import (
    _FINAL,
    _HEX64,
    _ID_TEXT,
    _RUN_NAME,
    _SERVED,
    _STORE_ID,
    _check_segment,
    _commit,
    _rel_parts,
    apply_pending,
    check_manifest,
    check_store,
    empty_manifest,
    load_manifest,
    recover,
    save_manifest,
)
from storage.spark.archive.net import (
    NetStore,
    _NetGroup,
    _NetPending,
    _NetTxn,
    open_served,
)
from storage.spark.archive.plan import (
    Hold,
    StreamPlan,
    _check_trimmable,
    _digest_entry,
    _pending_below,
    group_floor,
    hold_of,
    plan_streams,
    scan,
    trim_archived,
)

__all__ = [
    "ArchiveDir",
    "ArchiveError",
    "DEFAULT_MODE",
    "FORMAT",
    "FORMATS",
    "Hold",
    "KILL_ENV",
    "KILL_POINTS",
    "LOCK",
    "LOG",
    "Lock",
    "MARK",
    "MANIFEST",
    "MANIFEST_MAX",
    "NetStore",
    "ROWS_PER_PARTITION",
    "Result",
    "SHARED_HINT",
    "STAGE_PREFIX",
    "STAGING",
    "SparkJvm",
    "StreamPlan",
    "Terminated",
    "_FINAL",
    "_HEX64",
    "_ID_TEXT",
    "_NetGroup",
    "_NetPending",
    "_NetTxn",
    "_O_DIR",
    "_O_NOFOLLOW",
    "_RUN_NAME",
    "_SERVED",
    "_STORE_ID",
    "_StderrToLog",
    "_alive",
    "_check_segment",
    "_check_trimmable",
    "_commit",
    "_digest_entry",
    "_do_moves",
    "_fix_mode",
    "_glob_escape",
    "_id",
    "_not_utf8",
    "_pending_below",
    "_read_staged_ids",
    "_rel_parts",
    "_spark_job",
    "_start_spark",
    "_sweep_private_staging",
    "_watch",
    "apply_pending",
    "archive",
    "check_local",
    "check_manifest",
    "check_mode",
    "check_store",
    "check_values",
    "copy_in",
    "empty_manifest",
    "final_path",
    "group_floor",
    "hold_of",
    "id_text",
    "kill_point",
    "load_manifest",
    "mode_problem",
    "open_log",
    "open_served",
    "others_can_rename",
    "parse_id_text",
    "partition_dir_name",
    "plan_streams",
    "private_staging",
    "recover",
    "save_manifest",
    "scan",
    "spark_reason",
    "spark_session",
    "stage",
    "staged_files",
    "trim_archived",
    "verify",
]


class Result:
    """What a run did."""

    def __init__(self):
        self.recovered = 0          # rows of a killed run committed by this one
        self.archived = {}          # name -> rows written by this run
        self.trimmed = {}           # name -> entries removed
        self.files = 0
        self.dates = []             # dates of the files written
        self.first_last = {}        # name -> (first, last) written
        self.plans = []             # StreamPlans (their ``hold``: what groups kept back, or took)
        self.untrimmed = {}         # name -> Hold: archived entries left in the stream for its groups


def archive(open_store, store_path, names, cut, directory, master=None, fields_list=False, progress=None,
            dry_run=False, shared=False, binary=False, mode=DEFAULT_MODE, drop_unacked=False):
    """Archive the entries of the streams ``names`` (bytes) below ``cut``
    ((ms, seq)) into ``directory``, then trim them (see the module's
    docstring).  ``open_store()`` opens the store for writing (or a
    NetStore; ``store_path`` is then the data source's url options, a
    dict);
    ``progress(step, done, total)`` is told what happens; ``shared``: DIR
    may belong to another user or be writable by others (ArchiveDir);
    ``binary``: values as binary (the only way to archive values that
    are not UTF-8); ``mode``: what the run makes in DIR gets it
    (directories) or it without x (files), exactly (see mode_problem;
    ValueError for a mode it refuses, before anything is touched);
    ``drop_unacked``: also archive and trim entries consumer groups have
    not acknowledged (by default a stream is archived only below the
    oldest entry any of its groups still needs: plan_streams).
    Returns a Result; raises ArchiveError."""
    check_mode(mode)
    say = progress or (lambda step, done=None, total=None: None)
    res = Result()
    adir = ArchiveDir(directory, shared, create=not dry_run, mode=mode)
    try:
        if dry_run:
            return _dry_run(adir, open_store, names, cut, res, drop_unacked)
        return _run(adir, open_store, store_path, names, cut, master, fields_list, progress, say, res, binary,
                    drop_unacked)
    finally:
        adir.close()


def _dry_run(adir, open_store, names, cut, res, drop_unacked=False):
    manifest = load_manifest(adir)
    apply_pending(manifest)         # a killed run's files are verified: a real run commits them first
    store = open_store()
    try:
        check_store(adir, manifest, store.run(lambda tx: tx.store_id()))
        res.plans = store.run(lambda tx: plan_streams(tx, names, cut, manifest, drop_unacked))
    finally:
        store.close()
    return res


def check_values(adir, manifest, binary):
    """A directory holds one kind of values (see the module docstring)."""
    want = "binary" if binary else "string"
    have = manifest.get("values")
    if have is not None and have != want:
        raise ArchiveError("%s holds %s values: archiving %s values into it would make files Spark cannot read "
                           "with one schema (%s, or archive into another directory)"
                           % (adir.path, have, want, "add --binary" if have == "binary" else "leave out --binary"))


def _run(adir, open_store, store_path, names, cut, master, fields_list, progress, say, res, binary=False,
         drop_unacked=False):
    if not adir.staging_is_safe():
        check_local(master)             # refused before anything is touched
    lock = Lock(adir)
    try:
        adir.sweep_temporaries()
        manifest = load_manifest(adir)
        check_values(adir, manifest, binary)
        adir.check_entry(LOG, "file")       # refused now, before the store is touched
        adir.check_entry(STAGING, "dir")
        str_names = [n.decode("utf-8", "replace") for n in names]
        store = open_store()
        try:
            store_id = store.run(lambda tx: tx.store_id(create=True), write=True)
            check_store(adir, manifest, store_id)
            manifest["store"] = store_id
            res.recovered = recover(adir, manifest)
            say("trimming what an earlier run archived")
            res.trimmed, res.untrimmed = trim_archived(store, manifest, str_names, drop_unacked)
            say("planning")
            plans = store.run(lambda tx: plan_streams(tx, names, cut, manifest, drop_unacked))
        finally:
            store.close()
        res.plans = plans
        todo = [p for p in plans if p.rows]
        kill_point("planned")
        if not todo:
            return res
        run = "%s-%d-%s" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime()), os.getpid(), uuid.uuid4().hex[:8])
        os.close(adir.open_dirs([STAGING, run], create=True, mode=0o700))     # private while it lives
        data = (STAGING, run, "data")
        # Spark writes by path.  Into DIR/_staging only when nobody else
        # can rename entries in DIR; else into a private directory of
        # this user's, from which verified files are copied into DIR
        # through descriptors (copy_in).
        private = None if adir.staging_is_safe() else private_staging(master)
        try:
            sdir, sdata = (adir, data) if private is None else (ArchiveDir(private, create=False), ("data",))
            try:
                out = os.path.join(sdir.abspath, *sdata)
                _spark_job(adir, master, store_path, todo, out, fields_list, progress, say, binary)
                kill_point("staged")
                say("verifying")
                files = verify(sdir, sdata, todo)
                if private is not None:
                    say("copying %d files into %s" % (len(files), adir.path))
                    copy_in(sdir, sdata, adir, data, files)
            finally:
                if sdir is not adir:
                    sdir.close()
        finally:
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)
        kill_point("verified")
        moves = [("/".join(data + (rel,)), final_path(rel, first, last)) for rel, _, first, last, _ in files]
        manifest["values"] = "binary" if binary else "string"
        manifest["pending"] = {"run": run, "moves": moves, "streams": {
            p.name: {"first": id_text(p.first), "last": id_text(p.last), "rows": p.rows, "digest": p.digest}
            for p in todo}}
        save_manifest(adir, manifest)
        kill_point("pending")
        say("moving %d files into place" % len(moves))
        _do_moves(adir, moves, "moving")
        kill_point("moved")
        _commit(adir, manifest)
        kill_point("committed")
        say("trimming")
        store = open_store()
        try:
            trimmed, held = trim_archived(store, manifest, [p.name for p in todo], drop_unacked)
            res.untrimmed.update(held)      # (a stream held at step 3 planned nothing: not among these)
            for name, n in trimmed.items():
                res.trimmed[name] = res.trimmed.get(name, 0) + n
        finally:
            store.close()
        kill_point("trimmed")
        adir.remove_tree(STAGING)
        res.archived = {p.name: p.rows for p in todo}
        res.first_last = {p.name: (p.first, p.last) for p in todo}
        res.files = len(files)
        res.dates = sorted({rel.split("/")[1][len("date="):] for rel, _, _, _, _ in files})
        return res
    finally:
        lock.release()
