"""Memorization metrics: hand-computed values, properties against independent references, probes, generation."""

import collections
import difflib
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.eval import memorization as mem
from apertus_jax.models.generate import generate

sequences = st.lists(st.integers(0, 5), min_size=0, max_size=12)
nonempty = st.lists(st.integers(0, 5), min_size=1, max_size=12)


def _reference_lcs(a, b):
    """Textbook recursion (independent of the vectorized row update)."""

    @functools.cache
    def lcs(i, j):
        if i == len(a) or j == len(b):
            return 0
        if a[i] == b[j]:
            return 1 + lcs(i + 1, j + 1)
        return max(lcs(i + 1, j), lcs(i, j + 1))

    return lcs(0, 0)


def _reference_lccs(a, b):
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.find_longest_match(0, len(a), 0, len(b)).size


def test_hand_examples():
    # LCS(12345, 1357) = 135: P = 3/4, R = 3/5, F = 2PR/(P+R) = 2/3; LCCS = 1.
    assert mem.lcs_length([1, 2, 3, 4, 5], [1, 3, 5, 7]) == 3
    assert mem.rouge_l([1, 2, 3, 4, 5], [1, 3, 5, 7]) == pytest.approx(2 / 3)
    assert mem.lccs_length([1, 2, 3, 4, 5], [1, 3, 5, 7]) == 1
    # "a b c d e" vs "x b c d y": LCS = LCCS = 3, P = R = 3/5.
    assert mem.rouge_l([1, 2, 3, 4, 5], [9, 2, 3, 4, 8]) == pytest.approx(0.6)
    assert mem.lccs_length([1, 2, 3, 4, 5], [9, 2, 3, 4, 8]) == 3
    # Contiguous vs not: 1 2 9 3 4 5 against 1 2 3 4 5 has LCS 5, LCCS 3.
    assert (
        mem.lcs_length([1, 2, 9, 3, 4, 5], [1, 2, 3, 4, 5]),
        mem.lccs_length([1, 2, 9, 3, 4, 5], [1, 2, 3, 4, 5]),
    ) == (5, 3)
    assert mem.type_token_ratio([7, 7, 8, 8]) == 0.5 and mem.type_token_ratio([1, 2, 3]) == 1.0
    assert mem.rouge_l([1, 2], [3, 4]) == 0.0 and mem.rouge_l([], [1]) == 0.0


@settings(max_examples=200, deadline=None)
@given(sequences, sequences)
def test_lcs_and_lccs_match_independent_references(a, b):
    assert mem.lcs_length(a, b) == _reference_lcs(a, b)
    assert mem.lccs_length(a, b) == _reference_lccs(a, b)


@settings(max_examples=200, deadline=None)
@given(nonempty, nonempty)
def test_rouge_l_properties(a, b):
    score = mem.rouge_l(a, b)
    assert 0.0 <= score <= 1.0
    assert score == pytest.approx(mem.rouge_l(b, a))  # the F-measure is symmetric
    assert mem.rouge_l(a, a) == 1.0
    assert mem.lccs_length(a, b) <= mem.lcs_length(a, b) <= min(len(a), len(b))
    assert (score == 1.0) == (a == b)


def test_score_generation_and_means():
    exact = mem.score_generation([5, 6, 7, 8], [5, 6, 7, 8])
    assert (exact.rouge_l, exact.lccs, exact.lccs_fraction, exact.ttr, exact.exact_match) == (
        1.0,
        4,
        1.0,
        1.0,
        True,
    )
    degenerate = mem.score_generation([5, 6, 7, 8], [5, 5, 5, 5])
    assert (degenerate.lccs, degenerate.ttr, degenerate.exact_match) == (1, 0.25, False)
    means = mem.mean_scores([exact, degenerate])
    assert (
        means["exact_match"] == 0.5
        and means["lccs"] == 2.5
        and means["rouge_l"] == pytest.approx((1 + 0.25) / 2)
    )
    with pytest.raises(ValueError, match="no memorization scores"):
        mem.mean_scores([])


def test_probe_plan_covers_every_level_evenly_and_injects_exact_counts():
    levels = (1, 2, 4, 8, 16, 32, 64, 128)
    plan = mem.probe_injection_plan(20, levels, seed=3)
    counts = collections.Counter(plan)
    assert set(counts) == set(levels) and max(counts.values()) - min(counts.values()) <= 1
    assert plan != [levels[i % 8] for i in range(20)]  # shuffled, not tied to the probe order
    probes = [f"probe{i}" for i in range(20)]
    mixed = mem.inject_probes([f"doc{i}" for i in range(50)], probes, plan, seed=0)
    seen = collections.Counter(mixed)
    assert len(mixed) == 50 + sum(plan)
    assert all(seen[p] == n for p, n in zip(probes, plan)) and all(seen[f"doc{i}"] == 1 for i in range(50))
    with pytest.raises(ValueError, match="cannot cover"):
        mem.probe_injection_plan(3, levels)


