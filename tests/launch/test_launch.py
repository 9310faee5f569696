"""launch/ scripts: bash syntax, usage errors, and XLA flags that the pinned jaxlib accepts."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = ["launch/tpu_pod.sh", "launch/slurm_gpu.sbatch"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_bash_syntax(script):
    result = subprocess.run(["bash", "-n", os.path.join(ROOT, script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_missing_arguments_print_usage_and_exit_2(script):
    result = subprocess.run(
        ["bash", os.path.join(ROOT, script), "configs/runs/apertus_8b.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PATH="/usr/bin:/bin"),
    )
    assert result.returncode == 2
    assert result.stderr.startswith("usage:")


def _sbatch_xla_flags() -> list[str]:
    with open(os.path.join(ROOT, "launch/slurm_gpu.sbatch")) as f:
        return re.findall(r"--xla_\w+=\S+?(?=[\s\"\\])", f.read())


@pytest.mark.slow
def test_sbatch_xla_flags_are_known_to_the_pinned_jaxlib():
    flags = _sbatch_xla_flags()
    assert "--xla_gpu_enable_latency_hiding_scheduler=true" in flags
    # XLA aborts on an unknown flag in XLA_FLAGS ("Unknown flag in XLA_FLAGS"); the CPU build parses GPU flags.
    env = dict(os.environ, XLA_FLAGS=" ".join(flags), JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", "import jax; jax.numpy.zeros(1).block_until_ready()"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-1000:]
    bogus = dict(env, XLA_FLAGS="--xla_gpu_no_such_flag=true")
    assert (
        subprocess.run(
            [sys.executable, "-c", "import jax; jax.numpy.zeros(1)"], env=bogus, capture_output=True
        ).returncode
        != 0
    )
