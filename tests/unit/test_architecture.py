"""The house rules, checked: one codec owns every layout, parsers never
touch the store, storage/ stays free of click and rich, no engine class
grows past about 400 lines, the one-shot path stays lean, the command
line has one context, and the layers import downwards only (parts,
verbs, runtime, whole-store operations, Spark; the engine under the
command line) with no import cycle.  Imports inside functions count."""
import ast
import functools
import glob
import inspect
import os
import subprocess
import sys

import pytest

from xstream_cli.commands import COMMANDS, SUBCOMMANDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sources(*dirs):
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(ROOT, d, "**", "*.py"), recursive=True)):
            yield os.path.relpath(p, ROOT), open(p, encoding="utf-8").read()


def _all_commands():
    out = list(COMMANDS.values())
    for subs in SUBCOMMANDS.values():
        out += list(subs.values())
    return out


# =============================================================== the codec

# the inotify(7) event buffer and struct flock are the kernel's layouts, not the store's
LAYOUT_EXEMPT = {"storage/blocking.py", "storage/inotify.py", "storage/posixlock.py"}
PACKING_CALLS = {"pack", "unpack", "unpack_from", "pack_into", "from_bytes", "to_bytes"}


def test_key_and_value_packing_appears_only_in_the_codec():
    found = []
    for path, src in _sources("storage", "xstream_cli"):
        if path in LAYOUT_EXEMPT or path.startswith("storage/codec/"):
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "struct" in names:
                    found.append("%s:%d imports struct" % (path, node.lineno))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in PACKING_CALLS:
                found.append("%s:%d calls .%s()" % (path, node.lineno, node.func.attr))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "codec" and node.attr in ("U64", "ID"):
                found.append("%s:%d uses codec.%s directly" % (path, node.lineno, node.attr))
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("k", "key", "payload", "raw"):
                bounds = [b for b in (node.slice.lower, node.slice.upper) if b is not None]
                if any(isinstance(b, ast.Constant) and isinstance(b.value, int) and b.value >= 8 for b in bounds):
                    found.append("%s:%d slices a key at a byte offset" % (path, node.lineno))
    assert not found, "layouts belong to storage/codec/:\n" + "\n".join(found)


def test_the_codec_test_would_notice_packing_elsewhere(tmp_path):
    """The check above is not vacuous: this source would fail it."""
    tree = ast.parse("import struct\nx = U.pack(1)\ny = k[8:16]\n")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in PACKING_CALLS]
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import)]
    assert calls and imports


def test_storage_imports_neither_click_nor_rich():
    for path, src in _sources("storage"):
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for m in mods:
                    assert m.split(".")[0] not in ("click", "rich", "xstream_cli"), (path, m)


# ================================================================ parsers

@pytest.mark.parametrize("cmd", _all_commands(), ids=lambda c: c.name)
def test_a_parser_takes_only_its_arguments(cmd):
    """A parser sees argv, never a transaction: it cannot touch the store."""
    assert list(inspect.signature(cmd.parse).parameters) == ["argv"], cmd.name
    assert cmd.grammar.upper().startswith(cmd.name.upper().replace("|", " ")), cmd.grammar


def test_command_modules_name_no_transaction_inside_parsers():
    for path, src in _sources("xstream_cli/commands"):
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("parse"):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                assert "tx" not in names and "store" not in names, (path, node.name)


def test_blocking_is_not_a_command_concept():
    for path, src in _sources("xstream_cli/commands"):
        assert "Blocked" not in src and "Waiter" not in src and "time.sleep" not in src, path


# ================================================================= engine

def test_no_engine_class_is_longer_than_about_400_lines():
    long = []
    for path, src in _sources("storage"):
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 420:
                long.append("%s: class %s is %d lines" % (path, node.name, node.end_lineno - node.lineno + 1))
    assert not long, long


def test_txn_verbs_have_type_hints_and_docstrings():
    from storage.txn import Txn
    for name, fn in vars(Txn).items():
        if name.startswith("_") or not callable(fn) or isinstance(fn, staticmethod) or name == "check_committable":
            continue
        assert fn.__doc__, name
        assert "return" in fn.__annotations__, name


# ============================================================ command line

def _modules_after(code):
    code += "\nimport sys\nsys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0 and "MODULES " in out.stderr, out.stderr
    return set(out.stderr.split("MODULES ", 1)[1].split())


