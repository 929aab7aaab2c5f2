"""Shell completion: ``xs completion bash|zsh|fish`` prints the script,
and the hidden ``xs _complete`` answers it with names from the store.

    xs [--db PATH] _complete keys [PREFIX]            stream names, one a line
    xs [--db PATH] _complete groups [STREAM]          group names of STREAM
                                                      (no STREAM: of every stream)
    xs [--db PATH] _complete consumers STREAM GROUP   consumer names of the group
                                                      (STREAM '': every stream's GROUP)

The store is opened read-only (never created, never written), and any
error at all -- no store, a bad path, not an xs store, a bad argument --
prints nothing and exits 0: a completion must never spoil the shell
line with an error message.  Names are written as raw bytes.

The scripts are generated from the click command tree and the command
table (grammars): the model here, each shell's text in
xstream_cli.porcelain.complete_scripts; tools/gen_docs.py writes the
same text to completions/ and a test checks that the committed files do
not drift.
What they complete: global options, command names (Redis and porcelain),
subcommands, keywords of a grammar, stream names where a grammar has a
key, group names where it has a group (``XREADGROUP GROUP <TAB>``: the
groups of the stream named after STREAMS, else of every stream),
consumer names, and for porcelain commands their options, stream names
and files (``xs import ./<TAB>``).  The three scripts share one logic
(tests/cli/test_help.py drives bash, tests/cli/test_completion_shells.py zsh and
fish in the real shells), except that fish hands a completion only the
line up to the cursor: there ``XREADGROUP GROUP <TAB> c STREAMS s``
offers the groups of every stream, not just those of s.
"""
import os
import re
import sys

import click

from xstream_cli import context

MAX_NAMES = 10000       # a completion menu longer than this helps nobody
SHELLS = ("bash", "zsh", "fish")

# global options only the fast path knows (xstream_cli.context.parse_globals)
REPEAT_OPTIONS = [(["-r"], "N", "Run the command N times (negative: forever), as redis-cli -r."),
                  (["-i"], "SEC", "With -r: wait SEC seconds between runs (0.1 for a tenth), as redis-cli -i."),
                  (["-x"], None, "Read the command's last argument from stdin (any size, any bytes), "
                                 "as redis-cli -x.")]


def _uniq(names):
    seen = set()
    out = []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def _names(g, what, args):
    """The names to print (bytes), or [] on any problem."""
    store = context.store_at(context.db_path(g), readonly=True, create=False)
    arg = args[0] if args else None
    try:
        with store.read() as tx:
            if what == "keys":
                prefix = arg or b""
                return [n for n in tx.stream_names() if n.startswith(prefix)][:MAX_NAMES]
            if what == "groups":
                streams = [arg] if arg else tx.stream_names()
                return sorted(set(n for s in streams for n in tx.group_names(s)))[:MAX_NAMES]
            if what == "consumers" and len(args) >= 2:
                streams = [arg] if arg else tx.stream_names()
                out = set()
                for s in streams:
                    if args[1] in tx.group_names(s):
                        out.update(c.name for c in tx.consumers_info(s, args[1]))
                return sorted(out)[:MAX_NAMES]
            return []
    finally:
        store.close()


@click.command(name="_complete", hidden=True, add_help_option=False,
               context_settings={"ignore_unknown_options": True})
