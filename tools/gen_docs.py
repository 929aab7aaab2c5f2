"""Generate man/ and completions/ from the click command tree.

    python3 tools/gen_docs.py            write man/*.{1,7} and completions/*
    python3 tools/gen_docs.py --check    exit 1 if the committed files are stale
    python3 tools/gen_docs.py --out DIR  write into DIR instead of the repo

Also the layout section of docs/reference.md (from the module docstrings)
and its command -> parser -> engine table (from the command table and
storage.txn), between ``<!-- generated:NAME ... -->`` markers.

Sources, so that nothing is written twice:
  xstream_cli.app.cli            global options (names, metavars, help),
                                 porcelain commands (non-hidden), the overview
  xstream_cli.commands.COMMANDS  Redis commands: the grammar (the first
  / SUBCOMMANDS                  paragraph of each parser's docstring), the
                                 storage method, read or write
The output is deterministic: no dates, only the package version.  Every
Redis command must belong to exactly one family below (a new command
fails here until it is placed).  tests/cli/test_generated_docs.py fails when
regenerating gives a diff.
"""
import argparse
import inspect
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import click  # noqa: E402

from xstream_cli import __version__, help  # noqa: E402
from xstream_cli.app import cli  # noqa: E402
from xstream_cli.commands import COMMANDS, SUBCOMMANDS  # noqa: E402
from xstream_cli.porcelain import complete, complete_scripts  # noqa: E402

# (man page, title, blurb, Redis command names): xstream_cli.help's families
FAMILIES = [(page, title, blurb, names) for _, page, title, blurb, names in help.FAMILIES]

HEADER = complete_scripts.HEADER


# ================================================================ the model

def grammar(cmd):
    """The command's grammar: the first paragraph of its parser's
    docstring, on one line."""
    return cmd.grammar


def engine_verbs(cmd):
    """The storage.txn.Txn method(s) a command calls, as text."""
    return " / ".join("-" if v == "-" else "Txn." + v for v in cmd.verb.split(" / "))


def redis_commands():
    """[(NAME, [(display name, Command)])] in family order.  A container
    (XGROUP, XINFO) lists its subcommands."""
    out = []
    placed = [n for _, _, _, names in FAMILIES for n in names]
    table = sorted(n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS))
    missing = sorted(set(table) - set(placed))
    extra = sorted(set(placed) - set(table))
    dup = sorted(n for n in set(placed) if placed.count(n) > 1)
    if missing or extra or dup:
        raise SystemExit("gen_docs: FAMILIES out of date: missing %s, unknown %s, duplicated %s"
                         % (missing, extra, dup))
    for name in placed:
        b = name.encode()
        if b in COMMANDS:
            out.append((name, [(name, COMMANDS[b])]))
        else:
            subs = SUBCOMMANDS[b]
            out.append((name, [("%s %s" % (name, s.decode()), subs[s]) for s in subs]))
    return out


def global_options():
    """[(option strings, metavar or None, help)] of xs, in declaration
    order, --help, then -r and -i (xstream_cli.porcelain.complete)."""
    return complete.global_options(cli)


def porcelain_commands():
    """[(name, short help)] of the visible porcelain (click) commands."""
    return [(n, c.get_short_help_str(limit=200)) for n, c in complete.porcelain_commands(cli)]


# ================================================================ man pages

