"""The `posttrain` section: defaults, one-line errors for bad values."""

import pytest

from apertus_jax.posttrain.config import PosttrainConfig, section


def test_defaults_are_the_apertus_qrpo_settings():
    assert section() == {
        "objective": "lm",
        "beta": 5.0,
        "length_normalized": True,
        "reference": "cached",
        "reference_cache": "",
        "reference_workdir": "",
    }


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("objective", "ppo", "posttrain.objective must be one of"),
        ("reference", "live", "posttrain.reference must be one of"),
        ("beta", 0.0, "posttrain.beta must be a number > 0"),
        ("length_normalized", "yes", "posttrain.length_normalized must be True or False"),
    ],
)
def test_bad_values_fail_in_one_line(field, value, message):
    with pytest.raises(ValueError, match=message) as error:
        PosttrainConfig(**{**section(), field: value})
    assert "\n" not in str(error.value)
