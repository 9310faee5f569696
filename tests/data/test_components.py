"""Loading components of each kind: raw files are tokenized once and cached; shard sets open lazily."""

import json

import pytest

from apertus_jax.data import components
from apertus_jax.data.config import normalize_data_config


def _spec(**component):
    return normalize_data_config({"components": {"c": component}})["components"]["c"]


def test_jsonl_component_is_tokenized_once_and_cached(tekken, german_jsonl):
    spec = _spec(kind="jsonl", paths=[str(german_jsonl)], score_field="score")
    first = components.load_component("german", spec, tekken)
    assert components.load_component("german", spec, tekken) is first  # the per-process cache
    lines = german_jsonl.read_text(encoding="utf-8").splitlines()
    assert len(first.documents) == len(lines) == 200
    record = json.loads(lines[3])
    assert tekken.decode(first.documents[3][1:-1].tolist()) == record["text"]
    assert first.scores[3] == record["score"]


def test_demo_component_reads_the_requested_sources(tekken):
    spec = _spec(kind="demo", sources=["udhr"], split="heldout")
    component = components.load_component("udhr", spec, tekken)
    assert 0 < len(component.documents) < 521 and component.mean_tokens > 100


def test_empty_raw_source_names_the_component(tekken, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="component 'e'"):
        components.load_component("e", _spec(kind="jsonl", paths=[str(empty)]), tekken)
