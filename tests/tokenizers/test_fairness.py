"""Fairness metrics: docs/recipe.md section 9 values, edge cases and properties."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from apertus_jax.tokenizers.fairness import compression_ratio, fertility, gini, parity, vocabulary_utilization

COSTS = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=60)


def _mean_abs_difference_gini(costs):
    """Independent definition: sum_ij |c_i - c_j| / (2 n^2 mean)."""
    c = np.asarray(costs, dtype=np.float64)
    if c.sum() == 0:
        return 0.0
    return np.abs(c[:, None] - c[None, :]).sum() / (2 * c.size**2 * c.mean())


def test_gini_spec_values():
    assert gini([1, 2, 3]) == pytest.approx(0.2222, abs=1e-4)
    assert gini([5, 5, 5]) == 0.0
    assert gini([0, 0, 1]) == pytest.approx(0.6667, abs=1e-4)
    assert gini([3, 1, 2]) == gini([1, 2, 3])
    assert gini(iter([2.0, 1.0, 3.0])) == gini([1, 2, 3])


def test_gini_edge_cases():
    assert gini([7.0]) == 0.0  # a single language
    assert gini([0, 0, 0]) == 0.0  # all free: equal
    assert gini([0, 0, 0, 4]) == pytest.approx(0.75)  # zero-cost languages count: 1 - 1/n
    with pytest.raises(ValueError, match="at least one cost"):
        gini([])
    with pytest.raises(ValueError, match="non-negative"):
        gini([1, -1])
    with pytest.raises(ValueError, match="non-finite"):
        gini([1, math.nan])


@given(COSTS, st.randoms(use_true_random=False), st.floats(min_value=1e-3, max_value=1e3))
def test_gini_properties(costs, random, scale):
    value = gini(costs)
    assert value == pytest.approx(_mean_abs_difference_gini(costs), abs=1e-9)
    assert 0 <= value <= 1 - 1 / len(costs) + 1e-12
    shuffled = list(costs)
    random.shuffle(shuffled)
    assert gini(shuffled) == pytest.approx(value, abs=1e-12)
    assert gini([c * scale for c in costs]) == pytest.approx(value, abs=1e-9)


def test_fertility_skips_texts_without_words():
    assert fertility([10, 6], [5, 3]) == 2.0
    assert fertility([10, 4], [5, 0]) == 2.0  # the empty text is skipped, never 4 / 1
    assert math.isnan(fertility([3], [0]))
    assert math.isnan(fertility([], []))


def test_compression_ratio_is_mean_of_ratios():
    assert compression_ratio([10, 30], [5, 10]) == pytest.approx((2 + 3) / 2)
    assert compression_ratio([10, 0], [5, 0]) == 2.0
    assert math.isnan(compression_ratio([0], [0]))


def test_vocabulary_utilization():
    assert vocabulary_utilization([[1, 2, 2], [2, 5], []], vocab_size=10) == 0.3
    assert vocabulary_utilization([], vocab_size=10) == 0.0


def test_parity():
    assert parity({"eng": 100, "deu": 120, "jpn": 250}) == {"eng": 1.0, "deu": 1.2, "jpn": 2.5}
    assert parity({"a": 2, "b": 1}, reference="b") == {"a": 2.0, "b": 1.0}
    with pytest.raises(ValueError, match="not among"):
        parity({"deu": 1})
    with pytest.raises(ValueError, match="need > 0"):
        parity({"eng": 0, "deu": 1})
