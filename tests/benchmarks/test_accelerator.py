"""The accelerator benchmark's dry run: the GPU/TPU code path with tiny widths, 2 steps on CPU."""

import json
import math
import os
import subprocess
import sys

import jax
import pytest

from benchmarks import step
from benchmarks.configs import DRY_RUN


@pytest.mark.slow
def test_dry_run_trains_two_steps_and_reports_mfu():
    r = step.measure_accelerator("8b-slice", dry_run=True)
    devices = jax.device_count()
    assert r["batch"] == DRY_RUN["batch_per_device"] * devices and r["seq"] == DRY_RUN["seq"]
    assert r["dtype"] == "bfloat16" and r["optimizer"] == "ademamix" and r["attention_impl"] == "xla"
    assert r["tokens_per_s_per_device"] == pytest.approx(r["tokens_per_s"] / devices)
    assert 0 < r["mfu"] < 1
    # Small-std init gives near-uniform logits: the loss after one update is still ~ln(vocab).
    assert r["loss"] == pytest.approx(math.log(DRY_RUN["overrides"]["vocab_size"]), abs=0.1)
    line = step.format_accelerator("8b-slice", True, r)
    assert line.startswith("8b-slice (dry run) on ") and f"batch={r['batch']}" in line and "mfu=" in line


def test_unknown_config_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown --config='3b'"):
        step.measure_accelerator("3b", dry_run=True)


@pytest.mark.slow(minutes=2)
def test_accelerator_check_script_dry_runs_every_stage(tmp_path):
    """benchmarks/accelerator_check.sh --dry_run --out DIR: attention parity, the xla attention kernel, 1b in
    bf16 and FP8, every stage ok, each measuring stage's JSON in DIR."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(
        ["bash", "benchmarks/accelerator_check.sh", "--dry_run", "--out", str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count(": ok (") == 4, proc.stdout
    assert "PASS jax_nn vs xla" in proc.stdout and proc.stdout.count("mfu=") == 2
    assert "attention=xla fp8" in proc.stdout and "attention=xla bf16" in proc.stdout
    assert sorted(os.listdir(tmp_path)) == ["1b_bf16.json", "1b_fp8.json", "attention_kernels.json"]
    with open(tmp_path / "1b_bf16.json") as f:
        step_result = json.load(f)
    assert step_result["accelerator_config"] == "1b" and step_result["dry_run"] is True
    assert step_result["peak_gb"] == 0 and step_result["kernels"] == {}  # CPU: no statistics, no custom calls
    with open(tmp_path / "attention_kernels.json") as f:
        kernels = json.load(f)["kernels"]
    assert list(kernels) == ["xla"] and kernels["xla"]["relative_error"]["out"] < 0.01
