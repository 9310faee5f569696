"""The train step: any microbatch split equals the unsplit batch; a non-finite step changes nothing; an
objective reads logits or the fused head, and frozen parameters come in as inputs of the step."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.train.loss import cross_entropy
from apertus_jax.train.step import Objective, grads_and_sums, make_train_step, split_microbatches

ROWS, LENGTH, MICRO = 8, 32, 4


@pytest.fixture(scope="module")
def model(tiny_model):
    spec, params = tiny_model()
    jitted = {
        m: jax.jit(functools.partial(grads_and_sums, spec, cross_entropy(), num_microbatches=m))
        for m in (1, MICRO)
    }
    return spec, params, jitted


def _batch_with_unequal_masks(text_batch):
    batch = text_batch(rows=ROWS, length=LENGTH)
    mask = batch["loss_mask"]
    mask[1] = 0  # rows 1 and 5 (microbatch 1 of 4) have no unmasked token at all
    mask[5] = 0
    mask[2, 3:] = 0  # microbatch 2 has 3 + 32 tokens
    return batch


def _nll(spec, params, batch) -> np.ndarray:
    """Token cross-entropy [B, T] of the model's logits, float64 numpy."""
    logits = np.asarray(
        spec.apply_fn(params, batch["tokens"], batch["positions"], batch["segment_ids"]), np.float64
    )
    log_z = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    return log_z - np.take_along_axis(logits, batch["targets"][..., None], axis=-1)[..., 0]


@pytest.mark.slow
def test_accumulated_equals_unsplit(model, text_batch):
    spec, params, jitted = model
    batch = _batch_with_unequal_masks(text_batch)
    counts = split_microbatches({"m": batch["loss_mask"]}, MICRO)["m"].sum(axis=(1, 2))
    np.testing.assert_array_equal(counts, [64, 0, 35, 64])
    grads1, sums1 = jitted[1](params=params, batch=batch)
    gradsm, sumsm = jitted[MICRO](params=params, batch=batch)
    assert float(sums1["count"]) == float(sumsm["count"]) == 163
    np.testing.assert_allclose(sumsm["loss"], sums1["loss"], rtol=1e-6)
    for a, b in zip(jax.tree.leaves(gradsm), jax.tree.leaves(grads1)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    # The loss is the cross-entropy summed over unmasked tokens (float64 numpy reference).
    nll = _nll(spec, params, batch)
    np.testing.assert_allclose(sums1["loss"], (nll * batch["loss_mask"]).sum(), rtol=1e-5)


@pytest.mark.slow
def test_zero_unmasked_batch_gives_zero_loss_and_grad(model, text_batch):
    _, params, jitted = model
    batch = text_batch(rows=ROWS, length=LENGTH)
    batch["loss_mask"][:] = 0
    grads, sums = jitted[MICRO](params=params, batch=batch)
    assert float(sums["loss"]) == 0.0 and float(sums["count"]) == 0.0
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(grads))


@pytest.mark.slow
def test_non_finite_step_leaves_params_and_optimizer_untouched(model, text_batch):
    spec, params, _ = model
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2))
    step = jax.jit(make_train_step(spec, tx, cross_entropy(), 2))
    batch = text_batch(rows=4, length=16)
    poisoned = jax.tree.map(lambda p: p, params)
    poisoned["final_norm"]["weight"] = poisoned["final_norm"]["weight"].at[0].set(jnp.inf)
    opt_state = tx.init(params)
    new_params, new_opt_state, metrics = step(poisoned, opt_state, batch, None)
    assert float(metrics["finite"]) == 0.0
    for a, b in zip(jax.tree.leaves((new_params, new_opt_state)), jax.tree.leaves((poisoned, opt_state))):
        np.testing.assert_array_equal(a, b)
    moved, _, metrics = step(params, opt_state, batch, None)
    assert float(metrics["finite"]) == 1.0
    assert all(
        not np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(moved), jax.tree.leaves(params))
        if a.ndim >= 2
    )


def _logits_cross_entropy(logits_BxTxV, mb, frozen):
    del frozen
    log_p = jax.nn.log_softmax(logits_BxTxV)
    nll = -jnp.take_along_axis(log_p, mb["targets"][..., None], axis=-1)[..., 0]
    mask = mb["loss_mask"].astype(bool)
    return jnp.where(mask, nll, 0.0).sum(), {"count": mask.sum(dtype=jnp.float32)}


@pytest.mark.slow
def test_an_objective_reading_logits_equals_the_fused_head(model, text_batch):
    spec, params, jitted = model
    batch = _batch_with_unequal_masks(text_batch)
    grads, sums = grads_and_sums(spec, Objective(_logits_cross_entropy), params, batch, MICRO)
    fused_grads, fused_sums = jitted[MICRO](params=params, batch=batch)
    np.testing.assert_allclose(sums["loss"], fused_sums["loss"], rtol=1e-5)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(fused_grads)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="reads='probs' must be one of"):
        Objective(_logits_cross_entropy, reads="probs")


@pytest.mark.slow
def test_frozen_parameters_are_inputs_of_the_step_not_constants(tiny_model, text_batch):
    """A loss of the distance to a frozen model's logits: one compiled program takes any frozen values."""
    spec, params = tiny_model()
    _, teacher = tiny_model(seed=1)

    def loss_fn(logits, mb, frozen):
        target = spec.apply_fn(frozen, mb["tokens"], mb["positions"], mb["segment_ids"])
        return jnp.square(logits - target).sum(), {"count": jnp.float32(logits.size)}

    step = jax.jit(make_train_step(spec, optax.sgd(0.1), Objective(loss_fn), 2))
    batch = text_batch(rows=4, length=16)
    opt_state = optax.sgd(0.1).init(params)
    _, _, to_teacher = step(params, opt_state, batch, teacher)
    _, _, to_itself = step(params, opt_state, batch, params)
    assert float(to_itself["loss"]) < 1e-3 < float(to_teacher["loss"])
    assert step._cache_size() == 1
