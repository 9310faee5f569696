"""The train step: an objective's loss accumulated over microbatches, one normalization, clipping, the update.

    step = make_train_step(spec, tx, objective, num_microbatches, clip_norm)   # then jax.jit it
    params, opt_state, metrics = step(params, opt_state, batch, frozen)

The objective (`Objective`) is the step's one plug-in: the pretraining cross-entropy
(`apertus_jax.train.loss.cross_entropy`) is one, QRPO and DPO are others. Its loss is summed over the
batch and divided ONCE by the total of its normalizer "count" (summed over microbatches), so splitting a batch
never changes the loss or the gradient. A batch with count 0 gives loss 0 and gradient 0. A non-finite loss
or gradient norm leaves the parameters and the optimizer state as they were.
"""

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax

Batch = dict[str, jax.Array]
# loss_fn(outputs, microbatch, frozen) -> (loss_sum, sums)
LossFn = Callable[[Any, Batch, Any], tuple[jax.Array, dict[str, jax.Array]]]
READS = ("logits", "hidden")


@dataclasses.dataclass(frozen=True)
class FrozenParams:
    """Parameters an objective reads but never trains (a reference or teacher model): inputs of the step,
    never constants of its program.

    Attributes:
      abstract: their tree of `jax.ShapeDtypeStruct`s with the NamedShardings of the run's mesh (the step's
        input shardings; AOT lowering and the memory plan read only this).
      load: () -> the arrays, placed as `abstract` says (called once, by the loop).
    """

    abstract: Any
    load: Callable[[], Any]


@dataclasses.dataclass(frozen=True)
class Objective:
    """The loss of the train step (the pretraining cross-entropy, QRPO, DPO, ...).

    Attributes:
      loss_fn: `(outputs, microbatch, frozen) -> (loss_sum, sums)`: the objective summed over the microbatch
        and float32 scalar sums, among them "count" (the normalizer: tokens, examples or pairs, summed over
        microbatches before the one division) and optionally "loss" (what the step reports as its loss; by
        default the objective itself); every other sum is reported per count in the step's metrics.
        `outputs` is what the objective reads of the model: float32 logits `[B, T, V]` ("logits"), or the
        final hidden state `[B, T, D]` and the output weights `[D, V]` ("hidden", for a loss fused with the
        lm_head). `frozen` is the loaded `frozen` parameters (None without them).
      reads: "logits" or "hidden".
      batch_arrays: per-row batch arrays the loss reads beyond `apertus_jax.data.pipeline.BATCH_KEYS`:
        `{name: (trailing shape, dtype name)}`, e.g. `{"ref_logprobs": ((2,), "float32")}` for `[B, 2]`
        arrays (the memory plan and AOT lowering build them abstractly).
      frozen: `(run) -> FrozenParams` on the run's mesh (`apertus_jax.train.run.Run`), or None.

    Raises:
      ValueError: in `__post_init__`, `reads` is not one of `READS`.
    """

    loss_fn: LossFn
    reads: str = "logits"
    batch_arrays: Mapping[str, tuple[tuple[int, ...], str]] = dataclasses.field(default_factory=dict)
    frozen: Callable[[Any], FrozenParams] | None = None

    def __post_init__(self):
        if self.reads not in READS:
            raise ValueError(f"reads={self.reads!r} must be one of {READS}")


