"""Apertus-8B/70B optimizer presets match docs/recipe.md sections 4 and 5."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.optim.config import make_lr_schedule, make_tx
from apertus_jax.optim.presets import get_optim_preset


def test_apertus_8b_schedule_over_the_run():
    preset = get_optim_preset("apertus-8b")
    plan = preset.batch_plan
    lr = make_lr_schedule(preset, plan)
    warmup_end = plan.step_at_tokens(16_800_000_000)
    assert float(lr(0)) == 0.0  # released script: warmup from 0
    assert float(lr(warmup_end + 1)) == pytest.approx(1.1e-4)
    assert plan.phases == ((0, 4_194_304), (7_000_003_969_024, 8_388_608))
    decay_start = plan.step_at_tokens(13_500_000_000_000)
    assert float(lr(decay_start - 1)) == np.float32(1.1e-4)  # last stable step
    assert float(lr(decay_start + 1)) < np.float32(1.1e-4)
    assert float(lr(preset.total_steps())) == pytest.approx(1.1e-5, rel=1e-4)
    # The same values inside jit, with optax's int32 count.
    assert float(jax.jit(lr)(jnp.int32(preset.total_steps()))) == pytest.approx(1.1e-5, rel=1e-4)


def test_apertus_70b_peak_and_doubling():
    preset = get_optim_preset("apertus-70b")
    assert preset.peak_lr == 1.0e-5
    assert preset.batch_plan.batch_tokens == (8_388_608, 16_777_216)
    assert (
        preset.batch_plan.start_tokens[1] >= 4_400_000_000_000 > preset.batch_plan.start_tokens[1] - 8_388_608
    )


def test_preset_optimizer_takes_a_step():
    preset = get_optim_preset("apertus-8b")
    tx = make_tx(preset, make_lr_schedule(preset, preset.batch_plan))
    params = {"w": jnp.ones((2, 3)), "norm": jnp.ones(3)}
    state = tx.init(params)
    for _ in range(3):
        updates, state = jax.jit(tx.update)(jax.tree.map(jnp.ones_like, params), state, params)
        params = optax.apply_updates(params, updates)
    assert np.all(np.asarray(params["w"]) < 1.0)  # step 2 onwards has LR > 0


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown optimizer preset 'apertus-3b'"):
        get_optim_preset("apertus-3b")
