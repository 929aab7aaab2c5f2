"""The help texts, over the help tables (xstream_cli.help_tables) and
the command table, with the porcelain commands from the caller
(``registry``, below): ``xs help``, ``help XADD`` at the prompt,
``xs XADD --help``, usage lines after a wrong-arity error, and "did you
mean" suggestions.  xstream_cli.help is this API with the porcelain
commands of the registry; ``xs help`` (xstream_cli.porcelain.help) uses
it with the application's.

The grammar of a Redis command is its parser's docstring (the command
table, xstream_cli.commands); the summary, the Redis version that
introduced it, its time complexity and examples are the table DOCS.
Porcelain commands are described by their click commands, which are
imported only when a porcelain name is asked about: this module imports
neither click nor rich, so the one-shot path may use it.

Who imports it: xstream_cli.help, xstream_cli.porcelain.help.
"""
import difflib
import re
import sys

from xstream_cli.help_tables import DOCS, FAMILIES, REDIS_DOCS_URL

# ================================================================ the table

def _table():
    from xstream_cli.commands import COMMANDS, SUBCOMMANDS
    return COMMANDS, SUBCOMMANDS


def _words(name):
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return name.split()


def _redis(name):
    """(display name, Command or None for a container, subcommand names)
    for a Redis command name ("xadd", "XGROUP create", "xgroup"), or
    None."""
    COMMANDS, SUBCOMMANDS = _table()
    w = _words(name)
    if not w:
        return None
    head = w[0].upper().encode("utf-8", "surrogateescape")
    if head in COMMANDS and len(w) == 1:
        return head.decode(), COMMANDS[head], []
    subs = SUBCOMMANDS.get(head)
    if subs is None:
        return None
    if len(w) == 1:
        return head.decode(), None, [s.decode() for s in subs]
    sub = w[1].upper().encode("utf-8", "surrogateescape")
    if len(w) == 2 and sub in subs:
        return "%s %s" % (head.decode(), sub.decode()), subs[sub], []
    return None


def redis_names():
    """Every Redis command and subcommand name, as shown ("XGROUP CREATE")."""
    COMMANDS, SUBCOMMANDS = _table()
    out = [n.decode() for n in COMMANDS]
    for c, subs in SUBCOMMANDS.items():
        out.append(c.decode())
        out += ["%s %s" % (c.decode(), s.decode()) for s in subs]
    return sorted(out)


def family_of(name):
    """The family of a Redis command ("XGROUP CREATE" -> "group")."""
    head = _words(name)[0].upper()
    for fam, _, _, _, names in FAMILIES:
        if head in names:
            return fam
    return None


def example_line(example, prefix="xs "):
    return prefix + example


# ============================================================ porcelain

# ``registry``: a function returning the click group the porcelain
# commands are registered on, called only when a porcelain name is needed
# (it imports click and the porcelain modules): the registry's bare group
# (xstream_cli.help), or the application's own for ``xs help``
# (xstream_cli.porcelain.help, through click's context: the registry
# imports every porcelain module, so none may import it).

def porcelain(registry):
    """{name: click command} of the visible porcelain commands."""
    return {n: c for n, c in registry().commands.items() if not c.hidden}


def _click_help(registry, name, cmd, usage_only=False):
    import click

    root = registry()
    with click.Context(root, info_name="xs", **(root.context_settings or {})) as parent:
        ctx = click.Context(cmd, info_name=name, parent=parent)
        return ctx.get_usage() if usage_only else ctx.get_help()


def _twins():
    from xstream_cli.commands import TWINS
    return TWINS


def _porcelain_name(registry, name):
    if not isinstance(name, str) or " " in name.strip():
        return None
    n = name.strip()
    return n if n in porcelain(registry) else None


# ================================================================ the API

def usage_line(registry, name):
    """One line: ``usage: XADD key [NOMKSTREAM] ...`` (a container lists
    its subcommands), or None for an unknown name."""
    r = _redis(name)
    if r is not None:
        display, cmd, subs = r
        if cmd is not None:
            return "usage: " + cmd.grammar
        return "usage: %s <%s> [arguments ...]" % (display, " | ".join(subs))
    p = _porcelain_name(registry, name)
    if p is not None:
        return "usage: " + _click_help(registry, p, porcelain(registry)[p], usage_only=True).split("Usage: ", 1)[-1]
    return None


