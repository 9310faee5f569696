"""skip_spikes: updates above factor x the running means are dropped and counted; the means see only
accepted updates."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.optim.spikes import skip_spikes, spike_skipped, spikes_skipped_total


def _run(tx, sequence):
    params = {"w": jnp.array([2.0, -1.0])}
    state = tx.init(params)
    history = []
    for loss, grad in sequence:
        updates, state = tx.update({"w": jnp.array(grad)}, state, params, loss=jnp.float32(loss))
        params = optax.apply_updates(params, updates)
        history.append((np.asarray(params["w"]).copy(), float(spike_skipped(state))))
    return history, state


def test_spikes_in_loss_or_grad_norm_are_skipped_and_counted():
    tx = skip_spikes(optax.sgd(1.0), factor=2.0, warmup_steps=3, ema_decay=0.5)
    normal = (1.0, [0.3, 0.4])  # grad norm 0.5
    sequence = [normal] * 4 + [(2.5, [0.3, 0.4]), (1.0, [3.0, 4.0]), normal, (1.9, [0.0, 0.9])]
    history, state = _run(tx, sequence)
    skipped = [s for _, s in history]
    # loss 2.5 > 2 x 1.0 and grad norm 5 > 2 x 0.5 are dropped; loss 1.9 with norm 0.9 is kept
    assert skipped == [0, 0, 0, 0, 1, 1, 0, 0]
    assert int(spikes_skipped_total(state)) == 2 and int(state.count) == 6
    np.testing.assert_array_equal(history[4][0], history[3][0])  # parameters untouched, bitwise
    np.testing.assert_array_equal(history[5][0], history[3][0])
    np.testing.assert_allclose(history[6][0], history[3][0] - [0.3, 0.4], rtol=1e-6)
    # EMAs over the 6 accepted updates only (by hand, decay 0.5): five 1.0 losses give 1 - 0.5^5 = 0.96875,
    # then 0.5 * 0.96875 + 0.5 * 1.9 = 1.434375; norms: 0.5 * 0.96875 = 0.484375, then 0.6921875.
    np.testing.assert_allclose(state.loss_ema, 1.434375, rtol=1e-6)
    np.testing.assert_allclose(state.grad_norm_ema, 0.6921875, rtol=1e-6)


def test_not_armed_during_warmup():
    tx = skip_spikes(optax.sgd(1.0), factor=2.0, warmup_steps=3, ema_decay=0.5)
    history, state = _run(tx, [(1.0, [0.3, 0.4]), (10.0, [30.0, 40.0]), (1.0, [0.3, 0.4])])
    assert [s for _, s in history] == [0, 0, 0] and int(spikes_skipped_total(state)) == 0


def test_without_a_guard_nothing_is_skipped():
    state = optax.adamw(1e-3).init({"w": jnp.zeros(2)})
    assert float(spike_skipped(state)) == 0.0 and int(spikes_skipped_total(state)) == 0


@pytest.mark.parametrize("kwargs", [dict(factor=1.0), dict(warmup_steps=0), dict(ema_decay=1.0)])
def test_bad_arguments(kwargs):
    args = dict(factor=2.0, warmup_steps=3, ema_decay=0.5) | kwargs
    with pytest.raises(ValueError, match="skip_spikes"):
        skip_spikes(optax.sgd(1.0), **args)