def split_microbatches(batch: Batch, num_microbatches: int) -> Batch:
    """[B, T] arrays -> [M, B/M, T]; microbatch m takes rows m, m+M, m+2M, ...

    Strided rows keep every microbatch spread evenly over the batch-sharded devices (each device's
    contiguous block of rows holds B/(M*devices) rows of every microbatch), so the split needs no communication.

    Raises:
      ValueError: B is not divisible by num_microbatches.
    """

    def split(x):
        rows = x.shape[0]
        if rows % num_microbatches:
            raise ValueError(f"batch of {rows} rows does not split into {num_microbatches} microbatches")
        return jnp.swapaxes(x.reshape(rows // num_microbatches, num_microbatches, *x.shape[1:]), 0, 1)

    return jax.tree.map(split, batch)


def _sums(spec, objective: Objective):
    """(params, mb, frozen) -> (objective sum, sums) of one microbatch; sums hold "loss" and "count"."""
    forward = spec.hidden_fn if objective.reads == "hidden" else spec.apply_fn

    def sums(params, mb, frozen):
        outputs = forward(params, mb["tokens"], mb["positions"], mb["segment_ids"])
        loss_sum, extra = objective.loss_fn(outputs, mb, frozen)
        return loss_sum, {"loss": jax.lax.stop_gradient(loss_sum), **extra} if "loss" not in extra else extra

    return sums


def grads_and_sums(spec, objective: Objective, params, batch: Batch, num_microbatches: int, frozen=None):
    """Returns (grads, sums) of the whole batch, accumulated over microbatches.

    grads: the gradient (float32, the tree of params) of the objective's sum / max(total count, 1); sums:
    float32 scalars, the objective's sums over the batch ("loss", "count" and its own). `spec` gives the
    model's forward functions (`apply_fn`, `hidden_fn`: `apertus_jax.train.state.AbstractParams`). Microbatches
    run sequentially under `lax.scan`, so activation memory is that of one microbatch; one microbatch is
    differentiated directly.
    """
    sums_fn = _sums(spec, objective)
    grad_fn = jax.grad(sums_fn, has_aux=True)

    def accumulate(carry, mb):
        grad_sum, sums = carry
        mb_grads, mb_sums = grad_fn(params, mb, frozen)
        return (jax.tree.map(jnp.add, grad_sum, mb_grads), jax.tree.map(jnp.add, sums, mb_sums)), None

    if num_microbatches == 1:
        # No accumulator: a zero-filled gradient tree plus one add is two passes over every parameter.
        grad_sum, sums = jax.tree.map(lambda x: x.astype(jnp.float32), grad_fn(params, batch, frozen))
    else:
        microbatches = split_microbatches(batch, num_microbatches)
        zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
        first = jax.tree.map(lambda x: x[0], microbatches)
        _, sums_shape = jax.eval_shape(sums_fn, params, first, frozen)
        init = (zeros, jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), sums_shape))
        (grad_sum, sums), _ = jax.lax.scan(accumulate, init, microbatches)
    denom = jnp.maximum(sums["count"], 1.0)
    return jax.tree.map(lambda g: g / denom, grad_sum), sums


def _no_drops(opt_state) -> dict[str, jax.Array]:
    del opt_state
    return {}


def make_train_step(
    spec,
    tx: optax.GradientTransformation,
    objective: Objective,
    num_microbatches: int,
    clip_norm: float = 0.0,
    dropped: Callable[[Any], Mapping[str, jax.Array]] = _no_drops,
):
    """Returns `train_step(params, opt_state, batch, frozen) -> (params, opt_state, metrics)` (not jitted).

    A non-finite loss or gradient norm leaves params and optimizer state untouched (metrics["finite"] = 0);
    the loop counts such steps and rolls back after too many in a row (`apertus_jax.train.loop`). Clipping,
    weight decay and the learning rate live in `tx` (an optax chain from apertus_jax.optim); `tx.update`
    receives the batch's loss as the extra argument `loss`. The optimizer may drop an update (a loss-spike
    guard): `dropped(new_opt_state)` gives `{reason: 1.0 or 0.0}` (`apertus_jax.optim.config.RunOptimizer`),
    and a dropped update leaves the parameters as they were.

    metrics (float32 scalars): loss (the objective's "loss" per count), grad_norm (global norm before
    clipping), clipped (1.0 when grad_norm > clip_norm > 0), unmasked_tokens (the count), finite (1.0 or
    0.0), each reason of `dropped` (1.0 when the optimizer dropped this finite update for it), and the
    per-count means of the objective's other sums (the pretraining z_loss, post-training rewards and margins).
    """

    def train_step(params, opt_state, batch: Batch, frozen):
        grads, sums = grads_and_sums(spec, objective, params, batch, num_microbatches, frozen)
        denom = jnp.maximum(sums["count"], 1.0)
        loss = sums["loss"] / denom
        grad_norm = optax.tree.norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        updates, new_opt_state = optax.with_extra_args_support(tx).update(grads, opt_state, params, loss=loss)
        reasons = dropped(new_opt_state)
        new_params = optax.apply_updates(params, updates)
        keep_if = lambda ok, new, old: jax.tree.map(lambda n, o: jnp.where(ok, n, o), new, old)
        extra = {k: v / denom for k, v in sums.items() if k not in ("loss", "count")}
        metrics = {
            "loss": loss,
            **extra,
            "grad_norm": grad_norm,
            "clipped": (grad_norm > clip_norm).astype(jnp.float32) if clip_norm > 0 else jnp.float32(0),
            "unmasked_tokens": sums["count"],
            "finite": finite.astype(jnp.float32),
            **{reason: finite.astype(jnp.float32) * flag for reason, flag in reasons.items()},
        }
        dropped_any = functools.reduce(jnp.add, reasons.values()) if reasons else jnp.float32(0)
        new_params = keep_if(finite & (dropped_any == 0), new_params, params)
        return new_params, keep_if(finite, new_opt_state, opt_state), metrics

    return train_step
