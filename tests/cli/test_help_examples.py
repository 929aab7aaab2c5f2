"""Every example of ``xs help COMMAND`` -- and so of the man pages
man/xs-*.7, made from the same table (checked below) -- runs as written:
a command's examples, in order, each as one ``xs --db STORE --json``
command (the line as typed after ``xs`` in a shell), on an empty store.
No example may fail; the examples of a command first add what they need
(entries, a group, pending entries), as Redis's own pages do.  A BLOCK
example waits until another process adds an entry once it is blocked,
and must return that entry.

The help shows no replies, so Redis is the oracle for them: with a
redis-server installed, the same examples run on it too and every reply
must match (auto IDs, idle times and XINFO's extra keys normalised as in
tests/compat/test_differential.py), up to the first example that needs a
newer Redis than the reference server (7.0) -- from there on the two
would hold different data, and only "xs runs it without an error" is
checked."""
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import threading
import time

import pytest

from conftest import ROOT, XS, Resp3, new_store
from tests.cli.test_blocking_cli import wait_blocked
from tests.compat.test_differential import norm_ids, norm_reply, same
from xstream_cli import help as xhelp

NAMES = xhelp.redis_names()
TIMEOUT = 60

# options newer than their command (the command's own "since" is in the
# help table): a reference server older than this does not know them
NEWER_OPTIONS = {"XADD": {"IDMP": "8.6.0", "IDMPAUTO": "8.6.0"}, "XREADGROUP": {"CLAIM": "8.4.0"}}
# settings of CONFIG GET / SET newer than the command (a pattern that matches one counts)
NEWER_SETTINGS = {"stream-idmp-duration": "8.6.0", "stream-idmp-maxsize": "8.6.0"}
# replies that are Redis's help text, which changes between versions
VERSION_TEXT = {("XGROUP", "HELP"), ("XINFO", "HELP")}


def shown_examples(name):
    """The example lines ``xs help NAME`` prints, without the ``xs``."""
    text = xhelp.command_help(name)
    assert "\nExamples:\n" in text, "xs help %s shows no examples (xstream_cli/help.py, DOCS)" % name
    section = text.split("\nExamples:\n", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in section.splitlines()]
    assert lines and all(line.startswith("xs ") for line in lines), text
    return [line[3:] for line in lines]


def version(text):
    return tuple(int(x) for x in text.split("."))


def stdin_argument(argv, prev):
    """An example "-x CMD ..." takes its last argument from stdin, as
    redis-cli -x: the reply of the example before it, as bytes (RESTORE's
    payload from DUMP: issue 26).  (argv without "-x", the bytes) or
    (argv, None)."""
    if argv[:1] != ["-x"]:
        return argv, None
    if isinstance(prev, dict) and set(prev) == {"b64"}:
        import base64
        return argv[1:], base64.b64decode(prev["b64"])
    return argv[1:], prev.encode("utf-8", "surrogateescape")


def needs_newer(argv, oracle):
    """The Redis version an example needs, if newer than ``oracle``."""
    argv = argv[1:] if argv[:1] == ["-x"] else argv
    words = [a.upper() for a in argv]
    name = " ".join(words[:2]) if " ".join(words[:2]) in xhelp.DOCS else words[0]
    need = [xhelp.DOCS[name][1]] + [v for opt, v in NEWER_OPTIONS.get(words[0], {}).items() if opt in words]
    if words[0] == "CONFIG":
        need += [v for setting, v in NEWER_SETTINGS.items()
                 if any(fnmatch.fnmatchcase(setting, a.lower()) for a in argv[2:])]
    newest = max(need, key=version)
    return newest if version(newest) > oracle else None


def stream_after_streams(argv):
    return argv[[a.upper() for a in argv].index("STREAMS") + 1]


MARK = ["note", "added-while-blocked"]


