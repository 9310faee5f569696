"""Restore a trained model and its tokenizer from a training workdir (`experiments/pretrain.py` output).

The workdir holds `config.json` (the run config) and Orbax checkpoints under `checkpoints/`. The model is
rebuilt from the config, and the parameters of the newest readable checkpoint are restored with the
trainer's own `Checkpointer` onto one device; the optimizer state is neither built nor read (parameters
are a checkpoint item of their own).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import jax
import ml_collections
from flax import nnx

from apertus_jax.models import partitioning
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.transformer import Apertus
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.train import config as config_lib
from apertus_jax.train import inputs
from apertus_jax.train.checkpoint import restore_workdir_params
from apertus_jax.train.train_state import make_param_spec


@dataclasses.dataclass
class TrainedModel:
    """A restored run: `model` (NNX Apertus), `tokenizer`, the run `config` and the checkpoint `step`."""

    model: Apertus
    tokenizer: Tokenizer
    config: ml_collections.ConfigDict
    step: int


def load_workdir(workdir: str) -> TrainedModel:
    """The newest checkpoint of `workdir` as a model on the default device.

    A checkpoint that fails to restore is moved aside by the trainer's `Checkpointer` (as a resumed run
    would do) and the previous one is used.

    Raises:
      FileNotFoundError: no `config.json`, no `checkpoints/` or no readable checkpoint.
    """
    config_path = os.path.join(workdir, "config.json")
    if not os.path.exists(config_path) or not os.path.isdir(os.path.join(workdir, "checkpoints")):
        raise FileNotFoundError(
            f"{workdir} has no config.json or checkpoints/: --workdir must be a directory written by "
            "`python -m experiments.pretrain --workdir=...`"
        )
    with open(config_path) as f:
        config = ml_collections.ConfigDict(json.load(f))
    model_config = config_lib.model_config(config)
    tokenizer = inputs.load_run_tokenizer(config.data)
    mesh = partitioning.make_mesh(1, 1, 1, devices=jax.devices()[:1])
    abstract_params = make_param_spec(model_config, mesh, config.seed).abstract
    params, meta = restore_workdir_params(workdir, abstract_params)
    return TrainedModel(
        model=model_from_params(model_config, params),
        tokenizer=tokenizer,
        config=config,
        step=int(meta["progress"]["step"]),
    )


def model_from_params(model_config: ModelConfig, params: dict) -> Apertus:
    """An `Apertus` holding `params`, the trainer's plain nested dict of parameters
    (`nnx.state(model, nnx.Param).to_pure_dict()` layout); nothing is initialized or compiled."""
    graphdef, state = _abstract_model(model_config)
    state = jax.tree.map(lambda x: x, state)  # a fresh copy: the cached abstract state stays untouched
    nnx.replace_by_pure_dict(state, params)
    return nnx.merge(graphdef, state)


@functools.cache
def _abstract_model(model_config: ModelConfig):
    return nnx.split(nnx.eval_shape(lambda: Apertus(model_config, rngs=nnx.Rngs(0))), nnx.Param)