def test_app_does_not_import_main():
    mods = _modules_after("import xstream_cli.app")
    assert "xstream_cli.__main__" not in mods


def test_one_shot_path_imports_nothing_it_does_not_need(tmp_path):
    db = str(tmp_path / "db")
    mods = _modules_after("from xstream_cli.__main__ import main\n"
                          "main(['--db', %r, '--no-sync', 'XADD', 's', '*', 'a', '1'])" % db)
    for heavy in ("click", "rich", "dataclasses", "inspect", "xstream_cli.app", "storage.ops.snapshot",
                  "storage.verbs.load", "storage.migrate", "prompt_toolkit", "storage.inotify", "aiohttp",
                  "xstream_cli.web"):
        assert heavy not in mods, heavy


# Every module a one-shot ``xs XADD`` / ``xs XLEN`` imports beyond what
# ``python -c "import lmdb, msgpack"`` (the interpreter's floor for xs,
# benchmarks/bench_cli.py) already has.  A one-shot command's time is
# nearly all imports, so this list only grows deliberately: if a change
# needs a new module here, first try importing it where it is used (the
# one-shot path is XADD / XLEN: parse, open, one verb, render), and if
# it must be here, add it with the one-shot time before and after
# (bench_cli.py) in the commit message.
ONE_SHOT_MODULES = {
    # the interpreter's own (Python 3.9-3.13 differ in which of these the floor has already)
    "_functools", "errno", "fcntl", "functools", "gc", "types",
    # py-lmdb's environment keys (the store's fork guard)
    "lmdb._envid",
    # the engine
    "storage", "storage.blocking", "storage.codec", "storage.codec.changes", "storage.codec.entries",
    "storage.codec.keys", "storage.codec.state", "storage.errors", "storage.files", "storage.ids", "storage.options",
    "storage.opening", "storage.parts", "storage.parts.kv", "storage.parts.log", "storage.parts.nodes",
    "storage.parts.shapes", "storage.parts.stream_table", "storage.posixlock", "storage.store", "storage.txn",
    "storage.verbs", "storage.verbs.streams",
    # the command line's fast path
    "xstream_cli", "xstream_cli.__main__", "xstream_cli.commands", "xstream_cli.commands.groups",
    "xstream_cli.commands.keyspace", "xstream_cli.commands.parsing", "xstream_cli.commands.reading",
    "xstream_cli.commands.streams", "xstream_cli.context", "xstream_cli.execution", "xstream_cli.execution.batch",
    "xstream_cli.execution.blocked", "xstream_cli.execution.pages", "xstream_cli.execution.session",
    "xstream_cli.output", "xstream_cli.output.render", "xstream_cli.output.reply", "xstream_cli.runner",
    "xstream_cli.splitargs",
}


@pytest.mark.parametrize("argv", [["XADD", "s", "*", "a", "1"], ["XLEN", "s"]])
def test_one_shot_commands_import_only_the_allowed_modules(tmp_path, argv):
    """The allow-list above, for a one-shot write and read (the read on
    the store the write made)."""
    db = str(tmp_path / "db")
    floor = _modules_after("import lmdb, msgpack")
    if argv[0] == "XLEN":
        _modules_after("from xstream_cli.__main__ import main\nmain(['--db', %r, '--no-sync', 'XADD', 's', '*', 'a', '1'])"
                       % db)
    mods = _modules_after("from xstream_cli.__main__ import main\nmain(['--db', %r, '--no-sync'] + %r)" % (db, argv))
    assert "storage.verbs.streams" in mods          # the command ran
    new = sorted(mods - floor - ONE_SHOT_MODULES)
    assert not new, ("a one-shot xs %s now also imports %s: import it where it is used instead, or add it to "
                     "ONE_SHOT_MODULES deliberately (tests/unit/test_architecture.py says how)" % (argv[0], new))


def _made_store(tmp_path):
    """A new, empty store (a read never creates one)."""
    from storage.store import Store
    db = str(tmp_path / "db")
    Store(db, durable=False).close()
    return db


def test_a_stream_command_loads_only_the_stream_verbs(tmp_path):
    db = _made_store(tmp_path)
    mods = _modules_after("from xstream_cli.__main__ import main\n"
                          "main(['--db', %r, '--no-sync', 'XLEN', 's'])" % db)
    assert "storage.verbs.streams" in mods
    for other in ("storage.verbs.groups", "storage.verbs.delivery", "storage.verbs.keyspace", "storage.parts.pel",
                  "storage.parts.group_table", "storage.parts.idmp", "storage.info"):
        assert other not in mods, other


