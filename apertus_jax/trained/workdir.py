"""A trained model and its tokenizer from a training workdir (`experiments/pretrain.py` output).

The workdir holds `config.json` (the run config, `apertus_jax.records.config_record`) and Orbax checkpoints under
`checkpoints/`. The config is parsed like any run config, the model rebuilt from its `model` section, and the
parameters of the newest readable checkpoint restored with the trainer's `restore_workdir_params` onto one
device; the optimizer state is neither built nor read (parameters are a checkpoint item of their own).

A workdir a live run holds (the trainer's `WorkdirLock`, tested here without being taken) is read as it
stands: its newest checkpoint, with a warning that names the run and the step read; a live run that has saved
no checkpoint yet is told apart from a folder that holds no run (`WorkdirLock.held`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import jax
from absl import logging

from apertus_jax.config.schema import Config, parse_recorded
from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.models import partitioning
from apertus_jax.models.transformer import Apertus, model_from_params
from apertus_jax.records.config_record import CONFIG
from apertus_jax.records.runs import WORKDIR_FIX, check_workdir_exists
from apertus_jax.tokenizers.base import Tokenizer
from apertus_jax.train.checkpoint import WorkdirLock, hf_checkpoint_file, restore_workdir_params
from apertus_jax.train.train_state import make_abstract_params


@dataclasses.dataclass
class TrainedModel:
    """A restored run: `model` (NNX Apertus), `tokenizer`, the run's parsed `config` and the checkpoint `step`."""

    model: Apertus
    tokenizer: Tokenizer
    config: Config
    step: int


def _no_checkpoint_yet(workdir: str) -> str:
    """The message of a workdir a live run holds that has no checkpoint to read yet."""
    return (
        f"a run holds {workdir} and has saved no checkpoint yet; rerun once it has saved one (it saves every "
        "checkpoint.every_steps steps and when it stops)"
    )


def read_config(workdir: str) -> Config:
    """The parsed `config.json` of a training workdir.

    Raises:
      FileNotFoundError, NotADirectoryError: as `records.runs.check_workdir_exists`; no `config.json` or no
        `checkpoints/` (a live run that has not written them yet, or a HF checkpoint's folder, is named as
        such).
      ValueError: a `config.json` this version cannot parse.
    """
    check_workdir_exists(workdir)
    path = os.path.join(workdir, CONFIG)
    if not os.path.exists(path) or not os.path.isdir(os.path.join(workdir, "checkpoints")):
        if WorkdirLock.held(workdir):
            raise FileNotFoundError(_no_checkpoint_yet(workdir))
        weights = hf_checkpoint_file(workdir)
        if weights:
            raise FileNotFoundError(
                f"{workdir} holds a HF checkpoint ({weights}), not a training run: "
                f"{WORKDIR_FIX}; score a HF checkpoint with `python -m experiments.lm_eval run --model "
                f"apertus_jax --model_args pretrained={workdir}`"
            )
        raise FileNotFoundError(f"{workdir} has no config.json or checkpoints/: {WORKDIR_FIX}")
    with open(path) as f:
        return parse_recorded(json.load(f))


def restore_params(workdir: str, abstract_params, doing: str = "reading") -> tuple[Any, int]:
    """The parameters of the newest readable checkpoint of `workdir` on the shardings of `abstract_params`
    (`apertus_jax.train.checkpoint.restore_workdir_params`) and its step. In a workdir a live run holds
    (`WorkdirLock.held`), the newest checkpoint saved so far, with the warning `a run holds WORKDIR: <doing> its
    newest checkpoint, step N`.

    Raises:
      FileNotFoundError: no `checkpoints/` or no readable checkpoint (a live run that has saved none yet is
        named as such).
      ValueError: as `restore_workdir_params`.
    """
    try:
        params, meta = restore_workdir_params(workdir, abstract_params)
    except FileNotFoundError:
        if WorkdirLock.held(workdir):
            raise FileNotFoundError(_no_checkpoint_yet(workdir)) from None
        raise
    step = int(meta["progress"]["step"])
    if WorkdirLock.held(workdir):
        logging.warning("a run holds %s: %s its newest checkpoint, step %d", workdir, doing, step)
    return params, step


def load_workdir(workdir: str, doing: str = "reading", tokenizer: Tokenizer | None = None) -> TrainedModel:
    """The newest checkpoint of `workdir` as a model on the default device (`restore_params`: in a workdir a
    live run holds, the newest checkpoint saved so far, with a warning that names its step).

    A checkpoint that fails to restore is skipped with a warning and left in place, and the previous one is
    used.

    Args:
      doing: what the caller does with the model, for that warning ("exporting", "evaluating").
      tokenizer: the run's tokenizer where the caller has loaded it already (`run_tokenizer` of its
        `data.tokenizer`); None: loaded here.

    Raises:
      FileNotFoundError: as `read_config` and `restore_params`. ValueError: no checkpoint is readable (one
        line naming the newest).
    """
    config = read_config(workdir)
    model_config, data = config.model, config.data
    if tokenizer is None:
        tokenizer = run_tokenizer(data.tokenizer, data.demo_tokenizer_vocab)
    mesh = partitioning.make_mesh(1, 1, 1, devices=jax.devices()[:1])
    abstract_params = make_abstract_params(model_config, mesh, config.seed).abstract
    params, step = restore_params(workdir, abstract_params, doing)
    return TrainedModel(
        model=model_from_params(model_config, params), tokenizer=tokenizer, config=config, step=step
    )
