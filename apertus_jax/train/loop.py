"""The training loop: restore or initialize, step, log, checkpoint, survive faults and preemption.

    status = train(Run(config, objective=..., batch_source=..., hooks=[...]), workdir)   # "done" | "preempted"

Order of work (every check that can fail on user input runs before anything is written): the batch source
(data paths exist, the vocabulary fits the model) -> `checkpoint.init_from` exists -> workdir lock ->
abstract state -> restore the newest readable checkpoint (refusing one of a different model shape or layout),
else initialize (randomly, or the parameters of `checkpoint.init_from`) -> the hooks' `on_save` -> steps. A
SIGTERM or SIGINT (Ctrl-C) saves a checkpoint at the current step and returns "preempted".

Metrics are fetched one step late: step s+1 is dispatched before step s's metrics are read (`jax.device_get`
would otherwise wait for the device every step), except at checkpoint steps, steps a hook is due at and the
last step, whose state decides what happens next. A rollback found one step late discards the step dispatched
meanwhile and trains next on its batch, so the data order is that of a synchronous loop.

Faults: Apertus restarted from the last good checkpoint by hand and skipped the batches that blew up
(report, section on training stability); `NonFiniteCounter` automates that decision. `PreemptionSignal` turns
SIGTERM (cluster preemption) and SIGINT into that clean stop.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils

from apertus_jax.named import load_named
from apertus_jax.train.batches import Prefetcher
from apertus_jax.train.checkpoint import Checkpointer, WorkdirLock, restore_workdir_params, tree_shapes
from apertus_jax.train.hooks import LoopContext, due
from apertus_jax.train.metrics import MetricsWriter, StepProfiler, mfu, peak_flops_per_device
from apertus_jax.train.run import Run
from apertus_jax.train.train_state import make_global_batch

# `checkpoint.init_from = "hf:DIR"`: a HF checkpoint's parameters start the run (continued pretraining), checked
# against the run's model and tokenizer first; the HF reader is imported only then.
HF_PREFIX = "hf:"
CHECK_HF_DIR = "apertus_jax.models.hf:check_init_dir"
READ_HF_PARAMS = "apertus_jax.models.hf:read_params"
STEP_METRICS = ("loss", "grad_norm", "clipped", "unmasked_tokens", "finite", "spike_skipped")


class NonFiniteCounter:
    """Counts skipped (non-finite) steps; `record` says when to roll back.

    Args:
      max_in_a_row: roll back after this many consecutive non-finite steps (0 disables rollbacks).
    """

    def __init__(self, max_in_a_row: int, skipped_total: int = 0):
        self.max_in_a_row = max_in_a_row
        self.in_a_row = 0
        self.skipped_total = skipped_total

    def record(self, finite: bool) -> bool:
        """Registers one step; returns True when the caller must roll back now."""
        if finite:
            self.in_a_row = 0
            return False
        self.in_a_row += 1
        self.skipped_total += 1
        if self.max_in_a_row and self.in_a_row >= self.max_in_a_row:
            self.in_a_row = 0
            return True
        return False


class PreemptionSignal:
    """Sets a flag on SIGTERM (cluster preemption) or SIGINT (Ctrl-C) so the loop can save a checkpoint at the
    current step and exit 0; both signals mean the same: stop cleanly, resume later with the same command.

    A second SIGINT while the first is pending raises KeyboardInterrupt at once (a user pressing Ctrl-C
    twice wants out now; the last complete checkpoint stays valid, Orbax renames a save only when done).
    With several processes the flag is OR-reduced across them (an allgather, which synchronizes the hosts)
    only at steps that are multiples of `check_every_steps`, so all processes stop at the same step (a save
    is a collective operation) without a host barrier at every step. A single process reads its flag at
    every step (no communication).

    Args:
      check_every_steps: >= 1; multi-process check interval in steps (the cluster's grace period after
        SIGTERM must cover that many steps plus a save).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, check_every_steps: int = 1):
        self.check_every_steps = check_every_steps
        self.received: str | None = None  # "SIGTERM" | "SIGINT" once one arrived in this process
        self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}

    def _handle(self, signum, frame):
        del frame
        if signum == signal.SIGINT and self.received == "SIGINT":
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name

    def should_stop(self, step: int = 0) -> bool:
        """True when the run must stop before `step + 1` (call it with the same `step` on every process)."""
        if jax.process_count() == 1:
            return self.received is not None
        if step % self.check_every_steps:
            return False
        flag = np.array(self.received is not None)
        return bool(np.any(multihost_utils.process_allgather(flag)))

    def request(self, reason: str) -> None:
        """Asks for the same clean stop as a signal, from inside the process (`reason` names it in the log)."""
        self.received = self.received or reason

    def reason(self) -> str:
        """The signal's name for the log line ("SIGTERM", "SIGINT" or "a signal on another process")."""
        return self.received or "a signal on another process"

    def restore_handler(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


@dataclasses.dataclass
class Progress:
    """Counters saved in every checkpoint's meta. `updates` counts applied optimizer updates (finite and not
    dropped by the spike guard); `clipped_steps` steps whose gradient norm exceeded `optim.clip_norm`;
    `evaluated_step` the last step whose due hooks (in-loop evaluation) completed."""

    step: int = 0
    tokens: int = 0
    updates: int = 0
    skipped_steps: int = 0
    rollbacks: int = 0
    clipped_steps: int = 0
    spike_skipped_steps: int = 0
    evaluated_step: int = 0


def train(run: Run, workdir: str) -> str:
    """Runs (or resumes) training of `run` in `workdir`; returns "done" or "preempted".

    Raises:
      ValueError / FileNotFoundError: bad tokenizer or data (one line, before anything is written); a workdir
        holding a checkpoint of a different model shape or layout; a missing `checkpoint.init_from`.
      WorkdirLockedError: another run holds `workdir`.
      OSError: `workdir` cannot be created.
    """
    run.warn_if_steps_end_before_cooldown()
    logging.info("data: building this process's batch source")
    start = time.time()
    batches = Prefetcher(run.batch_source(), run.config.train.prefetch_batches)
    logging.info("data: ready in %.1f s", time.time() - start)
    init_from = run.config.checkpoint.init_from
    if init_from.startswith(HF_PREFIX):
        load_named(CHECK_HF_DIR)(init_from[len(HF_PREFIX) :], run.config.model, run.tokenizer)
    elif init_from and not os.path.isdir(os.path.join(init_from, "checkpoints")):
        raise FileNotFoundError(
            f"checkpoint.init_from={init_from} has no checkpoints/: it must be a workdir written by "
            "`python -m experiments.pretrain`, or hf:DIR for a HF checkpoint (or leave it empty)"
        )
    # A run that starts from another run's parameters reads them before it writes anything of its own: a source
    # of another model is refused with the workdir as it was.
    started = _initial_state(run) if init_from and not _has_checkpoints(workdir) else None
    logging.info(
        "mesh %s over %d devices (%d processes)",
        dict(run.mesh.shape),
        jax.device_count(),
        jax.process_count(),
    )
    with WorkdirLock(workdir):
        checkpoint = run.config.checkpoint
        checkpointer = Checkpointer(
            os.path.join(workdir, "checkpoints"), checkpoint.keep, checkpoint.async_save
        )
        try:
            restored = checkpointer.restore_latest(run.spec.abstract, batches)
            if restored:
                state, meta = restored
                progress = Progress(**meta["progress"])
                logging.info("resumed from step %d (%d tokens)", progress.step, progress.tokens)
            else:
                start = time.time()
                state, progress = started or _initial_state(run), Progress()
                logging.info("state: ready in %.1f s", time.time() - start)
            # Under the mesh, the model's activation constraints (partitioning.constrain) take effect; without it
            # XLA picks activation shardings itself and may replicate the batch.
            with jax.set_mesh(run.mesh):
                return _Loop(run, workdir, batches, checkpointer, state, progress, bool(restored)).execute()
        finally:
            checkpointer.close()
            batches.close()


def _has_checkpoints(workdir: str) -> bool:
    """Whether `workdir` holds a checkpoint step folder (the run resumes rather than starts)."""
    directory = os.path.join(workdir, "checkpoints")
    return os.path.isdir(directory) and any(name.isdigit() for name in os.listdir(directory))


def _initial_state(run: Run) -> dict:
    """Random initialization, or the parameters of `checkpoint.init_from` (a workdir, or hf:DIR) with a fresh
    optimizer state."""
    source = run.config.checkpoint.init_from
    if not source:
        logging.info("state: initializing the parameters and optimizer state (seed %d)", run.config.seed)
        return run.spec.init()
    if source.startswith(HF_PREFIX):
        read_params = load_named(READ_HF_PARAMS)
        params = read_params(source[len(HF_PREFIX) :], run.config.model, run.spec.abstract["params"])
        logging.info("initialized the parameters from the HF checkpoint %s", source[len(HF_PREFIX) :])
    else:
        try:
            params, meta = restore_workdir_params(source, run.spec.abstract["params"])
        except ValueError as e:
            raise ValueError(f"checkpoint.init_from={source}: {e}") from None
        logging.info("initialized the parameters from %s (step %d)", source, meta["progress"]["step"])
    return {"params": params, "opt_state": run.spec.init_opt_state(params)}


@dataclasses.dataclass
class _Pending:
    """A dispatched step whose metrics are not read yet."""

    metrics: dict
    batch: dict
    rows: int
    length: int
    seconds: float  # between the returns of this step call and the previous one


class _Loop:
    """The steps of one `train` call (module docstring)."""

    def __init__(self, run: Run, workdir, batches, checkpointer, state, progress: Progress, resumed: bool):
        config = run.config
        self.run, self.workdir, self.batches, self.checkpointer = run, workdir, batches, checkpointer
        self.state, self.progress = state, progress
        self.frozen = run.load_frozen()
        self.total_steps = config.train.steps
        self.metrics = MetricsWriter(
            workdir,
            self.total_steps,
            progress.step,
            config.metrics.wandb_project,
            run_config=config.to_dict(),
        )
        self.counter = NonFiniteCounter(config.faults.max_nonfinite_in_a_row, progress.skipped_steps)
        self.preemption = PreemptionSignal(config.faults.preemption_check_every_steps)
        self.profiler = StepProfiler(config.profile, workdir)
        self.shapes = tree_shapes(run.spec.abstract["params"])
        self.peak = peak_flops_per_device()
        self.saved_step = progress.step if checkpointer.all_steps() else -1
        self.shapes_run: set[tuple[int, int]] = set()  # batch shapes whose step was called (compiled)
        self.last_time = self.last_settle = time.time()
        self.context = LoopContext(
            run,
            workdir,
            batches,
            progress.step,
            resumed,
            self.preemption.should_stop,
            self.preemption.request,
        )

    def execute(self) -> str:
        try:
            for hook in self.run.hooks:
                hook.on_save(self.progress.step, self.context)
            return self._steps()
        finally:
            self.profiler.stop()
            self.preemption.restore_handler()
            self.metrics.close()

    def _due(self, step: int) -> bool:
        return any(due(hook, step, self.total_steps) for hook in self.run.hooks)

    def _on_step(self) -> bool:
        """Runs the due hooks on the current step's parameters; records their scalars. False when one gave
        up (SIGTERM): the checkpoint of this step keeps the previous `evaluated_step`, so the resumed run
        calls them again."""
        step, record = self.progress.step, {}
        for hook in self.run.hooks:
            if due(hook, step, self.total_steps):
                scalars = hook.on_step(step, self.state["params"], self.context)
                if scalars is None:
                    return False
                record.update(scalars)
        if record:
            self.metrics.write_scalars({"step": step, "tokens": self.progress.tokens, **record})
        self.progress.evaluated_step = step
        self.last_time = self.last_settle = time.time()  # the hooks' time is not counted in the next tokens/s
        return True

    def _save(self) -> None:
        progress = self.progress
        meta = {
            "progress": dataclasses.asdict(progress),
            "param_shapes": self.shapes,
            "seed": self.run.config.seed,
        }
        self.checkpointer.save(progress.step, self.state, self.batches, meta)
        for hook in self.run.hooks:
            hook.on_save(progress.step, self.context)
        self.saved_step = progress.step

    def _settle(self, pending: _Pending) -> bool:
        """Reads a dispatched step's metrics, counts and logs it; True when the run must roll back."""
        progress = self.progress
        step_metrics = jax.device_get(pending.metrics)
        lr = float(self.run.lr_schedule(progress.updates))
        finite = bool(step_metrics["finite"])
        spike = bool(step_metrics["spike_skipped"])
        progress.step += 1
        progress.tokens += pending.rows * pending.length
        progress.updates += finite and not spike
        progress.clipped_steps += bool(step_metrics["clipped"])
        progress.spike_skipped_steps += spike
        roll_back = self.counter.record(finite)
        progress.skipped_steps = self.counter.skipped_total
        now = time.time()
        # The longer of the two intervals: between the step calls' returns (right when the backend runs a step
        # inside the call, or when a settle is forced right after the previous one) and between the settles
        # (right when calls only queue work, as for the first steps after compilation).
        tokens_per_s = pending.rows * pending.length / max(pending.seconds, now - self.last_settle, 1e-9)
        self.last_settle = now
        self.metrics.write(
            {
                "step": progress.step,
                "tokens": progress.tokens,
                "seq_len": pending.length,
                "loss": float(step_metrics["loss"]),
                "lr": lr,
                "grad_norm": float(step_metrics["grad_norm"]),
                "clipped_fraction": progress.clipped_steps / progress.step,
                "tokens_per_s": tokens_per_s,
                "mfu": mfu(tokens_per_s, self.run.flops_per_token, jax.device_count(), self.peak),
                "skipped_steps": progress.skipped_steps,
                "spike_skipped_steps": progress.spike_skipped_steps,
                "rollbacks": progress.rollbacks,
                # the objective's own metrics (pretraining: z_loss; post-training: rewards, log-ratios, margins)
                **{k: float(v) for k, v in step_metrics.items() if k not in STEP_METRICS},
                # the batch source's own (the pipeline with Goldfish: goldfish_dropped_fraction)
                **self.batches.batch_metrics(pending.batch),
            }
        )
        return roll_back

    def _roll_back(self) -> None:
        """Restores the last good checkpoint but keeps the data source where it is (skipping the window)."""
        self.checkpointer.wait()
        restored = self.checkpointer.restore_latest(self.run.spec.abstract, data_iter=None)
        if restored is None:
            logging.error("non-finite steps in a row but no checkpoint yet to roll back to; continuing")
            return
        state, meta = restored
        progress = Progress(**meta["progress"])
        progress.skipped_steps = self.progress.skipped_steps
        progress.rollbacks = self.progress.rollbacks + 1
        logging.warning(
            "rolled back from step %d to step %d; the %d batches in between are skipped",
            self.progress.step,
            progress.step,
            self.progress.step - progress.step,
        )
        self.metrics.rewind(progress.step)
        self.state, self.progress = state, progress

    def _settle_or_roll_back(self, pending: _Pending | None) -> bool:
        """Settles a dispatched step (None: none is pending) and rolls back when it asks to; True after a
        rollback."""
        if pending is None or not self._settle(pending):
            return False
        self._roll_back()
        return True

    def _dispatch(self, local_batch: dict, completed: int) -> _Pending:
        """Starts the train step on `local_batch` (this process's rows) after `completed` completed steps (the
        settled ones and the pending one) and returns it, unsettled."""
        batch = make_global_batch(local_batch, self.run.mesh)
        rows, length = batch["tokens"].shape
        self.profiler.before_step(completed)
        first, start = (rows, length) not in self.shapes_run, time.time()
        if first:
            logging.info(
                "train step: compiling for batches of %d x %d tokens (a rerun loads it from the XLA cache)",
                rows,
                length,
            )
        params, opt_state, step_metrics = self.run.train_step(rows).fn(
            self.state["params"], self.state["opt_state"], batch, self.frozen
        )
        if first:
            self.shapes_run.add((rows, length))
            logging.info("train step: ready in %.1f s", time.time() - start)
        self.state = {"params": params, "opt_state": opt_state}
        self.profiler.after_step(completed + 1, step_metrics)
        # Time between two returns from the step call: the step period whether the backend runs the step
        # inside the call (CPU) or queues it (accelerators, where the next call waits for a free slot).
        now = time.time()
        dispatched = _Pending(step_metrics, local_batch, rows, length, now - self.last_time)
        self.last_time = now
        return dispatched

    def _steps(self) -> str:
        pending, held_batch = None, None
        if self.progress.evaluated_step != self.progress.step and self._due(self.progress.step):
            self._on_step()  # resumed at a step whose hooks did not finish
        while self.progress.step + (pending is not None) < self.total_steps:
            if self.preemption.should_stop(self.progress.step + (pending is not None)):
                self._settle_or_roll_back(pending)
                logging.warning(
                    "%s: saving a checkpoint at step %d and exiting",
                    self.preemption.reason(),
                    self.progress.step,
                )
                if self.saved_step != self.progress.step:
                    self._save()
                self.checkpointer.wait()
                return "preempted"
            local_batch = held_batch if held_batch is not None else next(self.batches)
            held_batch = None
            dispatched = self._dispatch(local_batch, self.progress.step + (pending is not None))
            if self._settle_or_roll_back(pending):
                # The step just dispatched ran after a step that triggers the rollback: drop it, train on its
                # batch right after the rollback (as a synchronous loop would).
                pending, held_batch = None, local_batch
                continue
            pending = dispatched
            step = self.progress.step + 1
            hook_due = self._due(step)
            save_due = step % self.run.config.checkpoint.every_steps == 0 or step == self.total_steps
            if save_due or hook_due:  # the step's own params and metrics: settle it now
                pending = None
                if self._settle_or_roll_back(dispatched):
                    continue
                if hook_due:
                    self._on_step()
                if save_due:
                    self._save()
        self._settle_or_roll_back(pending)
        self.checkpointer.wait()
        if self.progress.evaluated_step != self.progress.step and self._due(self.progress.step):
            if self.preemption.should_stop():
                return "preempted"  # SIGTERM during the last step's hooks: the resumed run redoes them
        return "done"
