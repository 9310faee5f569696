"""Tekken: the Apertus id layout, agreement with mistral-common's Tekkenizer, lossless round trips."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mistral_common.tokens.tokenizers.tekken import Tekkenizer

from apertus_jax.data.demo_corpus import load_udhr
from apertus_jax.tokenizers import load_tokenizer
from apertus_jax.tokenizers.tekken import TEKKEN_SHA256, TekkenTokenizer, default_tekken_path


@pytest.fixture(name="tekken", scope="module")
def fixture_tekken():
    return load_tokenizer("tekken")


def test_layout(tekken):
    assert (tekken.vocab_size, tekken.bod_id, tekken.eod_id, tekken.pad_id) == (131_072, 1, 2, 3)
    assert tekken.checksum == TEKKEN_SHA256


def test_matches_mistral_common(tekken, udhr_sample):
    reference = Tekkenizer.from_file(default_tekken_path())
    for text in udhr_sample.values():
        ids = tekken.encode(text)
        assert ids == reference.encode(text, bos=False, eos=False)
        assert tekken.decode(ids) == reference.decode(ids)
    assert reference.bos_id == tekken.bod_id and reference.eos_id == tekken.eod_id


def test_known_ids(tekken):
    # Reference ids printed by mistral-common 1.13.1's Tekkenizer.encode(..., bos=False, eos=False).
    assert tekken.encode("Hello world, Grüße 你好") == [22177, 4304, 1044, 3564, 1671, 9755, 1032, 124108]
    assert tekken.encode("") == []
    assert tekken.encode_document("").tolist() == [1, 2]


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_round_trip_any_text(tekken, text):
    assert tekken.decode(tekken.encode(text)) == text


def test_special_strings_are_text(tekken):
    ids = tekken.encode("<s></s>")
    assert all(i >= 1000 for i in ids) and tekken.decode(ids) == "<s></s>"


def test_round_trip_and_document(tekken, udhr_sample):
    texts = list(udhr_sample.values())
    batch = tekken.encode_batch(texts)
    for text, ids in zip(texts, batch):
        assert ids == tekken.encode(text)
        assert max(ids) < tekken.vocab_size
        assert tekken.decode(ids) == text
        document = tekken.encode_document(text)
        assert document.dtype == np.int32
        assert document[0] == 1 and document[-1] == 2 and document[1:-1].tolist() == ids
        assert tekken.decode(document) == text


def test_rejects_other_file(tmp_path):
    wrong = tmp_path / "tekken.json"
    wrong.write_text("{}")
    with pytest.raises(ValueError, match="sha256"):
        TekkenTokenizer(str(wrong))
    with pytest.raises(FileNotFoundError, match="mistral-common"):
        TekkenTokenizer(str(tmp_path / "missing.json"))


def test_round_trip_all_udhr_languages(tekken):
    texts = load_udhr()
    assert len(texts) >= 500
    for (code, text), ids in zip(texts.items(), tekken.encode_batch(list(texts.values()))):
        assert tekken.decode(ids) == text, code
        assert 1000 <= min(ids) and max(ids) < 131_072, code
