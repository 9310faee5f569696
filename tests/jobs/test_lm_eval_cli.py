"""lm-eval's command line through our entry point: `--model apertus_jax` resolves and runs a local task."""

import glob
import json
import os
import pathlib

import pytest

pytest.importorskip("lm_eval")

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_cli_runs_a_local_task_on_a_hf_directory(hf_dir, exams_task_dir, tmp_path, run_job):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [
        "apertus_jax.jobs.lm_eval_cli",
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