@click.argument("what", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def complete(obj, what, args):
    """Stream, group or consumer names for shell completion."""
    try:
        names = _names(obj or context.Globals(), what, [os.fsencode(a) for a in args])
        out = sys.stdout.buffer
        for n in names:
            if b"\n" not in n:
                out.write(n + b"\n")
        out.flush()
    except BaseException:       # noqa: BLE001  (silence is the contract)
        pass
    sys.exit(0)


@click.command(name="completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell):
    """Print the completion script for SHELL (bash, zsh or fish).

    \b
      bash:  source <(xs completion bash)          (in ~/.bashrc)
      zsh:   xs completion zsh > ~/.zfunc/_xs      (with fpath+=(~/.zfunc))
      fish:  xs completion fish > ~/.config/fish/completions/xs.fish

    Stream, group and consumer names are read from the store named by
    --db on the command line being completed, else from xs's default
    store (xs _complete reads the environment as every xs command does).
    """
    context.write_out(script(shell).encode("utf-8"))


def register(cli):
    cli.add_command(complete)
    cli.add_command(completion)


# ================================================================ the model

def global_options(cli=None):
    """[(option strings, metavar or None, help)] of the click app,
    in declaration order, --help last; then -r and -i."""
    if cli is None:             # the application running this command (no import of the app: a cycle)
        cli = click.get_current_context().find_root().command
    ctx = click.Context(cli, info_name="xs", **(cli.context_settings or {}))
    out = []
    for p in cli.get_params(ctx):
        if not isinstance(p, click.Option) or p.hidden:
            continue
        # click builds the help option's names from a set: sort them, short
        # options first, so the output does not depend on hash seeds
        names = sorted(list(p.opts) + list(p.secondary_opts), key=lambda n: (n.startswith("--"), n))
        metavar = None if p.is_flag else (p.metavar or p.name.upper())
        out.append((names, metavar, " ".join((p.help or "").split())))
    known = {n for names, _, _ in out for n in names}
    out += [o for o in REPEAT_OPTIONS if not known & set(o[0])]
    return out


def porcelain_commands(cli=None):
    """[(name, click command)] of the visible porcelain commands."""
    if cli is None:             # the application running this command (no import of the app: a cycle)
        cli = click.get_current_context().find_root().command
    return [(n, cli.commands[n]) for n in sorted(cli.commands) if not cli.commands[n].hidden]


def keywords(gram, skip):
    """Upper-case option words of a grammar (for completion)."""
    seen = []
    for w in re.findall(r"[A-Z][A-Z0-9-]*[A-Z0-9]|[A-Z]", gram):
        if w not in skip and w not in seen:
            seen.append(w)
    return seen


_NAME_SLOT = {"key": "k", "group": "g", "consumer": "c"}


def slots(gram, skip):
    """Completion slots of a grammar's leading positional words:
    'k' a stream, 'k*' streams from here on, 'g' a group of the stream
    in the 'k' slot, 'c' a consumer of that group, '-' anything; plus 'S'
    when it has ``STREAMS key [key ...]``."""
    words = gram.split()[skip:]
    out = []
    i = 0
    while i < len(words):
        w = words[i]
        if not re.fullmatch(r"[a-z][a-z-]*", w):
            break
        if w == "key" and words[i + 1:i + 3] == ["[key", "...]"]:
            out.append("k*")
            break
        out.append(_NAME_SLOT.get(w, "-"))
        i += 1
    while out and out[-1] == "-":
        out.pop()
    if "STREAMS key [key ...]" in gram:
        out.append("S")
    return out


def keyword_slots(gram, skip):
    """'KEYWORD:slot[:slot]' for every keyword followed by argument
    words: what the one or two words after it are (``GROUP group
    consumer`` -> 'GROUP:g:c', ``COUNT count`` -> 'COUNT:-')."""
    words = [w.strip("[]<>") for w in gram.split()[skip:]]
    out = []
    for i, w in enumerate(words):
        if not re.fullmatch(r"[A-Z][A-Z0-9-]*", w) or w == "STREAMS":
            continue
        vals = []
        for v in words[i + 1:i + 3]:
            if not re.fullmatch(r"[a-z][a-z-]*", v):
                break
            vals.append(_NAME_SLOT.get(v, "-"))
        if vals:
            e = "%s:%s" % (w, ":".join(vals))
            if e not in out:
                out.append(e)
    return out


def _param_slot(p):
    """What a porcelain parameter's value is: 'k' stream names, 'g'
    group names, 'f' files, '=a,b' fixed words, '-' anything."""
    if isinstance(p.type, click.Choice):
        return "=" + ",".join(p.type.choices)
    name = p.name or ""
    if name in ("stream", "streams", "globs", "dead_letter"):
        return "k"
    if name == "group":
        return "g"
    if name in ("file", "args", "output"):
        return "f"
    if name == "command":
        return "x"
    return "-"


def porcelain_specs(cli=None):
    """{name: (positional slot, [options], ['--opt:slot' of options with a value])}."""
    out = {}
    for name, cmd in porcelain_commands(cli):
        pos = "-"
        opts = []
        vals = []
        for p in cmd.params:
            if isinstance(p, click.Argument):
                if pos == "-":
                    pos = _param_slot(p)
                continue
            names = list(p.opts) + list(p.secondary_opts)
            opts += names
            if not p.is_flag and not getattr(p, "count", False):
                vals += ["%s:%s" % (n, _param_slot(p)) for n in p.opts]
        if cmd.add_help_option is not False and "--help" not in opts:
            opts.append("--help")
        out[name] = (pos, sorted(set(opts)), vals)
    return out


def completion_model(cli=None):
    """Everything the three scripts need, as sorted / ordered lists."""
    from xstream_cli.commands import COMMANDS, SUBCOMMANDS
    from xstream_cli.help_tables import FAMILIES
    gopts = global_options(cli)
    opts = sorted({n for names, _, _ in gopts for n in names})
    value_opts = sorted({n for names, metavar, _ in gopts if metavar for n in names})
    redis = sorted(n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS))
    pspecs = porcelain_specs(cli)
    porcelain = sorted(pspecs)
    specs = {}      # "XACK" / "XGROUP CREATE" -> (slots, keywords, keyword slots)
    subs = {}       # "XGROUP" -> [subcommand names]
    for fam in FAMILIES:
        for name in fam[4]:
            b = name.encode()
            if b in SUBCOMMANDS:
                subs[name] = [s.decode() for s in SUBCOMMANDS[b]]
                entries = [("%s %s" % (name, s.decode()), c) for s, c in SUBCOMMANDS[b].items()]
            else:
                entries = [(name, COMMANDS[b])]
            for d, c in entries:
                g = c.grammar
                n = len(d.split())
                specs[d] = (slots(g, n), keywords(g, set(d.split())), keyword_slots(g, n))
    return opts, value_opts, redis, porcelain, specs, subs, pspecs


def script(shell, cli=None):
    """The completion script for ``shell``."""
    from xstream_cli.porcelain import complete_scripts as s  # the scripts' text: only when one is asked for
    model = completion_model(cli)
    return {"bash": s.bash_script, "zsh": s.zsh_script, "fish": s.fish_script}[shell](model)
