"""The training loop: restore or initialize, step, log, checkpoint, survive faults and preemption.

    status = train(Run(config, objective=..., batch_source=..., hooks=[...]), workdir)   # "done" | "preempted"

Order of work (every check that can fail on user input runs before anything is written): the workdir (not held
by another run, not a HF checkpoint: `check_run_workdir`) -> the batch source
(data paths exist, the vocabulary fits the model) -> the initial parameters' source checks itself
(`Run.initial_params`: `checkpoint.init_from`, or a job's `init_params` plug-in) -> workdir lock -> abstract
state -> restore the newest readable checkpoint (refusing one of a different model shape or layout), else
initialize (randomly, or from that source) -> the hooks' `on_save` -> steps. A SIGTERM or SIGINT (Ctrl-C)
saves a checkpoint at the current step and returns "preempted".

Metrics are read one step late: step s+1 is dispatched before step s's metrics are read (`jax.device_get`
would otherwise wait for the device every step), except at checkpoint steps, steps a hook is due at and the
last step, whose state decides what happens next (`_Loop._steps`). A rollback found one step late discards the
step dispatched meanwhile and trains next on its batch, so the data order is that of a synchronous loop
(`_Loop._roll_back`).

Faults: Apertus restarted from the last good checkpoint by hand and skipped the batches that blew up
(report, section on training stability); `NonFiniteCounter` automates that decision. `PreemptionSignal` turns
SIGTERM (cluster preemption) and SIGINT into that clean stop.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils

from apertus_jax.train.batches import Prefetcher
from apertus_jax.train.checkpoint import (
    Checkpointer,
    InitialParams,
    WorkdirLock,
    WorkdirLockedError,
    hf_checkpoint_file,
    tree_shapes,
)
from apertus_jax.train.hooks import LoopContext, due
from apertus_jax.train.metrics import MetricsWriter, StepProfiler, mfu, peak_flops_per_device
from apertus_jax.train.run import Run
from apertus_jax.train.train_state import make_global_batch

# The exit status of a process a second Ctrl-C stopped at once (the shell's for SIGINT).
INTERRUPTED = 130
# The train step's own metrics; the others are the optimizer's drop reasons and the objective's.
STEP_METRICS = ("loss", "grad_norm", "clipped", "unmasked_tokens", "finite")


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
    current step and stop; both mean the same: stop cleanly, resume later with the same command.

    The signals are heard at once, even while the main thread is inside a long native call (XLA compiling the
    step, a step running), where Python's own handlers wait for it to return: `signal.set_wakeup_fd` hands each
    signal to a thread of this object. The first Ctrl-C prints at once what the loop will do (`plan()`, one
    line); a second one prints that it stops at once and ends the process with exit status 130 (`abort`,
    `os._exit`: no interpreter teardown beside XLA's running threads, which is what crashed before; the last
    complete checkpoint stays valid, as Orbax renames a save only when done).
    With several processes the flag is OR-reduced across them (an allgather, which synchronizes the hosts)
    only at steps that are multiples of `check_every_steps`, so all processes stop at the same step (a save
    is a collective operation) without a host barrier at every step. A single process reads its flag at
    every step (no communication).

    Args:
      check_every_steps: >= 1; multi-process check interval in steps (the cluster's grace period after
        SIGTERM must cover that many steps plus a save).
      plan: () -> what the loop does after a first Ctrl-C, for its line ("stopping after step 12, ...").
      kept: () -> the step of the last complete checkpoint (-1: none), for the line of a second Ctrl-C.
      abort: ends the process after a second Ctrl-C (default `os._exit(130)`).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(
        self,
        check_every_steps: int = 1,
        plan: Callable[[], str] = lambda: "stopping after the step in progress and saving it",
        kept: Callable[[], int] = lambda: -1,
        abort: Callable[[], None] = lambda: os._exit(INTERRUPTED),
    ):
        self.check_every_steps = check_every_steps
        self.received: str | None = None  # "SIGTERM" | "SIGINT" once one arrived in this process
        self.plan, self.kept, self.abort = plan, kept, abort
        self._interrupts = 0
        self._previous = {signum: signal.signal(signum, self._handle) for signum in self.SIGNALS}
        read, write = os.pipe()
        os.set_blocking(write, False)
        self._pipe = (read, write)
        self._previous_wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        threading.Thread(target=self._hear, args=(read,), daemon=True, name="preemption").start()

    def _handle(self, signum, frame):
        """Python's handler (main thread, when it runs Python code): the flag; `_hear` spoke already."""
        del frame
        self.received = self.received or signal.Signals(signum).name

    def _hear(self, read: int) -> None:
        """The signals as they arrive (this object's thread): the lines of the first and second Ctrl-C."""
        while chunk := os.read(read, 64):
            for signum in chunk:
                if signum == signal.SIGINT:
                    self._interrupts += 1
                    self.received = self.received or "SIGINT"
                    if self._interrupts == 1:
                        _say(f"Ctrl-C: {self.plan()}; press Ctrl-C again to stop at once")
                    elif self._interrupts == 2:
                        kept = self.kept()
                        checkpoint = (
                            f"the checkpoint of step {kept} stays" if kept >= 0 else "no checkpoint yet"
                        )
                        _say(
                            f"Ctrl-C again: stopped at once ({checkpoint}); rerun the same command to continue"
                        )
                        self.abort()
                elif signum == signal.SIGTERM:
                    self.received = self.received or "SIGTERM"
        os.close(read)

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C (SIGINT) asked for the stop."""
        return self.received == "SIGINT"

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
        """The handlers and wakeup fd as they were; this object's thread ends."""
        signal.set_wakeup_fd(self._previous_wakeup)
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        os.close(self._pipe[1])  # the thread's read returns b"": it closes the read end and ends


