"""The long-context job: stage configs, the driver across a stage boundary, kill -9 and resume."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from apertus_jax.config.schema import base_config, parse
from apertus_jax.jobs.long_context import (
    ContextStage,
    load_stages,
    merge_metrics,
    run_stages,
    stage_config,
)
from apertus_jax.optim.config import make_lr_schedule
from apertus_jax.train.config import check_layout
from configs.runs import tiny_long_context

from ..conftest import train, write_tiny_workdir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "runs", "tiny_long_context.py")


def test_stage_config_sets_length_theta_batch_and_a_rewarmed_constant_lr():
    stage = ContextStage("16k", seq_len=16384, rope_theta=2e6, tokens=100 * 2**23, context=4)
    config = stage_config(base_config(), stage, batch_tokens=2**23, peak_lr=1.1e-5, warmup_tokens=12 * 2**23)
    assert config.data.seq_len == config.model.max_seq_len == 16384
    assert config.model.rope_theta == 2e6 and config.mesh.context == 4
    assert config.train.batch_plan == ((0, 2**23),) and config.train.steps == 100
    run = parse(config)
    assert check_layout(run, num_devices=16) == (4, 1, 1, 4)  # data fills what context leaves
    lr = make_lr_schedule(run.optim, run.train.plan)
    values = [float(lr(update)) for update in (0, 6, 12, 50, 99)]
    assert values[0] == 0.0 and values[1] == pytest.approx(0.55e-5)
    assert values[2:] == pytest.approx([1.1e-5] * 3, rel=1e-6)  # constant after the warmup, no cooldown
    with pytest.raises(ValueError, match="not a multiple of seq_len"):
        stage_config(base_config(), stage, batch_tokens=10**6, peak_lr=1e-5, warmup_tokens=0)
    with pytest.raises(ValueError, match="seq_len"):
        ContextStage("x", seq_len=1, rope_theta=1.0, tokens=1)


def test_recipe_stages_match_the_report():
    from configs.runs import apertus_8b_long_context, apertus_70b_long_context

    for module, thetas, lr in (
        (apertus_8b_long_context, [1e6, 2e6, 4e6, 12e6], 1.1e-5),
        (apertus_70b_long_context, [1e6, 2e6, 4e6, 8e6], 1e-6),
    ):
        assert [s.seq_len for s in module.STAGES] == [8192, 16384, 32768, 65536]
        assert [s.rope_theta for s in module.STAGES] == thetas
        for stage in module.STAGES:
            config = module.get_config(stage.name)
            assert config.optim.peak_lr == lr and config.optim.warmup_tokens == 1_200_000_000
            assert config.train.batch_plan[0][1] == module.BATCH_TOKENS
            check_layout(parse(config), num_devices=module.DEVICES)


def test_the_262k_stages_double_length_and_theta_and_fit_their_devices():
    from configs.runs import apertus_8b_262k, apertus_70b_262k

    for module, thetas in ((apertus_8b_262k, [24e6, 48e6]), (apertus_70b_262k, [16e6, 32e6])):
        assert [s.seq_len for s in module.STAGES] == [131_072, 262_144]
        assert [s.rope_theta for s in module.STAGES] == thetas
        for stage in module.STAGES:
            config = module.get_config(stage.name)
            assert (
                config.train.batch_plan[0][1] == module.BATCH_TOKENS and config.mesh.context == stage.context
            )
            check_layout(parse(config), num_devices=module.DEVICES)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["8b", "70b"])
def test_the_262k_stage_compiles_in_the_memory_plan(model):
    """The train step at 262,144 tokens (the 128k stage differs only in its length), context parallel over the
    8 test devices, one row per microbatch on the one batch-sharded device."""
    from apertus_jax.aot import memory_plan

    module = importlib.import_module(f"configs.runs.apertus_{model}_262k")
    config = parse(module.get_config("256k"))
    row = memory_plan.plan_one(config, (1, 1, 1, 8), rows_per_device=1)
    rows = module.BATCH_TOKENS // config.data.seq_len
    assert (row["rows"], row["microbatches"]) == (1, rows) and row["total"] > row["activations"] > 0


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """The tiny short-row (32-token) pretraining run the stages start from."""
    workdir = str(tmp_path_factory.mktemp("pretrain"))
    assert train(tiny_long_context.get_config("pretrain"), workdir) == "done"
    return workdir


@pytest.fixture(scope="module")
def reference(pretrained, tmp_path_factory):
    """Both stages run in-process without interruption."""
    root = str(tmp_path_factory.mktemp("stages"))
    assert run_stages(load_stages(CONFIG), root, pretrained) == "done"
    return root


def _records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_stages_change_length_and_theta_at_the_boundary(reference, pretrained):
    records = _records(os.path.join(reference, "metrics.jsonl"))
    assert [r["step"] for r in records] == list(range(1, 13))
    assert [(r["stage"], r["seq_len"], r["rope_theta"]) for r in records] == [("2x", 64, 40_000.0)] * 6 + [
        ("4x", 128, 160_000.0)
    ] * 6
    assert all(r["tokens"] == 512 * r["stage_step"] for r in records)  # same tokens per batch: 8 then 4 rows
    # The LR warms up again at the boundary; the first stage starts from the pretrained parameters.
    assert [r["lr"] for r in records[:3]] == [r["lr"] for r in records[6:9]] and records[0]["lr"] == 0.0
    pretrain_last = _records(os.path.join(pretrained, "metrics.jsonl"))[-1]
    assert pretrain_last["seq_len"] == 32 and records[0]["loss"] < pretrain_last["loss"] + 0.5 < 6.0
    assert records[-1]["seq_len"] == 4 * pretrain_last["seq_len"]
    # A finished driver skips every stage and writes the same joined metrics.
    before = os.path.getmtime(os.path.join(reference, "4x", "metrics.jsonl"))
    assert run_stages(load_stages(CONFIG), reference, pretrained) == "done"
    assert os.path.getmtime(os.path.join(reference, "4x", "metrics.jsonl")) == before
    assert _records(merge_metrics(reference, {"2x": 40_000.0, "4x": 160_000.0})) == records


def _last_step(path):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return 0
    return json.loads(lines[-1])["step"] if lines else 0


@pytest.mark.slow
def test_kill9_across_the_stage_boundary_then_resume_is_bitwise(
    reference, pretrained, compilation_cache, tmp_path
):
    root = str(tmp_path / "stages")
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=compilation_cache)
    command = [sys.executable, "-m", "experiments.long_context", f"--config={CONFIG}"]
    command += [f"--init_from={pretrained}", f"--workdir={root}"]
    log = open(tmp_path / "stderr.log", "w")  # a file, not a pipe: a full pipe would block the driver
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    # Killed after the first step of the second stage, before its first checkpoint (every 2 steps).
    while process.poll() is None and _last_step(os.path.join(root, "4x", "metrics.jsonl")) < 1:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=300)
    log.close()
    assert _last_step(os.path.join(root, "2x", "metrics.jsonl")) == 6

    final = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert final.returncode == 0, final.stderr[-2000:]
    resumed = [(r["stage"], r["step"], r["loss"]) for r in _records(os.path.join(root, "metrics.jsonl"))]
    expected = [
        (r["stage"], r["step"], r["loss"]) for r in _records(os.path.join(reference, "metrics.jsonl"))
    ]
    assert resumed == expected  # float equality of every step's loss: bitwise


def test_cli_rejects_a_missing_init_from_in_one_line(tmp_path, run_job):
    result = run_job(
        "experiments.long_context",
        f"--config={CONFIG}",
        f"--init_from={tmp_path}/none",
        f"--workdir={tmp_path}/w",
    )
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: --init_from={tmp_path}/none has no checkpoints/: point it at a pretraining workdir, or hf:DIR "
        "for a HF checkpoint"
    ]
    assert not os.path.exists(f"{tmp_path}/w")


@pytest.mark.slow
def test_stages_from_another_models_workdir_write_nothing(tmp_path):
    """The first stage's trainer refuses a source of another model before it writes: no stage folder, no root
    (before: an empty ROOT/ was left)."""
    source = str(tmp_path / "other_model")
    os.makedirs(source)
    write_tiny_workdir(source, 2)
    with pytest.raises(ValueError, match=f"^checkpoint.init_from={source}: .* of another model"):
        run_stages(load_stages(CONFIG), str(tmp_path / "stages"), source)
    assert sorted(os.listdir(tmp_path)) == ["other_model"]
