"""The config listing is the schema's: every field of `base_config()` with its value, the annotation of its
section dataclass, the range its section's check states and the meaning its docstring gives."""

import ml_collections
import pytest

from apertus_jax.config.fields import config_fields, format_fields, meaning
from apertus_jax.config.schema import base_config, key_paths
from apertus_jax.train.config import TrainConfig


def leaves(config: ml_collections.ConfigDict) -> set[str]:
    """The leaf keys of the schema, `data.pipeline` as one."""
    paths = {k for k in key_paths(config) if not k.startswith("data.pipeline.")}
    return {k for k in paths if not any(other.startswith(k + ".") for other in paths)}


def value_at(config: ml_collections.ConfigDict, key: str):
    node = config.to_dict()
    for part in key.split("."):
        node = node[part]
    return node


def test_the_listing_is_every_field_of_base_config_with_its_default():
    config = base_config()
    fields = config_fields(config)
    assert [f.key for f in fields] == sorted(f.key for f in fields)
    assert {f.key for f in fields} == leaves(config) and len(fields) == len(leaves(config))
    for field in fields:
        assert field.value == value_at(config, field.key), field.key
        assert field.type and field.meaning, field
        assert "\n" not in field.meaning and not field.meaning.startswith("The `"), field


@pytest.mark.parametrize(
    "key, kind, value_range",
    [
        ("train.steps", "int", "a positive integer"),
        ("train.spike_ema_decay", "float", "a number in [0, 1)"),
        ("optim.name", "str", "one of ('adamw', 'ademamix', 'lion', 'muon')"),
        ("optim.schedule", "str", "one of ('wsd', 'cosine')"),
        ("optim.decay_shape", "str", "one of ('1-sqrt', 'linear', 'cosine')"),
        ("model.n_layers", "int", "a positive integer"),
        ("model.dtype", "str", "one of ('float32', 'bfloat16', 'float64')"),
        ("data.seq_len", "int", "an integer >= 2"),
        ("checkpoint.async_save", "bool", "True or False"),
        ("posttrain.data", "tuple[str, ...]", ""),
        ("data.tokenizer", "str", ""),
        ("seed", "int", "an integer >= 0"),
        ("mesh.data", "int", "a positive integer or -1 (fill)"),
    ],
)
def test_types_and_ranges_are_those_of_the_sections(key, kind, value_range):
    (field,) = [f for f in config_fields(base_config()) if f.key == key]
    assert (field.type, field.range) == (kind, value_range)


def test_meanings_are_the_docstrings_entries():
    fields = {f.key: f for f in config_fields(base_config())}
    assert meaning(TrainConfig, "steps") == "optimizer steps of the run (the run stops after step `steps`)"
    assert fields["train.steps"].meaning == meaning(TrainConfig, "steps")
    assert fields["optim.b3"].meaning.startswith("AdEMAMix moments")  # a shared entry `b1, b2, b3, ...: text`
    assert fields["model.rope_theta"].meaning.startswith("base theta")  # a pattern entry `rope_*: text`
    assert fields["posttrain.beta"].meaning.startswith("QRPO's b / DPO's beta")  # the module's aligned table
    assert fields["faults.max_nonfinite_in_a_row"].meaning.startswith("`max_nonfinite_in_a_row` non-finite")


def test_the_listing_shows_a_config_s_own_values():
    config = base_config()
    config.train.steps = 20
    text = format_fields(config_fields(config))
    assert "--config.train.steps=20  (int; a positive integer)\n    optimizer steps of the run" in text
    assert "--config.optim.name='ademamix'  (str; one of ('adamw', 'ademamix', 'lion', 'muon'))" in text
    assert max(len(line) for line in text.splitlines() if line.startswith("    ")) <= 114
