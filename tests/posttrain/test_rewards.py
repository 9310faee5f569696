"""The tiny sets' rewards: word-level ROUGE-L by hand."""

import pytest

from apertus_jax.posttrain.rewards import rouge_l_reward, words


def test_rouge_l_by_hand():
    assert words("Alle Menschen, frei!") == ["alle", "menschen", "frei"]
    # LCS of "menschen sind frei geboren" in the 11-word reference: 4 words; P = 4/4, R = 4/11.
    reference = "Alle Menschen sind frei und gleich an Würde und Rechten geboren."
    assert rouge_l_reward(reference, "Menschen sind frei geboren.") == pytest.approx(
        2 * (4 / 11) / (1 + 4 / 11)
    )
    assert rouge_l_reward(reference, reference) == 1.0
    assert rouge_l_reward(reference, "Das steht im Grundgesetz.") == 0.0
