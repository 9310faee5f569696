"""Gradient accumulation: any microbatch split equals the unsplit batch."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.train.step import loss_and_grads, make_train_step, split_microbatches

ROWS, LENGTH, MICRO = 8, 32, 4


@pytest.fixture(scope="module")
def model(tiny_model):
    apply_fn, params = tiny_model
    jitted = {m: jax.jit(functools.partial(loss_and_grads, apply_fn, num_microbatches=m)) for m in (1, MICRO)}
    return apply_fn, params, jitted


def _batch_with_unequal_masks(text_batch):
    batch = text_batch(rows=ROWS, length=LENGTH)
    mask = batch["loss_mask"]
    mask[1] = 0  # rows 1 and 5 (microbatch 1 of 4) have no unmasked token at all
    mask[5] = 0
    mask[2, 3:] = 0  # microbatch 2 has 3 + 32 tokens
    return batch


def test_accumulated_equals_unsplit(model, text_batch):
    apply_fn, params, jitted = model
    batch = _batch_with_unequal_masks(text_batch)
    counts = split_microbatches({"m": batch["loss_mask"]}, MICRO)["m"].sum(axis=(1, 2))
    np.testing.assert_array_equal(counts, [64, 0, 35, 64])
    loss1, grads1, n1 = jitted[1](params, batch)
    lossm, gradsm, nm = jitted[MICRO](params, batch)
    assert float(n1) == float(nm) == 163
    np.testing.assert_allclose(lossm, loss1, rtol=1e-6, atol=1e-6)
    for a, b in zip(jax.tree.leaves(gradsm), jax.tree.leaves(grads1)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    # The loss is the mean over unmasked tokens of the cross-entropy (float64 numpy reference).
    logits = np.asarray(
        apply_fn(params, batch["tokens"], batch["positions"], batch["segment_ids"]), np.float64
    )
    log_z = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    nll = log_z - np.take_along_axis(logits, batch["targets"][..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(loss1, (nll * batch["loss_mask"]).sum() / 163, rtol=1e-5)


def test_zero_unmasked_batch_gives_zero_loss_and_grad(model, text_batch):
    _, params, jitted = model
    batch = text_batch(rows=ROWS, length=LENGTH)
    batch["loss_mask"][:] = 0
    loss, grads, count = jitted[MICRO](params, batch)
    assert float(loss) == 0.0 and float(count) == 0.0
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(grads))


def test_non_finite_step_leaves_params_and_optimizer_untouched(model, text_batch):
    apply_fn, params, _ = model
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2))
    step = jax.jit(make_train_step(apply_fn, tx, 2))
    batch = text_batch(rows=4, length=16)
    poisoned = jax.tree.map(lambda p: p, params)
    poisoned["final_norm"]["weight"] = poisoned["final_norm"]["weight"].at[0].set(jnp.inf)
    opt_state = tx.init(params)
    new_params, new_opt_state, metrics = step(poisoned, opt_state, batch)
    assert float(metrics["finite"]) == 0.0
    for a, b in zip(jax.tree.leaves((new_params, new_opt_state)), jax.tree.leaves((poisoned, opt_state))):
        np.testing.assert_array_equal(a, b)
    moved, _, metrics = step(params, opt_state, batch)
    assert float(metrics["finite"]) == 1.0
    assert all(
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(moved), jax.tree.leaves(params))
        if a.ndim >= 2
    )
