"""Hooks: the trainer's plug-in points for work beside the steps (evaluation, records, manifests).

The loop calls every hook of its `Run` at fixed points, in the order given:

    start(context)        once, after the state is restored or initialized, before the first step
    due(step)             after step `step` was dispatched: True asks the loop to settle that step now and
                          call `at_step` with its parameters (and not to overlap the next step with it)
    at_step(step, params) -> scalars to record at `step` (metrics.jsonl, TensorBoard), or None when it gave
                          up because `context.should_stop()` turned true (SIGTERM): the loop then saves and
                          the resumed run calls `at_step` for that step again
    after_save(step)      after each checkpoint of `step` was started (the batch source is at that step)
    close()               once, when the loop ends (also on errors)

A hook never changes the train state or the data order; the loop's outputs with and without hooks are the
same. In-loop evaluation (`apertus_jax.eval.in_loop`), the run's records (`apertus_jax.jobs`) and the probe
manifest of the memorization study are hooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class LoopContext:
    """What a hook sees of the loop.

    Attributes:
      run: the `apertus_jax.train.assemble.Run` (config, mesh, tokenizer, train-state spec).
      workdir: the run directory.
      batches: the loop's batch source (`apertus_jax.train.batches.BatchSource`); its `consumed()` counts the
        batches handed to the train step so far, never those read ahead.
      step: the step the loop starts from (0 for a fresh run).
      resumed: True when the state was restored from this workdir's own checkpoint.
      should_stop: () -> bool, True once SIGTERM/SIGINT arrived (long hooks check it and give up).
      request_stop: (reason) -> None: asks for the clean stop a SIGTERM gives (a checkpoint at the current
        step, outcome "preempted"), e.g. a job's time budget or a resume check.
    """

    run: Any
    workdir: str
    batches: Any
    step: int
    resumed: bool
    should_stop: Callable[[], bool]
    request_stop: Callable[[str], None]


class Hook:
    """Base class of the loop's hooks; every method is optional (module docstring)."""

    def start(self, context: LoopContext) -> None:
        """Called once before the first step."""

    def due(self, step: int) -> bool:
        """Whether `at_step` wants the parameters of step `step` (settled synchronously)."""
        return False

    def at_step(self, step: int, params) -> dict[str, float] | None:
        """Scalars to record at `step`, or None when interrupted by `should_stop`."""
        return {}

    def after_save(self, step: int) -> None:
        """Called after the checkpoint of `step` was started."""

    def close(self) -> None:
        """Called once when the loop ends."""
