"""Loading components of each document kind: raw files are tokenized once and cached; shard sets open lazily;
held-out texts per kind."""

import json

import pytest

from apertus_jax.data.config import parse_pipeline


def _spec(**component):
    return parse_pipeline({"components": {"c": component}}).components["c"]


@pytest.mark.slow
def test_jsonl_component_is_tokenized_once_and_cached(tekken, german_jsonl):
    spec = _spec(kind="jsonl", paths=[str(german_jsonl)], score_field="score")
    first = spec.load("german", tekken)
    assert spec.load("german", tekken) is first  # the per-process cache
    lines = german_jsonl.read_text(encoding="utf-8").splitlines()
    assert len(first.documents) == len(lines) == 200
    record = json.loads(lines[3])
    assert tekken.decode(first.documents[3][1:-1].tolist()) == record["text"]
    assert first.scores[3] == record["score"]


def test_demo_component_reads_the_requested_sources(tekken):
    spec = _spec(kind="demo", sources=["udhr"], split="unseen_languages")
    component = spec.load("udhr", tekken)
    assert 0 < len(component.documents) < 521 and component.mean_tokens > 1000  # whole translations
    paragraphs = _spec(kind="demo", sources=["udhr"], split="heldout").load("udhr", tekken)
    assert len(paragraphs.documents) > 1000 and paragraphs.mean_tokens < 100


def test_empty_raw_source_names_the_component(tekken, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="component 'e'"):
        _spec(kind="jsonl", paths=[str(empty)]).load("e", tekken)


def test_heldout_texts_per_kind(german_jsonl):
    demo = _spec(kind="demo", sources=["german_prose"])
    texts = demo.heldout_texts(None)
    assert texts and all(isinstance(t, str) for t in texts)
    raw = _spec(kind="jsonl", paths=["unused"])
    assert raw.heldout_texts(None) is None
    assert (
        raw.heldout_texts(str(german_jsonl))[3]
        == json.loads(german_jsonl.read_text().splitlines()[3])["text"]
    )
    shards = _spec(kind="arrayrecord", paths=["unused"])
    with pytest.raises(ValueError, match="reads no held-out file"):
        shards.heldout_texts(str(german_jsonl))
