"""The train step: gradient accumulation over microbatches, one normalization, clipping, skip-if-non-finite.

The loss is normalized ONCE by the total number of unmasked tokens of the whole batch (summed over
microbatches), so splitting a batch never changes the loss or the gradient, whatever the per-microbatch
counts. A batch without unmasked tokens gives loss 0 and gradient 0.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from apertus_jax.train.loss import cross_entropy_sum

Batch = dict[str, jax.Array]
# apply_fn(params, tokens[B,T], positions[B,T], segment_ids[B,T]) -> logits[B,T,V]
ApplyFn = Callable[[Any, jax.Array, jax.Array, jax.Array], jax.Array]


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


def lm_loss(logits: jax.Array, mb: Batch) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The pretraining (and SFT) loss of a microbatch: (summed token loss, {"count": unmasked tokens})."""
    loss_sum, count = cross_entropy_sum(logits, mb["targets"], mb["loss_mask"])
    return loss_sum, {"count": count}


def loss_grads_and_metrics(apply_fn: ApplyFn, params, batch: Batch, num_microbatches: int, loss_fn=lm_loss):
    """Returns (loss, grads, count, metrics) of the whole batch, accumulated over microbatches.

    `loss_fn(logits, microbatch) -> (loss_sum, sums)` gives a summed loss and float32 sums, among them
    "count" (the normalizer: unmasked tokens for `lm_loss`, examples or pairs for post-training losses);
    loss = sum of losses / max(total count, 1), every other sum is divided by the same count (metrics).
    grads are the gradient of that loss (float32, same tree as params). Microbatches run sequentially under
    `lax.scan`, so activation memory is that of one microbatch.
    """

    def sum_loss(p, mb):
        return loss_fn(apply_fn(p, mb["tokens"], mb["positions"], mb["segment_ids"]), mb)

    grad_fn = jax.value_and_grad(sum_loss, has_aux=True)

    def accumulate(carry, mb):
        grad_sum, loss_sum, sums = carry
        (mb_loss, mb_sums), mb_grads = grad_fn(params, mb)
        grad_sum = jax.tree.map(jnp.add, grad_sum, mb_grads)
        return (grad_sum, loss_sum + mb_loss, jax.tree.map(jnp.add, sums, mb_sums)), None

    microbatches = split_microbatches(batch, num_microbatches)
    zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
    first = jax.tree.map(lambda x: x[0], microbatches)
    _, sums_shape = jax.eval_shape(sum_loss, params, first)
    init = (zeros, jnp.float32(0), jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), sums_shape))
    (grad_sum, loss_sum, sums), _ = jax.lax.scan(accumulate, init, microbatches)
    count = sums.pop("count")
    denom = jnp.maximum(count, 1.0)
    grads = jax.tree.map(lambda g: g / denom, grad_sum)
    return loss_sum / denom, grads, count, {k: v / denom for k, v in sums.items()}


def loss_and_grads(apply_fn: ApplyFn, params, batch: Batch, num_microbatches: int):
    """Returns (loss, grads, unmasked_tokens) of the whole batch under `lm_loss`.

    loss = sum of token losses / max(total unmasked tokens, 1); see `loss_grads_and_metrics`.
    """
    return loss_grads_and_metrics(apply_fn, params, batch, num_microbatches)[:3]


def make_train_step(
    apply_fn: ApplyFn, tx: optax.GradientTransformation, num_microbatches: int, loss_fn=lm_loss
):
    """Returns `train_step(params, opt_state, batch) -> (params, opt_state, metrics)` (not yet jitted).

    A non-finite loss or gradient norm leaves params and optimizer state untouched (metrics["finite"] = 0);
    the loop counts such steps and rolls back after too many in a row (faults.py). Clipping, weight decay and
    the learning rate live in `tx` (an optax chain from apertus_jax.optim).

    metrics (float32 scalars): loss, grad_norm (before clipping), unmasked_tokens (the loss's count),
    finite (1.0 or 0.0), and the per-count means of `loss_fn`'s other sums (see `loss_grads_and_metrics`).
    """

    def train_step(params, opt_state, batch: Batch):
        loss, grads, count, extra = loss_grads_and_metrics(apply_fn, params, batch, num_microbatches, loss_fn)
        grad_norm = optax.tree.norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        keep_if_finite = lambda new, old: jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)
        metrics = {
            "loss": loss,
            "grad_norm": grad_norm,
            "unmasked_tokens": count,
            "finite": finite.astype(jnp.float32),
            **extra,
        }
        return keep_if_finite(new_params, params), keep_if_finite(new_opt_state, opt_state), metrics

    return train_step
