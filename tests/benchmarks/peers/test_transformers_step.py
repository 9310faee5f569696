"""The transformers peer script: one real AdamW step loop on tiny shapes, its one-line output, bad input."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

# The script runs in a subprocess; checking for the packages without importing them keeps collection fast.
if not (importlib.util.find_spec("torch") and importlib.util.find_spec("transformers")):
    pytest.skip("needs the hf extra (torch, transformers)", allow_module_level=True)

SCRIPT = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "benchmarks", "peers", "transformers_step.py"
)
TINY = [
    "--vocab=300",
    "--d_model=32",
    "--layers=1",
    "--heads=2",
    "--kv_heads=1",
    "--mlp=48",
    "--batch=2",
    "--seq=16",
]


def test_prints_one_throughput_line():
    proc = subprocess.run(
        [sys.executable, SCRIPT, *TINY, "--steps=3", "--warmup=1", "--threads=1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    match = re.fullmatch(r"transformers tokens_per_s=(\d+) \(median of 3 steps\)", proc.stdout.strip())
    assert match and int(match.group(1)) > 0


def test_zero_steps_is_a_usage_error():
    proc = subprocess.run([sys.executable, SCRIPT, *TINY, "--steps=0"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "error: --steps=0 and --warmup=2 must both be >= 1"
