"""apertus_jax.trained.evaluate on a trainer workdir (perplexity, memorization, bad input) and the quiet log of
`experiments.evaluate`."""

import json
import os

import pytest

from apertus_jax.trained.evaluate import evaluate

from ..conftest import write_tiny_workdir


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A workdir as the trainer writes it (config.json + an Orbax checkpoint at step 7) of a tiny model."""
    workdir = str(tmp_path_factory.mktemp("run"))
    write_tiny_workdir(workdir, 7)
    return workdir


@pytest.mark.slow
def test_perplexity_and_memorization_tasks_run(workdir):
    ppl = evaluate(workdir, "perplexity", limit=2, batch_size=4)
    assert ppl["step"] == 7 and ppl["num_documents"] == 2 and ppl["seq_len"] == 64
    assert (
        100 < ppl["perplexity"] < 5000 and ppl["bits_per_byte"] > 0
    )  # random init: about the vocabulary size
    unseen = ppl["unseen_languages"]
    assert unseen["num_documents"] == 2 and unseen["num_tokens"] > 2 * ppl["num_tokens"]  # whole translations
    memo = evaluate(workdir, "memorization", limit=3, batch_size=3, prefix_len=8, suffix_len=8)
    assert memo["train"]["num_documents"] == 3 and memo["heldout"]["num_documents"] == 3
    assert 0 <= memo["train"]["rouge_l"] <= 1 and memo["train"]["exact_match"] == 0


@pytest.mark.slow
def test_bad_input_is_one_clear_error(workdir, tmp_path):
    with pytest.raises(ValueError, match="unknown --task='hellaswag'"):
        evaluate(workdir, "hellaswag")
    with pytest.raises(ValueError, match="--limit=-1 must be >= 0"):
        evaluate(workdir, "perplexity", limit=-1)
    with pytest.raises(FileNotFoundError, match="no config.json or checkpoints"):
        evaluate(str(tmp_path), "perplexity")


@pytest.mark.slow
def test_evaluate_cli_prints_no_library_info_lines(workdir, tmp_path, run_job):
    """Orbax's restore chatter stays out of the log; the result is printed."""
    output = tmp_path / "result.json"
    result = run_job(
        "experiments.evaluate", f"--workdir={workdir}", "--task=perplexity", "--limit=2", f"--output={output}"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    written = json.loads(output.read_text())
    assert written["num_documents"] == 2 and written["workdir"] == os.path.abspath(workdir)
    assert json.dumps(written, indent=2) in result.stdout and f"wrote {output}" in result.stdout
    noisy = [
        line for line in result.stderr.splitlines() if "orbax" in line.lower() or "backend 'tpu'" in line
    ]
    assert not noisy, noisy[:5]


def test_missing_workdir_is_one_line_and_exit_2(tmp_path, run_job):
    result = run_job("experiments.evaluate", "--task=perplexity", f"--output={tmp_path}/r.json")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: --workdir is required"]
    assert not list(tmp_path.iterdir())
