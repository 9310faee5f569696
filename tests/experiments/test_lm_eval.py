"""lm-eval's command line through our entry point: `--model apertus_jax` resolves and runs a local task."""

import glob
import json
import os
import pathlib

import pytest

pytest.importorskip("lm_eval")

from ..conftest import truncated_hf_copy  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_cli_runs_a_local_task_on_a_hf_directory(hf_dir, exams_task_dir, tmp_path, run_job):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [
        "experiments.lm_eval",
        "run",
        "--model",
        "apertus_jax",
        "--model_args",
        f"pretrained={hf_dir},max_length=128",
        "--include_path",
        exams_task_dir,
        "--tasks",
        "german_exams_qa",
        "--limit",
        "4",
        "--batch_size",
        "4",
        "--output_path",
        str(tmp_path),
    ]
    done = run_job(*command, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (results_file,) = glob.glob(str(tmp_path / "**" / "results_*.json"), recursive=True)
    results = json.loads(pathlib.Path(results_file).read_text())
    assert results["config"]["model"] == "apertus_jax"
    metrics = results["results"]["german_exams_qa"]
    assert {"acc,none", "acc_norm,none", "acc_bytes,none"} <= set(metrics)
    assert all(metrics[m] in (0.0, 0.25, 0.5, 0.75, 1.0) for m in ("acc,none", "acc_norm,none"))


@pytest.mark.parametrize(
    "model_args, message",
    [
        ("workdir={tmp}/nonexistent", "workdir {tmp}/nonexistent does not exist"),
        ("workdir={tmp}", "{tmp} has no config.json or checkpoints/: --workdir must be "),
        (
            "workdr={tmp}",
            "apertus_jax: unknown --model_args key 'workdr'; did you mean workdir=? the keys: workdir, pretrained, ",
        ),
    ],
)
@pytest.mark.slow
def test_a_bad_model_args_is_one_line_and_exit_2(model_args, message, exams_task_dir, tmp_path, run_job):
    """Before: a raw traceback and exit 1 (FileNotFoundError; for the typo a TypeError about __init__)."""
    command = ["run", "--model", "apertus_jax", "--model_args", model_args.format(tmp=tmp_path)]
    command += ["--tasks", "german_exams_qa", "--include_path", exams_task_dir, "--limit", "2"]
    done = run_job("experiments.lm_eval", *command)
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ") or "Traceback" in line]
    assert line.startswith("error: " + message.format(tmp=tmp_path)), line
    assert done.stderr.strip().splitlines()[-1] == line


@pytest.mark.slow
def test_a_truncated_hf_checkpoint_is_one_line_and_exit_2(hf_dir, exams_task_dir, tmp_path, run_job):
    """Before: a traceback ending in safetensors' `SafetensorError: Error while deserializing header: incomplete
    metadata, file not fully covered`, exit status 1."""
    broken = truncated_hf_copy(hf_dir, tmp_path / "truncated")
    command = ["run", "--model", "apertus_jax", "--model_args", f"pretrained={broken}"]
    command += ["--tasks", "german_exams_qa", "--include_path", exams_task_dir, "--limit", "2"]
    done = run_job("experiments.lm_eval", *command)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {broken / 'model.safetensors'} is not a whole safetensors file (Error while deserializing "
        "header: incomplete metadata, file not fully covered); copy or export it again"
    )
