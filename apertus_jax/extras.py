"""The optional extras of setup.py that a command needs, and the one check that an extra is installed.

A command that needs an extra checks it at its start (`experiments.cli.require_extras`), so a missing
package is one line naming the extra to install instead of a traceback at its first import.
"""

import importlib.util

# The packages of each extra as they are imported (setup.py's `extras_require` names them as installed).
MODULES = {
    "prep": ("datatrove", "protego", "pyarrow", "orjson"),
    "eval": ("lm_eval",),
    "seqio": ("seqio", "tensorflow"),
}


def installed(module: str) -> bool:
    """Whether `module` (a dotted name too) is found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def missing(extra: str, modules: tuple[str, ...] | None = None) -> str | None:
    """The first package of `extra` that is not installed, or None: of `modules`, by default `MODULES[extra]`
    (the part of an extra that one use needs, e.g. `accelerators`' compiler of one platform, names its own)."""
    return next((name for name in modules or MODULES[extra] if not installed(name)), None)


def require(extra: str, job: str, modules: tuple[str, ...] | None = None) -> None:
    """Checks that the packages of `extra` (`modules`, as `missing`) are installed (found, not imported).

    Args:
      extra: the extra of setup.py. job: the command (or flag) that needs it, named in the error.

    Raises:
      ValueError: a package is missing; one line naming it, the extra and the install command.
    """
    name = missing(extra, modules)
    if name is not None:
        raise ValueError(
            f"{job} needs the '{extra}' extra ({name} is not installed); "
            f'install it with: pip install -e ".[{extra}]"'
        )
