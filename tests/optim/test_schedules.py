"""AdEMAMix alpha/beta3 schedulers and token-based WSD/cosine: docs/recipe.md sections 4 and 5 values and boundary properties."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apertus_jax.optim.schedules import alpha_scheduler, beta3_scheduler, cosine_schedule, wsd_schedule


def test_beta3_half_life_values_from_spec():
    b3 = beta3_scheduler(0.9, 0.9999, 1000)
    np.testing.assert_allclose(b3(100), 0.999009, atol=5e-7)
    np.testing.assert_allclose(b3(500), 0.999800, atol=5e-7)
    assert float(b3(1000)) == np.float32(0.9999)
    assert float(b3(5000)) == np.float32(0.9999)
    np.testing.assert_allclose(b3(0), 0.9, rtol=1e-6)  # starts at b1


def test_beta3_is_increasing_during_warmup():
    values = np.asarray(beta3_scheduler(0.9, 0.9999, 1000)(jnp.arange(0, 1001)))
    assert np.all(np.diff(values) >= 0)
    assert np.all(np.diff(values[:100]) > 0)


def test_alpha_linear_warmup_values():
    alpha = alpha_scheduler(5.0, 1000)
    assert float(alpha(500)) == 2.5
    assert float(alpha(1000)) == 5.0
    assert float(alpha(123_456)) == 5.0
    assert float(alpha(1)) == pytest.approx(5.0 / 1000, rel=1e-6)


@pytest.mark.parametrize("warmup", [0, None])
def test_zero_warmup_gives_final_values_from_step_one_without_nan(warmup):
    t = jnp.arange(0, 5)
    alpha = np.asarray(alpha_scheduler(5.0, warmup)(t))
    b3 = np.asarray(beta3_scheduler(0.9, 0.9999, warmup)(t))
    assert np.all(np.isfinite(alpha)) and np.all(np.isfinite(b3))
    np.testing.assert_array_equal(alpha, 5.0)
    np.testing.assert_array_equal(b3, np.float32(0.9999))


def test_schedulers_run_under_jit_on_int32_steps():
    b3 = jax.jit(beta3_scheduler(0.9, 0.9999, 1000))
    alpha = jax.jit(alpha_scheduler(5.0, 1000))
    np.testing.assert_allclose(b3(jnp.int32(500)), 0.999800, atol=5e-7)
    assert float(alpha(jnp.int32(500))) == 2.5


def test_negative_warmup_is_rejected():
    with pytest.raises(ValueError, match="alpha warmup_steps must be an integer >= 0"):
        alpha_scheduler(8.0, -1)
    with pytest.raises(ValueError, match="b1 must be in \\(0, 1\\)"):
        beta3_scheduler(1.0, 0.9999, 10)


def test_wsd_1_sqrt_values_from_spec():
    lr = wsd_schedule(1.0, warmup=100, decay=200, total=1000, final_fraction=0.1)
    values = [float(lr(x)) for x in (800, 850, 900, 1000, 1500)]
    np.testing.assert_allclose(values, [1.0, 0.55, 0.36360, 0.1, 0.1], atol=5e-6)


def test_wsd_warmup_ends_exactly_at_peak():
    lr = wsd_schedule(1.1e-4, warmup=16_800_000_000, decay=1_500_000_000_000, total=15_000_000_000_000)
    assert lr(16_800_000_000) == jnp.float32(1.1e-4)
    assert lr(0) == 0.0
    np.testing.assert_allclose(lr(8_400_000_000), 0.55e-4, rtol=1e-6)
    np.testing.assert_allclose(lr(15_000_000_000_000), 1.1e-5, rtol=1e-6)
    lr_from_10_percent = wsd_schedule(2.0, warmup=10, decay=10, total=100, init_fraction=0.1)
    assert float(lr_from_10_percent(0)) == pytest.approx(0.2)
    assert float(lr_from_10_percent(10)) == 2.0


@pytest.mark.parametrize(
    "shape, at_850, at_900",
    [
        ("1-sqrt", 0.55, 0.1 + 0.9 * (1 - math.sqrt(0.5))),
        ("linear", 0.775, 0.55),
        ("cosine", 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)), 0.55),
    ],
)
def test_wsd_decay_shapes(shape, at_850, at_900):
    lr = wsd_schedule(1.0, warmup=0, decay=200, total=1000, decay_shape=shape)
    np.testing.assert_allclose([lr(850), lr(900)], [at_850, at_900], atol=1e-6)
    assert float(lr(0)) == 1.0  # no warmup: the peak from the first token
    assert float(lr(1000)) == pytest.approx(0.1)


def test_cosine_schedule_baseline():
    lr = cosine_schedule(1.0, warmup=100, total=1100, final_fraction=0.1)
    assert float(lr(100)) == 1.0
    np.testing.assert_allclose(lr(600), 0.55, atol=1e-6)
    np.testing.assert_allclose(lr(1100), 0.1, atol=1e-6)
    np.testing.assert_allclose(lr(50), 0.5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(peak_value=1.0, warmup=600, decay=500, total=1000), "warmup \\+ decay must be <= total"),
        (dict(peak_value=0.0, warmup=0, decay=10, total=100), "peak_value must be > 0"),
        (dict(peak_value=1.0, warmup=-1, decay=10, total=100), "must be >= 0 tokens"),
        (
            dict(peak_value=1.0, warmup=0, decay=10, total=100, final_fraction=1.5),
            "final_fraction must be in",
        ),
        (
            dict(peak_value=1.0, warmup=0, decay=10, total=100, decay_shape="exp"),
            "decay_shape must be one of",
        ),
    ],
)
def test_wsd_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        wsd_schedule(**kwargs)


def test_cosine_rejects_warmup_longer_than_run():
    with pytest.raises(ValueError, match="warmup must be <= total"):
        cosine_schedule(1.0, warmup=200, total=100)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    warmup=st.integers(1, 10**13),
    stable=st.integers(0, 10**13),
    decay=st.integers(1, 10**13),
    init_fraction=st.floats(0.0, 1.0),
    final_fraction=st.floats(0.0, 1.0),
    shape=st.sampled_from(["1-sqrt", "linear", "cosine"]),
)
def test_wsd_is_continuous_at_every_phase_boundary(
    warmup, stable, decay, init_fraction, final_fraction, shape
):
    total = warmup + stable + decay
    peak = 3e-4
    with jax.enable_x64(True):
        lr = wsd_schedule(peak, warmup, decay, total, init_fraction, final_fraction, shape)
        # Left and right limits approach the boundary value as fast as the steepest phase allows:
        # |f(b +- h) - f(b)| <= peak * sqrt(h / shortest phase) covers linear, cosine and 1-sqrt.
        h = 1e-8 * min(warmup, decay)
        bound = 2 * peak * math.sqrt(1e-8) + 1e-15
        for boundary in (warmup, total - decay, total):
            at = float(lr(boundary))
            assert abs(float(lr(boundary - h)) - at) <= bound
            assert abs(float(lr(boundary + h)) - at) <= bound
        assert float(lr(warmup)) == peak
        assert float(lr(total - decay)) == peak
        assert float(lr(total)) == pytest.approx(final_fraction * peak, rel=1e-12, abs=1e-18)
        values = np.asarray(lr(np.linspace(0, total * 1.1, 257)))
    assert np.all(np.isfinite(values))
    assert np.all(values <= peak) and np.all(values >= min(init_fraction, final_fraction) * peak - 1e-18)


def test_late_cooldown_does_not_rewarm_or_move_earlier_values():
    planned = wsd_schedule(1.0, warmup=100, decay=200, total=1000)
    extended = wsd_schedule(1.0, warmup=100, decay=200, total=3000)  # cooldown started later
    x = np.arange(0, 800)
    np.testing.assert_array_equal(planned(x), extended(x))
    assert float(extended(1500)) == 1.0 and float(extended(3000)) == pytest.approx(0.1)
