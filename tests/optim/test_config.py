"""The optim section: defaults, range checks, and the one builder of the LR schedule and optimizer chain."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from apertus_jax.optim.batch_plan import BatchSizePlan
from apertus_jax.optim.config import OptimConfig, from_section, make_lr_schedule, make_tx, section
from apertus_jax.optim.factory import make_optimizer
from apertus_jax.optim.schedules import wsd_schedule


def test_section_round_trips_and_rejects_unknown_fields():
    assert from_section(section()) == OptimConfig()
    with pytest.raises(ValueError, match="optim: unknown fields \\['lr'\\]"):
        from_section({**section(), "lr": 1e-3})


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("b2", 1.0, "optim.b2 must be a number in \\[0, 1\\), got 1.0"),
        ("schedule", "linear", "optim.schedule must be one of"),
        ("warmup_tokens", 10**9, "exceeds optim.total_tokens"),
        ("clip_norm", -0.1, "optim.clip_norm must be a number >= 0"),
    ],
)
def test_out_of_range_values_are_one_line_errors(field, value, message):
    with pytest.raises(ValueError, match=message):
        OptimConfig(**{field: value})


def test_lr_schedule_follows_tokens_through_the_batch_plan():
    optim = OptimConfig(peak_lr=1e-3, warmup_tokens=1000, decay_tokens=2000, total_tokens=10_000)
    plan = BatchSizePlan(((0, 100), (5000, 200)))  # the batch doubles at 5,000 tokens
    lr = make_lr_schedule(optim, plan)
    by_tokens = wsd_schedule(1e-3, 1000, 2000, 10_000)
    for count in (0, 5, 10, 49, 50, 51, 60, 74):
        assert float(lr(count)) == pytest.approx(float(by_tokens(plan.tokens_at_step(count))), rel=1e-6)


@pytest.mark.slow
def test_tx_equals_the_factory_chain_with_the_same_settings():
    optim = OptimConfig(name="ademamix", clip_norm=1.0, alpha_warmup_steps=10, b3_warmup_steps=10)
    lr = make_lr_schedule(optim, BatchSizePlan(((0, 128),)))
    ours = make_tx(optim, lr)
    reference = make_optimizer(
        "ademamix",
        lr,
        0.1,
        1.0,
        b1=0.9,
        b2=0.999,
        eps=1e-8,
        b3=0.9999,
        alpha=8.0,
        alpha_warmup_steps=10,
        b3_warmup_steps=10,
    )
    params = {"w": jnp.linspace(-1, 1, 6).reshape(2, 3), "scale": jnp.ones(3)}
    grads = jax.tree.map(lambda p: jnp.cos(p) * 0.3, params)
    state_a, state_b = ours.init(params), reference.init(params)
    for _ in range(3):
        update_a, state_a = ours.update(grads, state_a, params)
        update_b, state_b = reference.update(grads, state_b, params)
        jax.tree.map(np.testing.assert_array_equal, update_a, update_b)
        params = optax.apply_updates(params, update_a)
