"""Per-language top-5% toxicity removal (docs/recipe.md 7): a per-language percentile, not a global threshold."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.prep.filters.toxicity import is_toxic, language_thresholds, removal_count


def _removed(scores_by_lang, thresholds):
    return {
        lang: sum(is_toxic(s, lang, thresholds) for s in scores) for lang, scores in scores_by_lang.items()
    }


def test_five_percent_per_language_including_a_shifted_language():
    rng = np.random.default_rng(0)
    scores = {
        "de": rng.beta(1, 6, 1000),  # mostly clean
        "pt": np.clip(rng.beta(1, 6, 421) + 0.4, 0, 1),  # shifted up (Apertus: Portuguese mean 0.399)
        "pl": rng.beta(0.3, 9, 77),  # mostly ~0 (Apertus: Polish median 0.002)
    }
    thresholds = language_thresholds(scores)
    removed = _removed(scores, thresholds)
    for lang, s in scores.items():
        assert abs(removed[lang] - 0.05 * len(s)) <= 1, (lang, removed[lang], len(s))
    assert thresholds["pt"] > thresholds["de"] > thresholds["pl"]
    # A single global 95th percentile would hit the shifted language hardest: the reason for per-language.
    global_t = np.quantile(np.concatenate(list(scores.values())), 0.95)
    assert np.mean(scores["pt"] >= global_t) > 0.15 and np.mean(scores["de"] >= global_t) < 0.01


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["de", "fr", "it", "nl"]),
        st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=300, unique=True),
        min_size=1,
    )
)
def test_exactly_rounded_five_percent_without_ties(scores):
    removed = _removed(scores, language_thresholds(scores))
    assert removed == {lang: removal_count(len(s)) for lang, s in scores.items()}


def test_small_languages_and_unscored_languages_keep_everything():
    thresholds = language_thresholds({"rm": [0.9] * 9})  # round(0.45) = 0 documents
    assert thresholds["rm"] == float("inf") and not is_toxic(0.99, "rm", thresholds)
    assert not is_toxic(1.0, "gsw", thresholds)  # no classifier for this language
    assert removal_count(10) == 1 and removal_count(30) == 2 and removal_count(29) == 1


def test_real_head_scores_with_a_shifted_group(small_inputs):
    """Scores of a trained toxicity head on real text: profane web sentences score higher than quotes and
    poems; each group, treated as its own language, still loses 5% (+-1 document)."""
    from apertus_jax.prep.demo.inputs import TOXIC_LEXICON, load_de_corpus_extract
    from apertus_jax.prep.filters.classifier import Classifier

    head = Classifier.load(small_inputs["heads"]["toxicity"])
    profane = [s["text"] for s in load_de_corpus_extract() if TOXIC_LEXICON.search(s["text"].lower())][:300]
    quotes = [d["text"] for d in small_inputs["docs"] if d["source"] == "german_prose"][:300]
    scores = {"profane": head.score(profane), "quotes": head.score(quotes)}
    assert np.median(scores["profane"]) > np.quantile(scores["quotes"], 0.9)  # shifted distribution
    removed = _removed(scores, language_thresholds(scores))
    assert abs(removed["profane"] - 15) <= 1 and abs(removed["quotes"] - 15) <= 1