def test_the_installed_xs_launcher_imports_neither_re_nor_enum(tmp_path):
    # pip's generated console-script wrapper imports re (and with it enum)
    # on every start: the package installs bin/xs instead (script-files).
    # Run with -S so that no .pth file (an editable install's finder)
    # loads re first; the site directories go on PYTHONPATH instead.
    import site
    launcher = os.path.join(ROOT, "bin", "xs")
    path = os.pathsep.join([ROOT] + site.getsitepackages() + [site.getusersitepackages()])
    db = _made_store(tmp_path)
    p = subprocess.run([sys.executable, "-S", "-X", "importtime", launcher, "--db", db, "--no-sync", "XLEN", "s"],
                       capture_output=True, env=dict(os.environ, PYTHONPATH=path), timeout=60)
    assert p.returncode == 0 and p.stdout == b"0\n", p.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in p.stderr.decode().splitlines()
              if line.startswith("import time:")}
    assert "storage.txn" in loaded          # the listing is there
    assert not {"re", "enum"} & loaded


def test_only_the_context_opens_stores_and_reads_global_environment():
    for path, src in _sources("xstream_cli"):
        if path == "xstream_cli/context.py":
            continue
        assert "Store(" not in src, path
        for var in ("XS_NO_SYNC", "XS_DB", "XDG_DATA_HOME"):
            assert var not in src, (path, var)


@pytest.mark.parametrize("value,durable", [("1", False), ("true", False), ("TRUE", False), ("yes", False),
                                           ("on", False), ("0", True), ("false", True), ("", True)])
def test_xs_no_sync_reads_the_same_on_the_fast_path_and_in_click(value, durable, monkeypatch):
    from xstream_cli import context
    monkeypatch.setenv("XS_NO_SYNC", value)
    g = context.from_environment(context.Globals())
    assert g.durable is durable


def test_a_bad_xs_no_sync_is_a_usage_error_on_every_path(tmp_path):
    env = dict(os.environ, XS_NO_SYNC="maybe")
    for args in (["XLEN", "s"], ["tail", "s"]):
        p = subprocess.run([sys.executable, "-m", "xstream_cli", "--db", str(tmp_path / "db")] + args,
                           capture_output=True, env=env, timeout=60, cwd=ROOT)
        assert p.returncode == 2 and b"XS_NO_SYNC" in p.stderr and b"Traceback" not in p.stderr, args


# ================================================================= layers
#
# The module graph, from the source: every ``import`` and ``from ...
# import`` anywhere in a module, inside functions too (a lazy import is
# still a dependency).  The implicit import of a package's __init__ by
# its submodules is not an edge.

VOCABULARY = {"storage", "storage.codec", "storage.errors", "storage.ids", "storage.options", "storage.info",
              "storage.glob", "storage.posixlock", "storage.lines", "storage.codec.keys", "storage.codec.entries",
              "storage.codec.state", "storage.codec.snapshot", "storage.codec.changes",
              "storage.codec.rdb",                # Redis's serialization (issue 26), and its parts
              "storage.codec.rdb.base", "storage.codec.rdb.listpack", "storage.codec.rdb.reader",
              "storage.codec.rdb.stream", "storage.codec.rdb.files"}
RUNTIME = {"storage.store", "storage.files", "storage.txn", "storage.blocking", "storage.inotify", "storage.consumers",
           "storage.migrate", "storage.changelog"}
