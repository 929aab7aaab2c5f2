"""Help texts: ``xs help``, ``xs help XADD``, ``help XADD`` at the prompt,
``xs XADD --help``, usage lines after a wrong-arity error, and
"did you mean" suggestions.  The man pages (tools/gen_docs.py) are made
from the same tables.

    command_help(name) -> str | None   full help of a Redis or porcelain command
    overview() -> str                  every command, by family
    usage_line(name) -> str | None     "usage: XADD key [NOMKSTREAM] ..."
    suggest(name) -> str | None        the closest command name to a typo
    other_type(name) -> str | None     "strings" for SET: a common Redis
                                       command of a type xs does not hold

The texts are xstream_cli.help_text's, with the porcelain commands of
the registry (xstream_cli.porcelain.commands(), imported only when a
porcelain name is asked about); the tables (DOCS, FAMILIES ...) are
xstream_cli.help_tables', re-exported here.  This module imports neither
click nor rich, so the one-shot path may use it.  No porcelain module
imports it (the registry imports them all): ``xs help`` uses
xstream_cli.help_text with the application's own porcelain commands.

Who imports it: xstream_cli.runner, xstream_cli.prompt, tools/gen_docs.py.
"""
from xstream_cli import help_text
from xstream_cli.help_tables import (  # noqa: F401 (the tables, re-exported: tools/gen_docs.py, the completion model)
    DOCS,
    FAMILIES,
    OTHER_TYPES,
    PORCELAIN_BLURB,
    REDIS_DOCS_URL,
    other_type,
)
from xstream_cli.help_text import example_line, family_of, redis_names, terminal_width  # noqa: F401 (re-exported)


def _registry():
    """The registry's bare root group with every porcelain command on it
    (imports click and the porcelain modules, not the application)."""
    from xstream_cli.porcelain import commands
    return commands()[0]


def porcelain():
    """{name: click command} of the visible porcelain commands."""
    return help_text.porcelain(_registry)


def usage_line(name):
    """help_text.usage_line, with the registry's porcelain commands."""
    return help_text.usage_line(_registry, name)


def command_help(name):
    """help_text.command_help, with the registry's porcelain commands."""
    return help_text.command_help(_registry, name)


def overview(width=None):
    """help_text.overview, with the registry's porcelain commands."""
    return help_text.overview(_registry, width)


def suggest(name):
    """help_text.suggest, with the registry's porcelain commands."""
    return help_text.suggest(_registry, name)
