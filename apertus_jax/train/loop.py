"""The training loop: build, restore or initialize, step, log, checkpoint, survive faults and preemption.

Order of work (every check that can fail on user input runs before anything is written):
assemble the run (`assemble.Run`: validate every section, mesh, optimizer) -> tokenizer and data (vocab fits
the model, data paths exist) -> workdir lock -> abstract state -> restore the newest readable checkpoint
(refusing one of a different model shape or layout), else initialize (randomly, or the parameters of
`checkpoint.init_from`) -> steps. A SIGTERM or SIGINT (Ctrl-C) saves a checkpoint at the
current step and returns "preempted" (the CLI exits 0).
"""

import dataclasses
import json
import os
import time

import jax
import ml_collections
import numpy as np
from absl import logging

from apertus_jax.data.injection import write_manifest
from apertus_jax.models import flops
from apertus_jax.train import evaluation, provenance
from apertus_jax.train.assemble import Run
from apertus_jax.train.checkpoint import Checkpointer, WorkdirLock, param_shapes, restore_workdir_params
from apertus_jax.train.faults import NonFiniteCounter, PreemptionSignal
from apertus_jax.train.metrics import MetricsWriter, mfu, peak_flops_per_device, plot_loss
from apertus_jax.train.prefetch import Prefetcher
from apertus_jax.train.profiling import StepProfiler
from apertus_jax.train.sharding import make_global_batch
from apertus_jax.train.workdir_access import check_workdir_usable

STEP_METRICS = ("loss", "z_loss", "grad_norm", "clipped", "unmasked_tokens", "finite", "spike_skipped")


@dataclasses.dataclass
class Progress:
    """Counters saved in every checkpoint's meta. `updates` counts applied optimizer updates (finite and not
    dropped by the spike guard); `clipped_steps` steps whose gradient norm exceeded `optim.clip_norm`."""

    step: int = 0
    tokens: int = 0
    updates: int = 0
    skipped_steps: int = 0
    rollbacks: int = 0
    clipped_steps: int = 0
    spike_skipped_steps: int = 0
    evaluated_step: int = 0  # the last step whose in-loop eval was recorded (train/evaluation.py)


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
    check_workdir_usable(workdir)  # before devices and the mesh start
    run = Run(config)
    run.warn_if_steps_end_before_cooldown()
    data_iter = Prefetcher(run.data_iterator(), run.sections.train.prefetch_batches)
    init_from = run.sections.checkpoint.init_from
    if init_from and not os.path.isdir(os.path.join(init_from, "checkpoints")):
        raise FileNotFoundError(
            f"checkpoint.init_from={init_from} has no checkpoints/: it must be a workdir written by "
            "`python -m experiments.pretrain` (or leave checkpoint.init_from empty)"
        )
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
        provenance.record(workdir, config, data_iter, progress.step)
        try:
            # Under the mesh, the model's activation constraints (partitioning.constrain) take effect; without it
            # XLA picks activation shardings itself and may replicate the batch (the memory plan measured 280 GB
            # instead of 17 GB per device for apertus_8b on 1x64x1).
            with jax.set_mesh(run.mesh):
                return _run(run, workdir, data_iter, checkpointer, state, progress)
        finally:
            checkpointer.close()
            data_iter.close()


def _initial_state(run: Run) -> dict:
    """Random initialization, or the parameters of `checkpoint.init_from` with a fresh optimizer state."""
    source = run.sections.checkpoint.init_from
    if not source:
        return run.spec.init()
    params, meta = restore_workdir_params(source, run.spec.abstract["params"])
    logging.info("initialized the parameters from %s (step %d)", source, meta["progress"]["step"])
    return {"params": params, "opt_state": run.spec.init_opt_state(params)}


