"""Gradient accumulation: any microbatch split equals the unsplit batch (issue 5, Done means 4)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.train.step import loss_and_grads, make_train_step, split_microbatches
from trainutil import tiny_model_and_params, text_batch


@pytest.fixture(scope="module")
def setup():
  apply_fn, params = tiny_model_and_params()
  return apply_fn, params


def _batch_with_unequal_masks():
  batch = text_batch(rows=8, length=32)
  mask = np.array(batch["loss_mask"])
  # Rows 1 and 5 hold no unmasked token at all, row 2 only three: microbatches of 2 rows (rows m, m+4) get
  # very different counts.
  mask[1] = 0
  mask[5] = 0
  mask[2, 3:] = 0
  batch["loss_mask"] = mask
  return batch


@pytest.mark.parametrize("num_microbatches", [2, 4, 8])
def test_accumulated_equals_unsplit(setup, num_microbatches):
  apply_fn, params = setup
  batch = _batch_with_unequal_masks()
  micro = split_microbatches({"m": jnp.asarray(batch["loss_mask"])}, num_microbatches)["m"]
  counts = micro.sum(axis=(1, 2))
  assert len(set(np.asarray(counts).tolist())) > 1, "microbatch counts must differ for this test"
  loss1, grads1, n1 = jax.jit(lambda p, b: loss_and_grads(apply_fn, p, b, 1))(params, batch)
  lossm, gradsm, nm = jax.jit(lambda p, b: loss_and_grads(apply_fn, p, b, num_microbatches))(params, batch)
  assert float(n1) == float(nm) == float(np.sum(batch["loss_mask"]))
  np.testing.assert_allclose(lossm, loss1, rtol=1e-6, atol=1e-6)
  for a, b in zip(jax.tree.leaves(gradsm), jax.tree.leaves(grads1)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_loss_is_token_mean_of_cross_entropy(setup):
  apply_fn, params = setup
  batch = _batch_with_unequal_masks()
  loss, _, _ = loss_and_grads(apply_fn, params, batch, 2)
  logits = apply_fn(params, batch["tokens"], batch["positions"], batch["segment_ids"])
  logp = jax.nn.log_softmax(np.asarray(logits, np.float64), axis=-1)
  nll = -np.take_along_axis(np.asarray(logp), batch["targets"][..., None], axis=-1)[..., 0]
  expected = (nll * batch["loss_mask"]).sum() / batch["loss_mask"].sum()
  np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_zero_unmasked_batch_gives_zero_loss_and_grad(setup):
  apply_fn, params = setup
  batch = text_batch(rows=4, length=16)
  batch["loss_mask"] = np.zeros_like(batch["loss_mask"])
  loss, grads, count = loss_and_grads(apply_fn, params, batch, 2)
  assert float(loss) == 0.0 and float(count) == 0.0
  assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(grads))


def test_non_finite_step_leaves_params_untouched(setup):
  apply_fn, params = setup
  tx = optax.adamw(1e-2)
  opt_state = tx.init(params)
  nan_apply = lambda p, *a: apply_fn(p, *a) * jnp.nan
  step = jax.jit(make_train_step(nan_apply, tx, 1))
  new_params, new_opt_state, metrics = step(params, opt_state, text_batch(rows=2, length=16))
  assert float(metrics["finite"]) == 0.0
  for a, b in zip(jax.tree.leaves((new_params, new_opt_state)), jax.tree.leaves((params, opt_state))):
    np.testing.assert_array_equal(a, b)
  good = jax.jit(make_train_step(apply_fn, tx, 1))
  moved, _, metrics = good(params, opt_state, text_batch(rows=2, length=16))
  assert float(metrics["finite"]) == 1.0
  assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(moved), jax.tree.leaves(params)))
