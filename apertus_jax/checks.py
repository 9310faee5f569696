"""Range checks of config values: one rule, one wording, shared by every config section.

Each package validates its own section with these (models, data, optim, train, checkpoint, faults, mesh);
`apertus_jax.train.config` composes the sections into the run schema.
"""

import math
from typing import Any


def check_number(
    where: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
    allow_none: bool = False,
) -> None:
    """Checks that `value` is a (finite) number in the interval; a bool is not a number.

    Args:
      where: the field's name in messages, e.g. "optim.peak_lr".
      low, high: bounds (None: unbounded); `low_open` / `high_open` exclude the bound itself.
      integer: the value must be an int (floats such as 5e12 that are whole are accepted).
      allow_none: None is a valid value.

    Raises:
      ValueError: one line naming `where`, the value and the valid range.
    """
    if value is None and allow_none:
        return
    kind = "an integer" if integer else "a number"
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if integer and isinstance(value, float):
        is_number = value.is_integer()
    if not is_number or not math.isfinite(value):
        raise ValueError(f"{where} must be {kind}{' or None' if allow_none else ''}, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        raise ValueError(f"{where} must be {_describe(kind, low, high, low_open, high_open)}, got {value!r}")


def _describe(kind: str, low, high, low_open: bool, high_open: bool) -> str:
    if kind == "an integer" and low == 1 and high is None and not low_open:
        return "a positive integer"
    if high is None:
        return f"{kind} {'>' if low_open else '>='} {low}"
    if low is None:
        return f"{kind} {'<' if high_open else '<='} {high}"
    return f"{kind} in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


def check_choice(where: str, value: Any, choices: tuple) -> None:
    """Raises ValueError (one line) unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(f"{where} must be one of {choices}, got {value!r}")
