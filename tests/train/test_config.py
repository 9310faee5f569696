"""The trainer's typed config: sections check themselves, `check_layout` the rules that need devices."""

import dataclasses

import pytest

from apertus_jax.data.config import DataConfig
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.train.config import RunConfig, TrainConfig, check_layout


def _config(**sections) -> RunConfig:
    return RunConfig(data=DataConfig(seq_len=128), **sections)


def test_defaults_are_the_tiny_demo_run_and_resolve_the_mesh():
    config = RunConfig()
    assert config.model.n_layers == 2 and config.data.pipeline.components["demo"].kind == "demo"
    assert check_layout(config, 8, 1) == (8, 1, 1, 1)
    assert config.train.plan.batch_tokens_at_step(0) == 16 * 128
    assert config.to_dict()["data"]["pipeline"]["goldfish"] == {"k": 50, "h": 50, "hash": "apertus"}


@pytest.mark.parametrize(
    "sections, devices, processes, message",
    [
        ({"train": TrainConfig(batch_plan=((0, 100),))}, 1, 1, "not a multiple of data.seq_len=128"),
        ({"train": TrainConfig(batch_plan=((0, 6 * 128),))}, 4, 1, "not divisible by the data\\*fsdp"),
        ({"train": TrainConfig(microbatch_size=3)}, 1, 1, "train.microbatch_size=3 must divide"),
        ({"mesh": MeshConfig(data=1, context=3)}, 3, 1, "does not split over mesh.context=3"),
        ({}, 8, 3, "multiple of the 3 processes"),
    ],
)
def test_layout_rules_fail_in_one_line(sections, devices, processes, message):
    config = _config(**sections)
    if processes > 1:
        config = config.replace(data=dataclasses.replace(config.data, num_shards=4))
    with pytest.raises(ValueError, match=message):
        check_layout(config, devices, processes)


def test_sections_check_themselves():
    with pytest.raises(ValueError, match="train.steps must be a positive integer"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        RunConfig(seed=-1)
    assert TrainConfig(batch_plan=[[0, 2048], [4096, 4096]]).batch_plan == ((0, 2048), (4096, 4096))