def esc(text):
    """roff-escape running text."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + l) if l[:1] in (".", "'") else l for l in text.split("\n"))


def th(name, section, title):
    return ['.\\" %s' % HEADER,
            '.TH %s %s "" "xs %s" "%s"' % (name.upper(), section, __version__, title)]


def _example(line):
    """An example command line, as a man page shows it."""
    return [".RS 4", ".nf", esc(line), ".fi", ".RE"]


def _click_paragraphs(text):
    """A click help text as man page lines: paragraphs, and ``\\b``
    blocks kept as they are written."""
    L = []
    for para in inspect.cleandoc(text or "").split("\n\n"):
        if not para.strip():
            continue
        if para.lstrip().startswith("\b"):
            body = para.split("\b", 1)[1].strip("\n")
            L += [".PP", ".nf", esc(inspect.cleandoc(body)), ".fi"]
        else:
            L += [".PP", esc(" ".join(para.split()))]
    return L


def _option_lines(param):
    names = sorted(list(param.opts) + list(param.secondary_opts), key=lambda n: (n.startswith("--"), n))
    metavar = None
    if not param.is_flag:
        metavar = param.metavar
        if not metavar:
            try:
                metavar = param.make_metavar(click.Context(cli))
            except TypeError:              # click < 8.2
                metavar = param.make_metavar()
    text = " ".join((param.help or "").split())
    if param.default not in (None, False, ()) and not param.is_flag and param.show_default:
        text += " (default: %s)" % param.default
    head = ", ".join("\\fB%s\\fR" % esc(n) for n in names)
    if metavar:
        head += " \\fI%s\\fR" % esc(str(metavar))
    return [".TP", head, esc(text or "(no description)")]


def _porcelain_section():
    """Every porcelain command: usage, description, every option."""
    L = [".SH PORCELAIN COMMANDS", esc(help.PORCELAIN_BLURB + " \"xs help COMMAND\" and "
                                       "\"xs COMMAND --help\" show the same text.")]
    for name, cmd in complete.porcelain_commands(cli):
        with click.Context(cli, info_name="xs", **(cli.context_settings or {})) as parent:
            ctx = click.Context(cmd, info_name=name, parent=parent)
            usage = " ".join(cmd.collect_usage_pieces(ctx))
        L += [".SS %s" % esc(name), ".B xs %s" % esc(name), esc(usage)]
        L += _click_paragraphs(cmd.help)
        opts = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
        if opts:
            L += [".PP", "Options:", ".RS 4"]
            for p in opts:
                L += _option_lines(p)
            L += [".RE"]
    return L


def man_xs1(families):
    L = th("xs", 1, "xs manual")
    help_text = (cli.help or "").split("\n\n")[0]
    L += [".SH NAME", "xs \\- " + esc(" ".join(help_text.split()).split(": ", 1)[-1].split(".")[0]),
          ".SH SYNOPSIS",
          ".B xs", "[\\fIglobal options\\fR] \\fICOMMAND\\fR [\\fIARG\\fR ...]", ".br",
          ".B xs", "[\\fIglobal options\\fR] < \\fIscript\\fR", ".br",
          ".B xs", "[\\fIglobal options\\fR]", ".br",
          ".B xs help", "[\\fICOMMAND\\fR]", ".br",
          ".B xs", "\\fICOMMAND\\fR \\fB\\-\\-help\\fR",
          ".SH DESCRIPTION",
          esc(" ".join(help_text.split())),
          ".PP",
          esc("With a COMMAND, xs runs that one command. With no COMMAND and stdin not a "
              "terminal, xs reads one command per line from stdin (script mode), like "
              "redis-cli: spaces separate arguments, \"double quotes\" take backslash escapes "
              "(\\n, \\xHH, \\\"), 'single quotes' are literal. Whatever is already buffered on "
              "stdin runs in one transaction with one fsync; replies are printed after the "
              "commit. With no COMMAND on a terminal, xs opens an interactive prompt."),
          ".PP",
          esc("Command names are case-insensitive and take exactly Redis's arguments. Every "
              "command is one LMDB transaction: all or nothing. Every write is on disk "
              "(fsync) before xs answers, unless --no-sync is given."),
          ".SH HELP",
          esc("\"xs help\" lists the commands by family; \"xs help XADD\" (or \"XGROUP CREATE\", "
              "or a porcelain command such as tail) shows a command's grammar, what it does, the "
              "Redis version that introduced it, its time complexity and examples. "
              "\"xs XADD --help\" shows the same when --help is the only argument after the "
              "command (after the subcommand for XGROUP and XINFO); \"-h\" does too where a lone "
              "argument would be a wrong number of arguments anyway, so \"xs XLEN -h\" still "
              "counts the entries of a stream named -h. In script mode \"help\" is an unknown "
              "command, as Redis answers it. On a terminal, a wrong number of arguments or a "
              "syntax error is followed on stderr by the command's usage line, and an unknown "
              "command by the closest command name (\"did you mean XADD?\"); the Redis error "
              "text itself is unchanged, and nothing is added when stderr is not a terminal."),
          ".SH GLOBAL OPTIONS",
          esc("Global options come before the command.")]
    for names, metavar, text in global_options():
        L.append(".TP")
        L.append(", ".join("\\fB%s\\fR" % esc(n) for n in names)
                 + (" \\fI%s\\fR" % esc(metavar) if metavar else ""))
        L.append(esc(text))
    L += [".SH REDIS COMMANDS"]
    for page, title, blurb, names in FAMILIES:
        L += [".TP", "\\fBxs\\-%s\\fR(7): %s" % (page, esc(title)), esc(" ".join(names))]
    L += _porcelain_section()
    L += [".SH OUTPUT MODES",
          ".TP", "\\fB\\-\\-raw\\fR",
          esc("Byte-identical to redis-cli --raw. The default when stdout is not a terminal."),
          ".TP", "\\fB\\-\\-no\\-raw\\fR",
          esc("Byte-identical to redis-cli --no-raw: numbered lists, (integer) 1, (nil), "
              "(empty array), (error) ERR ..."),
          ".TP", "\\fB\\-\\-json\\fR",
          esc("One JSON document per reply, one per line, in RESP3 shape: strings, numbers, "
              "null, arrays, objects for maps (XINFO, XREAD and XREADGROUP results keyed by "
              "stream), {\"error\": \"...\"} for errors. Bytes that are not UTF-8 are written as "
              "{\"b64\": \"<base64>\"}, as xs export writes them (lossless). A map key (an object's "
              "name must be a string) that is not UTF-8 is decoded with surrogateescape: each byte "
              "that is not valid UTF-8 is the escape \\udcXX (XX the byte), a code point that valid "
              "UTF-8 never holds, so a real backslash stays \\\\ and the key is read back with "
              "json.loads and .encode(\"utf-8\", \"surrogateescape\"). A long XRANGE or "
              "XREVRANGE is written as it is read."),
          ".TP", "\\fB\\-\\-jsonl\\fR",
          esc("JSON lines of entries: the entries of XRANGE, XREVRANGE, XREAD and XREADGROUP one per "
              "line, {\"stream\", \"id\", \"fields\": [f, v, ...]}, the shape of xs export and xs tail "
              "--json (xs import reads it back); a nil XREAD prints nothing; other replies as --json."),
          ".TP", "\\fB\\-\\-pretty\\fR",
          esc("Readable tables and colours. The default on a terminal; colours are off with "
              "NO_COLOR or when stdout is not a terminal."),
          ".SH EXAMPLES"]
    for text, line in [("Add an entry and read the stream:", "xs XADD events '*' user alice action login"),
                       (None, "xs XRANGE events - +"),
                       ("Feed commands from a script (one transaction per batch):",
                        "printf 'XADD s * a 1\\nXLEN s\\n' | xs"),
                       ("Follow a stream as a consumer group:", "xs tail -f --group workers --consumer w1 events"),
                       ("Count the entries every half second, three times:", "xs -r 3 -i 0.5 XLEN events"),
                       ("Use another store, and JSON output:", "xs --db ./store --json XINFO STREAM events"),
                       ("Shell completion (bash):", "source <(xs completion bash)")]:
        if text:
            L += [".PP", esc(text)]
        L += _example(line)
    L += [".SH EXIT STATUS",
          ".TP", "0", esc("Success (in script mode: every command succeeded)."),
          ".TP", "1", esc("The command failed: the Redis error text went to stderr. An unknown "
                          "command, an unknown subcommand and a wrong number of arguments are "
                          "such failures too (Redis's own error texts), all with status 1. In "
                          "script mode errors are printed in place and the status is 1 if any "
                          "command failed. With -r, 1 if any run failed. Also: the store cannot "
                          "be opened."),
          ".TP", "2", esc("Usage error of xs itself: an unknown global option, a missing or bad "
                          "option value (-r, -i, XS_NO_SYNC), a bad option of a porcelain command."),
          ".TP", "130", esc("Interrupted (SIGINT, Ctrl-C): xs ends as a process killed by SIGINT, as "
                            "CPython does, so the shell reports 130, puts its prompt on a line of its "
                            "own and stops a script's loop (a program that waits for xs sees the signal, "
                            "not an exit code). Not so for the two commands that run until "
                            "stopped: xs worker, on SIGINT, SIGTERM or SIGHUP, stops its commands, gives "
                            "their entries back to the group (still pending) and exits 0 (with --once, 1 "
                            "if an entry failed); xs serve, on SIGINT or SIGTERM, drains its clients and "
                            "exits 0."),
          ".SH ENVIRONMENT",
          ".TP", "\\fBXS_DB\\fR", esc("The store directory, as --db (a leading ~ is expanded)."),
          ".TP", "\\fBXS_NO_SYNC\\fR",
          esc("1: as --no-sync. Commits skip fsync: a crash of the machine may lose the last "
              "commits (it never corrupts the store)."),
          ".TP", "\\fBNO_COLOR\\fR", esc("Set: no colours in the pretty output."),
          ".TP", "\\fBXDG_DATA_HOME\\fR", esc("Where the default store lives."),
          ".TP", "\\fBXDG_STATE_HOME\\fR",
          esc("Where the interactive prompt keeps its history (an absolute path; otherwise "
              "~/.local/state)."),
          ".SH FILES",
          ".TP", "\\fI$XDG_DATA_HOME/xstream\\fR, \\fI~/.local/share/xstream\\fR",
          esc("The default store (a directory)."),
          ".TP", "\\fISTORE/data.mdb\\fR, \\fISTORE/lock.mdb\\fR",
          esc("The LMDB environment of a store. Many processes may use one store at once."),
          ".TP", "\\fISTORE/lock\\fR",
          esc("The store lock: every process that opens the store holds a shared flock(2) on it; "
              "xs compact holds it exclusively while it replaces data.mdb."),
          ".TP", "\\fISTORE/serve.sock\\fR",
          esc("The Unix socket xs serve listens on by default (private, as the store's files are)."),
          ".TP", "\\fI$XDG_STATE_HOME/xs/history\\fR, \\fI~/.local/state/xs/history\\fR",
          esc("The interactive prompt's history (the directory mode 0700, the file 0600: it holds "
              "every value typed)."),
          ".SH SEE ALSO",
          ", ".join("\\fBxs\\-%s\\fR(7)" % p for p, _, _, _ in FAMILIES) + ", \\fBredis\\-cli\\fR(1)"]
    return "\n".join(L) + "\n"


def man_family(page, title, blurb, names, families):
    L = th("xs-" + page, 7, "xs manual")
    L += [".SH NAME", "xs\\-%s \\- %s of xs" % (page, esc(title)),
          ".SH SYNOPSIS"]
    entries = [(d, c) for name, subs in families if name in names for d, c in subs]
    for d, c in entries:
        rest = grammar(c).split(None, len(d.split()))[len(d.split()):]
        L += ["\\fBxs %s\\fR%s" % (esc(d), (" " + esc(rest[0])) if rest else ""), ".br"]
    L += [".SH DESCRIPTION", esc(blurb),
          esc("Each command takes exactly Redis's arguments and answers with Redis's reply and "
              "error texts (Redis 8.10 semantics); names are case-insensitive. Every command is "
              "one transaction: all or nothing; a command that writes is on disk before xs "
              "answers. \"xs help COMMAND\" shows the text below on a terminal."),
          ".SH COMMANDS"]
    for d, c in entries:
        summary, since, complexity, examples = help.DOCS[d]
        L += [".SS %s" % esc(d), ".nf", ".B " + esc(grammar(c)), ".fi",
              ".PP", esc(summary),
              ".PP",
              esc("Since Redis %s. Time complexity: %s %s" % (
                  since, complexity, "Writes the store." if c.write else "Only reads the store."))]
        if examples:
            L += [".PP", "Examples:"]
            for e in examples:
                L += _example(help.example_line(e))
        L += [".PP", esc("Redis: " + help.REDIS_DOCS_URL % c.name.replace("|", "-"))]
    L += [".SH SEE ALSO", "\\fBxs\\fR(1), "
          + ", ".join("\\fBxs\\-%s\\fR(7)" % p for p, _, _, _ in FAMILIES if p != page)]
    return "\n".join(L) + "\n"


# ============================================================== completions
# The scripts are made by xstream_cli.porcelain.complete, so that
# "xs completion bash" prints exactly what completions/xs.bash holds.

# ==================================================================== main

# ====================================================== docs/reference.md

README_SECTIONS = ("layout", "commands")
REFERENCE = "docs/reference.md"         # the file that holds those sections
PACKAGES = [("storage", "the engine: no click, no rich; usable as a library (`from storage import Store`)"),
            ("storage/parts", "the engine's parts: one invariant each, over one transaction"),
            ("storage/verbs", "what Txn delegates to: one module per command family"),
            ("storage/ops", "whole-store operations on the public API (save, export, compact, worker)"),
            ("storage/spark", "the Spark data source and xs archive (the only pyspark importer)"),
            ("storage/spark/archive", "xs archive: one module per idea, run in order by __init__.py"),
            ("xstream_cli", "the command line: parsing, output, porcelain"),
            ("xstream_cli/commands", "one parser and one engine call per Redis command"),
            ("xstream_cli/porcelain", "the porcelain commands (not Redis names)"),
            ("xstream_cli/porcelain/worker", "xs worker: the command, its loop, its children, the watchdog program"),
            ("xstream_cli/server", "xs serve: the RESP2/RESP3 server over the same command table")]


def module_summary(path):
    """The first sentence of a module's docstring."""
    import ast
    with open(path, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    para = " ".join(doc.split("\n\n")[0].split()).replace("``", "")
    first = re.split(r"(?<=[^.][.])\s", para)[0].rstrip(".:")
    if len(first) > 96:
        first = first[:93].rsplit(" ", 1)[0].rstrip(",;:(") + " ..."
    return first


def layout_section():
    """The reference's layout: every module of the packages, with the first
    sentence of its docstring."""
    rows = []
    for pkg, blurb in PACKAGES:
        rows.append((pkg + "/", blurb.replace("`", "")))
        for f in sorted(os.listdir(os.path.join(ROOT, pkg))):
            if f.endswith(".py"):
                rows.append(("  " + f, module_summary(os.path.join(ROOT, pkg, f))))
    rows += [("bin/xs", "the installed command (not pip's console-script wrapper, which imports re)"),
             ("examples/", "runnable jobs: user_counts.py, per-user counts over a stream with Spark"),
             ("tests/", "pytest: unit, parts, storage, CLI, differential (vs redis-server), property, "
                        "chaos, Spark, serve; bench_*.py benchmarks (not collected)"),
             ("tests/fixtures/", "stores of formats 1 and 2 and what they must answer "
                                 "(tests/cli/test_format_upgrade_replies.py)"),
             ("tools/gen_docs.py", module_summary(os.path.join(ROOT, "tools", "gen_docs.py"))),
             ("man/, completions/", "generated by tools/gen_docs.py (a test fails when they are stale)")]
    w = max(len(a) for a, _ in rows) + 2
    return "\n".join("    " + a.ljust(w) + b for a, b in rows)


def _txn_call(verb):
    """``module.function`` a Txn verb runs (read from its source)."""
    import inspect

    from storage.txn import Txn
    src = inspect.getsource(getattr(Txn, verb))
    m = re.search(r"self\._(?:read|write)\((\w+)\.(\w+)", src)
    return "storage/verbs/%s.py `%s`" % (m.group(1), m.group(2)) if m else "storage/txn.py"


def commands_section(families):
    """The reference's command table: Redis command -> parser -> engine verb."""
    rows = ["| Redis command | parser (xstream_cli/commands/) | engine verb (storage.txn.Txn) | implemented in |",
            "| --- | --- | --- | --- |"]
    for _, subs in families:
        for display, c in subs:
            verbs = [v for v in c.verb.split(" / ") if v != "-"]
            parser = "%s.%s" % (c.parse.__module__.rsplit(".", 1)[1], c.parse.__name__)
            rows.append("| %s | %s | %s | %s |" % (
                display, parser, " / ".join("`%s`" % v for v in verbs) or "-",
                " / ".join(_txn_call(v) for v in verbs) or "-"))
    return "\n".join(rows)


def readme(families):
    """docs/reference.md with its generated sections brought up to date."""
    with open(os.path.join(ROOT, REFERENCE), encoding="utf-8", newline="") as f:
        text = f.read()
    content = {"layout": layout_section(), "commands": commands_section(families)}
    for name in README_SECTIONS:
        begin = "<!-- generated:%s (tools/gen_docs.py) -->" % name
        end = "<!-- end generated:%s -->" % name
        a, b = text.find(begin), text.find(end)
        if a < 0 or b < a:
            raise SystemExit("gen_docs: %s lacks the %s markers" % (REFERENCE, name))
        text = text[:a + len(begin)] + "\n" + content[name] + "\n" + text[b:]
    return text


def generate():
    """{relative path: text} of every generated file."""
    families = redis_commands()
    files = {"man/xs.1": man_xs1(families), REFERENCE: readme(families)}
    for page, title, blurb, names in FAMILIES:
        files["man/xs-%s.7" % page] = man_family(page, title, blurb, names, families)
    model = complete.completion_model(cli)
    files["completions/xs.bash"] = complete_scripts.bash_script(model)
    files["completions/_xs"] = complete_scripts.zsh_script(model)
    files["completions/xs.fish"] = complete_scripts.fish_script(model)
    from xstream_cli import recipes
    files["docs/recipes.md"] = recipes.markdown()
    return files


def write(files, out):
    for rel, text in sorted(files.items()):
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def stale(files, root):
    """Relative paths whose committed copy differs (or is missing)."""
    out = []
    for rel, text in sorted(files.items()):
        try:
            with open(os.path.join(root, rel), encoding="utf-8", newline="") as f:
                if f.read() == text:
                    continue
        except OSError:
            pass
        out.append(rel)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=ROOT, help="write here instead of the repository")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed files are stale")
    a = ap.parse_args(argv)
    files = generate()
    if a.check:
        bad = stale(files, a.out)
        for rel in bad:
            print("stale: %s (run python3 tools/gen_docs.py)" % rel)
        return 1 if bad else 0
    write(files, a.out)
    for rel in sorted(files):
        print("wrote %s" % os.path.join(a.out, rel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
