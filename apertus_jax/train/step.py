"""The train step: gradient accumulation over microbatches, one normalization, clipping, skip-if-non-finite,
optional z-loss and loss-spike skip.

The loss is normalized ONCE by the total number of unmasked tokens of the whole batch (summed over
microbatches), so splitting a batch never changes the loss or the gradient, whatever the per-microbatch
counts. A batch without unmasked tokens gives loss 0 and gradient 0.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax

from apertus_jax.optim.spikes import spike_skipped
from apertus_jax.train.loss import (
    DEFAULT_CHUNK_TOKENS,
    cross_entropy_sum,
    fused_cross_entropy_sum,
    z_loss_sum,
)

Batch = dict[str, jax.Array]
# apply_fn(params, tokens[B,T], positions[B,T], segment_ids[B,T]) -> logits[B,T,V]
ApplyFn = Callable[[Any, jax.Array, jax.Array, jax.Array], jax.Array]
# hidden_fn(params, tokens, positions, segment_ids) -> (final hidden state [B,T,D], output weights [D,V])
HiddenFn = Callable[[Any, jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


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


LossFn = Callable[[jax.Array, Batch], tuple[jax.Array, dict[str, jax.Array]]]


@dataclasses.dataclass(frozen=True)
class Objective:
    """A training objective other than the pretraining cross-entropy: the train step's plug-in.

    Attributes:
      loss_fn: `(logits [B, T, V] float32, microbatch) -> (loss_sum, sums)`: the objective summed over the
        microbatch's examples and float32 scalar sums, among them "count" (the normalizer: examples, pairs
        or tokens, summed over microbatches before the one division); the other sums are reported per count
        in the step's metrics.
      batch_arrays: extra per-row batch arrays the loss reads beyond `apertus_jax.data.pipeline.BATCH_KEYS`:
        `{name: (trailing shape, dtype name)}`, e.g. `{"ref_logprobs": ((2,), "float32")}` for `[B, 2]`
        arrays (the memory plan and AOT lowering build them abstractly).
    """

    loss_fn: LossFn
    batch_arrays: Mapping[str, tuple[tuple[int, ...], str]] = dataclasses.field(default_factory=dict)


def _sums(apply_fn: ApplyFn, hidden_fn, z_loss_weight: float, chunk_tokens: int, loss_fn: LossFn | None):
    """mb -> (objective sum, sums) of one microbatch; sums hold "loss", "z_loss", "count" and `loss_fn`'s
    other sums (post-training metrics)."""

    def sums(params, mb):
        args = (params, mb["tokens"], mb["positions"], mb["segment_ids"])
        if loss_fn is not None:  # post-training objectives (apertus_jax.posttrain.objectives) read the logits
            loss_sum, extra = loss_fn(apply_fn(*args), mb)
            return loss_sum, {"loss": jax.lax.stop_gradient(loss_sum), "z_loss": jnp.float32(0), **extra}
        if hidden_fn is not None:
            hidden, w_DxV = hidden_fn(*args)
            out = fused_cross_entropy_sum(
                hidden,
                w_DxV,
                mb["targets"],
                mb["loss_mask"],
                z_loss_weight=z_loss_weight,
                chunk_tokens=chunk_tokens,
            )
            return out["objective"], {k: out[k] for k in ("loss", "z_loss", "count")}
        logits = apply_fn(*args)
        loss_sum, count = cross_entropy_sum(logits, mb["targets"], mb["loss_mask"])
        z_sum = z_loss_sum(logits, mb["loss_mask"]) if z_loss_weight else jnp.float32(0)
        aux = {
            "loss": jax.lax.stop_gradient(loss_sum),
            "z_loss": jax.lax.stop_gradient(z_sum),
            "count": count,
        }
        return loss_sum + z_loss_weight * z_sum, aux

    return sums


def loss_grads_and_sums(
    apply_fn: ApplyFn,
    params,
    batch: Batch,
    num_microbatches: int,
    *,
    hidden_fn: HiddenFn | None = None,
    z_loss_weight: float = 0.0,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    loss_fn: LossFn | None = None,
):
    """Returns (grads, sums) of the whole batch, accumulated over microbatches.

    Without `loss_fn` (pretraining, SFT): grads are the gradient (float32, same tree as params) of
    (cross-entropy + z_loss_weight * z-loss) summed over unmasked tokens / max(total unmasked tokens, 1);
    sums are float32 scalars "loss" and "z_loss" (sums over unmasked tokens) and "count" (unmasked tokens).
    With `hidden_fn` the lm_head and loss run fused, chunk by chunk (`fused_cross_entropy_sum`); otherwise
    through `apply_fn`'s logits. `loss_fn(logits, microbatch) -> (loss_sum, sums)` replaces the objective
    (post-training): its "count" is the normalizer (examples or pairs) and its other sums are returned too.
    Microbatches run sequentially under `lax.scan`, so activation memory is that of one microbatch; one
    microbatch is differentiated directly.
    """
    sums_fn = _sums(apply_fn, hidden_fn, z_loss_weight, chunk_tokens, loss_fn)
    grad_fn = jax.grad(sums_fn, has_aux=True)

    def accumulate(carry, mb):
        grad_sum, sums = carry
        mb_grads, mb_sums = grad_fn(params, mb)
        return (jax.tree.map(jnp.add, grad_sum, mb_grads), jax.tree.map(jnp.add, sums, mb_sums)), None

    if num_microbatches == 1:
        # No accumulator: a zero-filled gradient tree plus one add is two passes over every parameter.
        grad_sum, sums = jax.tree.map(lambda x: x.astype(jnp.float32), grad_fn(params, batch))
    else:
        microbatches = split_microbatches(batch, num_microbatches)
        zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
        _, sums_shape = jax.eval_shape(sums_fn, params, jax.tree.map(lambda x: x[0], microbatches))
        init = (zeros, jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), sums_shape))
        (grad_sum, sums), _ = jax.lax.scan(accumulate, init, microbatches)
    denom = jnp.maximum(sums["count"], 1.0)
    return jax.tree.map(lambda g: g / denom, grad_sum), sums


def loss_and_grads(apply_fn: ApplyFn, params, batch: Batch, num_microbatches: int, **kwargs):
    """Returns (loss, grads, unmasked_tokens) of the whole batch (`loss_grads_and_sums`, same kwargs).

    loss = sum of token losses / max(total unmasked tokens, 1); grads are the gradient of that loss (plus the
    weighted z-loss, when `z_loss_weight` > 0).
    """
    grads, sums = loss_grads_and_sums(apply_fn, params, batch, num_microbatches, **kwargs)
    return sums["loss"] / jnp.maximum(sums["count"], 1.0), grads, sums["count"]


def make_train_step(
    apply_fn: ApplyFn,
    tx: optax.GradientTransformation,
    num_microbatches: int,
    *,
    hidden_fn: HiddenFn | None = None,
    z_loss_weight: float = 0.0,
    clip_norm: float = 0.0,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    loss_fn: LossFn | None = None,
):
    """Returns `train_step(params, opt_state, batch) -> (params, opt_state, metrics)` (not yet jitted).

    A non-finite loss or gradient norm leaves params and optimizer state untouched (metrics["finite"] = 0);
    the loop counts such steps and rolls back after too many in a row (faults.py). Clipping, weight decay,
    the learning rate and the optional loss-spike skip live in `tx` (an optax chain from apertus_jax.optim);
    `tx.update` receives the batch's loss as the extra argument `loss` (`apertus_jax.optim.spikes`).

    metrics (float32 scalars): loss (cross-entropy per unmasked token, or `loss_fn`'s loss per count),
    z_loss (mean log Z^2), grad_norm (global norm before clipping), clipped (1.0 when grad_norm > clip_norm >
    0), unmasked_tokens (the count), finite (1.0 or 0.0), spike_skipped (1.0 when the spike guard dropped
    this update), and the per-count means of `loss_fn`'s other sums.
    """

    def train_step(params, opt_state, batch: Batch):
        grads, sums = loss_grads_and_sums(
            apply_fn,
            params,
            batch,
            num_microbatches,
            hidden_fn=hidden_fn,
            z_loss_weight=z_loss_weight,
            chunk_tokens=chunk_tokens,
            loss_fn=loss_fn,
        )
        denom = jnp.maximum(sums["count"], 1.0)
        loss = sums["loss"] / denom
        grad_norm = optax.tree.norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        updates, new_opt_state = optax.with_extra_args_support(tx).update(grads, opt_state, params, loss=loss)
        skipped = spike_skipped(new_opt_state)
        new_params = optax.apply_updates(params, updates)
        keep_if = lambda ok, new, old: jax.tree.map(lambda n, o: jnp.where(ok, n, o), new, old)
        extra = {k: v / denom for k, v in sums.items() if k not in ("loss", "z_loss", "count")}
        metrics = {
            "loss": loss,
            "z_loss": sums["z_loss"] / denom,
            "grad_norm": grad_norm,
            "clipped": (grad_norm > clip_norm).astype(jnp.float32) if clip_norm > 0 else jnp.float32(0),
            "unmasked_tokens": sums["count"],
            "finite": finite.astype(jnp.float32),
            "spike_skipped": finite.astype(jnp.float32) * skipped,
            **extra,
        }
        new_params = keep_if(finite & (skipped == 0), new_params, params)
        return new_params, keep_if(finite, new_opt_state, opt_state), metrics

    return train_step
