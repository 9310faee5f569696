"""The transformers peer script: one real AdamW step loop on tiny shapes, its one-line output, bad input."""

import importlib.util
import re

import pytest

from benchmarks.peers import transformers_step

# Checking for the packages without importing them keeps collection fast (the script imports torch in main).
if not (importlib.util.find_spec("torch") and importlib.util.find_spec("transformers")):
    pytest.skip("needs the hf extra (torch, transformers)", allow_module_level=True)

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


@pytest.mark.slow
def test_prints_one_throughput_line(capsys):
    import torch

    threads = torch.get_num_threads()
    try:
        transformers_step.main([*TINY, "--steps=3", "--warmup=1", "--threads=1"])
    finally:
        torch.set_num_threads(threads)
    match = re.fullmatch(
        r"transformers tokens_per_s=(\d+) \(median of 3 steps\)", capsys.readouterr().out.strip()
    )
    assert match and int(match.group(1)) > 0


def test_zero_steps_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        transformers_step.main([*TINY, "--steps=0"])
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == ""
    assert err.strip() == "error: --steps=0 and --warmup=2 must both be >= 1"
