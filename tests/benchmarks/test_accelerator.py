"""The accelerator benchmark's dry run: the GPU/TPU code path with tiny widths, 2 steps on CPU."""

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
def test_accelerator_check_script_dry_runs_every_stage():
    """benchmarks/accelerator_check.sh --dry_run: attention parity, 1b in bf16 and FP8, every stage ok."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(
        ["bash", "benchmarks/accelerator_check.sh", "--dry_run"],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count(": ok (") == 3, proc.stdout
    assert "PASS jax_nn vs xla" in proc.stdout and proc.stdout.count("mfu=") == 2
    assert "attention=xla fp8" in proc.stdout and "attention=xla bf16" in proc.stdout
