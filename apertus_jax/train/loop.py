"""The training loop: build, restore or initialize, step, log, checkpoint, survive faults and preemption.

Order of work (every check that can fail on user input runs before anything is written):
assemble the run (`assemble.Run`: validate every section, mesh, optimizer) -> tokenizer and data (vocab fits
the model, data paths exist) -> workdir lock -> abstract state -> restore the newest readable checkpoint
(refusing one of a different model shape or layout), else initialize (randomly, or the parameters of
`checkpoint.init_from`) -> steps. A SIGTERM saves a checkpoint at the current step and returns "preempted" (the CLI exits 0).
"""

import dataclasses
import json
import os
import time

import jax
import ml_collections
import numpy as np
from absl import logging

from apertus_jax.models import flops
from apertus_jax.train.assemble import Run
from apertus_jax.train.checkpoint import Checkpointer, WorkdirLock, param_shapes, restore_workdir_params
from apertus_jax.train.faults import NonFiniteCounter, PreemptionSignal
from apertus_jax.train.metrics import MetricsWriter, mfu, peak_flops_per_device, plot_loss
from apertus_jax.train.sharding import make_global_batch


@dataclasses.dataclass
class Progress:
    """Counters saved in every checkpoint's meta. `updates` counts applied (finite) optimizer updates."""

    step: int = 0
    tokens: int = 0
    updates: int = 0
    skipped_steps: int = 0
    rollbacks: int = 0


def goldfish_dropped_fraction(batch: dict[str, np.ndarray], eod_id: int) -> float:
    """Fraction of loss positions zeroed by Goldfish: positions that are neither padding nor an EoD input
    (the only other rules that zero the loss mask, docs/recipe.md 2) and still have loss_mask 0."""
    eligible = (batch["segment_ids"] > 0) & (batch["tokens"] != eod_id)
    return float(np.sum(eligible & (batch["loss_mask"] == 0)) / max(np.sum(eligible), 1))