def _say(line: str) -> None:
    """One line on stderr at once, from any thread (the log's own lock may be held by the main thread)."""
    os.write(2, (line + "\n").encode())


@dataclasses.dataclass
class Progress:
    """Counters saved in every checkpoint's meta. `updates` counts applied optimizer updates (finite and not
    dropped by the optimizer); `clipped_steps` steps whose gradient norm exceeded `optim.clip_norm`;
    `dropped_steps` the updates the optimizer dropped, per reason (`Run.optimizer.drop_reasons`; in the meta and
    metrics.jsonl as `<reason>_steps`); `hooks_step` the last step whose due hooks (in-loop evaluation) completed.
    """

    step: int = 0
    tokens: int = 0
    updates: int = 0
    skipped_steps: int = 0
    rollbacks: int = 0
    clipped_steps: int = 0
    dropped_steps: dict[str, int] = dataclasses.field(default_factory=dict)
    hooks_step: int = 0

    def to_meta(self) -> dict[str, int]:
        """The counters as the checkpoint's meta holds them (flat, `<reason>_steps`)."""
        meta = dataclasses.asdict(self)
        dropped = meta.pop("dropped_steps")
        return {**meta, **{f"{reason}_steps": n for reason, n in dropped.items()}}

    @classmethod
    def from_meta(cls, meta: dict[str, int], drop_reasons: tuple[str, ...]) -> Progress:
        """The counters of a checkpoint's meta (`to_meta`) for a run whose optimizer drops for `drop_reasons`."""
        meta = dict(meta)
        dropped = {reason: meta.pop(f"{reason}_steps", 0) for reason in drop_reasons}
        if "evaluated_step" in meta:  # `hooks_step` as checkpoints written before its rename call it
            meta["hooks_step"] = meta.pop("evaluated_step")
        return cls(**meta, dropped_steps=dropped)


def train(run: Run, workdir: str) -> str:
    """Runs (or resumes) training of `run` in `workdir`; returns "done", or "preempted" after the clean stop of
    a SIGTERM (or a hook's request).

    Raises:
      KeyboardInterrupt: after the clean stop of a Ctrl-C (SIGINT), its message naming the step saved; a second
        Ctrl-C ends the process at once (`PreemptionSignal`).
      ValueError / FileNotFoundError: bad tokenizer or data (one line, before anything is written); a workdir
        holding a checkpoint of a different model shape or layout, or a HF checkpoint (`check_run_workdir`);
        initial parameters that cannot be read (`Run.initial_params`).
      WorkdirLockedError: another run holds `workdir` (said before the data is built).
      OSError: `workdir` cannot be created.
    """
    check_run_workdir(workdir)
    run.warn_if_steps_end_before_cooldown()
    logging.info("data: building this process's batch source")
    start = time.time()
    batches = Prefetcher(run.batch_source(), run.config.train.prefetch_batches)
    logging.info("data: ready in %.1f s", time.time() - start)
    initial = run.initial_params()
    if initial is not None:
        initial.check()
    # A run that starts from another run's parameters reads them before it writes anything of its own: a source
    # of another model is refused with the workdir as it was.
    started = _initial_state(run, initial) if initial is not None and not _has_checkpoints(workdir) else None
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
                progress = Progress.from_meta(meta["progress"], run.optimizer.drop_reasons)
                logging.info("resumed from step %d (%d tokens)", progress.step, progress.tokens)
            else:
                if checkpointer.unreadable:
                    logging.warning(
                        "no checkpoint of %s is readable (set aside in checkpoints_corrupt/): the run starts "
                        "over from step 0",
                        workdir,
                    )
                start = time.time()
                state = started or _initial_state(run, initial)
                progress = Progress(dropped_steps=dict.fromkeys(run.optimizer.drop_reasons, 0))
                logging.info("state: ready in %.1f s", time.time() - start)
            # Under the mesh, the model's activation constraints (partitioning.constrain) take effect; without it
            # XLA picks activation shardings itself and may replicate the batch.
            with jax.set_mesh(run.mesh):
                steps = _Loop(run, workdir, batches, checkpointer, state, progress, bool(restored))
                status = steps.execute()
        finally:
            checkpointer.close()
            batches.close()
    if status == "preempted" and steps.preemption.interrupted:
        raise KeyboardInterrupt(f"the checkpoint of step {steps.saved_step} is saved")
    return status


