"""Restoring a trainer workdir: the saved parameters, without the optimizer state, a clear error without one; a
workdir a live run holds read as it stands, with a warning naming the step read, and told apart from a folder
that holds no run when it has no checkpoint yet."""

import os
import shutil

import jax
import numpy as np
import pytest
from flax import nnx

from apertus_jax.train.checkpoint import WorkdirLock
from apertus_jax.trained.workdir import load_workdir

from ..conftest import write_tiny_workdir


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A workdir as the trainer writes it (config.json + an Orbax checkpoint at step 7) of a tiny model."""
    workdir = str(tmp_path_factory.mktemp("run"))
    return workdir, write_tiny_workdir(workdir, 7)


@pytest.mark.slow
def test_restores_the_saved_parameters(workdir):
    directory, params = workdir
    trained = load_workdir(directory)
    assert trained.step == 7 and trained.tokenizer.vocab_size == 1024
    restored = nnx.to_pure_dict(nnx.state(trained.model, nnx.Param))
    jax.tree.map(np.testing.assert_array_equal, restored, params)


def test_restores_params_without_reading_the_optimizer_state(workdir, tmp_path):
    directory, params = workdir
    copy = str(tmp_path / "run")
    shutil.copytree(directory, copy)
    shutil.rmtree(os.path.join(copy, "checkpoints", "7", "opt_state"))  # no optimizer state to read
    trained = load_workdir(copy)
    restored = nnx.to_pure_dict(nnx.state(trained.model, nnx.Param))
    jax.tree.map(np.testing.assert_array_equal, restored, params)


def test_a_folder_without_a_run_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json or checkpoints"):
        load_workdir(str(tmp_path))


def test_a_live_run_is_read_as_it_stands_with_a_warning_naming_the_step(workdir, tmp_path, caplog):
    copy = tmp_path / "run"
    shutil.copytree(workdir[0], copy)
    assert not WorkdirLock.held(str(copy))
    with WorkdirLock(str(copy)):
        assert WorkdirLock.held(str(copy))
        trained = load_workdir(str(copy), "exporting")
    assert trained.step == 7
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [f"a run holds {copy}: exporting its newest checkpoint, step 7"]
    caplog.clear()
    assert (
        not WorkdirLock.held(str(copy)) and load_workdir(str(copy)).step == 7
    )  # the run has ended: no warning
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_a_live_run_without_a_checkpoint_is_told_apart_from_a_folder_without_a_run(workdir, tmp_path):
    live = tmp_path / "live"
    (live / "checkpoints").mkdir(parents=True)  # what a run has written before its first checkpoint
    shutil.copy(os.path.join(workdir[0], "config.json"), live)
    with pytest.raises(FileNotFoundError, match=r"no readable checkpoint under .*; train first"):
        load_workdir(str(live))
    says = (
        f"a run holds {live} and has saved no checkpoint yet; rerun once it has saved one (it saves every "
        "checkpoint.every_steps steps and when it stops)"
    )
    with WorkdirLock(str(live)):
        with pytest.raises(FileNotFoundError) as held:
            load_workdir(str(live))
        assert str(held.value) == says
        os.remove(live / "config.json")  # a run that has not recorded its config yet
        with pytest.raises(FileNotFoundError) as held:
            load_workdir(str(live))
        assert str(held.value) == says


def usage_block(heading: str) -> str:
    """The first ```python block after `heading` in docs/usage.md."""
    usage = open(
        os.path.join(os.path.dirname(__file__), "..", "..", "docs", "usage.md"), encoding="utf-8"
    ).read()
    section = usage[usage.index(heading) :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```", start)]


@pytest.mark.slow
def test_usage_workdir_snippet_runs(workdir, capsys):
    """docs/usage.md's "A trained workdir in Python" code, verbatim except the workdir path, on a tiny run."""
    code = usage_block("## A trained workdir in Python")
    assert '"/tmp/apertus_demo"' in code
    exec(compile(code.replace('"/tmp/apertus_demo"', repr(workdir[0])), "docs/usage.md", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("step 7: ")
