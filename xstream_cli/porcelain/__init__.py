"""Porcelain commands (not Redis names): xs tail, save, restore, export,
import, ...  Each module here defines ``register(cli)``, which adds its
click commands to a click group: the application's (xstream_cli.app), or
the bare group ``commands()`` builds for the help texts (xstream_cli.help,
which must not import the application: the application runs the runner
and the prompt, which ask help).  They must never shadow a Redis command
name.

Who imports it: xstream_cli.app and xstream_cli.help.
"""
import importlib
import pkgutil

# the root group's click settings: the application's, and the parent of
# every porcelain help text (so that "Usage: xs tail ..." and "-h, --help"
# read the same wherever the text is made)
ROOT_SETTINGS = {"help_option_names": ["-h", "--help"], "allow_interspersed_args": False}

_COMMANDS = None


def register_all(cli):
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module("%s.%s" % (__name__, info.name))
        reg = getattr(mod, "register", None)
        if reg is not None:
            reg(cli)


def commands():
    """(group, {name: click command}): a bare root group named like the
    application with every porcelain command on it, made once."""
    global _COMMANDS
    if _COMMANDS is None:
        import click
        group = click.Group("xs", context_settings=ROOT_SETTINGS)
        register_all(group)
        _COMMANDS = group, dict(group.commands)
    return _COMMANDS
