"""Pretraining on the fork's GPTDataset rows (`jobs.gpt_samples`): the batches are the stream's rows in order over
the run's data shards, the run trains and its provenance names the blend. (The source's exact resume:
tests/data/megatron/test_gpt_samples.py; its state goes into checkpoints like any batch source's.)"""

import json
import os

import numpy as np
import pytest

from apertus_jax.config.schema import parse
from apertus_jax.data.demo_corpus import load_demo_documents
from apertus_jax.data.megatron import gpt_samples
from apertus_jax.data.megatron.indexed import write_indexed_dataset
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.jobs.gpt_samples import gpt_sample_source, pretrain_on_gpt_samples, run_rows
from apertus_jax.jobs.pretrain import assemble
from configs.runs import tiny_resume

STEPS = 6  # tiny_resume's 4-row steps, one compiled step (its batch doubles after step 6)


def _config():
    config = tiny_resume.get_config()
    with config.unlocked():
        config.train.steps = STEPS
    return parse(config)


def _blend(tmp_path):
    """Two prefixes of UDHR translations in the demo BPE's ids (uint16) as a 0.3 / 0.7 blend."""
    tokenizer, texts = demo_tokenizer(1024), [d["text"] for d in load_demo_documents("train", ["udhr"])]
    for name, part in {"first": texts[:30], "second": texts[30:50]}.items():
        write_indexed_dataset(str(tmp_path / name), [tokenizer.encode_document(t) for t in part], np.uint16)
    return f"0.3 {tmp_path / 'first'} 0.7 {tmp_path / 'second'}"


def _losses(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f) if "loss" in r]


@pytest.mark.slow
def test_batches_are_the_streams_rows_and_the_run_trains_on_them(tmp_path):
    config, blend = _config(), _blend(tmp_path)
    rows = run_rows(config)
    assert rows == 6 * 4
    stream = gpt_samples.gpt_samples(blend, seq_len=64, seed=config.seed, split="98,2", num_samples=rows)
    source = gpt_sample_source(blend, split="98,2", num_samples=rows)
    batches = assemble(config, batch_source=source, data={}).batch_source()
    # data.num_shards = 2 shards of 2 rows each; this process reads both: the global batch, in stream order.
    first = [next(batches) for _ in range(STEPS)]
    tokens = np.concatenate([np.concatenate([b["tokens"], b["targets"][:, -1:]], axis=1) for b in first])
    np.testing.assert_array_equal(tokens, gpt_samples.first_rows(stream, rows).astype(np.int32))
    assert batches.consumed() == {"tokens": {"megatron": rows * 64}}

    workdir = str(tmp_path / "run")
    assert pretrain_on_gpt_samples(config, workdir, blend, split="98,2") == "done"
    provenance = open(os.path.join(workdir, "provenance.json")).read()
    assert "megatron GPT samples" in provenance and str(tmp_path / "second") in provenance
    losses = _losses(workdir)
    assert [s for s, _ in losses] == list(range(1, STEPS + 1)) and losses[-1][1] < losses[0][1]