def _run(run: Run, workdir, data_iter, checkpointer, state, progress) -> str:
    """The steps. Metrics are fetched one step late: step s+1 is dispatched before step s's metrics are read
    (`jax.device_get` would otherwise wait for the device every step), except at checkpoint steps and the
    last step, whose metrics decide the save. A rollback found one step late discards the step dispatched
    meanwhile and trains next on its batch, so the data order is that of a synchronous loop."""
    config, spec = run.config, run.spec
    total_steps = run.sections.train.steps
    metrics = MetricsWriter(
        workdir, total_steps, progress.step, run.sections.metrics.wandb_project, run_config=config.to_dict()
    )
    counter = NonFiniteCounter(run.sections.faults.max_nonfinite_in_a_row, progress.skipped_steps)
    preemption = PreemptionSignal(run.sections.faults.preemption_check_every_steps)
    shapes = param_shapes(spec.abstract["params"])
    flops_per_token = flops.train_flops_per_token(run.model_config, run.sections.data.seq_len)
    peak = peak_flops_per_device()
    eod_id = run.tokenizer.eod_id
    every_steps = run.sections.checkpoint.every_steps
    goldfish_k = run.sections.data.pipeline["goldfish"]["k"]
    saved_step = progress.step if checkpointer.all_steps() else -1
    evaluator = evaluation.Evaluator(run, preemption.should_stop) if run.sections.eval.every_steps else None

    def evaluate():
        record = evaluator.evaluate(state["params"])
        if record is not None:  # None: SIGTERM mid-eval; the checkpoint of this step redoes it on resume
            metrics.write_scalars({"step": progress.step, "tokens": progress.tokens, **record})
            progress.evaluated_step = progress.step

    last_time = last_settle = time.time()

    def save():
        nonlocal saved_step
        meta = {"progress": dataclasses.asdict(progress), "param_shapes": shapes, "seed": config.seed}
        checkpointer.save(progress.step, state, data_iter, meta)
        provenance.record(workdir, config, data_iter, progress.step)
        # Probes/canaries seen so far: the wrapped iterator set back to the last consumed batch (the prefetch
        # thread restarts at the next batch).
        data_iter.close()
        write_manifest(workdir, data_iter.iterator, progress.step, jax.process_index())
        saved_step = progress.step

    def settle(pending) -> bool:
        """Reads a dispatched step's metrics, counts and logs it; True when the run must roll back."""
        nonlocal last_settle
        step_metrics, local_batch, rows, length, seconds = pending
        step_metrics = jax.device_get(step_metrics)
        lr = float(run.lr_schedule(progress.updates))
        finite = bool(step_metrics["finite"])
        spike = bool(step_metrics["spike_skipped"])
        progress.step += 1
        progress.tokens += rows * length
        progress.updates += finite and not spike
        progress.clipped_steps += bool(step_metrics["clipped"])
        progress.spike_skipped_steps += spike
        roll_back = counter.record(finite)
        progress.skipped_steps = counter.skipped_total
        now = time.time()
        # The longer of the two intervals: between the step calls' returns (right when the backend runs a step
        # inside the call, or when a settle is forced right after the previous one) and between the settles
        # (right when calls only queue work, as for the first steps after compilation).
        tokens_per_s = rows * length / max(seconds, now - last_settle, 1e-9)
        last_settle = now
        metrics.write(
            {
                "step": progress.step,
                "tokens": progress.tokens,
                "seq_len": length,
                "rope_theta": run.model_config.rope_theta,
                "loss": float(step_metrics["loss"]),
                "z_loss": float(step_metrics["z_loss"]),
                "lr": lr,
                "grad_norm": float(step_metrics["grad_norm"]),
                "clipped_fraction": progress.clipped_steps / progress.step,
                "tokens_per_s": tokens_per_s,
                "mfu": mfu(tokens_per_s, flops_per_token, jax.device_count(), peak),
                # k = 0 drops nothing (post-training masks prompts, which is not Goldfish)
                "goldfish_dropped_fraction": goldfish_dropped_fraction(local_batch, eod_id)
                if goldfish_k
                else 0.0,
                "skipped_steps": progress.skipped_steps,
                "spike_skipped_steps": progress.spike_skipped_steps,
                "rollbacks": progress.rollbacks,
                # the loss's own metrics (post-training: reward quantiles, log-ratios, DPO margins)
                **{k: float(v) for k, v in step_metrics.items() if k not in STEP_METRICS},
            }
        )
        return roll_back

    profiler = StepProfiler(run.sections.profile, workdir)
    pending, held_batch = None, None
    try:
        if (
            evaluator
            and progress.evaluated_step != progress.step
            and run.sections.eval.due(progress.step, total_steps)
        ):
            evaluate()  # resumed at an eval step whose eval did not finish
            last_time = last_settle = time.time()
        while progress.step + (pending is not None) < total_steps:
            if preemption.should_stop(progress.step + (pending is not None)):
                if pending is not None and settle(pending):
                    state, progress = _roll_back(checkpointer, spec, progress, metrics, state)
                logging.warning(
                    "%s: saving a checkpoint at step %d and exiting", preemption.reason(), progress.step
                )
                if saved_step != progress.step:
                    save()
                checkpointer.wait()
                return "preempted"
            local_batch = held_batch if held_batch is not None else next(data_iter)
            held_batch = None
            batch = make_global_batch(local_batch, run.mesh)
            rows, length = batch["tokens"].shape
            profiler.before_step(progress.step + (pending is not None))
            params, opt_state, step_metrics = run.train_step(rows).fn(
                state["params"], state["opt_state"], batch
            )
            state = {"params": params, "opt_state": opt_state}
            profiler.after_step(progress.step + 1 + (pending is not None), step_metrics)
            # Time between two returns from the step call: the step period whether the backend runs the step
            # inside the call (CPU) or queues it (accelerators, where the next call waits for a free slot).
            now = time.time()
            dispatched = (step_metrics, local_batch, rows, length, now - last_time)
            last_time = now
            if pending is not None and settle(pending):
                # The step just dispatched ran after a step that triggers the rollback: drop it, train on its
                # batch right after the rollback (as a synchronous loop would).
                state, progress = _roll_back(checkpointer, spec, progress, metrics, state)
                pending, held_batch = None, local_batch
                continue
            pending = dispatched
            step = progress.step + 1
            eval_due = bool(evaluator) and run.sections.eval.due(step, total_steps)
            save_due = step % every_steps == 0 or step == total_steps
            if save_due or eval_due:  # the step's own params and metrics: settle it now
                pending = None
                if settle(dispatched):
                    state, progress = _roll_back(checkpointer, spec, progress, metrics, state)
                    continue
                if eval_due:
                    evaluate()
                    last_time = last_settle = (
                        time.time()
                    )  # the eval is not counted in the next step's tokens/s
                if not save_due:
                    continue
                save()
        if pending is not None and settle(pending):
            state, progress = _roll_back(checkpointer, spec, progress, metrics, state)
        checkpointer.wait()
        if evaluator and progress.evaluated_step != progress.step and preemption.should_stop():
            return "preempted"  # SIGTERM during the final eval: the resumed run redoes it
    finally:
        profiler.stop()
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
