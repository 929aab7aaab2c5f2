"""xs archive's manifest, DIR/_xs_archive.json: its shape (checked
before anything in it is obeyed), its atomic replacement, the store it
belongs to, and finishing the pending run a killed run recorded."""
import json
import os
import re
import secrets

from storage.files import write_atomically
from storage.spark.archive.common import FORMAT, FORMATS, MANIFEST, MANIFEST_MAX, STAGING, ArchiveError
from storage.spark.archive.directory import _do_moves


def empty_manifest():
    return {"format": FORMAT, "store": None, "streams": {}, "pending": None}


_ID_TEXT = re.compile(r"\d{1,20}-\d{1,20}\Z")


_RUN_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")


_FINAL = re.compile(r"stream=[^/\x00]+/date=\d{4}-\d{2}-\d{2}/\d{1,20}-\d{1,20}_\d{1,20}-\d{1,20}\.parquet\Z")


_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


_STORE_ID = re.compile(r"[0-9a-f]{32}\Z")


_SERVED = re.compile(r"url:(redis|rediss|unix)://[!-~]{1,1000}\Z")     # xs archive --url: the endpoint, no password


def _rel_parts(path):
    """The components of a relative, normalised path, or None."""
    if not isinstance(path, str) or not path or "\x00" in path or path.startswith("/"):
        return None
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts


def _check_segment(seg, where):
    if not isinstance(seg, dict):
        raise ValueError("%s is not an object" % where)
    for k in ("first", "last"):
        if not isinstance(seg.get(k), str) or not _ID_TEXT.match(seg[k]):
            raise ValueError("%s.%s is not a stream ID" % (where, k))
    if not isinstance(seg.get("rows"), int) or isinstance(seg.get("rows"), bool) or seg["rows"] < 0:
        raise ValueError("%s.rows is not a count" % where)
    if seg.get("digest") is not None and not (isinstance(seg["digest"], str) and _HEX64.match(seg["digest"])):
        raise ValueError("%s.digest is not a SHA-256 digest" % where)


def check_manifest(doc):
    """Raise ValueError saying what is wrong with a manifest read from
    DIR, which is trusted for nothing it does not prove: IDs, counts and
    digests must have their shapes, and every move must go from this
    directory's staging area to a file named as xs names its files, by
    a relative, normalised path inside DIR."""
    if not isinstance(doc, dict) or doc.get("format") not in FORMATS or not isinstance(doc.get("streams"), dict):
        raise ValueError("it is not an xs archive manifest of format %s" % " or ".join(map(str, FORMATS)))
    store = doc.get("store")
    if store is not None and not (isinstance(store, str) and (_STORE_ID.match(store) or _SERVED.match(store))):
        raise ValueError("its store is not a store identity")
    for name, rec in doc["streams"].items():
        if not isinstance(rec, dict) or not isinstance(rec.get("through"), str) or not _ID_TEXT.match(rec["through"]):
            raise ValueError("stream %r has no archived-through ID" % name)
        rows = rec.get("rows", 0)
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
            raise ValueError("stream %r's row count is not a count" % name)
        if rec.get("last_run") is not None:
            _check_segment(rec["last_run"], "stream %r's last run" % name)
    if doc.get("values") not in (None, "string", "binary"):
        raise ValueError("its values are neither string nor binary")
    pending = doc.get("pending")
    if pending is None:
        return
    if not isinstance(pending, dict) or not isinstance(pending.get("run"), str) or \
            not _RUN_NAME.match(pending["run"]) or not isinstance(pending.get("streams"), dict) or \
            not isinstance(pending.get("moves"), list):
        raise ValueError("its pending run is malformed")
    for name, seg in pending["streams"].items():
        _check_segment(seg, "the pending run's stream %r" % name)
    for move in pending["moves"]:
        if not isinstance(move, (list, tuple)) or len(move) != 2:
            raise ValueError("a pending move is not a pair of paths")
        src, dst = _rel_parts(move[0]), _rel_parts(move[1])
        if src is None or len(src) < 4 or src[0] != STAGING or src[1] != pending["run"] or src[2] != "data" \
                or not src[-1].endswith(".parquet"):
            raise ValueError("a pending move's source %r is not a file staged by that run" % (move[0],))
        if dst is None or not _FINAL.match(move[1]):
            raise ValueError("a pending move's target %r is not an archive file's path inside the directory"
                             % (move[1],))


def load_manifest(adir):
    """The manifest of the ArchiveDir ``adir`` (an empty one when there
    is none).  It must be this user's own regular file: a manifest that
    is a link, has another name, or was written by another user is never
    obeyed, whatever --shared-dir says."""
    if not adir.exists:
        return empty_manifest()
    try:
        fd = adir.open_file(MANIFEST, os.O_RDONLY)
    except FileNotFoundError:
        return empty_manifest()
    except OSError as e:
        raise ArchiveError("cannot read the archive's manifest %s: %s" % (adir.label(MANIFEST), e.strerror or e))
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(MANIFEST_MAX + 1)
        if len(data) > MANIFEST_MAX:
            raise ValueError("it is larger than %d bytes" % MANIFEST_MAX)
        doc = json.loads(data.decode("utf-8"))
        check_manifest(doc)
    except (OSError, ValueError) as e:
        raise ArchiveError("%s is not a manifest xs can use (%s); nothing was changed" % (adir.label(MANIFEST), e))
    doc.setdefault("store", None)
    doc.setdefault("pending", None)
    return doc


def save_manifest(adir, doc):
    """Replace the manifest atomically and durably (storage.files.AtomicFile
    in DIR's descriptor: a temporary file of a random name, made
    exclusively and checked as every file of ours in DIR, fsync, rename,
    fsync of DIR)."""
    doc["format"] = FORMAT
    data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")

    def make_temp():
        tmp = "%s.tmp-%s" % (MANIFEST, secrets.token_hex(8))
        return adir.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, parts=(tmp,)), tmp
    write_atomically(MANIFEST, lambda f: f.write(data), dir_fd=adir.fd, make_temp=make_temp)


def check_store(adir, manifest, store_id):
    """The manifest belongs to the store ``store_id`` (or to none yet):
    two stores never share an archive directory, since one would trim
    what only the other archived."""
    if manifest.get("store") not in (None, store_id):
        raise ArchiveError(
            "%s is the archive of another store (%s; this store is %s): two stores cannot share an archive "
            "directory.  Nothing was changed; archive this store to a directory of its own"
            % (adir.path, manifest["store"], store_id or "one that has never been archived"))


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


def _commit(adir, manifest):
    """Make the pending run the archived one (manifest written)."""
    apply_pending(manifest)
    save_manifest(adir, manifest)


def recover(adir, manifest):
    """Finish a pending run, then remove every staging directory.
    Returns the pending run's row count (0: there was none)."""
    pending = manifest.get("pending")
    rows = 0
    if pending:
        _do_moves(adir, pending["moves"], "recovering")
        rows = sum(s["rows"] for s in pending["streams"].values())
        _commit(adir, manifest)
    adir.remove_tree(STAGING)
    return rows
