"""make_optimizer: clipping + AdEMAMix/AdamW + default decay mask, as the trainer builds it."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.optim.decay_mask import default_weight_decay_mask
from apertus_jax.optim.ema_mixture import ademamix
from apertus_jax.optim.factory import make_optimizer


def run(tx, params, grads):
    state = tx.init(params)
    for g in grads:
        updates, state = tx.update(g, state, params)
        params = optax.apply_updates(params, updates)
    return params


def test_ema_mixture_chain_is_clip_then_masked_ademamix():
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32), "b": jnp.ones(3)}
    grads = [
        jax.tree.map(lambda p: jnp.asarray(100 * rng.normal(size=p.shape), jnp.float32), params)
        for _ in range(5)
    ]
    built = make_optimizer("ademamix", 1e-2, weight_decay=0.1, clip_norm=0.1, alpha_warmup_steps=3)
    manual = optax.chain(
        optax.clip_by_global_norm(0.1),
        ademamix(1e-2, weight_decay=0.1, alpha_warmup_steps=3, mask=default_weight_decay_mask),
    )
    unclipped = ademamix(1e-2, weight_decay=0.1, alpha_warmup_steps=3, mask=default_weight_decay_mask)
    np.testing.assert_array_equal(run(built, params, grads)["w"], run(manual, params, grads)["w"])
    assert not np.allclose(run(built, params, grads)["w"], run(unclipped, params, grads)["w"])


def test_baselines_and_no_clipping():
    params = {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}
    tx = make_optimizer("adamw", 0.5, weight_decay=0.1, clip_norm=None)
    zero = jax.tree.map(jnp.zeros_like, params)
    moved = run(tx, params, [zero])
    np.testing.assert_allclose(moved["w"], 1 - 0.5 * 0.1)  # decayed matrix
    np.testing.assert_array_equal(moved["b"], 1.0)  # 1-D bias not decayed
    assert len(tx.init(params)) == 3  # the bare optax.adamw chain, no clipping state


def test_explicit_mask_overrides_default():
    params = {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}
    tx = make_optimizer("ademamix", 0.5, weight_decay=0.1, clip_norm=0.0, mask={"w": False, "b": True})
    moved = run(tx, params, [jax.tree.map(jnp.zeros_like, params)])
    np.testing.assert_array_equal(moved["w"], 1.0)
    np.testing.assert_allclose(moved["b"], 1 - 0.5 * 0.1)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        make_optimizer("sgd", 1e-3, weight_decay=0.0, clip_norm=1.0)
    with pytest.raises(ValueError, match="clip_norm must be > 0"):
        make_optimizer("adamw", 1e-3, weight_decay=0.0, clip_norm=-1.0)


def test_lion_is_optax_lion_with_the_default_mask():
    params = {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}
    grads = {"w": jnp.asarray([[0.3, -2.0], [0.0, 1e-3]]), "b": jnp.asarray([-0.5, 0.5])}
    tx = make_optimizer("lion", 0.1, weight_decay=0.5, clip_norm=None, b1=0.9, b2=0.99)
    moved = run(tx, params, [grads])
    # sign of (1 - b1) g from zero momentum: +-1 or 0; decay lr * wd * w on the matrix only.
    np.testing.assert_allclose(moved["w"], [[1 - 0.1 - 0.05, 1 + 0.1 - 0.05], [1 - 0.05, 1 - 0.1 - 0.05]])
    np.testing.assert_allclose(moved["b"], [1.1, 0.9])
