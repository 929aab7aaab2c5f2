"""COMMAND DOCS for xs serve, in the shape of Redis's reply, made from
the same table as ``xs help`` (xstream_cli.help_tables.DOCS: summary,
since, complexity) and from each command's grammar (its parser's docstring),
read into Redis's argument tree: ``name``, ``type`` (key, string,
integer, pattern, unix-time, pure-token, oneof, block), ``token``,
``flags`` (optional, multiple) and nested ``arguments``.  redis-cli
builds its ``help`` pages and its argument hints from this reply.

Grammar notation: ``[x]`` optional, ``<a | b>`` one of, ``a | b`` inside
brackets one of, ``x [x ...]`` repeated, UPPERCASE words tokens
(``COUNT count``: the token of the argument after it).
"""
import re

from xstream_cli.help_tables import DOCS
from xstream_cli.output.reply import Map, Status

_TOKEN = re.compile(r"\[|\]|<|>|\||\.\.\.|[^\s\[\]<>|.]+(?:\.[^\s\[\]<>|.]+)*")
_KEYS = frozenset(("key", "newkey"))
_INTEGERS = frozenset(("count", "numids", "ms", "milliseconds", "min-idle-time", "seconds", "n", "bytes",
                       "entries-added", "entries-read", "cursor"))
_GROUPS = {"x": "stream"}


def _kind(word):
    if word in _KEYS:
        return "key"
    if word in _INTEGERS:
        return "integer"
    if word == "pattern":
        return "pattern"
    if word.startswith("unix-time"):
        return "unix-time"
    return "string"


def _is_token(word):
    return word.upper() == word and any(c.isalpha() for c in word) or word in ("*", "$", "=", "~")


def parse(tokens, i=0, closing=None):
    """Grammar tokens from ``i`` up to ``closing`` -> (alternatives (a
    list of node lists), index after).  A node is ("word", w),
    ("opt", alternatives) or ("one", alternatives)."""
    alts, seq = [], []
    while i < len(tokens):
        t = tokens[i]
        if t == closing:
            return alts + [seq], i + 1
        if t == "|":
            alts.append(seq)
            seq = []
            i += 1
        elif t in ("[", "<"):
            inner, i = parse(tokens, i + 1, "]" if t == "[" else ">")
            seq.append(("opt" if t == "[" else "one", inner))
        else:
            seq.append(("word", t))
            i += 1
    return alts + [seq], i


def _arg(name, kind, **extra):
    out = [("name", name), ("type", kind)]
    if kind not in ("oneof", "block", "pure-token"):
        out.append(("display_text", name))
    for k, v in extra.items():
        if v is not None:
            out.append((k, v))
    return out


def _flagged(arg, flag):
    d = dict(arg)
    flags = list(d.get("flags") or []) + [Status(flag)]
    return [(k, v) for k, v in arg if k != "flags"] + [("flags", flags)]


def _repeats(node, words):
    """Whether ``node`` is ``[w1 w2 ...]`` repeating the ``words`` before it."""
    if node[0] != "opt" or len(node[1]) != 1:
        return False
    seq = node[1][0]
    return [n[1] for n in seq if n[0] == "word"] == words + ["..."] and all(n[0] == "word" for n in seq)


def _one(alternatives, name_hint):
    """One argument for a group of alternatives (oneof, or a block, or
    the single argument a one-word alternative is)."""
    options = [arguments(seq) for seq in alternatives]
    if len(options) == 1:
        args = options[0]
        if len(args) == 1:
            return args[0]
        return _arg(dict(args[0])["name"] if args else name_hint, "block", arguments=[Map(a) for a in args])
    members = []
    for args in options:
        if len(args) == 1:
            members.append(args[0])
        else:
            members.append(_arg(dict(args[0])["name"], "block", arguments=[Map(a) for a in args]))
    return _arg("-".join(str(dict(m)["name"]) for m in members), "oneof", arguments=[Map(m) for m in members])