def xs_examples(db, examples):
    """Run each example as ``xs --db DB --json ...``; the replies."""
    env = dict(os.environ, XS_NO_SYNC="1")
    env.pop("XS_DB", None)
    replies = []
    for ex in examples:
        argv = shlex.split(ex)
        cmd = XS + ["--db", str(db), "--json"] + argv
        if "BLOCK" in (a.upper() for a in argv):
            p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                wait_blocked(p)
                add = subprocess.run(XS + ["--db", str(db), "XADD", stream_after_streams(argv), "*"] + MARK,
                                     cwd=ROOT, env=env, capture_output=True, timeout=TIMEOUT)
                assert add.returncode == 0, add.stderr
                out, err = p.communicate(timeout=TIMEOUT)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
            code = p.returncode
        else:
            stdin = stdin_argument(argv, replies[-1] if replies else None)[1]
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=TIMEOUT, input=stdin)
            out, err, code = p.stdout, p.stderr, p.returncode
        assert code == 0, "xs %s failed: %s" % (ex, err.decode("utf-8", "replace"))
        docs = [json.loads(line) for line in out.decode("utf-8").splitlines() if line.strip()]
        assert len(docs) == 1, (ex, out)
        if "BLOCK" in (a.upper() for a in argv):
            assert "added-while-blocked" in json.dumps(docs[0]), (ex, docs[0])
        replies.append(docs[0])
    return replies


def redis_examples(redis, examples):
    """The same examples on redis-server (flushed first); the replies, as
    xs --json writes them."""
    redis.flushall()
    replies = []
    for ex in examples:
        argv, stdin = stdin_argument(shlex.split(ex), replies[-1] if replies else None)
        if "BLOCK" not in (a.upper() for a in argv):
            replies.append(redis.call(*(argv + ([stdin] if stdin is not None else []))))
            continue
        other, got = Resp3(redis.port), []
        t = threading.Thread(target=lambda: got.append(other.call(*argv)))
        t.start()
        deadline = time.monotonic() + TIMEOUT
        while "blocked_clients:0" in redis.call("INFO", "clients"):
            assert time.monotonic() < deadline and t.is_alive(), ex
            time.sleep(0.01)
        redis.call("XADD", stream_after_streams(argv), "*", *MARK)
        t.join(TIMEOUT)
        other.sock.close()
        replies.append(got[0])
    return replies


@pytest.mark.parametrize("name", NAMES)
def test_the_help_examples_run_in_order_on_an_empty_store(name, tmp_path, request):
    examples = shown_examples(name)
    assert examples == xhelp.DOCS[name][3]       # (each one a valid command line: tests/cli/test_help.py)
    got = xs_examples(new_store(tmp_path / "store"), examples)
    if not shutil.which("redis-server"):
        return                                   # the redis fixture would skip the whole test
    redis = request.getfixturevalue("redis")
    oracle = version(re.search(r"redis_version:([\d.]+)", redis.call("INFO", "server")).group(1))
    newer = [needs_newer(shlex.split(ex), oracle) for ex in examples]
    upto = next((i for i, n in enumerate(newer) if n), len(examples))   # later state differs on Redis
    if upto == 0:
        return
    saved = redis.call("CONFIG", "GET", "stream-node-*")
    try:
        want = redis_examples(redis, examples[:upto])
    finally:
        redis.call("CONFIG", "SET", *[x for kv in saved.items() for x in kv])   # the server is shared
    ref_ids, got_ids, failures = {}, {}, []
    for ex, ref, mine in zip(examples, want, got):
        args = [a.encode() for a in stdin_argument(shlex.split(ex), None)[0]] if not ex.startswith("-x ") \
            else [a.encode() for a in shlex.split(ex)[1:]]
        if tuple(a.decode().upper() for a in args[:2]) in VERSION_TEXT:
            assert isinstance(ref, list) and isinstance(mine, list) and mine, (ex, mine)
            continue
        assert not (isinstance(ref, dict) and "error" in ref), "redis-server rejects %s: %s" % (ex, ref)
        ref, mine = norm_reply(args, norm_ids(ref, ref_ids)), norm_reply(args, norm_ids(mine, got_ids))
        if not same(ref, mine, loose_maps=args[0].upper() == b"XINFO"):
            failures.append("%s\n    redis: %s\n    xs:    %s" % (ex, json.dumps(ref), json.dumps(mine)))
    assert not failures, "\n".join(failures)


def test_the_man_pages_show_exactly_the_help_examples():
    """man/xs-*.7 show, for each command, the examples run above."""
    shown = {}
    for page in ("streams", "groups", "keyspace"):
        text = open(os.path.join(ROOT, "man", "xs-%s.7" % page), encoding="utf-8").read()
        for section in text.split("\n.SS ")[1:]:
            title = section.split("\n", 1)[0].replace("\\-", "-")
            lines = re.findall(r"\.nf\n(xs .*)\n\.fi", section)
            shown[title] = [line.replace("\\-", "-").replace("\\e", "\\")[3:] for line in lines]
    assert shown, "no command sections in man/xs-*.7"
    for title, examples in shown.items():
        assert examples == xhelp.DOCS[title][3], title