# what whole-store operations and Spark may use: the library surface
SURFACE = VOCABULARY | {"storage.store", "storage.txn"}
# ... and where they reach below it, each with its reason
SURFACE_EXCEPTIONS = {
    ("storage.ops.compact", "storage.files"):
        "compaction takes the store lock exclusively and replaces data.mdb: it works on the store's files",
    ("storage.ops.exchange", "storage.verbs.dump"): "CorruptStore: the error a dump raises",
    ("storage.ops.exchange", "storage.verbs.load"): "LoadError and Stats: the records of the one load path",
    ("storage.ops.line_import", "storage.verbs.load"): "LoadError and Stats: the records of the one load path",
    ("storage.ops.snapshot", "storage.verbs.dump"): "CorruptStore: the error a dump raises",
    ("storage.ops.snapshot", "storage.verbs.load"): "LoadError, Stats, all_bytes: the one load path's records",
    ("storage.ops.snapshot", "storage.files"): "write_atomically: the one way a file is replaced",
    ("storage.ops.replicate", "storage.changelog"):
        "replication reads the store's change log and acknowledges it (issue 41)",
    ("storage.ops.replica_restore", "storage.changelog"): "a restore replays the change log's records (issue 41)",
    ("storage.ops.replicate", "storage.blocking"): "wait_until: the replicator waits for commits in the one wait loop",
    ("storage.ops.replica_restore", "storage.parts.kv"): "a restore replays the log's ops through KV, as they were made",
    ("storage.spark.archive.manifest", "storage.files"): "write_atomically: the one way a file is replaced",
    ("storage.spark.archive.directory", "storage.files"):
        "unsafe_reason: the archive directory is held to the rule of the store's own files",
}


# Imports the parser cannot see (importlib, __import__ of a computed
# name), declared here so the graph counts them: the module, and what it
# imports at run time.
DYNAMIC_IMPORTS = {
    "storage.txn": {"storage.verbs." + n for n in ("delivery", "groups", "keyspace", "settings", "streams")},
    "storage.spark": {"storage.spark.archive", "storage.spark.source"},
    "xstream_cli.porcelain": {"xstream_cli.porcelain." + os.path.basename(p.rstrip(os.sep)).removesuffix(".py")
                              for p in glob.glob(os.path.join(ROOT, "xstream_cli", "porcelain", "*"))
                              if (p.endswith(".py") and not p.endswith("__init__.py"))
                              or os.path.isfile(os.path.join(p, "__init__.py"))},
}
def _preloaded():
    """What xs serve imports at start (server.connection PRELOAD and the
    modules of PRELOAD_PACKAGES), so a lazily imported module never
    needs a descriptor later: the project's modules among them."""
    from xstream_cli.server import connection
    mods = {m for m in connection.PRELOAD if m.startswith(("storage", "xstream_cli"))}
    for pkg in connection.PRELOAD_PACKAGES:
        d = os.path.join(ROOT, *pkg.split("."))
        mods |= {pkg + "." + f[:-3] for f in os.listdir(d) if f.endswith(".py") and f != "__init__.py"}
    return mods


DYNAMIC_IMPORTS["xstream_cli.server.connection"] = _preloaded()
_DYNAMIC_CALLS = ("importlib.import_module(", "__import__(")


