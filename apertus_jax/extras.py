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


def missing(extra: str) -> str | None:
    """The first package of `extra` (a key of MODULES) that is not installed, or None."""
    return next((name for name in MODULES[extra] if importlib.util.find_spec(name) is None), None)


def require(extra: str, job: str) -> None:
    """Checks that every package of `extra` is installed (found, not imported).

    Args:
      extra: a key of MODULES. job: the command that needs it, named in the error.

    Raises:
      ValueError: a package is missing; one line naming it, the extra and the install command.
    """
    name = missing(extra)
    if name is not None:
        raise ValueError(
            f"{job} needs the '{extra}' extra ({name} is not installed); "
            f'install it with: pip install -e ".[{extra}]"'
        )
