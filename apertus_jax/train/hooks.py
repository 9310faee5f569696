"""Hooks: the trainer's plug-in points for work beside the steps (evaluation, records, manifests).

    class Evaluate(Hook):
        every_steps = 100
        def on_step(self, step, params, context): return {"eval/loss": ...}
    status = train(Run(config, hooks=[Evaluate()]), workdir)

The loop calls every hook of its `Run`, in the order given, at two points:

    on_save(step, context)          once before the first step (step = `context.step`, the state the loop
                                    starts from: restored or initial), then after each checkpoint of `step`
                                    was started (the batch source is at that step)
    on_step(step, params, context)  after every `every_steps`-th step and the last one (never when
                                    `every_steps` is 0): the loop settles that step first and does not overlap
                                    the next one with it; returns scalars to record at `step` (metrics.jsonl,
                                    TensorBoard), or None when it gave up because `context.should_stop()`
                                    turned true (SIGTERM): the loop then saves and the resumed run calls
                                    `on_step` for that step again

A hook that holds a resource (a file, a thread, a client) is opened and closed by the job that builds it,
around its `train` call (`with` or `try/finally`); the loop closes nothing of a hook.

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
      run: the `apertus_jax.train.run.Run` (config, mesh, tokenizer, train-state spec).
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
    """Base class of the loop's hooks (module docstring): both methods are optional.

    Attributes:
      every_steps: `on_step` follows every `every_steps`-th step and the last one; 0 never.
    """

    every_steps: int = 0

    def on_step(self, step: int, params, context: LoopContext) -> dict[str, float] | None:
        """Scalars to record at `step`, or None when interrupted by `context.should_stop`."""
        return {}

    def on_save(self, step: int, context: LoopContext) -> None:
        """Called before the first step (`step == context.step`) and after each checkpoint of `step`."""


def due(hook: Hook, step: int, total_steps: int) -> bool:
    """True when `hook.on_step` follows step `step` (>= 1) of a run of `total_steps`."""
    every = hook.every_steps
    return bool(every) and step > 0 and (step % every == 0 or step == total_steps)
