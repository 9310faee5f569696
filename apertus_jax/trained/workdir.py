"""A trained model and its tokenizer from a training workdir (`experiments/pretrain.py` output).

The workdir holds `config.json` (the run config, `apertus_jax.records.config_record`) and Orbax checkpoints under
`checkpoints/`. The config is parsed like any run config, the model rebuilt from its `model` section, and the
parameters of the newest readable checkpoint restored with the trainer's `restore_workdir_params` onto one
device; the optimizer state is neither built nor read (parameters are a checkpoint item of their own).
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax

from apertus_jax.config.schema import Config, parse_recorded
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.models import partitioning
from apertus_jax.models.transformer import Apertus, model_from_params
from apertus_jax.records.config_record import CONFIG
from apertus_jax.records.runs import WORKDIR_FIX, check_workdir_exists
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.train.checkpoint import restore_workdir_params
from apertus_jax.train.train_state import make_abstract_params


@dataclasses.dataclass
class TrainedModel:
    """A restored run: `model` (NNX Apertus), `tokenizer`, the run's parsed `config` and the checkpoint `step`."""

    model: Apertus
    tokenizer: Tokenizer
    config: Config
    step: int


def read_config(workdir: str) -> Config:
    """The parsed `config.json` of a training workdir.

    Raises:
      FileNotFoundError, NotADirectoryError: as `records.runs.check_workdir_exists`; no `config.json` or no
        `checkpoints/`.
      ValueError: a `config.json` this version cannot parse.
    """
    check_workdir_exists(workdir)
    path = os.path.join(workdir, CONFIG)
    if not os.path.exists(path) or not os.path.isdir(os.path.join(workdir, "checkpoints")):
        raise FileNotFoundError(f"{workdir} has no config.json or checkpoints/: {WORKDIR_FIX}")
    with open(path) as f:
        return parse_recorded(json.load(f))


def load_workdir(workdir: str) -> TrainedModel:
    """The newest checkpoint of `workdir` as a model on the default device.

    A checkpoint that fails to restore is left in place with a warning and the previous one is used
    (`apertus_jax.train.checkpoint.restore_workdir_params`).

    Raises:
      FileNotFoundError: as `read_config`, or no checkpoint. ValueError: no checkpoint is readable (one line
        naming the newest).
    """
    config = read_config(workdir)
    model_config, data = config.model, config.data
    tokenizer = run_tokenizer(data.tokenizer, data.demo_tokenizer_vocab)
    mesh = partitioning.make_mesh(1, 1, 1, devices=jax.devices()[:1])
    abstract_params = make_abstract_params(model_config, mesh, config.seed).abstract
    params, meta = restore_workdir_params(workdir, abstract_params)
    return TrainedModel(
        model=model_from_params(model_config, params),
        tokenizer=tokenizer,
        config=config,
        step=int(meta["progress"]["step"]),
    )
