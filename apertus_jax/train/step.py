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


def loss_and_grads(apply_fn: ApplyFn, params, batch: Batch, num_microbatches: int):
    """Returns (loss, grads, unmasked_tokens) of the whole batch, accumulated over microbatches.

    loss = sum of token losses / max(total unmasked tokens, 1); grads are the gradient of that loss (float32,
    same tree as params). Microbatches run sequentially under `lax.scan`, so activation memory is that of one
    microbatch.
    """

    def sum_loss(p, mb):
        logits = apply_fn(p, mb["tokens"], mb["positions"], mb["segment_ids"])
        return cross_entropy_sum(logits, mb["targets"], mb["loss_mask"])

    grad_fn = jax.value_and_grad(sum_loss, has_aux=True)

    def accumulate(carry, mb):
        grad_sum, loss_sum, count = carry
        (mb_loss, mb_count), mb_grads = grad_fn(params, mb)
        grad_sum = jax.tree.map(jnp.add, grad_sum, mb_grads)
        return (grad_sum, loss_sum + mb_loss, count + mb_count), None

    zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
    init = (zeros, jnp.float32(0), jnp.float32(0))
    (grad_sum, loss_sum, count), _ = jax.lax.scan(
        accumulate, init, split_microbatches(batch, num_microbatches)
    )
    denom = jnp.maximum(count, 1.0)
    grads = jax.tree.map(lambda g: g / denom, grad_sum)
    return loss_sum / denom, grads, count


def make_train_step(apply_fn: ApplyFn, tx: optax.GradientTransformation, num_microbatches: int):
    """Returns `train_step(params, opt_state, batch) -> (params, opt_state, metrics)` (not yet jitted).

    A non-finite loss or gradient norm leaves params and optimizer state untouched (metrics["finite"] = 0);
    the loop counts such steps and rolls back after too many in a row (faults.py). Clipping, weight decay and
    the learning rate live in `tx` (an optax chain from apertus_jax.optim).

    metrics (float32 scalars): loss, grad_norm (before clipping), unmasked_tokens, finite (1.0 or 0.0).
    """

    def train_step(params, opt_state, batch: Batch):
        loss, grads, count = loss_and_grads(apply_fn, params, batch, num_microbatches)
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
        }
        return keep_if_finite(new_params, params), keep_if_finite(new_opt_state, opt_state), metrics

    return train_step
