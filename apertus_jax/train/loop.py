"""The training loop: build, restore or initialize, step, log, checkpoint, survive faults and preemption.

Order of work (every check that can fail on user input runs before anything is written):
validate config -> tokenizer and data (vocab fits the model, data paths exist) -> workdir lock -> abstract
state -> restore the newest readable checkpoint (refusing one of a different model shape) or initialize ->
steps. A SIGTERM saves a checkpoint at the current step and returns "preempted" (the CLI exits 0).
"""

import dataclasses
import json
import os
import time

import jax
import ml_collections
import numpy as np
from absl import logging

from apertus_jax.models import flops, partitioning
from apertus_jax.optim import BatchSizePlan, cosine_schedule, make_optimizer, schedule_in_steps, wsd_schedule
from apertus_jax.train import config as config_lib
from apertus_jax.train import inputs, provenance
from apertus_jax.train.checkpoint import Checkpointer, WorkdirLock, param_shapes
from apertus_jax.train.faults import NonFiniteCounter, PreemptionSignal
from apertus_jax.train.metrics import MetricsWriter, mfu, peak_flops_per_device, plot_loss
from apertus_jax.train.sharding import batch_sharding, make_global_batch
from apertus_jax.train.step import make_train_step
from apertus_jax.train.train_state import make_train_state_spec


@dataclasses.dataclass
class Progress:
    """Counters saved in every checkpoint's meta. `updates` counts applied (finite) optimizer updates."""

    step: int = 0
    tokens: int = 0
    updates: int = 0
    skipped_steps: int = 0
    rollbacks: int = 0


def make_lr_schedule(optim: ml_collections.ConfigDict, plan: BatchSizePlan):
    """The optax schedule over applied updates, from the token-based WSD or cosine schedule (docs/recipe.md 5)."""
    if optim.schedule == "wsd":
        by_tokens = wsd_schedule(
            optim.peak_lr,
            optim.warmup_tokens,
            optim.decay_tokens,
            optim.total_tokens,
            optim.init_fraction,
            optim.final_fraction,
            optim.decay_shape,
        )
    else:
        by_tokens = cosine_schedule(
            optim.peak_lr, optim.warmup_tokens, optim.total_tokens, optim.init_fraction, optim.final_fraction
        )
    return schedule_in_steps(by_tokens, plan)


def make_tx(optim: ml_collections.ConfigDict, lr_schedule):
    """clip_by_global_norm -> AdEMAMix or AdamW, with the default weight-decay mask (docs/recipe.md 4)."""
    kwargs = dict(b1=optim.b1, b2=optim.b2, eps=optim.eps)
    if optim.name == "ademamix":
        kwargs.update(
            b3=optim.b3,
            alpha=optim.alpha,
            alpha_warmup_steps=optim.alpha_warmup_steps,
            b3_warmup_steps=optim.b3_warmup_steps,
        )
    return make_optimizer(optim.name, lr_schedule, optim.weight_decay, optim.clip_norm, **kwargs)


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
        a workdir holding a checkpoint of a different model shape.
      WorkdirLockedError: another run holds `workdir`.
    """
    mesh_shape = config_lib.validate(config, jax.device_count(), jax.process_count())
    model_config = config_lib.model_config(config)
    tokenizer = inputs.load_run_tokenizer(config.data)
    if tokenizer.vocab_size > model_config.vocab_size:
        raise ValueError(
            f"tokenizer {tokenizer.name} has {tokenizer.vocab_size} ids but model.vocab_size is "
            f"{model_config.vocab_size}; set --config.model.vocab_size >= {tokenizer.vocab_size}"
        )
    plan = BatchSizePlan(config.train.batch_plan)
    end_tokens = plan.tokens_at_step(config.train.steps)
    if end_tokens < config.optim.total_tokens:
        logging.warning(
            "train.steps=%d ends at %d tokens but the LR schedule runs to optim.total_tokens=%d: the "
            "run stops before the cooldown; set --config.optim.total_tokens (and decay_tokens) to match",
            config.train.steps,
            end_tokens,
            config.optim.total_tokens,
        )
    lr_schedule = make_lr_schedule(config.optim, plan)
    tx = make_tx(config.optim, lr_schedule)
    data_iter = inputs.make_train_iterator(config, tokenizer, plan)
    mesh = partitioning.make_mesh(*mesh_shape)
    logging.info(
        "mesh %s over %d devices (%d processes)", dict(mesh.shape), jax.device_count(), jax.process_count()
    )

    with WorkdirLock(workdir):
        spec = make_train_state_spec(model_config, tx, mesh, config.seed)
        checkpointer = Checkpointer(
            os.path.join(workdir, "checkpoints"), config.checkpoint.keep, config.checkpoint.async_save
        )
        restored = checkpointer.restore_latest(spec.abstract, data_iter)
        if restored:
            state, meta = restored
            progress = Progress(**meta["progress"])
            logging.info("resumed from step %d (%d tokens)", progress.step, progress.tokens)
        else:
            state, progress = spec.init(), Progress()
        if jax.process_index() == 0:
            record_config(workdir, config.to_dict(), progress.step if restored else None)
        provenance.record(workdir, config, data_iter, progress.step)
        try:
            # Under the mesh, the model's activation constraints (partitioning.constrain) take effect; without it
            # XLA picks activation shardings itself and may replicate the batch (the memory plan measured 280 GB
            # instead of 17 GB per device for apertus_8b on 1x64x1).
            with jax.set_mesh(mesh):
                return _run(
                    config,
                    workdir,
                    spec,
                    tx,
                    mesh,
                    data_iter,
                    checkpointer,
                    state,
                    progress,
                    lr_schedule,
                    model_config,
                    tokenizer.eod_id,
                )
        finally:
            checkpointer.close()


def _run(
    config,
    workdir,
    spec,
    tx,
    mesh,
    data_iter,
    checkpointer,
    state,
    progress,
    lr_schedule,
    model_config,
    eod_id,
) -> str:
    total_steps = config.train.steps
    metrics = MetricsWriter(workdir, total_steps, progress.step)
    counter = NonFiniteCounter(config.faults.max_nonfinite_in_a_row, progress.skipped_steps)
    preemption = PreemptionSignal()
    shapes = param_shapes(spec.abstract["params"])
    flops_per_token = flops.train_flops_per_token(model_config, config.data.seq_len)
    peak = peak_flops_per_device()
    steps_by_rows = {}

    def compiled_step(rows: int):
        if rows not in steps_by_rows:
            micro = config.train.microbatch_size or rows
            step = make_train_step(spec.apply_fn, tx, rows // micro)
            steps_by_rows[rows] = jax.jit(
                step,
                in_shardings=(spec.shardings["params"], spec.shardings["opt_state"], batch_sharding(mesh)),
                donate_argnums=(0, 1),
            )
        return steps_by_rows[rows]

    saved_step = progress.step if checkpointer.all_steps() else -1

    def save():
        nonlocal saved_step
        meta = {"progress": dataclasses.asdict(progress), "param_shapes": shapes, "seed": config.seed}
        checkpointer.save(progress.step, state, data_iter, meta)
        provenance.record(workdir, config, data_iter, progress.step)
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
            batch = make_global_batch(local_batch, mesh)
            rows, length = batch["tokens"].shape
            params, opt_state, step_metrics = compiled_step(rows)(state["params"], state["opt_state"], batch)
            state = {"params": params, "opt_state": opt_state}
            step_metrics = jax.device_get(step_metrics)
            lr = float(lr_schedule(progress.updates))
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
            if progress.step % config.checkpoint.every_steps == 0 or progress.step == total_steps:
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
