"""What a one-shot command imports (issue 42: "one-shot at the
interpreter's floor").

A one-shot ``xs XLEN s`` is nearly all imports: each module costs about
0.1-0.2 ms whatever it holds, the command itself well under 1 ms.  So the
modules a one-shot XLEN and XADD import beyond ``python -c "import lmdb,
msgpack"`` (the floor benchmarks/bench_cli.py measures xs against) are
listed here, exactly, and the test fails when a list changes:

* grown: import the new module where it is used instead (a function's
  body, a module ``__getattr__``), or, if the one-shot path really needs
  it, add it here with the one-shot time before and after
  (``python3 benchmarks/bench_cli.py --only oneshot``) in the commit;
* shrunk: take the module out of the list, so it stays out.

The process is run as ``xs`` runs (``entry()``, its fast exit included),
and the list read by an exit handler.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the project's modules, exactly
XLEN_MODULES = {
    "storage", "storage.codec", "storage.codec.changes", "storage.codec.keys", "storage.codec.state",
    "storage.errors", "storage.files", "storage.ids", "storage.opening", "storage.options", "storage.parts",
    "storage.parts.kv", "storage.parts.stream_table", "storage.store", "storage.txn", "storage.verbs", "storage.verbs.streams",
    "xstream_cli", "xstream_cli.__main__", "xstream_cli.commands", "xstream_cli.commands.parsing",
    "xstream_cli.commands.streams", "xstream_cli.context", "xstream_cli.execution",
    "xstream_cli.execution.session", "xstream_cli.output", "xstream_cli.output.render", "xstream_cli.output.reply",
    "xstream_cli.runner",
}
# a write also encodes entries, takes the writer mark and touches the
# notification files of blocked readers
XADD_MODULES = XLEN_MODULES | {"storage.codec.entries", "storage.posixlock", "storage.blocking", "storage.parts.log",
                               "storage.parts.nodes", "storage.parts.shapes"}

# anything else beyond the floor (the interpreter's and py-lmdb's own
# modules; which of them the floor has already differs between versions)
OTHER_MODULES = {"_functools", "errno", "fcntl", "gc", "lmdb._envid"}

_REPORT = ("import atexit, sys\n"
           "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n")


def _modules(code, *args):
    out = subprocess.run([sys.executable, "-c", _REPORT + code] + list(args), capture_output=True, text=True,
                         cwd=ROOT, timeout=60, env=dict(os.environ, XS_DB="", XS_NO_SYNC="1"))
    assert "\nMODULES " in out.stderr, out.stderr
    return set(out.stderr.rsplit("\nMODULES ", 1)[1].split()) - {"atexit"}


def _one_shot(*argv):
    return _modules("from xstream_cli.__main__ import entry\nentry()", *argv)


@pytest.fixture(scope="module")
def floor():
    return _modules("import lmdb, msgpack")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(the store, the modules of the XADD that made it)."""
    db = str(tmp_path_factory.mktemp("oneshot") / "db")
    return db, _one_shot("--db", db, "XADD", "s", "*", "a", "1")


def _check(name, mods, floor, expected):
    ours = {m for m in mods if m.split(".")[0] in ("storage", "xstream_cli")}
    grown, gone = sorted(ours - expected), sorted(expected - ours)
    assert not grown, ("a one-shot xs %s now also imports %s: import it where it is used instead, or list it "
                       "here deliberately (this file's docstring says how)" % (name, grown))
    assert not gone, "a one-shot xs %s no longer imports %s: take it out of the list" % (name, gone)
    other = sorted(mods - floor - ours - OTHER_MODULES)
    assert not other, "a one-shot xs %s now also imports %s (OTHER_MODULES)" % (name, other)


def test_a_one_shot_xadd_imports_the_listed_modules(floor, written):
    db, mods = written
    assert os.path.exists(os.path.join(db, "data.mdb"))      # the command ran
    _check("XADD", mods, floor, XADD_MODULES)