def arguments(seq):
    """The argument tree (lists of pairs) of one grammar sequence."""
    out = []
    i, n = 0, len(seq)
    while i < n:
        kind, v = seq[i]
        if kind == "word":
            if v == "...":
                i += 1
                continue
            nxt = seq[i + 1] if i + 1 < n else None
            if _is_token(v) and nxt is not None and nxt[0] == "word" and not _is_token(nxt[1]) and nxt[1] != "...":
                arg = _arg(nxt[1], _kind(nxt[1]), token=v)
                i += 2
                if i < n and _repeats(seq[i], [v, nxt[1]]):
                    arg = _flagged(_flagged(arg, "multiple"), "multiple_token")
                    i += 1
                elif i < n and _repeats(seq[i], [nxt[1]]):      # STREAMS key [key ...]
                    arg = _flagged(arg, "multiple")
                    i += 1
                out.append(arg)
                continue
            if _is_token(v):
                out.append(_arg(v.lower() if v.isalpha() else v, "pure-token", token=v))
                i += 1
                continue
            # a run of plain words, perhaps repeated as a whole: "field value [field value ...]"
            j = i
            while j < n and seq[j][0] == "word" and not _is_token(seq[j][1]) and seq[j][1] != "...":
                j += 1
            words = [w for _, w in seq[i:j]]
            if j < n and _repeats(seq[j], words):
                if len(words) == 1:
                    out.append(_flagged(_arg(words[0], _kind(words[0])), "multiple"))
                else:
                    out.append(_flagged(_arg("data", "block", arguments=[Map(_arg(w, _kind(w))) for w in words]),
                                        "multiple"))
                i = j + 1
                continue
            out.append(_arg(v, _kind(v)))
            i += 1
        elif kind == "opt":
            out.append(_flagged(_one(v, "options"), "optional"))
            i += 1
        else:
            out.append(_one(v, "choice"))
            i += 1
    return out


def grammar_arguments(grammar, words=1):
    """The arguments of a grammar line (its first ``words`` words are the
    command's name), as Maps for the reply."""
    tokens = _TOKEN.findall(grammar)[words:]
    alts, _ = parse(tokens)
    seq = alts[0] if len(alts) == 1 else [("one", alts)]
    return [Map(a) for a in arguments(seq)]


def _summary(text):
    """The first sentence of a help summary (whole: redis-cli wraps it)."""
    return text.split(". ", 1)[0].rstrip(".") if text else ""


def _entry(name, grammar, words):
    doc = DOCS.get(name.upper())
    summary = _summary(doc[0]) if doc else name.upper()
    pairs = [("summary", summary), ("since", doc[1] if doc else "1.0.0"),
             ("group", _GROUPS.get(name[:1].lower(), "generic"))]
    if doc and doc[2]:
        pairs.append(("complexity", doc[2].rstrip(".")))
    if grammar:
        pairs.append(("arguments", grammar_arguments(grammar, words)))
    return pairs


def command_docs(name, command=None, subcommands=None):
    """COMMAND DOCS's map for one command name (lower case): ``command``
    its Command (a grammar), or ``subcommands`` {NAME: Command} of a
    container (XGROUP, XINFO, CONFIG)."""
    if subcommands is not None:
        doc = DOCS.get(name.upper())
        pairs = [("summary", _summary(doc[0]) if doc else "A container for %s commands" % name.upper()),
                 ("since", doc[1] if doc else "5.0.0"), ("group", _GROUPS.get(name[:1], "generic"))]
        subs = [("%s|%s" % (name, s.decode().lower()),
                 Map(_entry("%s %s" % (name, s.decode().lower()), c.grammar, 2)))
                for s, c in sorted(subcommands.items())]
        pairs.append(("subcommands", Map(subs)))
        return Map(pairs)
    return Map(_entry(name, command.grammar if command is not None else None, 1))
