"""Every shipped config loads, is locked, and validates on a mesh of the size it is meant for."""

import importlib
import pathlib

import numpy as np
import pytest

from apertus_jax.config.schema import apply_preset_override, parse
from apertus_jax.train.config import check_layout

# (config module, devices it is validated on): the accelerator recipes on the pod sizes their comments name.
CONFIGS = [
    ("runs.tiny_demo", 1),
    ("runs.tiny_own_data", 1),
    ("runs.tiny_resume", 2),
    ("runs.apertus_8b", 256),
    ("runs.apertus_8b_continued", 256),
    ("runs.apertus_70b", 1024),
    ("runs.ablation_1p5b", 64),
    ("runs.boldt_350m", 8),
    ("runs.tiny_long_context", 1),
    ("runs.apertus_8b_long_context", 64),
    ("runs.apertus_8b_262k", 64),
    ("runs.apertus_70b_262k", 256),
    ("runs.apertus_70b_long_context", 256),
    ("posttrain.sft_tiny", 1),
    ("posttrain.qrpo_tiny", 1),
]
KINDS = ("runs", "recipes", "ablations", "studies", "posttrain", "prep")
# The argument of a config that needs one (`--config=PATH:ARG`).
ARGUMENTS = {"runs.tiny_own_data": ("/data/my_shards",)}


@pytest.mark.parametrize("name,devices", CONFIGS)
def test_config_validates(name, devices):
    config = importlib.import_module(f"configs.{name}").get_config(*ARGUMENTS.get(name, ()))
    mesh_shape = check_layout(parse(config), devices, 1)
    assert len(mesh_shape) == 4 and int(np.prod(mesh_shape)) == devices  # (data, fsdp, tensor, context)
    with pytest.raises(Exception):
        config.train.not_a_field = 1  # locked: a typo in an override cannot silently add a field


def test_accelerator_recipes_accumulate_gradients():
    for name in ("runs.apertus_8b", "runs.apertus_70b"):
        config = importlib.import_module(f"configs.{name}").get_config()
        assert config.train.microbatch_size > 0, f"{name} would run its whole batch in one pass"


def test_preset_override_replaces_the_model_section_and_keeps_field_overrides():
    config = importlib.import_module("configs.runs.tiny_demo").get_config()
    config.model.preset, config.model.vocab_size = "tiny-llama", 4096  # as absl applies the overrides
    apply_preset_override(
        config, ["pretrain", "--config.model.preset=tiny-llama", "--config.model.vocab_size=4096"]
    )
    model = parse(config).model
    assert (model.mlp_type, model.qk_norm, model.vocab_size) == ("swiglu", False, 4096)
    config.model.preset = "no-such-model"
    with pytest.raises(ValueError, match="tiny-llama"):
        apply_preset_override(config, ["--config.model.preset=no-such-model"])


def test_without_a_preset_override_the_model_section_is_untouched():
    config = importlib.import_module("configs.runs.tiny_demo").get_config()
    before = config.model.to_dict()
    apply_preset_override(config, ["--config.model.n_layers=2", "--config.train.steps=3"])
    assert config.model.to_dict() == before


def test_configs_live_in_folders_by_kind_and_no_two_share_a_name():
    root = pathlib.Path(__file__).parents[2] / "configs"
    files = [p for p in root.rglob("*.py") if p.name != "__init__.py"]
    assert {p.parent.name for p in files} == set(KINDS)  # nothing at the top level, every folder in use
    names = [p.stem for p in files]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    listed = {name for name, _ in CONFIGS}
    runs = {f"{p.parent.name}.{p.stem}" for p in files if p.parent.name in ("runs", "posttrain")}
    assert runs == listed  # every run config is checked above


def test_the_own_data_config_reads_its_shard_sets_and_nothing_of_the_demo():
    own = importlib.import_module("configs.runs.tiny_own_data")
    run = parse(own.get_config("/data/a,/data/b"))
    (spec,) = run.data.pipeline.components.values()
    assert (spec.kind, spec.paths, run.data.tokenizer) == ("arrayrecord", ("/data/a", "/data/b"), "demo")
    assert parse(own.get_config("/data/a")).eval.every_steps == 0
    with pytest.raises(ValueError, match="needs your shard set"):
        own.get_config()
