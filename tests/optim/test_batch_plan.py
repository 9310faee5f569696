"""Batch-size plans: step <-> tokens maps, boundary validation, and LR invariance under batch doubling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.optim.batch_plan import BatchSizePlan, schedule_in_steps
from apertus_jax.optim.ema_mixture import ademamix
from apertus_jax.optim.schedules import wsd_schedule

BATCH_4M, BATCH_8M = 1024 * 4096, 2048 * 4096


def test_apertus_8b_plan_is_exact_beyond_int32():
    plan = BatchSizePlan([(0, BATCH_4M), (7_000_000_000_000, BATCH_8M)], snap=True)
    boundary_step = 1_668_931  # ceil(7e12 / 4,194,304)
    assert plan.phases == ((0, BATCH_4M), (boundary_step * BATCH_4M, BATCH_8M))
    assert plan.tokens_at_step(boundary_step) == 7_000_003_969_024
    assert plan.tokens_at_step(boundary_step + 10) == 7_000_003_969_024 + 10 * BATCH_8M
    assert plan.tokens_at_step(np.int64(1000)) == 1000 * BATCH_4M
    steps = np.array([0, boundary_step - 1, boundary_step, 2_622_605])
    np.testing.assert_array_equal(plan.tokens_at_step(steps), [plan.tokens_at_step(int(s)) for s in steps])
    np.testing.assert_array_equal(plan.batch_tokens_at_step(steps), [BATCH_4M, BATCH_4M, BATCH_8M, BATCH_8M])
    assert plan.batch_tokens_at_step(boundary_step - 1) == BATCH_4M
    assert plan.batch_tokens_at_step(boundary_step) == BATCH_8M
    assert plan.step_at_tokens(15_000_000_000_000) == 2_622_605
    assert plan.tokens_at_step(2_622_605) >= 15_000_000_000_000 > plan.tokens_at_step(2_622_604)


def test_boundary_off_a_batch_edge_is_rejected_without_snap():
    with pytest.raises(ValueError, match="not on a batch edge.*use 96 or 104, or pass snap=True"):
        BatchSizePlan([(0, 8), (100, 16)])
    assert BatchSizePlan([(0, 8), (100, 16)], snap=True).phases == ((0, 8), (104, 16))


@pytest.mark.parametrize(
    "phases, message",
    [
        ([], "at least one"),
        ([(5, 8)], "first phase must start at 0"),
        ([(0, 8), (16, 8), (16, 32)], "phase starts must increase"),
        ([(0, 0)], "tokens_per_batch must be a positive integer"),
    ],
)
def test_invalid_plans_are_rejected(phases, message):
    with pytest.raises(ValueError, match=message):
        BatchSizePlan(phases)


def test_negative_step_is_rejected():
    with pytest.raises(ValueError, match="step must be an integer .* >= 0"):
        BatchSizePlan([(0, 8)]).tokens_at_step(-1)
    with pytest.raises(ValueError, match="step must be an integer"):
        BatchSizePlan([(0, 8)]).tokens_at_step(2.5)


def _plan_from_batches(spec):
    """Phases from (number of batches in the previous phase, tokens per batch), all on batch edges."""
    phases, start, previous = [], 0, None
    for batches, size in spec:
        if previous is not None:
            start += batches * previous
        phases.append((start, size))
        previous = size
    return BatchSizePlan(phases)


plans = st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 2**24)), min_size=1, max_size=4).map(
    _plan_from_batches
)


@settings(max_examples=80, deadline=None)
@given(plan=plans, step=st.integers(0, 10**7))
def test_step_and_tokens_are_inverse(plan, step):
    tokens = plan.tokens_at_step(step)
    assert plan.step_at_tokens(tokens) == step
    assert plan.tokens_at_step(step + 1) - tokens == plan.batch_tokens_at_step(step)
    if step > 0 and plan.batch_tokens_at_step(step - 1) > 1:
        assert plan.step_at_tokens(tokens - 1) == step  # rounds up between edges


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(plan=plans, step=st.integers(0, 10**6))
def test_jitted_tokens_match_host_ints(plan, step):
    traced = jax.jit(plan.tokens_at_step)(jnp.int32(step))
    np.testing.assert_allclose(float(traced), plan.tokens_at_step(step), rtol=1e-7)


def lr_per_step(schedule, steps):
    return np.asarray(jax.jit(jax.vmap(schedule))(jnp.arange(steps, dtype=jnp.int32)))


@pytest.mark.slow
def test_doubling_the_batch_keeps_lr_a_function_of_tokens():
    token_lr = wsd_schedule(1e-3, warmup=480, decay=256, total=1024)
    constant = BatchSizePlan([(0, 8)])
    doubled = BatchSizePlan([(0, 8), (400, 16)])
    lr_constant = lr_per_step(schedule_in_steps(token_lr, constant), 129)
    lr_doubled = lr_per_step(schedule_in_steps(token_lr, doubled), 79)
    tokens_doubled = [doubled.tokens_at_step(s) for s in range(79)]
    # Each step of the doubled run uses the LR the constant run had at the same tokens consumed.
    np.testing.assert_array_equal(lr_doubled, lr_constant[[t // 8 for t in tokens_doubled]])
    np.testing.assert_allclose(lr_doubled, token_lr(np.array(tokens_doubled)), rtol=1e-6)
    # After the switch (step 50 = 400 tokens, inside the warmup) the LR stays on the token curve,
    # unlike a step-based schedule that would keep the constant-batch step -> LR map.
    assert lr_doubled[52] == lr_constant[54] != lr_constant[52]


def test_optimizer_applies_the_token_lr_after_a_doubling():
    """Zero gradients: the update is -lr * weight_decay * params, exposing the LR optax used."""
    token_lr = wsd_schedule(1e-1, warmup=96, decay=256, total=1024)
    plan = BatchSizePlan([(0, 8), (400, 16)])
    tx = ademamix(schedule_in_steps(token_lr, plan), weight_decay=1.0)
    params = {"w": jnp.ones((2, 2))}
    state = tx.init(params)
    update = jax.jit(tx.update)
    used = []
    for _ in range(60):
        updates, state = update(jax.tree.map(jnp.zeros_like, params), state, params)
        used.append(-float(updates["w"][0, 0]))
    expected = [float(token_lr(plan.tokens_at_step(s))) for s in range(60)]
    np.testing.assert_allclose(used, expected, rtol=1e-6)
