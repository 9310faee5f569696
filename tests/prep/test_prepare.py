"""prepare.py: demo inputs written round-robin, heads trained only when missing, clear errors for missing inputs."""

import json

import pytest

from apertus_jax.prep import prepare
from apertus_jax.prep.demo import inputs as demo
from apertus_jax.prep.executors import resolve_work_dir
from apertus_jax.prep.filters.classifier import Classifier
from configs.prep import demo as demo_config


def config_in(work_dir, **overrides):
    config = demo_config.get_config()
    config.work_dir = str(work_dir)
    for key, value in overrides.items():
        config[key] = value
    return resolve_work_dir(config)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_demo_inputs_round_robin_robots_and_labels(tmp_path):
    config = config_in(tmp_path, demo_input_files=3)
    prepare.write_demo_inputs(config)
    docs = demo.demo_documents()
    parts = [read_jsonl(tmp_path / "input" / f"part-{i:05d}.jsonl") for i in range(3)]
    assert [len(p) for p in parts] == [len(docs[i::3]) for i in range(3)]
    assert parts[1][:2] == docs[1:7:3]
    assert sum(map(len, parts)) == len(docs)
    robots = {r["domain"]: r["robots_txt"] for r in read_jsonl(tmp_path / "robots.jsonl")}
    assert robots == demo.DEMO_ROBOTS
    for name in config.heads:
        rows = read_jsonl(tmp_path / "labels" / f"{name}.jsonl")
        assert rows and set(rows[0]) == {"text", "label"}


def test_missing_head_without_labels_names_the_setting(tmp_path):
    config = config_in(tmp_path)
    config.heads.toxicity.labels = None
    with pytest.raises(
        FileNotFoundError, match=r"head 'toxicity'.*at None; set config\.heads\.toxicity\.labels"
    ):
        prepare.train_missing_heads(config)


@pytest.mark.slow
def test_only_missing_heads_are_trained(tmp_path):
    config = config_in(tmp_path)
    config.toxicity.enabled = False
    # Real German web sentences (label 1) against the same sentences with their words reversed (label 0).
    sentences = [s["text"] for s in demo.load_de_corpus_extract()[:80]]
    rows = [{"text": t, "label": 1} for t in sentences] + [
        {"text": " ".join(reversed(t.split())), "label": 0} for t in sentences
    ]
    for name in ("coherence", "information_value"):
        demo.write_jsonl(rows, config.heads[name].labels)
    already = tmp_path / "heads" / "educational_quality.safetensors"
    already.parent.mkdir(parents=True)
    already.write_bytes(b"a head trained earlier")
    assert sorted(prepare.train_missing_heads(config)) == ["coherence", "information_value"]
    head = Classifier.load(config.heads.coherence.path)
    scores = head.score(sentences[:1])
    assert scores.shape == (1,) and 0.0 <= float(scores[0]) <= 1.0
    assert already.read_bytes() == b"a head trained earlier"
    assert prepare.train_missing_heads(config) == []


def test_no_input_files_is_an_error(tmp_path):
    config = config_in(tmp_path, demo=False)
    (tmp_path / "input").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no \*\.jsonl"):
        prepare.run_prepare(config)
    assert not (tmp_path / "prep_stats.json").exists()
