"""Objects named "module:attribute", imported on first use.

    load_named("apertus_jax.optim.orthogonal:muon")   # the function; its module imported now, not before

The tables of optimizers, tokenizer kinds and data kinds, and the trainer's default data side, name their
objects so: importing the trainer loads only what a run uses.
"""

import importlib
from typing import Any


def load_named(name: str) -> Any:
    """The attribute that `name` ("module:attribute") names, its module imported on first use.

    Raises:
      ValueError: `name` is not of the form "module:attribute".
      ImportError / AttributeError: no such module, or no such attribute in it.
    """
    module, colon, attribute = name.partition(":")
    if not (module and colon and attribute):
        raise ValueError(
            f"{name!r} names no object; use 'module:attribute', e.g. 'apertus_jax.optim.orthogonal:muon'"
        )
    return getattr(importlib.import_module(module), attribute)
