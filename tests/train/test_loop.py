"""The training loop in-process: exact resume across crashes and bad inputs."""

import json
import os

import numpy as np
import pytest

from apertus_jax.train import metrics as metrics_lib
from configs.runs import tiny_resume

from ..conftest import train

# Crash right after these steps: the first step of the doubled batch (7), the first step of stage 2 (9),
# and three other random steps.
_RANDOM = np.random.default_rng(5).permutation([s for s in range(2, 12) if s not in (7, 9)])[:3]
CRASH_STEPS = sorted({7, 9, *_RANDOM.tolist()})


class Crash(Exception):
    """Stands in for kill -9: raised after a step's metrics line, before that step's checkpoint."""


def _tree_snapshot(directory):
    return sorted(
        (root, tuple(sorted(files)), tuple(os.path.getmtime(os.path.join(root, f)) for f in sorted(files)))
        for root, _, files in os.walk(directory)
    )


@pytest.mark.slow
def test_uninterrupted_run_writes_everything(uninterrupted, losses_of):
    losses = losses_of(uninterrupted)
    assert [s for s, _ in losses] == list(range(1, 13))
    for name in ("config.json", "loss.png", "checkpoints/12", "tensorboard"):
        assert os.path.exists(os.path.join(uninterrupted, name)), name
    with open(os.path.join(uninterrupted, "metrics.jsonl")) as f:
        record = json.loads(f.readline())
    assert set(record) >= {
        "step",
        "tokens",
        "loss",
        "lr",
        "grad_norm",
        "tokens_per_s",
        "mfu",
        "goldfish_dropped_fraction",
        "skipped_steps",
    }


@pytest.mark.slow
def test_resume_after_crashes_is_bitwise_identical(uninterrupted, tmp_path, monkeypatch, losses_of):
    workdir = str(tmp_path)
    write = metrics_lib.MetricsWriter.write
    pending = list(CRASH_STEPS)

    def write_then_crash(self, record, **kwargs):
        write(self, record, **kwargs)
        if pending and record["step"] == pending[0]:
            pending.pop(0)
            raise Crash(record["step"])

    monkeypatch.setattr(metrics_lib.MetricsWriter, "write", write_then_crash)
    crashes = 0
    while True:
        try:
            assert train(tiny_resume.get_config(), workdir) == "done"
            break
        except Crash:
            crashes += 1
    assert crashes == len(CRASH_STEPS) >= 5
    assert losses_of(workdir) == losses_of(uninterrupted)  # float equality of every step's loss: bitwise


def _bad(**changes):
    config = tiny_resume.get_config()
    config.unlock()
    for dotted, value in changes.items():
        *path, key = dotted.split(".")
        node = config
        for part in path:
            node = node[part]
        node[key] = value
    return config


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes, message",
    [
        ({"train.bogus_key": 1}, "unknown \\['train.bogus_key'\\]"),
        ({"mesh.fsdp": 3}, "does not divide the 8 devices"),
        (
            {"mesh.data": 8, "mesh.fsdp": 1, "mesh.tensor": 1},
            "not divisible by the data\\*fsdp mesh axes \\(8\\)",
        ),
        ({"model.vocab_size": 512}, "has 1024 ids but model.vocab_size is 512"),
        (
            {
                "data.pipeline": {
                    "components": {"web": {"kind": "arrayrecord", "paths": ["/nonexistent/shards"]}}
                }
            },
            "/nonexistent/shards",
        ),
        ({"model.d_model": 64}, "of another model"),
    ],
    ids=["unknown-key", "mesh", "batch-vs-data-axis", "tokenizer-vocab", "missing-data", "other-model-shape"],
)
def test_bad_inputs_fail_in_one_line_and_write_nothing(uninterrupted, changes, message):
    before = _tree_snapshot(uninterrupted)
    with pytest.raises((ValueError, FileNotFoundError), match=message) as error:
        train(_bad(**changes), uninterrupted)
    assert "\n" not in str(error.value)
    assert _tree_snapshot(uninterrupted) == before


@pytest.mark.slow
def test_a_run_from_another_models_parameters_is_refused_before_it_writes_its_workdir(
    uninterrupted, tmp_path
):
    """checkpoint.init_from of another model: one line naming init_from, the new workdir not created (no lock
    file, no empty checkpoints/), the source as it was."""
    before, workdir = _tree_snapshot(uninterrupted), tmp_path / "from_another_model"
    config = _bad(**{"checkpoint.init_from": uninterrupted, "model.d_model": 64})
    with pytest.raises(
        ValueError, match=f"^checkpoint.init_from={uninterrupted}: .* of another model"
    ) as error:
        train(config, str(workdir))
    assert "\n" not in str(error.value)
    assert not workdir.exists() and _tree_snapshot(uninterrupted) == before


def test_config_json_keeps_the_original_run_config(tmp_path):
    from apertus_jax.records.config_record import record_config

    workdir = str(tmp_path)
    original = {"train": {"steps": 12, "batch_plan": ((0, 256),)}}
    assert record_config(workdir, original, None).endswith("config.json")
    assert record_config(workdir, original, 12).endswith("config.json")  # same values (tuples as JSON lists)
    changed = {"train": {"steps": 20, "batch_plan": ((0, 256),)}}
    assert record_config(workdir, changed, 12).endswith("config.step12.json")
    with open(tmp_path / "config.json") as f:
        assert json.load(f)["train"]["steps"] == 12
    with open(tmp_path / "config.step12.json") as f:
        assert json.load(f)["train"]["steps"] == 20
    assert record_config(workdir, changed, None).endswith("config.json")  # no checkpoint: a new run


