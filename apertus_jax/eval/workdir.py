"""Restore a trained model and its tokenizer from a training workdir (`experiments/pretrain.py` output).

The workdir holds `config.json` (the run config) and Orbax checkpoints under `checkpoints/`. The model is
rebuilt from the config, and the newest readable checkpoint is restored with the trainer's own
`Checkpointer` onto one device (the optimizer state is restored too, as the trainer stores both together,
and then dropped).
"""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import ml_collections
from flax import nnx

from apertus_jax.models import partitioning
from apertus_jax.models.transformer import Apertus, create_model
from apertus_jax.optim import BatchSizePlan
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.train import config as config_lib
from apertus_jax.train import inputs
from apertus_jax.train.checkpoint import Checkpointer
from apertus_jax.train.loop import make_lr_schedule, make_tx
from apertus_jax.train.train_state import make_train_state_spec


@dataclasses.dataclass
class TrainedModel:
    """A restored run: `model` (NNX Apertus), `tokenizer`, the run `config` and the checkpoint `step`."""
    model: Apertus
    tokenizer: Tokenizer
    config: ml_collections.ConfigDict
    step: int


def load_workdir(workdir: str) -> TrainedModel:
    """The newest checkpoint of `workdir` as a model on the default device.

    Raises:
      FileNotFoundError: no `config.json` or no readable checkpoint (the message says how to make one).
    """
    config_path = os.path.join(workdir, "config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{config_path} not found: --workdir must be a directory written by "
                                "`python -m experiments.pretrain --workdir=...`")
    with open(config_path) as f:
        config = ml_collections.ConfigDict(json.load(f))
    model_config = config_lib.model_config(config)
    tokenizer = inputs.load_run_tokenizer(config.data)
    tx = make_tx(config.optim, make_lr_schedule(config.optim, BatchSizePlan(config.train.batch_plan)))
    mesh = partitioning.make_mesh(1, 1, 1, devices=jax.devices()[:1])
    spec = make_train_state_spec(model_config, tx, mesh, config.seed)
    checkpointer = Checkpointer(os.path.join(workdir, "checkpoints"), keep=config.checkpoint.keep,
                                async_save=False)
    try:
        restored = checkpointer.restore_latest(spec.abstract)
    finally:
        checkpointer.close()
    if restored is None:
        raise FileNotFoundError(f"no readable checkpoint under {workdir}/checkpoints; train first "
                                f"(`python -m experiments.pretrain --workdir={workdir}`)")
    state, meta = restored
    model = create_model(model_config)
    params = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(params, state["params"])
    nnx.update(model, params)
    return TrainedModel(model=model, tokenizer=tokenizer, config=config, step=int(meta["progress"]["step"]))
