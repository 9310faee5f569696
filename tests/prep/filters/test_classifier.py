"""Classifier: hashed n-gram embedder, JAX MLP head trained from labeled JSONL, beats a constant predictor."""

import json

import numpy as np
import pytest

from apertus_jax.prep.demo.inputs import TOXIC_LEXICON, demo_labels, load_de_corpus_extract, write_jsonl
from apertus_jax.prep.filters.classifier import Classifier, HeadConfig, load_labeled_jsonl
from apertus_jax.prep.filters.embedders import CallableEmbedder, HashedCharNgramEmbedder

FAST = HeadConfig(epochs=8)


def _split(rows, seed=0, test_fraction=0.25):
    order = np.random.default_rng(seed).permutation(len(rows))
    n_test = int(len(rows) * test_fraction)
    pick = lambda idx: ([rows[i]["text"] for i in idx], np.array([rows[i]["label"] for i in idx], float))
    return pick(order[n_test:]), pick(order[:n_test])


@pytest.fixture(scope="module")
def labels():
    return demo_labels()


def test_embedder_is_deterministic_normalized_and_text_sensitive():
    emb = HashedCharNgramEmbedder(dim=512)
    texts = [
        "Die Würde des Menschen ist unantastbar.",
        "die   würde des menschen ist unantastbar.",
        "Ganz anders.",
    ]
    x = emb(texts)
    assert x.shape == (3, 512) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(x[0], x[1])  # case and whitespace do not matter
    assert float(x[0] @ x[2]) < 0.5
    np.testing.assert_array_equal(emb(texts[:1]), HashedCharNgramEmbedder(dim=512)(texts[:1]))


@pytest.mark.slow
def test_toxicity_head_beats_constant_predictor(labels, tmp_path):
    """Real text, weak labels: de-corpus web sentences matching a profanity lexicon (1) vs not (0)."""
    path = tmp_path / "toxicity.jsonl"
    write_jsonl(labels["toxicity"], str(path))
    texts, y = load_labeled_jsonl(str(path))
    rows = [{"text": t, "label": v} for t, v in zip(texts, y)]
    (train_x, train_y), (test_x, test_y) = _split(rows)
    head = Classifier.train(train_x, train_y, config=FAST)
    assert head.objective == "binary"
    scores = head.score(test_x)
    accuracy = np.mean((scores > 0.5) == (test_y == 1))
    constant = max(test_y.mean(), 1 - test_y.mean())  # the best constant predictor on the test set
    assert accuracy > constant + 0.15, (accuracy, constant)
    # Ranking quality: a random toxic sentence outscores a random clean one most of the time (AUC).
    auc = np.mean(scores[test_y == 1][:, None] > scores[test_y == 0][None, :])
    assert auc > 0.85


@pytest.mark.slow
def test_regression_head_beats_mean_predictor(labels):
    """Educational-quality proxy scores 0/2/3 (Debian Handbook 3, Debian Reference 2, quotes and web 0)."""
    (train_x, train_y), (test_x, test_y) = _split(labels["educational_quality"])
    head = Classifier.train(train_x, train_y, config=FAST)
    assert head.objective == "regression"
    mse = np.mean((head.score(test_x) - test_y) ** 2)
    assert mse < 0.5 * np.mean((train_y.mean() - test_y) ** 2)


@pytest.mark.slow
def test_save_load_round_trip_and_custom_embedder(tmp_path):
    texts = [s["text"] for s in load_de_corpus_extract()[:300]]
    y = np.array([1.0 if TOXIC_LEXICON.search(t.lower()) or i % 3 == 0 else 0.0 for i, t in enumerate(texts)])
    head = Classifier.train(texts, y, embedder=HashedCharNgramEmbedder(dim=256), config=HeadConfig(epochs=2))
    head.save(str(tmp_path / "h.safetensors"))
    loaded = Classifier.load(str(tmp_path / "h.safetensors"))
    np.testing.assert_allclose(loaded.score(texts[:20]), head.score(texts[:20]), rtol=1e-6)

    lengths = CallableEmbedder(
        lambda ts: np.array([[len(t) / 100.0, t.count(" ") / 10.0] for t in ts]), 2, "len"
    )
    custom = Classifier.train(texts, y, embedder=lengths, config=HeadConfig(epochs=2))
    custom.save(str(tmp_path / "c.safetensors"))
    with pytest.raises(ValueError, match="pass the same embedder"):
        Classifier.load(str(tmp_path / "c.safetensors"))
    assert Classifier.load(str(tmp_path / "c.safetensors"), embedder=lengths).score(texts[:3]).shape == (3,)


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="labeled JSONL"):
        load_labeled_jsonl(str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "ok", "label": "high"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_labeled_jsonl(str(bad))
    for line in ('["ok", 1]', '{"text": "ok", '):
        bad.write_text(line + "\n")
        with pytest.raises(ValueError, match="bad.jsonl:1"):
            load_labeled_jsonl(str(bad))
    with pytest.raises(FileNotFoundError, match="classifier head"):
        Classifier.load(str(tmp_path / "none.safetensors"))
    with pytest.raises(ValueError, match="dim"):
        HashedCharNgramEmbedder(dim=0)
