"""SentencePiece BPE training: special ids at the documented layout, lossless, per-subset models."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.train import SPECIAL_IDS, BPEConfig, train_per_subset, train_sentencepiece

CONFIG = BPEConfig(vocab_size=1200)  # > the sample's ~880 distinct characters + specials


@pytest.fixture(name="bpe", scope="module")
def fixture_bpe(tmp_path_factory, udhr_sample):
    path = str(tmp_path_factory.mktemp("bpe") / "udhr.model")
    train_sentencepiece(udhr_sample.values(), path, CONFIG)
    return path


def test_special_ids_match_pipeline(bpe):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    assert SPECIAL_IDS == {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": 3}
    assert (tokenizer.bod_id, tokenizer.eod_id, tokenizer.pad_id) == (1, 2, 3)
    assert tokenizer.vocab_size == 1200
    assert tokenizer.name == "sentencepiece:udhr.model" and len(tokenizer.checksum) == 64


def test_lossless_round_trip(bpe, udhr_sample):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    unseen = "Grüße aus Zürich:  42 Äpfel\n\tund ein 🍎 (unseen emoji)."
    texts = [*udhr_sample.values(), unseen]
    for text, ids in zip(texts, tokenizer.encode_batch(texts)):
        assert ids == tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert 0 not in ids  # byte fallback, never <unk>
    document = tokenizer.encode_document(unseen)
    assert document[0] == 1 and document[-1] == 2 and tokenizer.decode(document) == unseen


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_round_trip_any_text(bpe, text):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_bpe_learns_frequent_words(bpe):
    tokenizer = load_tokenizer(f"sentencepiece:{bpe}")
    # "and" occurs in several sample sentences: one piece "▁and" (with the dummy-prefix space).
    assert len(tokenizer.encode("and")) == 1
    assert len(tokenizer.encode("Xq7Zv")) >= 4


def test_per_subset(tmp_path, udhr_sample):
    subsets = {
        "latin": [udhr_sample[c] for c in ("eng", "deu_1996", "vie", "yor")],
        "cyrillic_greek": [udhr_sample[c] for c in ("rus", "ell_monotonic")],
    }
    paths = train_per_subset(subsets, str(tmp_path), BPEConfig(vocab_size=400))
    assert sorted(os.listdir(tmp_path)) == ["cyrillic_greek.model", "latin.model"]
    latin = load_tokenizer(f"sentencepiece:{paths['latin']}")
    cyrillic = load_tokenizer(f"sentencepiece:{paths['cyrillic_greek']}")
    text = udhr_sample["rus"]
    assert len(cyrillic.encode(text)) < len(latin.encode(text))


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no non-empty text"):
        train_sentencepiece(["", "  \n"], str(tmp_path / "x.model"), CONFIG)
    with pytest.raises(ValueError, match="SentencePiece training failed"):
        train_sentencepiece(["tiny text"], str(tmp_path / "x.model"), BPEConfig(vocab_size=100_000))
    assert not os.listdir(tmp_path)
