"""The canonical Goldfish hash: format variants drop alike, exact 1/k on real text, document-start aware."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.data.config import parse_pipeline
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.goldfish import canonical as gc
from apertus_jax.data.goldfish.drop_masks import goldfish_drop_mask
from apertus_jax.data.pipeline import rows_to_batch


@pytest.fixture(scope="module")
def prose():
    """~40 German prose documents of the demo corpus, joined (real text with line breaks)."""
    return "\n\n".join(d["text"] for d in load_german_prose()[:40])


def reformat(text: str) -> str:
    """A format variant: line breaks become spaces, every third space doubled, every 5th word capitalized."""
    words = re.sub(r"\s+", " ", text).split(" ")
    out = [w.upper() if i % 5 == 0 else w for i, w in enumerate(words)]
    return "".join(w + ("  " if i % 3 == 0 else " ") for i, w in enumerate(out)).strip()


def word_decisions(ids, dropped, tokenizer):
    """Per normalized word: True if any token that adds letters to it is dropped."""
    words, touched = gc.token_words(ids, tokenizer)
    decision = np.zeros(len(words), bool)
    for token_words, d in zip(touched, dropped):
        for w in token_words:
            decision[w] |= bool(d)
    return words, decision


def test_normalized_words_latin_devanagari_cjk_and_compatibility_forms():
    assert gc.normalized_words("To be,--that\nIS  the ﬁnal Straße") == [
        "to",
        "be",
        "that",
        "is",
        "the",
        "final",
        "strasse",
    ]
    # Devanagari vowel signs and virama are combining marks: they stay inside the word.
    assert gc.normalized_words("सभी मनुष्यों को, स्वतंत्रता") == ["सभी", "मनुष्यों", "को", "स्वतंत्रता"]
    # Without spaces, a run of Han characters is one word; the ideographic comma separates.
    assert gc.normalized_words("人人生而自由，在尊严") == ["人人生而自由", "在尊严"]


def test_word_skeleton_folds_early_modern_spelling_and_keeps_other_scripts():
    pairs = [("minde", "mind"), ("haue", "have"), ("vs", "us"), ("naturall", "natural"), ("sleepe", "sleep")]
    for folio, modern in pairs:
        assert gc.word_skeleton(folio) == gc.word_skeleton(modern)
    assert gc.word_skeleton("minde") == "mnd" and gc.word_skeleton("question") == "qstn"
    assert gc.word_skeleton("mind") != gc.word_skeleton("kind")  # consonants still tell words apart
    assert gc.word_skeleton("सभी") == "सभी" and gc.word_skeleton("人人生") == "人生"


@pytest.mark.slow
def test_token_texts_keep_leading_spaces_and_blank_specials(tekken):
    texts = gc.token_texts(tekken)
    assert len(texts) == tekken.vocab_size
    assert texts[tekken.bod_id] == texts[tekken.eod_id] == texts[tekken.pad_id] == ""
    ids = tekken.encode(" the question")
    assert "".join(texts[i] for i in ids) == " the question"


def test_format_variants_drop_the_same_words_only_with_the_canonical_hash(tekken, prose):
    original = tekken.encode_document(prose)
    variant = tekken.encode_document(reformat(prose))
    k, h = 4, 13
    identical = {}
    for name in ("canonical", "apertus", "mixed"):
        decisions = []
        for ids in (original, variant):
            if name == "canonical":
                dropped = gc.canonical_drop_mask(ids, tekken, k, h)
            else:
                dropped = goldfish_drop_mask(ids, k, h, name)
            decisions.append(word_decisions(ids, dropped, tekken))
        (words_a, a), (words_b, b) = decisions
        assert words_a == words_b  # the variant only changed the format
        identical[name] = float(np.mean(a == b))
    # Only words that the capitals split into other tokens can differ (their inner tokens).
    assert identical["canonical"] > 0.93
    # Token hashes see other tokens after every changed space or capital: close to chance agreement.
    assert identical["apertus"] < 0.65 and identical["mixed"] < 0.65


@pytest.mark.parametrize("k", [4, 50])
def test_drop_rate_is_one_in_k_on_real_text(tekken, k):
    ids = tekken.encode_document("\n\n".join(d["text"] for d in load_german_prose()[:400]))
    dropped = gc.canonical_drop_mask(ids, tekken, k, 13)
    rate = dropped.mean()
    tolerance = 4 * np.sqrt(1 / k * (1 - 1 / k) / len(ids))
    assert len(ids) > 20_000
    assert abs(rate - 1 / k) < tolerance


def test_k_one_drops_exactly_the_tokens_with_a_complete_context(tekken):
    text = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."
    ids = tekken.encode(text)
    # Mid-document (no BoD in the row): nothing before h = 3 words have passed.
    dropped = gc.canonical_drop_mask(np.asarray(ids), tekken, 1, 3)
    texts = gc.token_texts(tekken)
    prefix = ""
    for token, d in zip(ids, dropped):
        prefix += texts[token]
        words = gc.normalized_words(prefix)
        ends_in_word = gc.is_word_char(prefix[-1])
        complete = len(words) - 1 >= 2 if ends_in_word else len(words) >= 3
        assert d == complete, (prefix, d)
    # After a BoD the document start is known: every token but the BoD is dropped at k = 1.
    with_bod = gc.canonical_drop_mask(np.asarray([tekken.bod_id, *ids, tekken.eod_id]), tekken, 1, 3)
    assert with_bod.tolist() == [False] + [True] * len(ids) + [False]


def test_decisions_depend_on_the_document_not_on_what_precedes_it(tekken, prose):
    documents = prose.split("\n\n")
    target = tekken.encode_document(documents[3])
    after_a = np.concatenate([tekken.encode_document(documents[0]), target])
    after_b = np.concatenate([tekken.encode_document(documents[1])[:57], target])
    mask_a = gc.canonical_drop_mask(after_a, tekken, 4, 13)[-len(target) :]
    mask_b = gc.canonical_drop_mask(after_b, tekken, 4, 13)[-len(target) :]
    np.testing.assert_array_equal(mask_a, mask_b)
    assert 0.1 < mask_a.mean() < 0.4


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 30), st.integers(1, 20))
def test_rows_are_independent_and_k_zero_drops_nothing(tekken, start, h):
    ids = np.asarray(tekken.encode_document("Devoutly to be wish'd. To die, to sleep; To sleep, perchance"))
    rows = np.stack([ids, np.roll(ids, start)])
    batch_mask = gc.canonical_drop_mask(rows, tekken, 3, h)
    np.testing.assert_array_equal(batch_mask[1], gc.canonical_drop_mask(rows[1], tekken, 3, h))
    assert not gc.canonical_drop_mask(rows, tekken, 0, h).any()


def test_errors_name_the_problem(tekken):
    with pytest.raises(ValueError, match="k >= 0"):
        gc.canonical_drop_mask(np.array([5, 6]), tekken, -1, 3)
    with pytest.raises(ValueError, match="integer token ids"):
        gc.canonical_drop_mask(np.array([5.0, 6.0]), tekken, 4, 3)
    with pytest.raises(ValueError, match=r"\[0, 131072\)"):
        gc.canonical_drop_mask(np.array([5, 131_072]), tekken, 4, 3)


def test_pipeline_batches_use_the_canonical_hash(tekken, prose):
    config = parse_pipeline(
        {"components": {"p": {"kind": "demo"}}, "goldfish": {"k": 4, "h": 5, "hash": "canonical"}}
    )
    ids = tekken.encode_document(prose)[: 4 * 65].reshape(4, 65)
    batch = rows_to_batch(ids, tekken, config.goldfish)
    expected = gc.canonical_drop_mask(ids[:, 1:], tekken, 4, 5)
    assert expected.sum() > 20
    np.testing.assert_array_equal(batch["loss_mask"] == 0, expected)
    with pytest.raises(ValueError, match="canonical"):
        parse_pipeline({"components": {"p": {"kind": "demo"}}, "goldfish": {"hash": "canon"}})
