"""Optional Weights & Biases logging of the training scalars (`--config.metrics.wandb_project=NAME`).

`MetricsWriter` forwards every metrics.jsonl record here when `metrics.wandb_project` is set: each numeric
value except "step" is logged as `train/<key>` (the TensorBoard tag) at W&B step = the training step.

Resume: the W&B run id is kept in `WORKDIR/wandb_run_id`, so a restarted run continues the same W&B run
(`wandb.init(id=..., resume="allow")`). W&B's history only grows: steps logged between the last checkpoint
and a crash are not removed, and W&B drops the re-logged ones (a step not above its last). A resumed run
recomputes those steps bit for bit (the trainer's exact resume), so nothing is lost; after a
non-finite rollback the W&B curve keeps the first attempt, metrics.jsonl the second.

Offline: with `WANDB_MODE=offline` the run is written under `WORKDIR/wandb/offline-run-*` (upload later with
`wandb sync`); every resumed process writes one more such directory with the same run id. The `wandb`
package is optional (`pip install -e '.[wandb]'`); without `metrics.wandb_project` it is never imported.
"""

from __future__ import annotations

import os
import secrets
import string

from apertus_jax import files

RUN_ID_FILE = "wandb_run_id"


def check_wandb_config(metrics_config) -> None:
    """Up-front check of the `metrics` config section (before anything is written).

    Raises:
      ValueError: `wandb_project` is set but the `wandb` package is not installed.
    """
    if not metrics_config.wandb_project:
        return
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise ValueError(
            f"metrics.wandb_project={metrics_config.wandb_project!r} needs the wandb package: "
            "pip install -e '.[wandb]' (or leave metrics.wandb_project empty)"
        ) from None


def run_id(workdir: str) -> str:
    """The W&B run id of `workdir`: read from `WORKDIR/wandb_run_id`, or a new one written there atomically."""
    path = os.path.join(workdir, RUN_ID_FILE)
    if os.path.exists(path):
        with open(path) as f:
            existing = f.read().strip()
        if existing:
            return existing
    # 8 characters of [a-z0-9], the alphabet and length of the ids W&B generates itself.
    new_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
    files.write_text(path, new_id + "\n")
    return new_id


class WandbWriter:
    """One W&B run per workdir, resumed across restarts (see the module docstring).

    Args:
      workdir: the training workdir (holds the run id file and, offline, the run files).
      project: W&B project name.
      run_config: the run config (a JSON-like dict) shown as the W&B run config.
    """

    def __init__(self, workdir: str, project: str, run_config: dict | None = None):
        import wandb

        self.run_id = run_id(workdir)
        self._run = wandb.init(
            project=project,
            id=self.run_id,
            resume="allow",
            dir=workdir,
            name=os.path.basename(os.path.abspath(workdir)),
            config=run_config,
        )

    def log(self, record: dict) -> None:
        """Log the numeric values of a metrics.jsonl `record` (must hold "step") at its step."""
        scalars = {
            f"train/{key}": value
            for key, value in record.items()
            if key != "step" and isinstance(value, (int, float))
        }
        self._run.log(scalars, step=int(record["step"]))

    def close(self) -> None:
        self._run.finish()
