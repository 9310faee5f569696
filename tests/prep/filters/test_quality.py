"""Boldt tiers: threshold per tier, Dense-Core = intersection of the three (docs/recipe.md 8)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apertus_jax.prep.filters.quality import DENSE_CORE, TIERS, assign_tiers

THRESHOLDS = {"coherence": 0.5, "information_value": 0.7, "educational_quality": 3.0}


def test_tiers_and_dense_core():
    assert assign_tiers(
        {"coherence": 0.9, "information_value": 0.8, "educational_quality": 3.5}, THRESHOLDS
    ) == {"coherence": True, "information_value": True, "educational_quality": True, DENSE_CORE: True}
    assert assign_tiers(
        {"coherence": 0.9, "information_value": 0.1, "educational_quality": 4.0}, THRESHOLDS
    ) == {"coherence": True, "information_value": False, "educational_quality": True, DENSE_CORE: False}
    at_thresholds = {"coherence": 0.5, "information_value": 0.7, "educational_quality": 3.0}
    assert assign_tiers(at_thresholds, THRESHOLDS)[DENSE_CORE]


@given(st.fixed_dictionaries({tier: st.floats(0, 5) for tier in TIERS}))
def test_dense_core_is_the_intersection(scores):
    member = assign_tiers(scores, THRESHOLDS)
    assert member[DENSE_CORE] == all(scores[t] >= THRESHOLDS[t] for t in TIERS)


def test_missing_score_raises():
    with pytest.raises(KeyError):
        assign_tiers({"coherence": 1.0}, THRESHOLDS)