@pytest.mark.slow
def test_the_outputs_table_lists_everything_a_run_writes(uninterrupted):
    """Each top-level entry of a finished workdir has a row in the Outputs table of docs/outputs.md."""
    import pathlib
    import re

    page = (pathlib.Path(__file__).parents[2] / "docs" / "outputs.md").read_text(encoding="utf-8")
    section = page[page.index("## Outputs") : page.index("## Troubleshooting")]
    rows = {re.sub(r"/.*", "", cell) for cell in re.findall(r"^\| `([^`]+)` \|", section, re.M)}
    written = set(os.listdir(uninterrupted))
    assert written <= rows, written - rows
    assert {".lock-p0", "eval"} <= rows  # the lock and evaluate's results


@pytest.mark.slow
def test_init_from_starts_from_the_params_with_a_fresh_optimizer(uninterrupted, tmp_path, losses_of):
    import jax

    from apertus_jax.config.schema import parse
    from apertus_jax.train.checkpoint import restore_workdir_params
    from apertus_jax.train.run import Run
    from apertus_jax.train.train_state import make_global_batch

    config = tiny_resume.get_config()
    with config.unlocked():
        config.train.steps, config.checkpoint.init_from = 1, uninterrupted
    assert train(config, str(tmp_path / "b")) == "done"
    # The same first step by hand: the uninterrupted run's final params, a fresh optimizer state.
    run = Run(parse(config))
    params, _ = restore_workdir_params(uninterrupted, run.spec.abstract["params"])
    batch = make_global_batch(next(run.batch_source()), run.mesh)
    with jax.set_mesh(run.mesh):
        _, _, metrics = run.train_step(batch["tokens"].shape[0]).fn(
            params, run.spec.init_opt_state(params), batch, None
        )
    assert losses_of(str(tmp_path / "b")) == [(1, float(metrics["loss"]))]
    assert float(metrics["loss"]) < losses_of(uninterrupted)[0][1] - 0.5  # trained parameters, not a new init


def test_missing_init_from_fails_in_one_line_and_writes_nothing(tmp_path):
    config = tiny_resume.get_config()
    with config.unlocked():
        config.checkpoint.init_from = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="checkpoint.init_from=.* has no checkpoints/") as error:
        train(config, str(tmp_path / "w"))
    assert "\n" not in str(error.value) and not (tmp_path / "w").exists()


def test_a_hf_checkpoint_folder_is_refused_as_a_workdir_untouched(tmp_path):
    """A folder of safetensors weights and no checkpoints/ is a model, not a run: its config.json is kept."""
    (tmp_path / "config.json").write_text('{"model_type": "apertus"}')
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    before = _tree_snapshot(tmp_path)
    with pytest.raises(ValueError, match="holds a HF checkpoint .*init_from=hf:") as error:
        train(tiny_resume.get_config(), str(tmp_path))
    assert "\n" not in str(error.value) and _tree_snapshot(tmp_path) == before


def test_a_workdir_another_run_holds_is_refused_before_the_data_is_built(tmp_path, monkeypatch):
    from apertus_jax.train.checkpoint import WorkdirLock, WorkdirLockedError
    from apertus_jax.train.run import Run

    def no_data(self):
        raise AssertionError("the batch source was built for a workdir in use")

    monkeypatch.setattr(Run, "batch_source", no_data)
    with WorkdirLock(str(tmp_path)):
        with pytest.raises(WorkdirLockedError, match="in use by another run; wait for it"):
            train(tiny_resume.get_config(), str(tmp_path))


def _spike_config():
    config = tiny_resume.get_config()
    config.unlock()
    config.train.steps, config.train.batch_plan = 8, ((0, 256),)
    config.train.spike_factor, config.train.spike_warmup_steps = 3.0, 2
    return config


@pytest.mark.slow
def test_spike_batch_is_skipped_counted_and_resume_is_bitwise(tmp_path, monkeypatch, losses_of, read_records):
    """Batch 5 keeps the loss of a single token: its gradient norm is many times the running mean, so the
    guard drops that update. Crashes after step 6 (resume from step 4, before the spike) and after step 7
    (resume from step 6, after it) reproduce the uninterrupted run bitwise."""
    from apertus_jax.config.schema import parse
    from apertus_jax.data import process_shards
    from apertus_jax.train.run import Run

    reference = Run(parse(_spike_config())).batch_source()
    spike_tokens = [next(reference) for _ in range(5)][-1]["tokens"]
    next_batch = process_shards.ShardedSource.__next__

    def spiking_next(self):
        batch = next_batch(self)
        if np.array_equal(batch["tokens"], spike_tokens):
            batch["loss_mask"][:] = 0
            batch["loss_mask"][0, 10] = 1
        return batch

    monkeypatch.setattr(process_shards.ShardedSource, "__next__", spiking_next)
    straight = str(tmp_path / "straight")
    assert train(_spike_config(), straight) == "done"
    records = read_records(straight)
    assert [r["spike_skipped_steps"] for r in records] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert records[4]["grad_norm"] > 3 * max(r["grad_norm"] for r in records[:4])
    assert all(r["skipped_steps"] == 0 for r in records)  # a spike is not a non-finite step

    write = metrics_lib.MetricsWriter.write
    pending = [6, 7]

    def write_then_crash(self, record, **kwargs):
        write(self, record, **kwargs)
        if pending and record["step"] == pending[0]:
            pending.pop(0)
            raise Crash(record["step"])

    monkeypatch.setattr(metrics_lib.MetricsWriter, "write", write_then_crash)
    resumed = str(tmp_path / "resumed")
    for _ in range(2):
        with pytest.raises(Crash):
            train(_spike_config(), resumed)
    assert train(_spike_config(), resumed) == "done"
    assert losses_of(resumed) == losses_of(straight)
    assert read_records(resumed)[-1]["spike_skipped_steps"] == 1
