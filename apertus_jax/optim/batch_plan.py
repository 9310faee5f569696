"""Batch-size plan: tokens per batch as a function of tokens consumed, and steps <-> tokens.

Apertus doubles the global batch mid-run without touching the learning rate (docs/recipe.md section 5):
8B 4.2M -> 8.4M tokens per batch at ~7T tokens, 70B 8.4M -> 16.8M at ~4.4T. The LR schedules are
functions of tokens consumed; `schedule_in_steps` composes one with the plan's step -> tokens map so
optax (which counts steps) can use it.

Convention: `step` is the number of completed optimizer updates (optax's 0-based `count`).
`tokens_at_step(step)` is the number of tokens those updates consumed, and `batch_tokens_at_step(step)`
is the size of the batch of the next update (update number `step + 1`).
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from apertus_jax.optim.schedules import Schedule


class BatchSizePlan:
    """Piecewise-constant tokens per batch, with phase starts counted in tokens.

    Args:
      phases: `[(start_tokens, tokens_per_batch), ...]`, the first starting at 0 tokens, starts
        strictly increasing, batch sizes positive integers.
      snap: a phase start must fall on a batch edge of the previous phase (the previous start plus
        a whole number of its batches). With `snap=False` (default) a start off an edge raises; with
        `snap=True` it is rounded UP to the next edge (e.g. Apertus' "7T tokens" becomes
        1,668,931 batches of 4,194,304 tokens = 7,000,003,969,024 tokens).

    Raises:
      ValueError: on an empty plan, a first start other than 0, non-increasing starts, a
        non-positive batch size, or (without `snap`) a start that is not on a batch edge.
    """

    def __init__(self, phases: Sequence[tuple[int, int]], snap: bool = False):
        if not phases:
            raise ValueError("a BatchSizePlan needs at least one (start_tokens, tokens_per_batch) phase")
        if phases[0][0] != 0:
            raise ValueError(f"the first phase must start at 0 tokens, got {phases[0][0]!r}")
        start_steps, start_tokens, batch_tokens = [], [], []
        for start, size in phases:
            if int(size) != size or size <= 0:
                raise ValueError(f"tokens_per_batch must be a positive integer, got {size!r}")
            if int(start) != start:
                raise ValueError(f"start_tokens must be an integer, got {start!r}")
            start, size = int(start), int(size)
            if start_tokens:
                if start <= start_tokens[-1]:
                    raise ValueError(f"phase starts must increase, got {start} after {start_tokens[-1]}")
                steps, remainder = divmod(start - start_tokens[-1], batch_tokens[-1])
                if remainder and not snap:
                    below = start - remainder
                    raise ValueError(
                        f"phase start {start} is not on a batch edge of the previous phase "
                        f"({batch_tokens[-1]} tokens per batch); use {below} or "
                        f"{below + batch_tokens[-1]}, or pass snap=True to round up"
                    )
                steps += bool(remainder)
                start_steps.append(start_steps[-1] + steps)
                start_tokens.append(start_tokens[-1] + steps * batch_tokens[-1])
            else:
                start_steps.append(0)
                start_tokens.append(0)
            batch_tokens.append(size)
        self.start_steps = tuple(start_steps)
        self.start_tokens = tuple(start_tokens)
        self.batch_tokens = tuple(batch_tokens)

    @property
    def phases(self) -> tuple[tuple[int, int], ...]:
        """The (possibly snapped) `(start_tokens, tokens_per_batch)` phases."""
        return tuple(zip(self.start_tokens, self.batch_tokens))

    def __repr__(self) -> str:
        return f"BatchSizePlan({list(self.phases)})"

    def _phase_of_step(self, step: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(steps as int64, index of the phase each step falls in)."""
        steps = np.asarray(step)
        if steps.dtype.kind not in "iu" or np.any(steps < 0):
            raise ValueError(f"step must be an integer (or integer array) >= 0, got {step!r}")
        steps = steps.astype(np.int64)
        return steps, np.searchsorted(self.start_steps, steps, side="right") - 1

    def tokens_at_step(self, step: int | np.ndarray | jax.Array) -> int | np.ndarray | jax.Array:
        """Tokens consumed by the first `step` updates.

        Args:
          step: a Python int or NumPy integer (array): exact, returns a Python int (an int64 array for
            an array), no int32 overflow. Or a jax integer array, possibly traced inside `jax.jit`:
            returns the default float dtype (float32 keeps ~7 significant digits, plenty for an LR
            schedule; jax has no int64 without `jax_enable_x64`).

        Raises:
          ValueError: for a negative or non-integer host `step`.
        """
        if isinstance(step, jax.Array):
            tokens = jnp.zeros(jnp.shape(step), jnp.result_type(float))
            for first_step, first_tokens, size in zip(self.start_steps, self.start_tokens, self.batch_tokens):
                in_phase = float(first_tokens) + (step - first_step).astype(tokens.dtype) * float(size)
                tokens = jnp.where(step >= first_step, in_phase, tokens)
            return tokens
        steps, phase = self._phase_of_step(step)
        start_steps, start_tokens, batch_tokens = (
            np.asarray(values, np.int64)[phase]
            for values in (self.start_steps, self.start_tokens, self.batch_tokens)
        )
        tokens = start_tokens + (steps - start_steps) * batch_tokens
        return int(tokens) if tokens.ndim == 0 else tokens

    def batch_tokens_at_step(self, step: int | np.ndarray) -> int | np.ndarray:
        """Tokens in the batch of the next update after `step` completed updates (host ints)."""
        _, phase = self._phase_of_step(step)
        sizes = np.asarray(self.batch_tokens, np.int64)[phase]
        return int(sizes) if sizes.ndim == 0 else sizes

    def step_at_tokens(self, tokens: int) -> int:
        """Smallest number of updates that consume at least `tokens` tokens.

        The exact inverse of `tokens_at_step` on batch edges; between edges it rounds up (the steps
        needed for a token budget).

        Raises:
          ValueError: for negative or non-integer `tokens`.
        """
        if int(tokens) != tokens or tokens < 0:
            raise ValueError(f"tokens must be an integer >= 0, got {tokens!r}")
        tokens = int(tokens)
        phase = int(np.searchsorted(self.start_tokens, tokens, side="right")) - 1
        offset = tokens - self.start_tokens[phase]
        return self.start_steps[phase] + -(-offset // self.batch_tokens[phase])


def schedule_in_steps(token_schedule: Schedule, plan: BatchSizePlan) -> Schedule:
    """An optax schedule over the 0-based update count from a schedule over tokens consumed.

    `lr(count) = token_schedule(plan.tokens_at_step(count))`: the LR of an update depends on the
    tokens consumed before it, so doubling the batch at a token boundary does not move it. Works
    inside `jax.jit` (count is then a traced int32).
    """

    def schedule(count: int | jax.Array) -> jax.Array:
        return token_schedule(plan.tokens_at_step(count))

    return schedule
