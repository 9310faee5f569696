"""Raw text becomes `[BoD] + ids + [EoD]` documents of a Component, with scores and the mean length."""

import math

import numpy as np

from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.documents import tokenize_documents


def test_documents_are_framed_by_bod_and_eod(tekken):
    texts = [d["text"] for d in load_german_prose()[:5]]
    component = tokenize_documents("prose", texts, [1.0, None, 3.0, None, 5.0], tekken)
    assert component.name == "prose" and len(component.documents) == 5
    for text, document in zip(texts, component.documents):
        assert document.dtype == np.int32
        assert document[0] == tekken.bod_id and document[-1] == tekken.eod_id
        assert tekken.decode(document[1:-1].tolist()) == text
    assert component.mean_tokens == np.mean([len(d) for d in component.documents])
    assert component.scores[[0, 2, 4]].tolist() == [1.0, 3.0, 5.0]
    assert math.isnan(component.scores[1]) and math.isnan(component.scores[3])
