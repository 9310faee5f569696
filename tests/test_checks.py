"""Range checks shared by the config sections: the interval rules and the one-line wording."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apertus_jax.checks import check_choice, check_number


@pytest.mark.parametrize(
    "value, kwargs, message",
    [
        (0, dict(low=1, integer=True), "x must be a positive integer, got 0"),
        (2.5, dict(low=1, integer=True), "x must be an integer, got 2.5"),
        (math.nan, dict(low=0), "x must be a number, got nan"),
        (math.inf, dict(), "x must be a number, got inf"),
        (True, dict(low=0), "x must be a number, got True"),
        ("3", dict(low=0), "x must be a number, got '3'"),
        (None, dict(low=0), "x must be a number, got None"),
        (1.0, dict(low=0, high=1, high_open=True), "x must be a number in \\[0, 1\\), got 1.0"),
        (0, dict(low=0, low_open=True), "x must be a number > 0, got 0"),
        (-1, dict(low=0, integer=True), "x must be an integer >= 0, got -1"),
        (5, dict(high=4), "x must be a number <= 4, got 5"),
    ],
)
def test_rejects_with_one_line(value, kwargs, message):
    with pytest.raises(ValueError, match=message) as error:
        check_number("x", value, **kwargs)
    assert "\n" not in str(error.value)


def test_accepts_bounds_none_and_whole_floats():
    check_number("x", 0, low=0)
    check_number("x", 1, low=0, high=1)
    check_number("x", None, low=0, allow_none=True)
    check_number("x", 5e12, low=1, integer=True)  # token counts written as 5e12
    check_choice("x", "wsd", ("wsd", "cosine"))
    with pytest.raises(ValueError, match="x must be one of \\('wsd', 'cosine'\\), got 'linear'"):
        check_choice("x", "linear", ("wsd", "cosine"))


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(-10, 10), st.floats(0, 10))
def test_accepts_exactly_the_finite_values_in_the_interval(value, low, width):
    high = low + width
    inside = math.isfinite(value) and low <= value <= high
    try:
        check_number("x", value, low=low, high=high)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == inside
