"""A run's workdir read back: that it exists, and its metrics (`metrics.jsonl`) with its planned steps.

    runs = load_runs(["/tmp/ablation"])          # every workdir at or below the paths
    run.smoothed_loss(), run.tokens, run.finished

A workdir called `seed<N>` belongs to the variant named by its parent folder (the layout of
`apertus_jax.studies.ablations.ablate`); any other workdir is its own variant.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np

from apertus_jax.records.config_record import newest_config

# The fix of a --workdir that holds no training run.
WORKDIR_FIX = "--workdir must be a directory written by `python -m experiments.pretrain --workdir=...`"


def check_workdir_exists(workdir: str) -> None:
    """Raises unless `workdir` is an existing directory (a job reading a run's workdir calls this first).

    Raises:
      FileNotFoundError: `workdir` does not exist.
      NotADirectoryError: `workdir` is a file.
    """
    if not os.path.exists(workdir):
        raise FileNotFoundError(f"workdir {workdir} does not exist: {WORKDIR_FIX}")
    if not os.path.isdir(workdir):
        raise NotADirectoryError(f"workdir {workdir} is a file, not a directory: {WORKDIR_FIX}")


SMOOTHING_FRACTION = 0.1


@dataclasses.dataclass
class RunRecords:
    """One workdir's metrics: `variant`, `seed` label, training records and eval records (dicts), and the
    `train.steps` of its newest recorded config (None: the workdir records none)."""

    path: str
    variant: str
    seed: str
    train: list[dict]
    evals: list[dict]
    planned_steps: int | None = None

    @property
    def finished(self) -> bool:
        """Whether the run has training records up to its planned steps (any, when it records no config)."""
        return bool(self.train) and self.train[-1]["step"] >= (self.planned_steps or 0)

    @property
    def tokens(self) -> np.ndarray:
        """[steps] float64: the training tokens seen after each training record."""
        return np.asarray([r["tokens"] for r in self.train], np.float64)

    def smoothed_loss(self) -> np.ndarray:
        """[steps] float64: the training loss (nats/token) as a trailing mean over the last
        `SMOOTHING_FRACTION` of the run's steps (at least one)."""
        losses = np.asarray([r["loss"] for r in self.train], np.float64)
        window = max(1, int(round(len(losses) * SMOOTHING_FRACTION)))
        cumulative = np.concatenate([[0.0], np.cumsum(losses)])
        starts = np.maximum(np.arange(1, len(losses) + 1) - window, 0)
        return (cumulative[1:] - cumulative[starts]) / (np.arange(1, len(losses) + 1) - starts)


def run_dirs(paths: list[str]) -> list[str]:
    """Workdirs (folders with metrics.jsonl) at or below `paths`, sorted within each path.

    Raises:
      FileNotFoundError: a path that holds no run.
    """
    found = []
    for path in paths:
        here = sorted(root for root, _, names in os.walk(path) if "metrics.jsonl" in names)
        if not here:
            raise FileNotFoundError(
                f"{path} holds no metrics.jsonl: pass run workdirs or their parent folder"
            )
        found += here
    return found


def load_run(path: str) -> RunRecords:
    """The records of one workdir, named as in the module docstring."""
    with open(os.path.join(path, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.endswith("\n")]
    name = os.path.basename(os.path.normpath(path))
    if re.fullmatch(r"seed\d+", name):
        variant, seed = os.path.basename(os.path.dirname(os.path.normpath(path))), name
    else:
        variant, seed = name, "seed?"
    train = [r for r in records if "loss" in r]
    evals = [r for r in records if any(k.startswith("eval/") for k in r)]
    config = newest_config(path)
    return RunRecords(path, variant, seed, train, evals, config["train"]["steps"] if config else None)


def load_runs(paths: list[str]) -> list[RunRecords]:
    """`load_run` of every workdir at or below `paths` (raises as `run_dirs`)."""
    return [load_run(p) for p in run_dirs(paths)]
