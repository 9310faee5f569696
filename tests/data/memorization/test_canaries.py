"""Canaries: format, distinct names and secrets, pure functions of the seed."""

import numpy as np
import pytest

from apertus_jax.data.memorization import canaries as cn


def test_canaries_are_distinct_seeded_sentences_with_digit_secrets():
    canaries = cn.make_canaries(50, seed=7)
    assert len({c.prefix for c in canaries}) == 50
    for canary in canaries:
        assert canary.prefix.endswith("'s account number is ")
        digits = canary.secret.split(" ")
        assert len(digits) == cn.NUM_DIGITS and all(len(d) == 1 and d.isdigit() for d in digits)
        assert canary.text == canary.prefix + canary.secret + "."
    assert cn.make_canaries(50, seed=7) == canaries
    assert cn.make_canaries(50, seed=8) != canaries


def test_candidate_secrets_exclude_the_true_one_and_are_uniform():
    canary = cn.make_canaries(1, seed=0)[0]
    secrets = cn.candidate_secrets(canary, 2000, seed=1)
    assert canary.secret not in secrets and len(secrets) == 2000
    assert secrets == cn.candidate_secrets(canary, 2000, seed=1)
    digits = np.array([int(d) for s in secrets for d in s.split(" ")])
    counts = np.bincount(digits, minlength=10)
    assert counts.min() > 0.9 * len(digits) / 10  # 18,000 digits: each of 0-9 close to 10%
    assert canary.with_secret(secrets[0]).text.startswith(canary.prefix)


def test_bad_arguments():
    with pytest.raises(ValueError, match="count >= 1"):
        cn.make_canaries(0, seed=0)
