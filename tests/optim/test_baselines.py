"""The AdamW baseline shares AdEMAMix's conventions: it equals AdEMAMix with alpha = 0."""

import jax
import numpy as np
import optax
import pytest

from apertus_jax.optim.baselines import adamw
from apertus_jax.optim.decay_mask import default_weight_decay_mask
from apertus_jax.optim.ema_mixture import ademamix


@pytest.mark.slow
def test_baselines_equals_ademamix_without_slow_ema():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        params = {"w": rng.normal(size=(4, 3)), "b": rng.normal(size=(3,))}
        grads = [{"w": rng.normal(size=(4, 3)), "b": rng.normal(size=(3,))} for _ in range(10)]
        schedule = optax.linear_schedule(1e-2, 1e-3, 10)
        kwargs = dict(b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1, mask=default_weight_decay_mask)
        results = []
        for tx in (adamw(schedule, **kwargs), ademamix(schedule, alpha=0.0, **kwargs)):
            p, state = params, tx.init(params)
            for g in grads:
                updates, state = tx.update(g, state, p)
                p = optax.apply_updates(p, updates)
            results.append(jax.tree.map(np.asarray, p))
    for a, b in zip(jax.tree.leaves(results[0]), jax.tree.leaves(results[1])):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert not np.allclose(results[0]["w"], params["w"], rtol=1e-2)