def command_help(registry, name):
    """The full help of a Redis command ("XADD", "xgroup create", "XINFO")
    or a porcelain command ("tail"), or None if there is no such
    command."""
    r = _redis(name)
    if isinstance(name, str) and name.strip() in _twins():   # "restore": the porcelain, "RESTORE": Redis's
        p = name.strip()
        return _click_help(registry, p, porcelain(registry)[p]).rstrip("\n") + "\n\n(Redis's %s: xs help %s)\n" % (
            p.upper(), p.upper())
    if r is None:
        p = _porcelain_name(registry, name)
        if p is None:
            return None
        return _click_help(registry, p, porcelain(registry)[p]).rstrip("\n") + "\n"
    display, cmd, subs = r
    summary, since, complexity, examples = DOCS.get(display, ("", "", "", []))
    L = []
    if cmd is not None:
        L += [cmd.grammar, ""]
    else:
        L += ["%s <subcommand> [arguments ...]" % display, ""]
    L += _wrap(summary, "  ")
    L.append("")
    L.append("  family:     %s" % family_of(display))
    if since:
        L.append("  since:      Redis %s" % since)
    if complexity:
        L += _wrap(complexity, "  complexity: ", "              ")
    if cmd is not None:
        L.append("  %s" % ("writes (one durable transaction)" if cmd.write else "reads only"))
    if subs:
        COMMANDS, SUBCOMMANDS = _table()
        L += ["", "Subcommands:"]
        for s in subs:
            full = "%s %s" % (display, s)
            L.append("  %s" % SUBCOMMANDS[display.encode()][s.encode()].grammar)
            L += _wrap(DOCS.get(full, ("",))[0], "      ")
    if examples:
        L += ["", "Examples:"]
        L += ["  " + example_line(e) for e in examples]
    L += ["", "Redis reference: " + REDIS_DOCS_URL % (display.lower().replace(" ", "-"))]
    return "\n".join(L) + "\n"


def terminal_width(stream=None):
    """The width to lay help out in: the terminal's, when ``stream``
    (default stdout) is one, else 80 (pipes, files, generated pages)."""
    import shutil
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return max(shutil.get_terminal_size((80, 24)).columns, 40)
    except (AttributeError, OSError, ValueError):
        pass
    return 80


def overview(registry, width=None):
    """Every command, listed by family, with a one-line summary cut to
    ``width`` columns (the terminal's, so that a summary is not cut short
    on a wide one; None: 80)."""
    room = None if width is None else max(width - 25, 30)
    L = ["xs: Redis Streams in a file. Commands by family (Redis names are case-insensitive",
         "and take Redis's own arguments):"]
    COMMANDS, SUBCOMMANDS = _table()
    for fam, _, title, _, names in FAMILIES:
        L += ["", "%s:" % title.capitalize()]
        for n in names:
            entries = [n] if n.encode() in COMMANDS else \
                ["%s %s" % (n, s.decode()) for s in SUBCOMMANDS[n.encode()]]
            for e in entries:
                L.append("  %-22s %s" % (e, _first_sentence(DOCS.get(e, ("",))[0], room or 54)))
    try:
        pc = porcelain(registry)
    except Exception:           # noqa: BLE001  (the Redis part is still worth showing)
        pc = {}
    if pc:
        L += ["", "Porcelain commands (xs COMMAND --help for options):"]
        for n in sorted(pc):
            L.append("  %-22s %s" % (n, pc[n].get_short_help_str(limit=room or 56)))
    L += ["", "xs help COMMAND shows a command's grammar, summary, complexity and examples;",
          "xs help recipes everyday tasks, each in a few commands;",
          "man xs (and man xs-streams, xs-groups, xs-keyspace) the manual."]
    return "\n".join(L) + "\n"


def suggest(registry, name):
    """The command name closest to ``name`` (a typo), or None."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    w = name.split()
    if not w or len(w[0]) > 64:
        return None
    COMMANDS, SUBCOMMANDS = _table()
    head = w[0].upper()
    if head.encode() in SUBCOMMANDS and len(w) > 1:
        subs = [s.decode() for s in SUBCOMMANDS[head.encode()]]
        m = difflib.get_close_matches(w[1].upper(), subs, n=1, cutoff=0.6)
        return "%s %s" % (head, m[0]) if m else None
    redis = sorted(n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS))
    try:
        pc = sorted(porcelain(registry))
    except Exception:           # noqa: BLE001
        pc = []
    cands = {n: n for n in redis}
    for n in pc:
        cands.setdefault(n.upper(), n)
    m = difflib.get_close_matches(head, list(cands), n=1, cutoff=0.6)
    if not m or m[0] == head and cands[m[0]] == w[0]:
        return None
    return cands[m[0]]


# ================================================================ helpers

def _first_sentence(text, room=54):
    """The summary's first clause (up to ". ", "; " or ": ", but not one
    inside parentheses or brackets), cut to ``room`` columns; a cut one
    ends with " ..."."""
    s = text or ""
    for m in re.finditer(r"[.;:] ", s):
        head = s[:m.start()]
        if head.count("(") <= head.count(")") and head.count("[") <= head.count("]"):
            s = head
            break
    s = s.rstrip(".")
    return s if len(s) <= room else s[:room - 3].rsplit(" ", 1)[0] + " ..."


def _wrap(text, first, rest=None, width=78):
    if not text:
        return []
    import textwrap
    return textwrap.wrap(text, width=width, initial_indent=first,
                         subsequent_indent=first if rest is None else rest)
