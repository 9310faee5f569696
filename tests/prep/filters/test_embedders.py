"""Embedders: the hashed n-gram embedder against a plain-Python transcription of its rule, config round trips."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.prep.demo.inputs import load_de_corpus_extract
from apertus_jax.prep.filters.embedders import CallableEmbedder, HashedCharNgramEmbedder, embedder_from_config

M64 = 1 << 64


def mix64(h):
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) % M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) % M64
    return h ^ (h >> 31)


def reference_embedding(text, dim, min_n, max_n, max_chars):
    """The documented rule, one n-gram at a time with Python integers (mod 2^64)."""
    text = " " + " ".join(text.lower().split())[:max_chars] + " "
    codes = [ord(c) for c in text]
    counts = [0] * dim
    for n in range(min_n, max_n + 1):
        for start in range(len(codes) - n + 1):
            h = 0
            for code in codes[start : start + n]:
                h = (h * 0x100000001B3 + code) % M64
            h = mix64((h + n) % M64)
            counts[h % dim] += -1 if h >> 63 else 1
    features = [math.copysign(math.log1p(abs(c)), c) if c else 0.0 for c in counts]
    norm = math.sqrt(sum(f * f for f in features))
    return np.array([f / norm for f in features] if norm else features, np.float32)


@pytest.fixture(name="sentences", scope="module")
def fixture_sentences():
    return [s["text"] for s in load_de_corpus_extract()[:6]]


@pytest.mark.parametrize(("dim", "min_n", "max_n"), [(4096, 1, 4), (257, 2, 3), (64, 3, 5)])
def test_matches_the_plain_python_rule_on_real_text(sentences, dim, min_n, max_n):
    embedder = HashedCharNgramEmbedder(dim=dim, min_n=min_n, max_n=max_n)
    texts = [*sentences, "Grüße aus Zürich — 42 Äpfel!", ""]
    expected = np.stack([reference_embedding(t, dim, min_n, max_n, 20_000) for t in texts])
    np.testing.assert_allclose(embedder(texts), expected, rtol=1e-6, atol=1e-7)


def test_long_texts_are_cut_at_max_chars(sentences):
    embedder = HashedCharNgramEmbedder(dim=512, max_chars=40)
    long_text = " ".join(sentences)
    assert len(long_text) > 200
    np.testing.assert_array_equal(embedder([long_text]), embedder([long_text + " und noch viel mehr Text"]))
    assert not np.array_equal(embedder([long_text]), HashedCharNgramEmbedder(dim=512)([long_text]))


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=60))
def test_unit_norm_and_deterministic(text):
    embedder = HashedCharNgramEmbedder(dim=128)
    x = embedder([text, text])
    assert x.shape == (2, 128) and x.dtype == np.float32
    assert np.linalg.norm(x[0]) == pytest.approx(1.0, abs=1e-5) or not x[0].any()
    np.testing.assert_array_equal(x[0], x[1])


def test_config_round_trip_rebuilds_the_same_embedder(sentences):
    embedder = HashedCharNgramEmbedder(dim=300, min_n=2, max_n=3, max_chars=100)
    rebuilt = embedder_from_config(embedder.config())
    assert rebuilt.name == embedder.name
    np.testing.assert_array_equal(rebuilt(sentences), embedder(sentences))


def test_callable_embedder_checks_its_output_shape(sentences):
    def lengths(texts):
        return [[len(t), t.count(" ")] for t in texts]

    embedder = CallableEmbedder(lengths, dim=2, name="lengths")
    out = embedder(sentences[:3])
    assert out.dtype == np.float32 and out.tolist() == [[len(t), t.count(" ")] for t in sentences[:3]]
    with pytest.raises(ValueError, match=r"returned shape \(3, 2\), expected \(3, 3\)"):
        CallableEmbedder(lengths, dim=3, name="lengths")(sentences[:3])
    assert embedder_from_config(embedder.config(), embedder) is embedder


@pytest.mark.parametrize(
    ("config", "embedder", "message"),
    [
        ({"kind": "callable", "dim": 2, "name": "xlmr"}, None, "pass the same embedder"),
        ({"kind": "callable", "dim": 2, "name": "xlmr"}, CallableEmbedder(len, 2, "other"), "'xlmr'"),
        ({"kind": "callable", "dim": 768, "name": "xlmr"}, CallableEmbedder(len, 2, "xlmr"), "dim 768"),
        ({"kind": "tfidf"}, None, "unknown embedder kind 'tfidf'"),
    ],
)
def test_config_errors(config, embedder, message):
    with pytest.raises(ValueError, match=message):
        embedder_from_config(config, embedder)


@pytest.mark.parametrize(("dim", "min_n", "max_n"), [(0, 1, 4), (16, 0, 2), (16, 3, 2)])
def test_bad_settings(dim, min_n, max_n):
    with pytest.raises(ValueError, match="1 <= min_n <= max_n"):
        HashedCharNgramEmbedder(dim=dim, min_n=min_n, max_n=max_n)
