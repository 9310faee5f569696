"""Restoring a trainer workdir and the evaluate CLI's `run` on it (perplexity, memorization, bad input)."""

import json
import os
import shutil

import jax
import numpy as np
import pytest
from flax import nnx

from apertus_jax.eval.workdir import load_workdir
from experiments.evaluate import run

from .conftest import write_tiny_workdir


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A workdir as the trainer writes it (config.json + an Orbax checkpoint at step 7) of a tiny model."""
    workdir = str(tmp_path_factory.mktemp("run"))
    return workdir, write_tiny_workdir(workdir, 7)


def test_restores_the_saved_parameters(workdir):
    directory, params = workdir
    trained = load_workdir(directory)
    assert trained.step == 7 and trained.tokenizer.vocab_size == 1024
    restored = nnx.state(trained.model, nnx.Param).to_pure_dict()
    jax.tree.map(np.testing.assert_array_equal, restored, params)


def test_restores_params_without_reading_the_optimizer_state(workdir, tmp_path):
    directory, params = workdir
    copy = str(tmp_path / "run")
    shutil.copytree(directory, copy)
    shutil.rmtree(os.path.join(copy, "checkpoints", "7", "opt_state"))  # no optimizer state to read
    trained = load_workdir(copy)
    restored = nnx.state(trained.model, nnx.Param).to_pure_dict()
    jax.tree.map(np.testing.assert_array_equal, restored, params)


def test_perplexity_and_memorization_tasks_run(workdir):
    directory, _ = workdir
    ppl = run(directory, "perplexity", limit=2, batch_size=4)
    assert ppl["step"] == 7 and ppl["num_documents"] == 2 and ppl["seq_len"] == 64
    assert (
        100 < ppl["perplexity"] < 5000 and ppl["bits_per_byte"] > 0
    )  # random init: about the vocabulary size
    memo = run(directory, "memorization", limit=3, batch_size=3, prefix_len=8, suffix_len=8)
    assert memo["train"]["num_documents"] == 3 and memo["heldout"]["num_documents"] == 3
    assert 0 <= memo["train"]["rouge_l"] <= 1 and memo["train"]["exact_match"] == 0


def test_bad_input_is_one_clear_error(workdir, tmp_path):
    with pytest.raises(ValueError, match="unknown --task='hellaswag'"):
        run(workdir[0], "hellaswag")
    with pytest.raises(FileNotFoundError, match="no config.json or checkpoints"):
        load_workdir(str(tmp_path))


def test_evaluate_cli_prints_no_library_info_lines(workdir, tmp_path):
    """Orbax's restore chatter and jax's TPU probe line stay out of the log; the result is printed."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}  # let jax probe for a TPU
    output = tmp_path / "result.json"
    result = subprocess.run(
        [sys.executable, "-m", "experiments.evaluate", f"--workdir={workdir[0]}", "--task=perplexity"]
        + ["--limit=2", f"--output={output}"],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(output.read_text())["num_documents"] == 2
    noisy = [
        line for line in result.stderr.splitlines() if "orbax" in line.lower() or "backend 'tpu'" in line
    ]
    assert not noisy, noisy[:5]


def readme_block(heading: str) -> str:
    """The first ```python block after `heading` in the README."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8").read()
    section = readme[readme.index(heading) :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```", start)]


def test_readme_workdir_snippet_runs(workdir, capsys):
    """The README's "A trained workdir in Python" code, verbatim except the workdir path, on a tiny run."""
    code = readme_block("### A trained workdir in Python")
    assert '"/tmp/apertus_demo"' in code
    exec(compile(code.replace('"/tmp/apertus_demo"', repr(workdir[0])), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("step 7: ")
