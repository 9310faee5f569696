"""Canary exposure: hand-computed ranks, saturation, ties, and the model's text log-probabilities."""

import math

import numpy as np
import pytest

from apertus_jax.data.memorization.canaries import make_canaries
from apertus_jax.eval import exposure as ex


def test_hand_computed_exposures():
    # Rank 2 of 4 (one candidate more likely): log2 4 - log2 2 = 1 bit.
    assert ex.exposure(-1.0, [-0.5, -2.0, -3.0]) == pytest.approx(1.0)
    # Most likely of 8: log2 8 - log2 1 = 3 bits (the most the 7-candidate estimate can give).
    assert ex.exposure(-1.0, [-4.0] * 7) == pytest.approx(3.0)
    # Least likely of 8: rank 8, exposure 0.
    assert ex.exposure(-9.0, [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0]) == pytest.approx(0.0)
    # Ties count against the canary: a model that scores everything alike exposes nothing.
    assert ex.exposure(-2.0, [-2.0, -2.0, -2.0]) == pytest.approx(0.0)
    # Rank 3 of 1000 candidates + the canary.
    assert ex.exposure(-10.0, [-1.0, -5.0] + [-20.0] * 998) == pytest.approx(math.log2(1001) - math.log2(3))


def test_exposure_errors():
    with pytest.raises(ValueError, match="at least one candidate"):
        ex.exposure(-1.0, [])
    with pytest.raises(ValueError, match="NaN"):
        ex.exposure(float("nan"), [-1.0])


@pytest.mark.slow
def test_text_logprobs_equal_the_summed_forward_log_softmax(tiny_model, forward, tokenizer):
    texts = [c.text for c in make_canaries(3, seed=0)]
    got = ex.text_logprobs(tiny_model, tokenizer, texts, seq_len=64, batch_size=2)
    for text, value in zip(texts, got):
        ids = np.asarray([[tokenizer.bod_id, *tokenizer.encode(text)]], np.int32)
        positions = np.arange(ids.shape[1], dtype=np.int32)[None]
        logits = forward(ids, positions, np.ones_like(ids))[0, :-1]
        shifted = logits - logits.max(-1, keepdims=True)
        logprobs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        expected = float(np.sum(logprobs[np.arange(len(ids[0]) - 1), ids[0, 1:]]))
        assert value == pytest.approx(expected, rel=1e-4)


@pytest.mark.slow
def test_canary_exposures_of_an_untrained_model_are_small_and_bounded(tiny_model, tokenizer):
    canaries = make_canaries(4, seed=3)
    values = ex.canary_exposures(tiny_model, tokenizer, canaries, num_candidates=63, seq_len=64)
    assert len(values) == 4
    assert all(0.0 <= v <= 6.0 for v in values)  # log2(64) = 6 bits at most
    assert np.mean(values) < 4.0  # a random model does not single out the true secrets
    with pytest.raises(ValueError, match="num_candidates"):
        ex.canary_exposures(tiny_model, tokenizer, canaries, num_candidates=0)
