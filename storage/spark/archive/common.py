"""xs archive's vocabulary: the names of its files in DIR, the kill
points, the error every step raises, and the ID texts of the manifest.
(The protocol itself: storage.spark.archive's docstring.)"""
import os
import signal

MANIFEST = "_xs_archive.json"


LOCK = "_xs_archive.lock"


LOG = "_xs_archive.log"


STAGING = "_staging"


FORMAT = 2                       # 2: the manifest names its store and each run's digest


FORMATS = (1, 2)                 # read; a format-1 manifest is taken over by the first store that runs


KILL_ENV = "XS_ARCHIVE_KILL_AT"


KILL_POINTS = ("planned", "staged", "verified", "pending", "recovering", "moving", "moved", "committed", "trimmed")


ROWS_PER_PARTITION = 250000      # entries per Spark read partition (at most 64 per stream)


MANIFEST_MAX = 64 << 20          # a manifest larger than this is not one of ours


DEFAULT_MODE = 0o700             # what a run makes in DIR: directories this, files this without x (0600)


SHARED_HINT = ("pass --shared-dir to archive there anyway (links are still never followed, and only a manifest "
               "of your own is obeyed)")


class ArchiveError(Exception):
    """The archive cannot be made or is not what it should be; the text
    says why and what was left as it was."""


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


def partition_dir_name(stream):
    """``stream=NAME`` with NAME escaped as Spark escapes a partition value."""
    out = []
    for ch in stream:
        if ord(ch) < 0x20 or ch in '"#%\'*/:=?\\\x7f{[]^':
            out.append("%%%02X" % ord(ch))
        else:
            out.append(ch)
    return "stream=" + "".join(out)


def _id(b):
    ms, _, seq = bytes(b).partition(b"-")
    return int(ms), int(seq)
