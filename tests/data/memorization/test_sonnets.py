"""apertus_jax.data.memorization.sonnets: the 154 sonnets of the pinned sdist."""

import pytest

from apertus_jax.data.memorization import sonnets as sonnets_lib


def test_sonnets_from_the_pinned_sdist():
    try:
        sonnets = sonnets_lib.load_sonnets()
    except FileNotFoundError as error:  # no PyPI access and nothing cached
        pytest.skip(str(error))
    assert len(sonnets) == 154
    assert sonnets[0].splitlines()[0] == "From fairest creatures we desire increase,"
    assert sonnets[17].splitlines()[0] == "Shall I compare thee to a summer's day?"
    assert sonnets[153].splitlines()[-1] == "Love's fire heats water, water cools not love."
    assert [len(s.splitlines()) for s in sonnets].count(14) >= 150
