"""The Tokenizer interface: document framing, the default batch encoder."""

import numpy as np
import pytest

from apertus_jax.tokenizers.base import Tokenizer


class Utf8Tokenizer(Tokenizer):
    """The smallest concrete tokenizer: UTF-8 bytes shifted past the four tekken-layout special ids."""

    def __init__(self):
        super().__init__(name="utf8", vocab_size=260, bod_id=1, eod_id=2, pad_id=3, checksum="0" * 64)

    def encode(self, text):
        return [b + 4 for b in text.encode("utf-8")]

    def decode(self, ids):
        return bytes(i - 4 for i in ids if i >= 4).decode("utf-8")


def test_encode_document_frames_with_bod_and_eod(udhr_sample):
    tokenizer = Utf8Tokenizer()
    text = udhr_sample["deu_1996"]
    document = tokenizer.encode_document(text)
    assert document.dtype == np.int32
    assert document.shape == (len(text.encode("utf-8")) + 2,)
    assert document[0] == 1 and document[-1] == 2
    assert tokenizer.decode(document[1:-1].tolist()) == text
    assert tokenizer.decode(document.tolist()) == text  # special ids are dropped


def test_encode_document_of_empty_text_is_bod_eod():
    assert Utf8Tokenizer().encode_document("").tolist() == [1, 2]


def test_default_encode_batch_is_encode_per_text(udhr_sample):
    tokenizer = Utf8Tokenizer()
    texts = list(udhr_sample.values())
    assert tokenizer.encode_batch(texts) == [tokenizer.encode(t) for t in texts]
    assert all(0 <= i < tokenizer.vocab_size for ids in tokenizer.encode_batch(texts) for i in ids)


def test_repr_names_the_special_ids():
    assert repr(Utf8Tokenizer()) == "Utf8Tokenizer(name='utf8', vocab_size=260, bod_id=1, eod_id=2, pad_id=3)"


def test_the_interface_is_abstract():
    with pytest.raises(TypeError):
        Tokenizer(name="x", vocab_size=1, bod_id=1, eod_id=2, pad_id=3, checksum="")
