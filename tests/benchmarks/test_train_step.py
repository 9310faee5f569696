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
    assert result["temp_mib"] > 0 and result["minor_faults"] >= 0


@pytest.mark.parametrize(
    "args, message",
    (
        (["--vocab_size=-1"], "--vocab_size=-1 must be >= 0"),
        (["--steps=0"], "--steps=0 and --warmup=3 must both be >= 1"),
        (["--warmup=0"], "--steps=15 and --warmup=0 must both be >= 1"),
        (["--config=nope"], "--config='nope' is not a model preset"),
    ),
)
def test_usage_errors_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_step.main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
