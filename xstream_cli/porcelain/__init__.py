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

# modules here that hold no command of their own, only parts of some
# (not imported to register commands: every start of the click application
# would load them; tests/unit/test_porcelain_registry.py keeps this true)
HELPERS = frozenset({"complete_scripts", "durations", "tail_output"})

# the root group's click settings: the application's, and the parent of
# every porcelain help text (so that "Usage: xs tail ..." and "-h, --help"
# read the same wherever the text is made)
ROOT_SETTINGS = {"help_option_names": ["-h", "--help"], "allow_interspersed_args": False}

_COMMANDS = None


def register_all(cli):
    for info in pkgutil.iter_modules(__path__):
        if info.name in HELPERS:
            continue
        mod = importlib.import_module("%s.%s" % (__name__, info.name))
        reg = getattr(mod, "register", None)
        if reg is not None:
            before = set(cli.commands)
            reg(cli)
            for name in set(cli.commands) - before:
                accept_globals(cli.commands[name])


_PREFIX = "xs_global_"


def accept_globals(cmd):
    """Let ``cmd`` take the global options --db and --no-sync after its
    name too (``xs ls --db X``), as people type them: given, they set the
    invocation's Globals (ctx.obj) before the command runs.  (--json:
    every porcelain command that prints replies has its own, which
    honours ``xs --json CMD`` too.)"""
    import click

    from xstream_cli import context
    taken = {o for p in cmd.params for o in getattr(p, "opts", ())}
    specs = [("--db", "db", dict(metavar="PATH", help=context.DB_HELP)),
             ("--no-sync", "no_sync", dict(is_flag=True, help=context.NO_SYNC_HELP))]
    added = []
    for flag, name, kw in specs:
        if flag not in taken:
            cmd.params.append(click.Option([flag, _PREFIX + name], **kw))
            added.append(name)
    if not added:
        return
    inner = cmd.callback

    def callback(*args, **kwargs):
        given = {name: kwargs.pop(_PREFIX + name) for name in added}
        ctx = click.get_current_context()
        g = ctx.obj
        if g is None:
            g = ctx.obj = ctx.find_root().obj = context.Globals()
        if given.get("db") is not None:
            try:
                context.check_db(given["db"])
            except context.UsageError as e:
                raise click.UsageError(str(e))
            g.db = given["db"]
        if given.get("no_sync"):
            g.durable = False
        return inner(*args, **kwargs) if inner is not None else None
    cmd.callback = callback


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
