"""The train-step benchmark: a vocabulary override keeps the body, bad arguments exit 2."""

import pytest

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from benchmarks import step


@pytest.mark.slow
def test_vocab_override_measures_the_same_body_at_that_vocabulary():
    result = step.measure(
        "bench-18m-apertus", steps=1, warmup=1, batch=8, seq=32, peak_gflops=1.0, vocab_size=512
    )
    small = get_config("bench-18m-apertus", vocab_size=512)
    assert result["train_flops_per_token"] == flops.train_flops_per_token(small, 32)
    assert result["train_flops_per_token"] < flops.train_flops_per_token(get_config("bench-18m-apertus"), 32)
    assert result["temp_mib"] > 0 and result["minor_faults"] >= 0


@pytest.mark.parametrize(
    "kwargs, message",
    (
        ({"vocab_size": -1}, "--vocab_size=-1 must be >= 0"),
        ({"steps": 0}, "--steps=0 and --warmup=3 must both be >= 1"),
        ({"warmup": 0}, "--steps=15 and --warmup=0 must both be >= 1"),
        ({"config_name": "nope"}, "--config='nope' is not a model preset"),
    ),
)
def test_bad_arguments_are_refused_before_anything_is_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        step.measure(**{"config_name": "bench-18m-apertus", **kwargs})


def test_usage_error_exits_2_with_one_line(run_job):
    proc = run_job("benchmarks.train_step", "--config=nope")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: --config='nope' is not a model preset")