def test_a_one_shot_xlen_imports_the_listed_modules(floor, written):
    db, _ = written
    _check("XLEN", _one_shot("--db", db, "XLEN", "s"), floor, XLEN_MODULES)


def test_xlen_needs_neither_the_other_commands_nor_the_batch_nor_the_wait_loop():
    """The lists above name what is imported; these are what the lazy
    imports keep out, named for the reader."""
    for absent in ("xstream_cli.commands.groups", "xstream_cli.commands.keyspace", "xstream_cli.commands.reading",
                   "xstream_cli.execution.batch", "xstream_cli.execution.blocked", "storage.blocking",
                   "storage.codec.entries", "storage.posixlock", "click", "rich"):
        assert absent not in XLEN_MODULES


def test_the_lazy_table_loads_one_commands_module_and_all_of_them_for_the_whole_table():
    """``lookup`` imports the module of the command it finds; COMMANDS
    (what xs serve, script mode, the docs and the prompt use) is every
    command with its functions loaded, at once."""
    table = {"xstream_cli.commands." + m for m in ("groups", "keyspace", "reading", "streams")}
    mods = _modules("from xstream_cli.commands import lookup\n"
                    "assert lookup([b'XLEN', b's']).parse([b'XLEN', b's'])")
    assert table & mods == {"xstream_cli.commands.streams"}
    mods = _modules("from xstream_cli.commands import COMMANDS, Command\n"
                    "assert all(Command.run.__get__(c) for c in COMMANDS.values())   # set, not looked up\n")
    assert table <= mods


def test_every_command_of_the_table_names_functions_of_its_module():
    from xstream_cli.commands import COMMANDS, SUBCOMMANDS, lookup
    every = list(COMMANDS.values()) + [c for subs in SUBCOMMANDS.values() for c in subs.values()]
    assert len(every) == len({id(c) for c in every})
    for cmd in every:
        assert callable(cmd.parse) and callable(cmd.run), cmd.name
        assert cmd.prepare is None or callable(cmd.prepare), cmd.name
        assert cmd.parse.__module__ == cmd.run.__module__, cmd.name
        assert cmd.parse.__doc__, cmd.name
    from xstream_cli.commands import reading
    assert COMMANDS[b"XREAD"].prepare is reading.prepare_xread
    assert lookup([b"xgroup", b"create", b"s", b"g", b"$"]) is SUBCOMMANDS[b"XGROUP"][b"CREATE"]


def test_the_codec_gives_each_name_of_its_modules_as_their_star_imports_did():
    """storage.codec imports keys, entries and state on first use of one
    of their names: each name is the object ``from storage.codec.entries
    import *``, then keys', then state's, made it (a later one wins)."""
    import storage.codec as codec
    from storage.codec import entries, keys, state
    expected = {}
    for m in (entries, keys, state):
        expected.update((n, v) for n, v in vars(m).items() if not n.startswith("_"))
    for n, v in expected.items():
        assert getattr(codec, n) is v, n
    assert codec.keys is keys and codec.entries is entries and codec.state is state
    from storage.codec import snapshot
    assert codec.snap_frame is snapshot.snap_frame and codec.SNAP_FRAME_SIZE == snapshot.SNAP_FRAME_SIZE
    with pytest.raises(AttributeError):
        codec.no_such_name
    with pytest.raises(AttributeError):
        codec._KEY3                  # private names were never re-exported
    with pytest.raises(ImportError):
        exec("from storage.codec import no_such_name")


def test_a_read_needs_no_entry_module_and_renders_entries_once_it_is_loaded():
    """The renderers know the engine's Entries only once
    storage.codec.entries is loaded (a one-shot XLEN never loads it)."""
    mods = _modules("from xstream_cli.output.render import RENDERERS\n"
                    "assert RENDERERS['raw'](3) == b'3\\n' and RENDERERS['noraw'](b'a') == b'\"a\"\\n'\n"
                    "assert RENDERERS['json']([1]) == b'[1]\\n'")
    assert "storage.codec.entries" not in mods
