"""apertus_jax.studies.goldfish.study: the sonnet rows, a tiny standard vs Goldfish study end to end (files, table)."""

import json

import pytest

from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.studies.goldfish.study import GoldfishStudy, documents, run_study, summary_table

# 4 epochs of 10 sonnets in one batch each: 4 steps per run.
TINY = GoldfishStudy(epochs=4, num_documents=10, batch_size=10, eval_every=2, d_model=32, suffix_len=16)


def test_documents_are_the_sonnet_starts_with_bod():
    tokenizer = demo_tokenizer(1024)
    train, unseen = documents(tokenizer, 48, 100)
    assert train.shape == (100, 49) and unseen.shape == (54, 49) and str(train.dtype) == "int32"
    assert (train[:, 0] == tokenizer.bod_id).all() and (unseen[:, 0] == tokenizer.bod_id).all()
    with pytest.raises(ValueError, match=r"--num_documents=131 must be in \[1, 130\]"):
        documents(tokenizer, 48, 131)
    with pytest.raises(ValueError, match="has only .* tokens; lower --prefix_len/--suffix_len"):
        documents(tokenizer, 5000, 10)


@pytest.mark.slow
def test_a_tiny_study_writes_its_results_and_figure(tmp_path):
    lines = []
    results = run_study(TINY, str(tmp_path), log=lines.append)
    assert json.loads((tmp_path / "goldfish_study.json").read_text()) == results
    assert (tmp_path / "goldfish_study.png").read_bytes()[:4] == b"\x89PNG"
    config = results["config"]
    assert (config["num_documents"], config["unseen_documents"], config["k"], config["h"]) == (10, 144, 4, 13)
    assert list(results["runs"]) == ["standard", "goldfish_k4"]
    standard, goldfish = results["runs"].values()
    for run in (standard, goldfish):
        assert run["steps"] == 4 and [c["epoch"] for c in run["curve"]] == [2, 4]
        assert len(run["train_rouge_l"]) == 10 and len(run["unseen_rouge_l"]) == 144
        assert all(0 <= r <= 1 for r in run["train_rouge_l"] + run["unseen_rouge_l"])
    assert (standard["goldfish_k"], goldfish["goldfish_k"]) == (0, 4)
    assert standard["loss_kept_fraction"] == 1.0  # full rows, nothing padded or dropped
    assert 0.7 < goldfish["loss_kept_fraction"] < 0.85  # 1/k = 1/4 of the labels dropped
    # progress after the 8th (last) step and the curve's 2 points per run
    assert lines[-1].startswith("  [goldfish_k4] epoch 4: train-doc ROUGE-L ")
    assert sum("step 8/8" in line for line in lines) == 1 and sum("epoch" in line for line in lines) == 4
    table = summary_table(results).splitlines()
    assert table[0].split()[:3] == ["run", "ROUGE-L", "train"] and table[2].startswith("goldfish_k4 ")
    assert table[1].split()[-1] == "1.000"
