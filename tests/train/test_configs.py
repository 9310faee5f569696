"""Every shipped config loads, is locked, and validates on a mesh of the size it is meant for."""

import importlib

import pytest

from apertus_jax.train import config as config_lib

# (config module, devices it is validated on): the accelerator recipes on the pod sizes their comments name.
CONFIGS = [("tiny_demo", 1), ("tiny_resume", 2), ("apertus_8b", 256), ("apertus_70b", 1024),
           ("ablation_1p5b", 64), ("boldt_350m", 8)]


@pytest.mark.parametrize("name,devices", CONFIGS)
def test_config_validates(name, devices):
  config = importlib.import_module(f"configs.{name}").get_config()
  mesh_shape = config_lib.validate(config, devices, 1)
  assert len(mesh_shape) == 3 and mesh_shape[0] * mesh_shape[1] * mesh_shape[2] == devices
  with pytest.raises(Exception):
    config.train.not_a_field = 1  # locked: a typo in an override cannot silently add a field


def test_accelerator_recipes_accumulate_gradients():
  for name in ("apertus_8b", "apertus_70b"):
    config = importlib.import_module(f"configs.{name}").get_config()
    assert config.train.microbatch_size > 0, f"{name} would run its whole batch in one pass"