def _module_name(rel):
    name = rel[:-3].replace(os.sep, ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


@functools.lru_cache(maxsize=None)
def _module_graph():
    mods = {_module_name(path): src for path, src in _sources("storage", "xstream_cli")}

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None
    graph = {}
    for name, src in mods.items():
        edges = set()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                edges |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    sub = node.module + "." + a.name
                    edges.add(sub if sub in mods else resolve(node.module))
        edges |= DYNAMIC_IMPORTS.get(name, set())
        edges.discard(None)
        edges.discard(name)
        graph[name] = edges
    return graph


def test_every_dynamic_import_is_declared_for_the_graph():
    """A module that imports by a computed name must say what it reaches
    in DYNAMIC_IMPORTS, or the cycle and layer checks cannot see it."""
    found = {_module_name(path) for path, src in _sources("storage", "xstream_cli")
             if any(c in src for c in _DYNAMIC_CALLS)}
    assert found == set(DYNAMIC_IMPORTS)


def _cycles(graph):
    """The strongly connected components of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return set(out)


def _edges(prefix):
    return sorted((a, b) for a, bs in _module_graph().items() if a == prefix or a.startswith(prefix + ".")
                  for b in bs if b.startswith(("storage", "xstream_cli")))


def test_parts_import_only_the_codec_the_vocabulary_and_other_parts():
    bad = [(a, b) for a, b in _edges("storage.parts") if b not in VOCABULARY and not b.startswith("storage.parts")]
    assert not bad, bad


def test_verbs_never_import_the_runtime_whole_store_operations_or_spark():
    bad = [(a, b) for a, b in _edges("storage.verbs")
           if b in RUNTIME or b.startswith(("storage.ops", "storage.spark", "xstream_cli"))]
    assert not bad, bad


def test_the_vocabulary_and_the_codec_import_no_layer_above_them():
    bad = [(a, b) for a, b in _edges("storage") if a in VOCABULARY - {"storage"} and b not in VOCABULARY]
    assert not bad, bad


def test_whole_store_operations_and_spark_use_the_library_surface_or_a_named_exception():
    used = set()
    bad = []
    for prefix in ("storage.ops", "storage.spark"):
        for a, b in _edges(prefix):
            if b in SURFACE or b.startswith(prefix):
                continue
            if (a, b) in SURFACE_EXCEPTIONS:
                used.add((a, b))
            else:
                bad.append((a, b))
    assert not bad, bad
    assert used == set(SURFACE_EXCEPTIONS), "exceptions no longer needed: %s" % (set(SURFACE_EXCEPTIONS) - used)


def test_the_engine_core_imports_neither_whole_store_operations_nor_spark():
    core = ("storage.store", "storage.files", "storage.txn", "storage.blocking", "storage.inotify", "storage.consumers",
            "storage.migrate", "storage.changelog",
            "storage.parts", "storage.verbs") + tuple(VOCABULARY - {"storage"})
    bad = [(a, b) for p in core for a, b in _edges(p) if b.startswith(("storage.ops", "storage.spark"))]
    assert not bad, bad


def test_storage_never_imports_the_command_line():
    assert not [(a, b) for a, b in _edges("storage") if b.startswith("xstream_cli")]


def test_the_server_never_imports_the_clis_session_runner_or_app():
    bad = [(a, b) for a, b in _edges("xstream_cli.server")
           if b in ("xstream_cli.execution.session", "xstream_cli.runner", "xstream_cli.app", "xstream_cli.prompt")]
    assert not bad, bad


# Cycles allowed, with the dynamic edges counted: none (issue 39).  The
# help tables (xstream_cli.help_tables) import nothing; the completion
# model, `xs help` and COMMAND DOCS read them there.
KNOWN_CYCLES: set = set()


def test_no_import_cycle():
    """Counting imports inside functions and the declared dynamic ones
    (DYNAMIC_IMPORTS): the help texts (xstream_cli.help) reach the
    porcelain commands through xstream_cli.porcelain.commands(), not the
    click application, which runs the runner and the prompt; the porcelain
    reaches the application through click's context, never an import
    (``xs help`` uses xstream_cli.help_text with the application's
    commands); COMMAND DOCS reads the tables of xstream_cli.help_tables,
    which imports nothing, as does the completion model."""
    assert _cycles(_module_graph()) == KNOWN_CYCLES


def test_each_engine_folder_says_what_it_owns_and_who_may_import_it():
    for pkg in ("parts", "verbs", "ops", "spark"):
        import importlib
        doc = importlib.import_module("storage." + pkg).__doc__ or ""
        assert "import" in doc and len(doc) > 300, pkg


def test_every_wait_of_the_command_line_is_the_one_wait_loop():
    """Blocked reads (script mode, the prompt, xs serve), xs tail -f,
    xs worker and xs web's watcher all wait in storage.blocking.wait_until: no module of the
    command line arms a Waiter or sleeps on a stream of its own."""
    callers = set()
    for path, src in _sources("xstream_cli"):
        assert "Waiter" not in src and "wait_for_change" not in src, path
        if "wait_until(" in src:
            callers.add(path)
    assert callers == {"xstream_cli/execution/blocked.py", "xstream_cli/porcelain/tail.py",
                       "xstream_cli/porcelain/worker/loop.py", "xstream_cli/web/server.py",
                       "xstream_cli/redis_replica.py"}


def test_one_method_decides_where_a_served_job_runs_and_one_flow_follows_it():
    """Engine.run is the only way in to the engine's places (the calling
    thread, the engine thread, the readers' thread) for the server's
    connections and the in-process client, and a job's replies and a
    blocked read's continuation are written in server/flow.py alone."""
    for path, src in _sources("xstream_cli"):
        if path in ("xstream_cli/server/engine.py", "xstream_cli/server/storelock.py"):
            continue
        for call in (".execute([", ".execute(box", ".submit(", ".read_heavy(", "hold_write("):
            assert call not in src, (path, call)
        if path != "xstream_cli/server/flow.py":
            assert "(encode_replies(items, replies" not in src, path
    routing = open(os.path.join(ROOT, "xstream_cli/server/routing.py")).read()
    assert "engine.run(" in routing
    for path, flow in (("xstream_cli/server/reading.py", "answered("), ("xstream_cli/server/routing.py", "Flow("),
                       ("xstream_cli/client.py", "Flow(")):
        src = open(os.path.join(ROOT, path)).read()
        assert "engine.run(" in src and flow in src, path


def test_commands_run_in_batches_through_the_one_driver():
    """Script mode and xs serve run many commands in one transaction
    through xstream_cli.execution.batch alone: nothing else in the command
    line adds runs of entries or shares a savepoint among commands."""
    users = set()
    for path, src in _sources("xstream_cli"):
        if "add_auto_many(" in src or ".shared(" in src:
            users.add(path)
    assert users == {"xstream_cli/execution/batch.py"}
    for path in ("xstream_cli/execution/script.py", "xstream_cli/server/engine.py"):
        src = open(os.path.join(ROOT, path)).read()
        assert "Batch(" in src, path


def test_every_package_of_the_source_tree_is_installed_by_pyproject():
    """``pip install .`` (not editable) installs only the packages named
    in pyproject.toml: a folder left out would be missing on a user's
    machine while every test here passes from the source tree."""
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {os.path.relpath(os.path.dirname(p), ROOT).replace(os.sep, ".")
             for d in ("storage", "xstream_cli")
             for p in glob.glob(os.path.join(ROOT, d, "**", "__init__.py"), recursive=True)}
    assert listed == found


def test_no_layout_module_name_hides_a_layout_of_the_codec():
    """storage.codec re-exports its modules' names; a module named like
    one of them (``records``) would replace it once imported."""
    import importlib

    from storage import codec
    mods = [os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "storage", "codec", "*.py"))
            if not p.endswith("__init__.py")]
    for m in mods:
        mod = importlib.import_module("storage.codec." + m)
        for other in mods:
            assert other not in vars(mod), (m, other)
        assert getattr(codec, m) is mod


