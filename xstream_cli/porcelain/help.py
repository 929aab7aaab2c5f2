"""``xs help``: the commands by family; ``xs help XADD``: one command's
grammar, summary, Redis version, complexity and examples (the texts are
xstream_cli.help_text's, the same as ``help XADD`` at the prompt and
``xs XADD --help``)."""
import sys

import click


@click.command(name="help", context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def help_(command):
    """Show the commands by family, the help of COMMAND (XADD, 'XGROUP CREATE', tail), or recipes."""
    from xstream_cli import help_text as help
    if not command:
        text = help.overview(_application, help.terminal_width())
    elif len(command) == 1 and command[0].lower() == "recipes":
        from xstream_cli import recipes
        text = recipes.text()
    else:
        name = " ".join(command)
        text = help.command_help(_application, name)
        if text is None:
            s = help.suggest(_application, name)
            click.echo("xs: no command %r%s; xs help lists them"
                       % (name, " (did you mean %s?)" % s if s else ""), err=True)
            sys.exit(1)
    from xstream_cli import context
    context.write_out(text.encode("utf-8"))


def _application():
    """The click group running ``xs help``, with every porcelain command
    on it: the porcelain reaches the application through click's context,
    never an import (the registry, xstream_cli.porcelain, imports this
    module)."""
    return click.get_current_context().find_root().command


def register(cli):
    cli.add_command(help_)
