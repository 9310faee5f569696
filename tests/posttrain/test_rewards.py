"""The tiny sets' rewards: word-level ROUGE-L by hand, and the shipped files are what the builder writes."""

import json
import os

import pytest

from apertus_jax.posttrain.rewards import rouge_l_reward, words
from experiments import build_posttrain_data


def test_rouge_l_by_hand():
    assert words("Alle Menschen, frei!") == ["alle", "menschen", "frei"]
    # LCS of "menschen sind frei geboren" in the 11-word reference: 4 words; P = 4/4, R = 4/11.
    reference = "Alle Menschen sind frei und gleich an Würde und Rechten geboren."
    assert rouge_l_reward(reference, "Menschen sind frei geboren.") == pytest.approx(
        2 * (4 / 11) / (1 + 4 / 11)
    )
    assert rouge_l_reward(reference, reference) == 1.0
    assert rouge_l_reward(reference, "Das steht im Grundgesetz.") == 0.0


def test_shipped_sets_are_the_builders_output():
    with open(os.path.join(build_posttrain_data.ASSETS, "qa_source.json"), encoding="utf-8") as f:
        items = json.load(f)
    for name, lines in [
        ("chat_tiny.jsonl", build_posttrain_data.conversations(items)),
        ("qrpo_tiny.jsonl", build_posttrain_data.preference_records(items)),
    ]:
        with open(os.path.join(build_posttrain_data.ASSETS, name), encoding="utf-8") as f:
            assert [json.loads(line) for line in f] == lines
    multi_turn = [c for c in build_posttrain_data.conversations(items) if len(c["messages"]) > 3]
    assert len(multi_turn) == 6 and any(c["messages"][0]["role"] == "system" for c in multi_turn)
