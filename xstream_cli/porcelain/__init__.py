"""Porcelain commands (not Redis names): xs tail, save, restore, export,
import, ...  Each module here defines ``register(cli)``, which adds its
click commands to the application.  They must never shadow a Redis
command name."""
import importlib
import pkgutil


def register_all(cli):
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module("%s.%s" % (__name__, info.name))
        reg = getattr(mod, "register", None)
        if reg is not None:
            reg(cli)