@pytest.mark.slow
def test_greedy_continuations_of_the_model_score_as_memorized(tiny_model, tokenizer):
    """Documents whose suffix IS the model's greedy continuation are memorized by construction (ROUGE-L 1);
    the same prefixes with other suffixes are not."""
    text = "All human beings are born free and equal in dignity and rights. They are endowed with reason."
    ids = [tokenizer.bod_id, *tokenizer.encode(text)]
    prefixes = [ids[:6], ids[2:8], ids[4:10]]
    suffixes = generate(tiny_model, prefixes, max_new_tokens=8, pad_id=tokenizer.pad_id)
    documents = [[*p, *s] for p, s in zip(prefixes, suffixes)]
    scores = mem.memorization_scores(tiny_model, documents, prefix_len=6, suffix_len=8, batch_size=2)
    assert [s.exact_match for s in scores] == [True] * 3 and all(s.rouge_l == 1.0 for s in scores)
    others = [[*p, *ids[10:18]] for p in prefixes]
    scores = mem.memorization_scores(tiny_model, others, prefix_len=6, suffix_len=8, batch_size=2)
    assert not any(s.exact_match for s in scores)
    with pytest.raises(ValueError, match="document 0 has 3 tokens"):
        mem.split_prefix_suffix([[1, 2, 3]], 2, 2)
    assert np.all([len(s) for s in mem.split_prefix_suffix(documents, 6, 8)[1]] == np.array(8))


# UDHR article 1 (public domain) in three scripts; the generation drops one phrase of each.
SCRIPTS = {
    "latin": ("All human beings are born free and equal in dignity and rights.", "equal in dignity and"),
    "cjk": ("人人生而自由，在尊严和权利上一律平等。", "尊严和"),
    "devanagari": ("सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता प्राप्त है।", "गौरव और"),
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_metrics_on_characters_of_three_scripts(script):
    """A generation that drops one phrase: it is a subsequence of the reference, so LCS = its length."""
    reference, phrase = SCRIPTS[script]
    generation = reference.replace(phrase, "", 1)
    ref, gen = [ord(c) for c in reference], [ord(c) for c in generation]
    assert mem.lcs_length(ref, gen) == len(gen)
    assert mem.rouge_l(ref, gen) == pytest.approx(2 * len(gen) / (len(ref) + len(gen)))
    # The longest unchanged stretch is the longer side of the cut.
    cut = reference.index(phrase)
    assert mem.lccs_length(ref, gen) == max(cut, len(reference) - cut - len(phrase))
    assert mem.type_token_ratio(gen) == pytest.approx(len(set(generation)) / len(generation))


def test_hand_values_on_cjk_characters():
    # 人人生而自由，在尊严和权利上一律平等。 (19 characters) vs the same without 尊严和 (16): P = 1, R = 16/19.
    ref = [ord(c) for c in SCRIPTS["cjk"][0]]
    gen = [ord(c) for c in "人人生而自由，在权利上一律平等。"]
    assert (len(ref), len(gen)) == (19, 16)
    assert mem.rouge_l(ref, gen) == pytest.approx(32 / 35)
    assert mem.lccs_length(ref, gen) == 8  # 人人生而自由，在
    assert mem.type_token_ratio([ord(c) for c in "人人生而自由"]) == pytest.approx(5 / 6)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_metrics_on_tekken_tokens_match_the_reference_dynamic_programme(script):
    from apertus_jax.tokenizers import load_tokenizer

    tekken = load_tokenizer("tekken")
    reference, phrase = SCRIPTS[script]
    ref = tekken.encode(reference)
    gen = tekken.encode(reference.replace(phrase, "", 1))
    assert mem.lcs_length(ref, gen) == _reference_lcs(tuple(ref), tuple(gen))
    assert mem.lccs_length(ref, gen) == _reference_lccs(ref, gen)
    assert 0.5 < mem.rouge_l(ref, gen) < 1.0
    score = mem.score_generation(ref, gen)
    assert not score.exact_match and score.lccs_fraction == pytest.approx(score.lccs / len(ref))


def test_exact_match_length_counts_the_leading_equal_tokens():
    assert mem.exact_match_length([5, 6, 7, 8], [5, 6, 9, 8]) == 2
    assert mem.exact_match_length([5, 6, 7], [5, 6, 7]) == 3
    assert mem.exact_match_length([5, 6, 7], [4, 6, 7]) == 0
    assert mem.exact_match_length([5, 6], [5, 6, 7, 8]) == 2  # at most the shorter length
    cjk = [ord(c) for c in SCRIPTS["cjk"][0]]
    assert mem.exact_match_length(cjk, [ord(c) for c in "人人生而自由，在权利"]) == 8
