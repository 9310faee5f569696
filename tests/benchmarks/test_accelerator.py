"""The accelerator benchmark's dry run: the GPU/TPU code path with tiny widths, 2 steps on CPU."""

import importlib.metadata
import json
import math
import os
import platform
import shutil
import subprocess
import sys

import jax
import pytest

from benchmarks import step
from benchmarks.configs import DRY_RUN
from tools.measure import gpu_check


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


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_check(*args: str) -> subprocess.CompletedProcess:
    """benchmarks/accelerator_check.sh ARGS on CPU."""
    return subprocess.run(
        ["bash", "benchmarks/accelerator_check.sh", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"},
        timeout=600,
    )


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """(the process, its --out directory) of the check's dry run, every stage."""
    out = tmp_path_factory.mktemp("accelerator_check")
    return run_check("--dry_run", "--out", str(out)), out


@pytest.mark.slow(minutes=3)
def test_accelerator_check_script_dry_runs_every_stage(dry_run):
    """benchmarks/accelerator_check.sh --dry_run --out DIR: attention parity, the xla attention kernel, 1b in
    bf16, in FP8 (with and without Triton GEMMs) and its profile, every stage ok, each measuring stage's JSON in
    DIR."""
    proc, out = dry_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count(": ok (") == 6, proc.stdout
    assert "PASS jax_nn vs xla" in proc.stdout and proc.stdout.count("mfu=") == 3
    assert "attention=xla fp8" in proc.stdout and "attention=xla bf16" in proc.stdout
    assert sorted(os.listdir(out)) == [
        "1b_bf16.json",
        "1b_fp8.json",
        "1b_fp8_cublas.json",
        "attention_kernels.json",
        "profile_1b.json",
    ]
    with open(out / "1b_bf16.json") as f:
        step_result = json.load(f)
    assert step_result["accelerator_config"] == "1b" and step_result["dry_run"] is True
    assert step_result["peak_gb"] == 0 and step_result["kernels"] == {}  # CPU: no statistics, no custom calls
    with open(out / "attention_kernels.json") as f:
        kernels = json.load(f)["kernels"]
    assert list(kernels) == ["xla"] and kernels["xla"]["relative_error"]["out"] < 0.01
    with open(out / "profile_1b.json") as f:
        profiled = json.load(f)
    devices = profiled["devices"]  # the tests' virtual CPU devices
    assert (profiled["accelerator_config"], profiled["seq"]) == ("1b", DRY_RUN["seq"])
    assert profiled["batch"] == DRY_RUN["batch_per_device"] * devices
    # Every op time is in a part; the GEMMs counted from the program's dots and loop trips do the model's
    # FLOPs (remat recomputes a few more).
    assert sum(profiled["parts"].values()) == pytest.approx(profiled["op_ms"])
    assert sum(profiled["kinds"].values()) == pytest.approx(profiled["op_ms"])
    assert 1 <= profiled["gemm_tflop_per_step"] / profiled["model_tflop_per_step"] < 1.5
    assert profiled["kinds"]["xla_gemm"] > 0 and set(profiled["gemm"]) <= set(profiled["parts"])
    assert 0 <= profiled["idle_share"] < 1 and 0 < profiled["mfu"] < 1
    assert "top 15 ops: op, part, kind" in proc.stdout


@pytest.mark.slow(minutes=3)
def test_the_dry_runs_profile_is_recorded_and_rendered(dry_run, tmp_path):
    """tools.measure's gathering of the profile (`gpu_check.profile_values`) and BENCHMARKS.md's tables
    (`render_gpu_profile`) from the dry run's outputs, its 1b files standing in for the 8b-slice's too."""
    proc, out = dry_run
    assert proc.returncode == 0, proc.stdout[-2000:]
    for name in ("profile_{}.json", "{}_bf16.json"):
        shutil.copy(out / name.format("1b"), tmp_path / name.format("1b"))
        shutil.copy(out / name.format("1b"), tmp_path / name.format("8b-slice"))
    values, machine = gpu_check.profile_values(str(tmp_path))
    assert values["device_kind"] == "cpu" and values["jax"] == jax.__version__
    devices = values["1b"]["devices"]  # the tests' virtual CPU devices
    versions = f"Python {platform.python_version()} with jax {jax.__version__}"
    flax = importlib.metadata.version("flax")
    assert machine["platform"] == f"{devices} x cpu, {versions} and flax {flax}"
    assert values["8b_slice"]["bf16_stage"]["accelerator_config"] == "1b"
    text = gpu_check.render_gpu_profile(values)
    profiled = values["1b"]
    assert text.count("| part | ms | share |") == 2 and text.startswith(
        f"**1b** ({devices} x 128 tokens, bfloat16"
    )
    assert (
        f"| {profiled['step_ms']:.1f} | {profiled['mfu']:.1%} | {profiled['bf16_stage']['mfu']:.1%} |" in text
    )
    top = profiled["top"][0]
    assert f"| `{top['op']}` | {top['part']} | {top['kind']} | {top['ms']:.2f} |" in text
    assert text.count("| largest ops |") == 2 and text.endswith("|\n")
    for row in text.splitlines():
        if row.startswith("| part") or row.startswith("| optimizer") or row.startswith("| mlp"):
            assert row.count("|") == 8, row  # 7 cells, GEMM cells empty where a part has no GEMM


def test_unknown_stages_are_a_one_line_usage_error():
    proc = run_check("--dry_run", "--stages=bf16,nope")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        "unknown stage 'nope' in --stages; choose from parity,attention,attention_32k,bf16,demo,fp8,fp8_cublas,profile\n"
    )
