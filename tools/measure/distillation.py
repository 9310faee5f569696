"""The distillation figures of docs/usage.md: the demo run as the teacher, then `experiments.distill_study`
(a one-layer student distilled vs from scratch, three seeds), from the distill_study.json it writes.

    values = measure_distill_study(REPO, scratch)
"""

from __future__ import annotations

import json
import os
import statistics

from tools.measure import commands, demo

DISTILL_STUDY_RUN = (
    "python -m experiments.distill_study --teacher=/tmp/apertus_demo --config=configs/runs/tiny_demo.py "
    "--config.model.n_layers=1 --config.train.steps=100 --out=/tmp/distill_study"
)


def measure_distill_study(root: str, scratch: str) -> dict:
    """The demo run (the teacher), then the study; redraws docs/figures/distill_study.png.

    Returns:
      wall_seconds (the study's), steps, k, alpha, seeds; for ARM of distilled, scratch and each held-out SET
      of the demo pipeline ("/" written "_"): ARM.SET_loss (mean over seeds, nats per token) and
      ARM.SET_losses (per seed);
      ARM.final_ce (the last step's training cross-entropy, mean over seeds).

    Raises:
      ChildProcessError: a command failed.
    """
    commands.documented(demo.DEMO_RUN, root, scratch, {})
    wall = commands.documented(DISTILL_STUDY_RUN, root, scratch, {})
    out = os.path.join(scratch, "distill_study")
    with open(os.path.join(out, "distill_study.json")) as f:
        study = json.load(f)
    values = {"wall_seconds": round(wall, 1), **{k: study[k] for k in ("steps", "k", "alpha", "seeds")}}
    for arm in ("distilled", "scratch"):
        means = study["mean_held_out_loss"][arm]
        arm_values = {f"{_key(name)}_loss": means[name] for name in means}
        arm_values.update({f"{_key(name)}_losses": v for name, v in study[arm]["held_out_loss"].items()})
        arm_values["final_ce"] = statistics.mean(ce[-1] for ce in study[arm]["ce"])
        values[arm] = arm_values
    commands.figure(os.path.join(out, "distill_study.png"), root, "distill_study.png")
    return values


def _key(held_out_set: str) -> str:
    """A held-out set's name as a value name (`unseen_languages/udhr` -> `unseen_languages_udhr`)."""
    return held_out_set.replace("/", "_")
