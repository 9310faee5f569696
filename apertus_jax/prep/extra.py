"""The `prep` extra of setup.py (datatrove, protego, pyarrow, orjson), checked before a job imports the prep
modules that need it (`pipeline`, `steps`, `run`, `stats`, `tokenize`, ...), so a missing package is one
clear line instead of a traceback."""

import importlib

PREP_MODULES = ("datatrove", "protego", "pyarrow", "orjson")


def require_prep_extra(job: str) -> None:
    """Imports every package of the `prep` extra.

    Args:
      job: the command that needs them, named in the error.

    Raises:
      OSError: a package is missing; the message names it and the install command.
    """
    for name in PREP_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            raise OSError(
                f"{job} needs the 'prep' extra ({name} is not installed); "
                'install it with: pip install -e ".[prep]"'
            ) from None