def _write_json_atomic(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
    os.replace(tmp, path)


def record_config(workdir: str, config_dict: dict, resumed_step: int | None) -> str:
    """Writes the run config; returns the path written.

    `config.json` describes the run that wrote the checkpoints (evaluation reads it): a fresh run writes it; a
    run resumed at step N with the same values leaves it; one resumed with other values (e.g. more
    `train.steps`) writes `config.stepN.json` beside it instead of rewriting the original.
    """
    path = os.path.join(workdir, "config.json")
    if resumed_step is not None and os.path.exists(path):
        with open(path) as f:
            if json.load(f) == json.loads(json.dumps(config_dict)):
                return path
        path = os.path.join(workdir, f"config.step{resumed_step}.json")
        logging.warning("resumed with a config that differs from config.json; recorded it in %s", path)
    _write_json_atomic(path, config_dict)
    return path


def train(config: ml_collections.ConfigDict, workdir: str) -> str:
    """Runs (or resumes) training in `workdir`; returns "done" or "preempted".

    Raises:
      ValueError / FileNotFoundError: bad config, tokenizer or data (one line, before anything is written);
        a workdir holding a checkpoint of a different model shape or layout; a missing `checkpoint.init_from`.
      WorkdirLockedError: another run holds `workdir`.
    """
    run = Run(config)
    run.warn_if_steps_end_before_cooldown()
    data_iter = run.data_iterator()
    logging.info(
        "mesh %s over %d devices (%d processes)",
        dict(run.mesh.shape),
        jax.device_count(),
        jax.process_count(),
    )

    with WorkdirLock(workdir):
        checkpointer = Checkpointer(
            os.path.join(workdir, "checkpoints"),
            run.sections.checkpoint.keep,
            run.sections.checkpoint.async_save,
        )
        restored = checkpointer.restore_latest(run.spec.abstract, data_iter)
        if restored:
            state, meta = restored
            progress = Progress(**meta["progress"])
            logging.info("resumed from step %d (%d tokens)", progress.step, progress.tokens)
        else:
            state, progress = _initial_state(run), Progress()
        if jax.process_index() == 0:
            record_config(workdir, config.to_dict(), progress.step if restored else None)
        try:
            # Under the mesh, the model's activation constraints (partitioning.constrain) take effect; without it
            # XLA picks activation shardings itself and may replicate the batch (the memory plan measured 280 GB
            # instead of 17 GB per device for apertus_8b on 1x64x1).
            with jax.set_mesh(run.mesh):
                return _run(run, workdir, data_iter, checkpointer, state, progress)
        finally:
            checkpointer.close()


def _initial_state(run: Run) -> dict:
    """Random initialization, or the parameters of `checkpoint.init_from` with a fresh optimizer state."""
    source = run.sections.checkpoint.init_from
    if not source:
        return run.spec.init()
    params, meta = restore_workdir_params(source, run.spec.abstract["params"])
    logging.info("initialized the parameters from %s (step %d)", source, meta["progress"]["step"])
    return {"params": params, "opt_state": run.spec.init_opt_state(params)}


def _run(run: Run, workdir, data_iter, checkpointer, state, progress) -> str:
    config, spec = run.config, run.spec
    total_steps = run.sections.train.steps
    metrics = MetricsWriter(workdir, total_steps, progress.step)
    counter = NonFiniteCounter(run.sections.faults.max_nonfinite_in_a_row, progress.skipped_steps)
    preemption = PreemptionSignal()
    shapes = param_shapes(spec.abstract["params"])
    flops_per_token = flops.train_flops_per_token(run.model_config, run.sections.data.seq_len)
    peak = peak_flops_per_device()
    eod_id = run.tokenizer.eod_id
    saved_step = progress.step if checkpointer.all_steps() else -1

    def save():
        nonlocal saved_step
        meta = {"progress": dataclasses.asdict(progress), "param_shapes": shapes, "seed": config.seed}
        checkpointer.save(progress.step, state, data_iter, meta)
        saved_step = progress.step

    try:
        last_time = time.time()
        while progress.step < total_steps:
            if preemption.should_stop():
                logging.warning("SIGTERM: saving a checkpoint at step %d and exiting", progress.step)
                if saved_step != progress.step:
                    save()
                checkpointer.wait()
                return "preempted"
            local_batch = next(data_iter)
            batch = make_global_batch(local_batch, run.mesh)
            rows, length = batch["tokens"].shape
            params, opt_state, step_metrics = run.train_step(rows).fn(
                state["params"], state["opt_state"], batch
            )
            state = {"params": params, "opt_state": opt_state}
            step_metrics = jax.device_get(step_metrics)
            lr = float(run.lr_schedule(progress.updates))
            finite = bool(step_metrics["finite"])
            progress.step += 1
            progress.tokens += rows * length
            progress.updates += finite
            roll_back = counter.record(finite)
            progress.skipped_steps = counter.skipped_total
            now = time.time()
            tokens_per_s = rows * length / max(now - last_time, 1e-9)
            last_time = now
            metrics.write(
                {
                    "step": progress.step,
                    "tokens": progress.tokens,
                    "seq_len": length,
                    "rope_theta": run.model_config.rope_theta,
                    "loss": float(step_metrics["loss"]),
                    "lr": lr,
                    "grad_norm": float(step_metrics["grad_norm"]),
                    "tokens_per_s": tokens_per_s,
                    "mfu": mfu(tokens_per_s, flops_per_token, jax.device_count(), peak),
                    "goldfish_dropped_fraction": goldfish_dropped_fraction(local_batch, eod_id),
                    "skipped_steps": progress.skipped_steps,
                    "rollbacks": progress.rollbacks,
                }
            )
            if roll_back:
                state, progress = _roll_back(checkpointer, spec, progress, metrics, state)
                continue
            if progress.step % run.sections.checkpoint.every_steps == 0 or progress.step == total_steps:
                save()
        checkpointer.wait()
    finally:
        preemption.restore_handler()
        metrics.close()
    if jax.process_index() == 0:
        plot_loss(metrics.path, os.path.join(workdir, "loss.png"))
    return "done"


def _roll_back(checkpointer, spec, progress, metrics, state):
    """Restores the last good checkpoint but keeps the data iterator where it is (skipping the window)."""
    checkpointer.wait()
    restored = checkpointer.restore_latest(spec.abstract, data_iter=None)
    if restored is None:
        logging.error("non-finite steps in a row but no checkpoint yet to roll back to; continuing")
        return state, progress
    new_state, meta = restored
    window = progress.step - meta["progress"]["step"]
    new_progress = Progress(**meta["progress"])
    new_progress.skipped_steps = progress.skipped_steps
    new_progress.rollbacks = progress.rollbacks + 1
    logging.warning(
        "rolled back from step %d to step %d; the %d batches in between are skipped",
        progress.step,
        new_progress.step,
        window,
    )
    metrics.rewind(new_progress.step)
    return new_state, new_progress
