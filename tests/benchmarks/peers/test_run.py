"""Peer runners: MaxText log parsing, the shapes passed to each peer, interpreter discovery."""

import statistics
import sys

import pytest

from apertus_jax.models.presets import get_config
from benchmarks.peers import run


def maxtext_log(tokens_per_s):
    """Lines in MaxText's per-step log format."""
    return "\n".join(
        f"completed step: {i}, seconds: {1024 / v:.3f}, TFLOP/s/device: 0.070, Tokens/s/device: {v:.3f}, "
        f"total_weights: 1024, loss: {10.4 - 0.01 * i:.3f}"
        for i, v in enumerate(tokens_per_s)
    )


def test_median_uses_only_the_last_steps():
    compile_steps = [12.5, 300.0, 310.0, 320.0, 330.0]  # the first step compiles
    timed = [1000.0 + 7 * i for i in range(15)]
    median, count = run.median_tokens_per_s(f"I1201 loading\n{maxtext_log(compile_steps + timed)}\n", 15)
    assert count == 15
    assert median == statistics.median(timed) == 1049.0


def test_median_of_a_short_log_counts_what_is_there():
    assert run.median_tokens_per_s(maxtext_log([900.0, 1100.0, 1000.0]), 15) == (1000.0, 3)


def test_log_without_throughput_is_an_error():
    with pytest.raises(RuntimeError, match="Tokens/s/device"):
        run.median_tokens_per_s("Traceback (most recent call last):\nImportError: no module", 15)


@pytest.mark.parametrize("preset", ["bench-18m-llama", "bench-18m-apertus"])
def test_peer_shapes_match_our_bench_presets(preset):
    config = get_config(preset)
    shapes = run.BENCH_18M
    assert (config.vocab_size, config.d_model, config.n_layers) == (
        shapes["vocab"],
        shapes["d_model"],
        shapes["layers"],
    )
    assert (config.n_heads, config.n_kv_heads, config.head_dim) == (
        shapes["heads"],
        shapes["kv_heads"],
        shapes["head_dim"],
    )
    expected_mlp = run.MAXTEXT_MLP if preset.endswith("llama") else run.APERTUS_MLP
    assert config.mlp_hidden == expected_mlp


def test_maxtext_args_set_the_llama2_block_and_step_count():
    args = dict(a.split("=", 1) for a in run.maxtext_args("/tmp/mt", 20))
    assert args["decoder_block"] == "llama2" and args["dataset_type"] == "synthetic"
    assert args["steps"] == "20" and args["dtype"] == "float32"
    assert (args["base_emb_dim"], args["base_mlp_dim"], args["base_num_decoder_layers"]) == (
        "256",
        "1024",
        "2",
    )
    assert int(args["per_device_batch_size"]) * int(args["max_target_length"]) == 1024


def _interpreter(path, answer: str) -> str:
    """A stand-in interpreter at `path` that answers `answer` to any command (no Python is started)."""
    path.write_text(f"#!/bin/sh\n{answer}\n")
    path.chmod(0o755)
    return str(path)


def test_python_version_of_an_interpreter_and_of_one_that_does_not_run(tmp_path):
    assert run.python_version(_interpreter(tmp_path / "python3", "echo 3 12")) == (3, 12)
    assert run.python_version(_interpreter(tmp_path / "broken", "exit 1")) is None
    assert run.python_version(str(tmp_path / "nonexistent")) is None


def test_find_python_honours_the_minimum(tmp_path, monkeypatch):
    """This interpreter first, then python3.X on PATH, then pyenv's; none new enough names the flag."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "pyenv" / "versions" / "3.14.0" / "bin").mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", _interpreter(tmp_path / "this", "echo 3 11"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    on_path = _interpreter(tmp_path / "bin" / "python3.12", "echo 3 12")
    pyenv = _interpreter(tmp_path / "pyenv" / "versions" / "3.14.0" / "bin" / "python3", "echo 3 14")
    assert run.find_python((3, 11)) == sys.executable
    assert run.find_python((3, 12)) == on_path
    assert run.find_python((3, 13)) == pyenv
    with pytest.raises(RuntimeError, match="--maxtext_python"):
        run.find_python((3, 99))