def check_run_workdir(workdir: str) -> None:
    """Refuses, before anything is built or written, a workdir that another run holds (`WorkdirLock.held`) or
    that holds a HF checkpoint instead of a run (its `config.json` would be overwritten).

    Raises:
      WorkdirLockedError: a live run holds `workdir`.
      ValueError: `workdir` holds `*.safetensors` weights and no `checkpoints/` (one line naming the fix).
    """
    if WorkdirLock.held(workdir):
        raise WorkdirLockedError(
            f"workdir {workdir} is in use by another run; wait for it to finish or pass a different --workdir"
        )
    weights = hf_checkpoint_file(workdir)
    if weights:
        raise ValueError(
            f"workdir {workdir} holds a HF checkpoint ({weights}), not a training run: "
            f"train in a new --workdir (to start from it: --config.checkpoint.init_from=hf:{workdir})"
        )


def _has_checkpoints(workdir: str) -> bool:
    """Whether `workdir` holds a checkpoint step folder (the run resumes rather than starts)."""
    directory = os.path.join(workdir, "checkpoints")
    return os.path.isdir(directory) and any(name.isdigit() for name in os.listdir(directory))


def _initial_state(run: Run, initial: InitialParams | None) -> dict:
    """Random initialization, or the parameters of `initial` with a fresh optimizer state."""
    if initial is None:
        logging.info("state: initializing the parameters and optimizer state (seed %d)", run.config.seed)
        return run.spec.init()
    params, source = initial.load(run.spec.abstract["params"])
    logging.info("initialized the parameters from %s", source)
    return {"params": params, "opt_state": run.spec.init_opt_state(params)}


@dataclasses.dataclass
class _Pending:
    """A dispatched step whose metrics are not read yet."""

    metrics: dict
    batch: dict
    rows: int
    length: int
    seconds: float  # between the returns of this step call and the previous one


class _Clock:
    """The loop's timing: the batch shapes whose step is compiled, and each step's tokens/s and MFU."""

    def __init__(self, run: Run):
        self.flops_per_token = run.flops_per_token
        self.peak = peak_flops_per_device()
        self.compiled: set[tuple[int, int]] = set()  # batch shapes whose step was called
        self.last_return = self.last_read = time.time()

    def step_returned(self) -> float:
        """Seconds since the previous step call returned: the step period whether the backend runs the step
        inside the call (CPU) or queues it (accelerators, where the next call waits for a free slot)."""
        now = time.time()
        seconds, self.last_return = now - self.last_return, now
        return seconds

    def throughput(self, pending: _Pending) -> tuple[float, float]:
        """(tokens/s, MFU) of a step whose metrics are read now: its tokens over the longer of the interval
        between the step calls' returns (right when the backend runs a step inside the call, or when a read
        is forced right after the previous one) and the interval between the reads (right when calls only
        queue work, as for the first steps after compilation)."""
        now = time.time()
        seconds = max(pending.seconds, now - self.last_read, 1e-9)
        self.last_read = now
        tokens_per_s = pending.rows * pending.length / seconds
        return tokens_per_s, mfu(tokens_per_s, self.flops_per_token, jax.device_count(), self.peak)

    def restart(self) -> None:
        """After the hooks: their time is not counted in the next step's tokens/s."""
        self.last_return = self.last_read = time.time()


