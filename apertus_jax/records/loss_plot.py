"""The loss curve of a run, `<workdir>/loss.png`, drawn by a loop hook after the checkpoint of the last step,
labelled with what the run's loss is (the training cross-entropy, or a job's own objective)."""

from __future__ import annotations

import json
import os

import jax

from apertus_jax import plots
from apertus_jax.train.hooks import Hook, LoopContext

FILE = "loss.png"
LABEL = "training loss (nats/token)"


def plot_loss(metrics_path: str, png_path: str, label: str = LABEL, title: str = "") -> None:
    """Draws loss vs step from metrics.jsonl, raw and as a trailing mean over 5% of the run, into a PNG whose
    y axis is `label` (what the loss is) and whose `title` (if any) says how it is made."""
    with open(metrics_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    records = [r for r in records if "loss" in r]  # training steps (eval records have their own keys)
    steps, losses = [r["step"] for r in records], [r["loss"] for r in records]
    window = max(1, len(losses) // 20)
    smoothed = [
        sum(losses[max(0, i - window + 1) : i + 1]) / len(losses[max(0, i - window + 1) : i + 1])
        for i in range(len(losses))
    ]
    fig = plots.figure((7, 4))
    ax = fig.subplots()
    ax.plot(steps, losses, alpha=0.35, label="per step")
    ax.plot(steps, smoothed, label=f"mean of the last {window} steps")
    ax.legend()
    ax.set_xlabel("step")
    ax.set_ylabel(label)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    plots.save(fig, png_path)


class LossPlot(Hook):
    """Draws `loss.png` from the run's metrics.jsonl (process 0) once the last step is checkpointed, labelled
    `label` and titled `title` (`plot_loss`)."""

    def __init__(self, label: str = LABEL, title: str = ""):
        self.label, self.title = label, title

    def on_save(self, step: int, context: LoopContext) -> None:
        if step == context.run.config.train.steps and jax.process_index() == 0:
            workdir = context.workdir
            plot_loss(
                os.path.join(workdir, "metrics.jsonl"), os.path.join(workdir, FILE), self.label, self.title
            )