def test_a_parsed_command_runs_through_the_one_run_command():
    """Single-command mode, the batch driver (script mode, xs serve, the
    in-process client) run a parsed command with
    xstream_cli.execution.run_command; only a blocked read's retries
    (its arguments already prepared) call a command's ``run`` again."""
    callers = set()
    for path, src in _sources("xstream_cli"):
        if "cmd.run(" in src or "cmd.prepare(" in src:
            callers.add(path)
    assert callers == {"xstream_cli/execution/__init__.py", "xstream_cli/execution/blocked.py"}
    for path in ("xstream_cli/execution/session.py", "xstream_cli/execution/batch.py"):
        assert "run_command(" in open(os.path.join(ROOT, path)).read(), path


def test_the_one_shot_path_parses_once_before_it_opens_the_store():
    """runner.run_one looks the command up and parses it, then opens:
    no second parse of the same argv anywhere on the way."""
    src = open(os.path.join(ROOT, "xstream_cli", "runner.py")).read()
    body = src[src.index("def run_one("):src.index("def _error(")]
    assert body.count(".parse(") == 1
    assert body.index(".parse(") < body.index("open_session(")
    session = open(os.path.join(ROOT, "xstream_cli", "execution", "session.py")).read()
    sr = session[session.index("def stream_range("):session.index("def block(")]
    assert ".parse(" not in sr


def test_only_the_transaction_reaches_its_private_read_and_write_paths():
    """Every other module uses Txn's public verbs: ``._read(`` and
    ``._write(`` appear in storage/txn.py alone."""
    users = {path for path, src in _sources("storage", "xstream_cli") if "._read(" in src or "._write(" in src}
    assert users == {"storage/txn.py"}


def test_a_plain_xadd_is_recognised_in_one_place():
    """Script mode and xs serve both ask commands.plain_add whether a
    command is a plain ``XADD key * f v ...`` the batch driver adds in
    runs; nothing else tests argv for it."""
    users = set()
    for path, src in _sources("xstream_cli"):
        if 'argv[2] == b"*"' in src:
            users.add(path)
        if "plain_add(argv)" in src.replace("def plain_add(argv)", ""):
            users.add(path + " (calls)")
    assert users == {"xstream_cli/commands/__init__.py", "xstream_cli/execution/script.py (calls)",
                     "xstream_cli/server/jobs.py (calls)"}
