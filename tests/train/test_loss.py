"""cross_entropy_sum: the summed token loss and count, exact zeros where masked (even for non-finite logits)."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.train.loss import cross_entropy_sum


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_matches_float64_reference(seed):
    rows, length = 3, 5
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(rows, length, 11)).astype(np.float32) * 4
    targets = rng.integers(0, 11, size=(rows, length)).astype(np.int32)
    mask = rng.integers(0, 2, size=(rows, length)).astype(np.int32)
    loss_sum, count = jax.jit(cross_entropy_sum)(logits, targets, mask)
    ref = logits.astype(np.float64)
    log_z = np.log(np.exp(ref).sum(-1))
    nll = log_z - np.take_along_axis(ref, targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(loss_sum, (nll * mask).sum(), rtol=1e-5, atol=1e-5)
    assert float(count) == mask.sum()


def test_masked_positions_contribute_exact_zero_even_if_not_finite():
    logits = jnp.stack([jnp.full((4,), jnp.nan), jnp.log(jnp.array([0.5, 0.25, 0.125, 0.125]))])[None]
    loss_sum, count = cross_entropy_sum(logits.astype(jnp.bfloat16), jnp.array([[0, 1]]), jnp.array([[0, 1]]))
    np.testing.assert_allclose(loss_sum, np.log(4.0), rtol=1e-2)  # bf16 logits, float32 loss
    assert float(count) == 1.0


def test_gradient_through_masked_non_finite_logits_is_exact_zero():
    """A masked position with NaN/inf logits gets gradient 0; unmasked positions keep their exact gradient."""
    probs = jnp.array([0.5, 0.25, 0.125, 0.125])
    logits = jnp.stack([jnp.full((4,), jnp.nan), jnp.array([jnp.inf, 0.0, -jnp.inf, 1.0]), jnp.log(probs)])[
        None
    ]
    targets, mask = jnp.array([[0, 1, 2]]), jnp.array([[0, 0, 1]])
    grad = jax.grad(lambda x: cross_entropy_sum(x, targets, mask)[0])(logits)
    assert np.all(np.isfinite(np.asarray(grad)))
    np.testing.assert_array_equal(grad[0, :2], 0.0)
    # d(log_z - logit_target)/d logits = softmax - onehot(target)
    np.testing.assert_allclose(grad[0, 2], probs - jnp.eye(4)[2], rtol=1e-6)
