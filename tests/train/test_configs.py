"""Every shipped config loads, is locked, and validates on a mesh of the size it is meant for."""

import importlib

import numpy as np
import pytest

from apertus_jax.train import config as config_lib

# (config module, devices it is validated on): the accelerator recipes on the pod sizes their comments name.
CONFIGS = [
    ("tiny_demo", 1),
    ("tiny_resume", 2),
    ("apertus_8b", 256),
    ("apertus_70b", 1024),
    ("ablation_1p5b", 64),
    ("boldt_350m", 8),
    ("tiny_long_context", 1),
    ("apertus_8b_long_context", 64),
    ("apertus_70b_long_context", 256),
]


@pytest.mark.parametrize("name,devices", CONFIGS)
def test_config_validates(name, devices):
    config = importlib.import_module(f"configs.{name}").get_config()
    mesh_shape = config_lib.validate(config, devices, 1)
    assert len(mesh_shape) == 4 and int(np.prod(mesh_shape)) == devices  # (data, fsdp, tensor, context)
    with pytest.raises(Exception):
        config.train.not_a_field = 1  # locked: a typo in an override cannot silently add a field


def test_accelerator_recipes_accumulate_gradients():
    for name in ("apertus_8b", "apertus_70b"):
        config = importlib.import_module(f"configs.{name}").get_config()
        assert config.train.microbatch_size > 0, f"{name} would run its whole batch in one pass"


def test_preset_override_replaces_the_model_section_and_keeps_field_overrides():
    config = importlib.import_module("configs.tiny_demo").get_config()
    config.model.preset, config.model.vocab_size = "tiny-llama", 4096  # as absl applies the overrides
    config_lib.apply_preset_override(
        config, ["pretrain", "--config.model.preset=tiny-llama", "--config.model.vocab_size=4096"]
    )
    model = config_lib.model_config(config)
    assert (model.mlp_type, model.qk_norm, model.vocab_size) == ("swiglu", False, 4096)
    config.model.preset = "no-such-model"
    with pytest.raises(ValueError, match="tiny-llama"):
        config_lib.apply_preset_override(config, ["--config.model.preset=no-such-model"])


def test_without_a_preset_override_the_model_section_is_untouched():
    config = importlib.import_module("configs.tiny_demo").get_config()
    before = config.model.to_dict()
    config_lib.apply_preset_override(config, ["--config.model.n_layers=2", "--config.train.steps=3"])
    assert config.model.to_dict() == before
