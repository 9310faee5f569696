"""The `posttrain` section: defaults, one-line errors for bad values."""

import pytest

from apertus_jax.posttrain.config import PosttrainConfig, section


def test_defaults_are_the_apertus_qrpo_settings():
    assert section() == {
        "data": (),
        "objective": "lm",
        "beta": 5.0,
        "length_normalized": True,
        "qrpo_variant": "exact",
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
        ("qrpo_variant", "trl", "posttrain.qrpo_variant must be one of"),
        ("qrpo_variant", "apertus_trainer", "applies to objective 'qrpo' only \\(objective is 'lm'\\)"),
        ("data", "chat.jsonl", "posttrain.data='chat.jsonl' must be a list of JSONL paths"),
        ("data", ("",), "must be a list of JSONL paths"),
    ],
)
def test_bad_values_fail_in_one_line(field, value, message):
    with pytest.raises(ValueError, match=message) as error:
        PosttrainConfig(**{**section(), field: value})
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("objective", ["qrpo", "dpo"])
def test_preference_objectives_need_data(objective):
    with pytest.raises(ValueError, match="needs preference records: set posttrain.data") as error:
        PosttrainConfig(objective=objective)
    assert str(error.value) == (
        f"posttrain.objective={objective!r} needs preference records: set posttrain.data"
    )
    assert PosttrainConfig(objective=objective, data=["prefs.jsonl"]).data == ("prefs.jsonl",)
