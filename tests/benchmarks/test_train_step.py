"""The train-step benchmark: a vocabulary override keeps the body, bad arguments exit 2."""

import pytest

from apertus_jax.models import flops
from apertus_jax.models.presets import get_config
from benchmarks import train_step


def test_vocab_override_measures_the_same_body_at_that_vocabulary():
    result = train_step.measure(
        "bench-18m-apertus", steps=1, warmup=1, batch=8, seq=32, peak_gflops=1.0, vocab_size=512
    )
    small = get_config("bench-18m-apertus", vocab_size=512)
    assert result["train_flops_per_token"] == flops.train_flops_per_token(small, 32)
    assert result["train_flops_per_token"] < flops.train_flops_per_token(get_config("bench-18m-apertus"), 32)


def test_negative_vocab_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_step.main(["--vocab_size=-1"])
    assert exit_info.value.code == 2
    assert "--vocab_size=-1 must be >= 0" in capsys.readouterr().err
