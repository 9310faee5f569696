"""The distillation study: a student distilled from a teacher against the same student trained from scratch on
the same tokens, over several seeds (docs/usage.md "Pretraining distillation").

    results = run_study(teacher_workdir, student_config, out, seeds=(0, 1, 2), k=32, alpha=0.9)

For each seed (the student run's `seed`: its data order and initialization) the teacher's top-k logits are
written over the student's batches (`apertus_jax.jobs.distill.write_teacher_logits`), then the student trains
twice on exactly those batches: with `alpha` (distilled) and with alpha = 0 (from scratch: the objective is then
the plain cross-entropy). Both arms read the same tokens in the same order and start from the same parameters,
so the difference is the teacher alone. The comparison is the held-out loss of the last in-loop evaluation
(each held-out set of `data.pipeline`, nats per token) and the training cross-entropy per step.

Writes `out/distill_study.json` (`RESULTS`) and `out/distill_study.png` (training cross-entropy per step, mean
over seeds, both arms), and each seed's logits and workdirs under `out/seed_S/`.
"""

from __future__ import annotations

import os
import statistics
import time

from absl import logging

from apertus_jax import files, plots
from apertus_jax.config.schema import Config
from apertus_jax.jobs.distill import distill, write_teacher_logits
from apertus_jax.records.runs import load_run

RESULTS = "distill_study.json"
PLOT = "distill_study.png"
ARMS = ("distilled", "scratch")


def _arm_result(workdir: str) -> dict:
    """The arm's per-step training cross-entropy and its last held-out losses ({set: nats per token})."""
    run = load_run(workdir)
    held_out = {k[len("eval/") : -len("/loss")]: v for k, v in run.evals[-1].items() if k.endswith("/loss")}
    return {"ce": [r["ce"] for r in run.train], "held_out_loss": held_out}


def run_study(
    teacher_workdir: str,
    config: Config,
    out: str,
    *,
    seeds: tuple[int, ...],
    k: int,
    alpha: float,
    temperature: float = 1.0,
) -> dict:
    """Runs the study (module docstring) and writes its results and plot to `out`; returns the results:
    {"seeds", "steps", "k", "alpha", "temperature", ARM: {"held_out_loss": {set: [per seed]},
    "ce": [per seed: [per step]]}, "mean_held_out_loss": {ARM: {set: mean}}, "seconds"}.

    Raises:
      ValueError: no seeds, or a student config without in-loop evaluation (`eval.every_steps` = 0); as
        `write_teacher_logits` and `distill`.
    """
    if not seeds:
        raise ValueError("--seeds names no seed; give e.g. --seeds=0,1,2")
    if not config.eval.every_steps:
        raise ValueError("the study compares held-out losses: set --config.eval.every_steps > 0")
    start, steps = time.time(), config.train.steps
    results: dict = {"seeds": list(seeds), "steps": steps, "k": k, "alpha": alpha, "temperature": temperature}
    results.update({arm: {"held_out_loss": {}, "ce": []} for arm in ARMS})
    for index, seed in enumerate(seeds):
        seeded = config.replace(seed=seed)
        root = os.path.join(out, f"seed_{seed}")
        logits = os.path.join(root, "logits")
        write_teacher_logits(teacher_workdir, seeded, logits, steps=steps, k=k)
        for arm, weight in zip(ARMS, (alpha, 0.0)):
            distill(seeded, os.path.join(root, arm), logits, alpha=weight, temperature=temperature)
            arm_result = _arm_result(os.path.join(root, arm))
            results[arm]["ce"].append(arm_result["ce"])
            for name, loss in arm_result["held_out_loss"].items():
                results[arm]["held_out_loss"].setdefault(name, []).append(loss)
        elapsed = time.time() - start
        eta = elapsed / (index + 1) * (len(seeds) - index - 1)
        logging.info(
            "distill study: seed %d done (%d of %d), %.0f s, ETA %.0f s",
            seed,
            index + 1,
            len(seeds),
            elapsed,
            eta,
        )
    results["mean_held_out_loss"] = {
        arm: {name: statistics.mean(v) for name, v in results[arm]["held_out_loss"].items()} for arm in ARMS
    }
    results["seconds"] = round(time.time() - start, 1)
    files.write_json(os.path.join(out, RESULTS), results, indent=1)
    plot(results, os.path.join(out, PLOT))
    return results


def plot(results: dict, path: str) -> None:
    """Training cross-entropy per step of both arms, mean over seeds, as a PNG."""
    fig = plots.figure((7, 4))
    ax = fig.subplots()
    for arm in ARMS:
        per_step = [statistics.mean(values) for values in zip(*results[arm]["ce"])]
        ax.plot(range(1, len(per_step) + 1), per_step, label=f"{arm} (mean of {len(results['seeds'])} seeds)")
    ax.set_xlabel("training step")
    ax.set_ylabel("training cross-entropy (nats per token)")
    ax.set_title(f"student distilled (alpha {results['alpha']}, top-{results['k']}) vs from scratch")
    ax.legend()
    plots.save(fig, path)
