"""provenance.json (a loop hook): the sources, licences and tokens consumed of a run on two components."""

import json
import os

import pytest

from apertus_jax.cache import cache_dir
from apertus_jax.config.schema import parse
from apertus_jax.data.pipeline import pipeline_source
from apertus_jax.data.provenance import PREP_STATS
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.prep.tokenize import TokenizeJob, run_tokenize
from apertus_jax.records.provenance import load_provenance
from configs.runs import tiny_resume

from ..conftest import train

SEQ_LEN, ROWS = 64, 4


@pytest.fixture(scope="module")
def tokenizer():
    return demo_tokenizer(1024)


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
            tokenizer=f"sentencepiece:{os.path.join(cache_dir(), tokenizer.name.split(':', 1)[1])}",
            source="fortunes-de",
            licence="GPL-2+",
        )
    )
    with open(os.path.join(shards, PREP_STATS), "w") as f:
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


@pytest.mark.slow
def test_workdir_records_sources_licences_and_consumed_tokens(run, tokenizer):
    config, workdir = run
    record = load_provenance(workdir)
    # The batch source's own counts after the same 4 steps.
    run = parse(config)
    source = pipeline_source(run.data, tokenizer, run.train.plan, run.seed, process_index=0, process_count=1)
    for _ in range(4):
        next(source)
    assert record["step"] == 4
    assert record["tokens_consumed"] == source.consumed()["tokens"]
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