class _Loop:
    """The steps of one `train` call (module docstring)."""

    def __init__(self, run: Run, workdir, batches, checkpointer, state, progress: Progress, resumed: bool):
        config = run.config
        self.run, self.workdir, self.batches, self.checkpointer = run, workdir, batches, checkpointer
        self.state, self.progress = state, progress
        self.frozen = run.load_frozen()
        self.writer = MetricsWriter(
            workdir,
            config.train.steps,
            progress.step,
            config.metrics.wandb_project,
            run_config=config.to_dict(),
        )
        self.faults = NonFiniteCounter(config.faults.max_nonfinite_in_a_row, progress.skipped_steps)
        self.preemption = PreemptionSignal(
            config.faults.preemption_check_every_steps, self._stop_plan, lambda: self.saved_step
        )
        self.profiler = StepProfiler(config.profile, workdir)
        self.clock = _Clock(run)
        self.saved_step = progress.step if checkpointer.all_steps() else -1
        self.dispatched, self.compiling = progress.step, False  # what a Ctrl-C's line says (`_stop_plan`)
        self.context = LoopContext(
            run,
            workdir,
            batches,
            progress.step,
            resumed,
            self.preemption.should_stop,
            self.preemption.request,
        )

    @property
    def total_steps(self) -> int:
        return self.run.config.train.steps

    def execute(self) -> str:
        try:
            for hook in self.run.hooks:
                hook.on_save(self.progress.step, self.context)
            return self._steps()
        finally:
            self.profiler.stop()
            self.preemption.restore_handler()
            self.writer.close()

    def _steps(self) -> str:
        """Trains to `train.steps`. Each step is dispatched before the previous one's metrics are read (`_read`),
        so `pending` is the step dispatched and not read yet; a step that a hook or a checkpoint follows is read
        at once, since its parameters and metrics decide what comes next. A read that asks for a rollback
        (`_roll_back`) discards the step dispatched meanwhile: its batch is trained on next (`refeed`)."""
        pending, refeed = None, None
        if self.progress.hooks_step != self.progress.step and self._hooks_due(self.progress.step):
            self._on_step()  # resumed at a step whose hooks did not finish
        while self._dispatched(pending) < self.total_steps:
            if self.preemption.should_stop(self._dispatched(pending)):
                return self._stop(pending)
            batch = next(self.batches) if refeed is None else refeed
            refeed = None
            dispatched = self._dispatch(batch, self._dispatched(pending))
            if self._read(pending):
                pending, refeed = None, batch
                continue
            step = self.progress.step + 1
            save_due = step % self.run.config.checkpoint.every_steps == 0 or step == self.total_steps
            hooks_due = self._hooks_due(step)
            if not (save_due or hooks_due):
                pending = dispatched
                continue
            pending = None
            if self._read(dispatched):
                continue
            if hooks_due:
                self._on_step()
            if save_due:
                self._save()
        self._read(pending)
        self.checkpointer.wait()
        if self.progress.hooks_step != self.progress.step and self._hooks_due(self.progress.step):
            if self.preemption.should_stop():
                return "preempted"  # SIGTERM during the last step's hooks: the resumed run redoes them
        return "done"

    def _stop_plan(self) -> str:
        """What the loop does after a first Ctrl-C (read by the signal's thread: a line, not a decision)."""
        if self.compiling:
            return f"stopping after step {self.dispatched}, whose train step compiles now, and saving it"
        return f"stopping after step {self.dispatched} and saving it"

    def _dispatched(self, pending: _Pending | None) -> int:
        """The steps dispatched so far: those read and the pending one."""
        return self.progress.step + (pending is not None)

    def _stop(self, pending: _Pending | None) -> str:
        """The clean stop of a SIGTERM/SIGINT: reads the pending step, saves a checkpoint at the current step."""
        self._read(pending)
        if not self.preemption.interrupted:  # a Ctrl-C said it at once
            logging.warning(
                "%s: saving a checkpoint at step %d and exiting", self.preemption.reason(), self.progress.step
            )
        if self.saved_step != self.progress.step:
            self._save()
        self.checkpointer.wait()
        return "preempted"

    def _dispatch(self, local_batch: dict, completed: int) -> _Pending:
        """Starts the train step on `local_batch` (this process's rows) after `completed` dispatched steps and
        returns it, unread."""
        batch = make_global_batch(local_batch, self.run.mesh)
        rows, length = batch["tokens"].shape
        self.profiler.before_step(completed)
        first, start = (rows, length) not in self.clock.compiled, time.time()
        self.dispatched, self.compiling = completed + 1, first  # what a Ctrl-C now says (`_stop_plan`)
        if first:
            logging.info(
                "train step: compiling for batches of %d x %d tokens (a rerun loads it from the XLA cache)",
                rows,
                length,
            )
        params, opt_state, step_metrics = self.run.train_step(rows).fn(
            self.state["params"], self.state["opt_state"], batch, self.frozen
        )
        self.compiling = False
        if first:
            self.clock.compiled.add((rows, length))
            logging.info("train step: ready in %.1f s", time.time() - start)
        self.state = {"params": params, "opt_state": opt_state}
        self.profiler.after_step(completed + 1, step_metrics)
        return _Pending(step_metrics, local_batch, rows, length, self.clock.step_returned())

    def _read(self, pending: _Pending | None) -> bool:
        """Reads a dispatched step's metrics (None: nothing is pending), counts and records it; rolls back when
        the non-finite steps in a row ask for it. True after a rollback."""
        if pending is None:
            return False
        step_metrics = jax.device_get(pending.metrics)
        progress, reasons = self.progress, self.run.optimizer.drop_reasons
        lr = float(self.run.lr_schedule(progress.updates))
        finite = bool(step_metrics["finite"])
        dropped = {reason: bool(step_metrics[reason]) for reason in reasons}
        progress.step += 1
        progress.tokens += pending.rows * pending.length
        progress.updates += finite and not any(dropped.values())
        progress.clipped_steps += bool(step_metrics["clipped"])
        for reason, flag in dropped.items():
            progress.dropped_steps[reason] += flag
        roll_back = self.faults.record(finite)
        progress.skipped_steps = self.faults.skipped_total
        tokens_per_s, step_mfu = self.clock.throughput(pending)
        # the objective's own metrics (pretraining: z_loss; post-training: rewards, log-ratios, margins)
        own = {k: float(v) for k, v in step_metrics.items() if k not in STEP_METRICS and k not in reasons}
        self.writer.write(
            {
                "step": progress.step,
                "tokens": progress.tokens,
                "seq_len": pending.length,
                "loss": float(step_metrics["loss"]),
                "lr": lr,
                "grad_norm": float(step_metrics["grad_norm"]),
                "clipped_fraction": progress.clipped_steps / progress.step,
                "tokens_per_s": tokens_per_s,
                "mfu": step_mfu,
                "skipped_steps": progress.skipped_steps,
                **{f"{reason}_steps": n for reason, n in progress.dropped_steps.items()},
                "rollbacks": progress.rollbacks,
                **own,
                # the batch source's own (the pipeline with Goldfish: goldfish_dropped_fraction)
                **self.batches.batch_metrics(pending.batch),
            },
            shown=tuple(own),
        )
        if roll_back:
            self._roll_back()
        return roll_back

    def _roll_back(self) -> None:
        """Restores the last good checkpoint's state and counters but leaves the data source where it is: the
        batches between that checkpoint and now are skipped, and the metrics written for them are rewound. The
        caller drops the step it dispatched after the one that asked for the rollback and trains on its batch
        next."""
        self.checkpointer.wait()
        restored = self.checkpointer.restore_latest(self.run.spec.abstract, data_iter=None)
        if restored is None:
            logging.error("non-finite steps in a row but no checkpoint yet to roll back to; continuing")
            return
        state, meta = restored
        progress = Progress.from_meta(meta["progress"], self.run.optimizer.drop_reasons)
        progress.skipped_steps = self.progress.skipped_steps
        progress.rollbacks = self.progress.rollbacks + 1
        logging.warning(
            "rolled back from step %d to step %d; the %d batches in between are skipped",
            self.progress.step,
            progress.step,
            self.progress.step - progress.step,
        )
        self.writer.rewind(progress.step)
        self.state, self.progress = state, progress

    def _hooks_due(self, step: int) -> bool:
        return any(due(hook, step, self.total_steps) for hook in self.run.hooks)

    def _on_step(self) -> bool:
        """Runs the due hooks on the current step's parameters; records their scalars. False when one gave
        up (SIGTERM): the checkpoint of this step keeps the previous `hooks_step`, so the resumed run calls
        them again."""
        step, record = self.progress.step, {}
        for hook in self.run.hooks:
            if due(hook, step, self.total_steps):
                scalars = hook.on_step(step, self.state["params"], self.context)
                if scalars is None:
                    return False
                record.update(scalars)
        if record:
            self.writer.write_scalars({"step": step, "tokens": self.progress.tokens, **record})
        self.progress.hooks_step = step
        self.clock.restart()
        return True

    def _save(self) -> None:
        progress = self.progress
        meta = {
            "progress": progress.to_meta(),
            "param_shapes": tree_shapes(self.run.spec.abstract["params"]),
            "seed": self.run.config.seed,
        }
        self.checkpointer.save(progress.step, self.state, self.batches, meta)
        for hook in self.run.hooks:
            hook.on_save(progress.step, self.context)
        self.saved_step = progress.step
