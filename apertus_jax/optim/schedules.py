"""Schedules of the Apertus recipe: AdEMAMix alpha/beta3 warmups (in steps) and WSD/cosine LR (in tokens).

Conventions (docs/recipe.md sections 4 and 5):
- `alpha_scheduler` and `beta3_scheduler` take the 1-based step `t` of the AdEMAMix reference code
  (the first update is t = 1). `ademamix` calls them with `t = count + 1`, where `count` is optax's
  0-based number of completed updates.
- `wsd_schedule` and `cosine_schedule` take the number of TOKENS (or samples) consumed before the
  update, so that a batch-size change does not move the learning rate. Turn them into an optax
  schedule over steps with `batch_plan.schedule_in_steps`.

All schedules are jnp functions: they work on Python numbers, NumPy values and traced arrays inside
`jax.jit`, and return the default float dtype (float32, or float64 with `jax_enable_x64`).
"""

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

Schedule = Callable[[jax.typing.ArrayLike], jax.Array]

DECAY_SHAPES = ("1-sqrt", "linear", "cosine")


def _as_float(x: jax.typing.ArrayLike) -> jax.Array:
    return jnp.asarray(x, dtype=jnp.result_type(float))


def _check_warmup_steps(warmup_steps: int | None, name: str) -> int:
    warmup_steps = 0 if warmup_steps is None else warmup_steps
    if int(warmup_steps) != warmup_steps or warmup_steps < 0:
        raise ValueError(f"{name} must be an integer >= 0 (0 means no warmup), got {warmup_steps!r}")
    return int(warmup_steps)


def _warmup_fraction(t: jax.typing.ArrayLike, warmup_steps: int) -> jax.Array:
    """min(t / T, 1) with T = 0 meaning 1 from the first step (no division by zero)."""
    if warmup_steps == 0:
        return jnp.ones_like(_as_float(t))
    return jnp.clip(_as_float(t) / warmup_steps, 0.0, 1.0)


def alpha_scheduler(alpha: float, warmup_steps: int | None) -> Schedule:
    """Linear warmup of the AdEMAMix mixing coefficient: `alpha(t) = alpha * min(t / T, 1)`.

    Source: docs/recipe.md section 4 (AdEMAMix reference code, Pagliardini et al. 2024).

    Args:
      alpha: final mixing coefficient (Apertus: 8.0).
      warmup_steps: T, in optimizer steps (Apertus: 100,000). 0 or None: `alpha` from step 1.

    Returns:
      A function of the 1-based step `t` (scalar or array) returning alpha(t) as a float array.

    Raises:
      ValueError: if `warmup_steps` is negative or not an integer.
    """
    warmup_steps = _check_warmup_steps(warmup_steps, "alpha warmup_steps")

    def schedule(t: jax.typing.ArrayLike) -> jax.Array:
        return alpha * _warmup_fraction(t, warmup_steps)

    return schedule


def _half_life(b: float) -> float:
    """f(b) = ln(0.5) / ln(b) - 1: the half-life (in steps, minus one) of an EMA with decay b."""
    return math.log(0.5) / math.log(b) - 1.0


def beta3_one_minus_scheduler(b1: float, b3: float, warmup_steps: int | None) -> Schedule:
    """`1 - b3(t)` of `beta3_scheduler`, computed with `expm1` so it keeps full relative precision.

    In float32, `1 - 0.9999` computed after rounding 0.9999 loses about 3 significant digits; the
    slow EMA update `m2 = b3*m2 + (1 - b3)*g` uses this function instead. Arguments as
    `beta3_scheduler`.
    """
    warmup_steps = _check_warmup_steps(warmup_steps, "b3 warmup_steps")
    if warmup_steps == 0:
        return lambda t: jnp.full_like(_as_float(t), 1.0 - b3)
    f_b1, f_b3 = _half_life(_check_decay(b1, "b1")), _half_life(_check_decay(b3, "b3"))

    def schedule(t: jax.typing.ArrayLike) -> jax.Array:
        a = _warmup_fraction(t, warmup_steps)
        half_life = (1.0 - a) * f_b1 + a * f_b3
        # f_inv(x) = 0.5 ** (1 / (x + 1)), so 1 - f_inv(x) = -expm1(ln(0.5) / (x + 1)).
        return -jnp.expm1(math.log(0.5) / (half_life + 1.0))

    return schedule


def beta3_scheduler(b1: float, b3: float, warmup_steps: int | None) -> Schedule:
    """Half-life interpolation of the slow-EMA decay from `b1` to `b3` over `warmup_steps`.

    `f(b) = ln(0.5)/ln(b) - 1`, `f_inv(x) = 0.5**(1/(x+1))`,
    `b3(t) = f_inv((1 - a) * f(b1) + a * f(b3))` with `a = min(t / T, 1)`. At and after T the value
    is exactly `b3`. Source: docs/recipe.md section 4. Example: b1 0.9, b3 0.9999, T 1000 gives
    0.999009, 0.999800, 0.9999 at t = 100, 500, 1000.

    Args:
      b1: fast-EMA decay, the starting point of the interpolation (Apertus: 0.9), in (0, 1).
      b3: final slow-EMA decay (Apertus: 0.9999), in (0, 1).
      warmup_steps: T, in optimizer steps (Apertus: 100,000). 0 or None: `b3` from step 1.

    Returns:
      A function of the 1-based step `t` (scalar or array) returning b3(t) as a float array.

    Raises:
      ValueError: if `warmup_steps` > 0 and b1 or b3 is outside (0, 1), or `warmup_steps` < 0.
    """
    one_minus = beta3_one_minus_scheduler(b1, b3, warmup_steps)
    warmup_steps = _check_warmup_steps(warmup_steps, "b3 warmup_steps")

    def schedule(t: jax.typing.ArrayLike) -> jax.Array:
        done = _warmup_fraction(t, warmup_steps) >= 1.0
        return jnp.where(done, b3, 1.0 - one_minus(t))

    return schedule


def _check_decay(b: float, name: str) -> float:
    if not 0.0 < b < 1.0:
        raise ValueError(f"{name} must be in (0, 1) for the half-life interpolation, got {b!r}")
    return float(b)


def wsd_schedule(
    peak_value: float,
    warmup: float,
    decay: float,
    total: float,
    init_fraction: float = 0.0,
    final_fraction: float = 0.1,
    decay_shape: str = "1-sqrt",
) -> Schedule:
    """Warmup-stable-decay learning rate as a function of tokens (or samples) consumed.

    Phases, with `x` the tokens consumed before the update:
    - warmup, `0 <= x < warmup`: linear from `init_fraction * peak_value` to `peak_value`;
    - stable, `warmup <= x < total - decay`: exactly `peak_value`;
    - decay, `total - decay <= x <= total`, `r = (x - (total - decay)) / decay`:
      `final + s(r) * (peak - final)` with `s = 1 - sqrt(r)` ("1-sqrt", Apertus), `1 - r`
      ("linear") or `(1 + cos(pi r)) / 2` ("cosine");
    - after `total`: `final_fraction * peak_value`.
    The schedule is continuous at every boundary when `decay > 0`: the warmup ends at the peak, the
    decay starts at the peak and ends at the final value.
    Source: docs/recipe.md section 5 (Haegele et al. 2024; Apertus section 2.3). Example: peak 1, final
    0.1, decay over 800..1000 of 1000 gives 1.0, 0.55, 0.36360, 0.1 at 800, 850, 900, 1000.
    The cooldown can be started late without re-warming: resuming with a larger `total` (same
    `warmup`) gives the same values up to the new decay start.

    Args:
      peak_value: peak learning rate (Apertus 8B: 1.1e-4), > 0.
      warmup: warmup length in tokens, >= 0 (Apertus 8B: 16.8e9). 0: peak from the start.
      decay: decay length in tokens, >= 0 (Apertus: 1.5e12). 0: no decay phase (the value jumps to
        the final value after `total`).
      total: tokens at the end of the decay (Apertus: 15e12); `warmup + decay <= total`.
      init_fraction: warmup start as a fraction of the peak, in [0, 1] (released 8B run: 0.0; the
        report text: 0.1).
      final_fraction: final value as a fraction of the peak, in [0, 1] (Apertus: 0.1).
      decay_shape: "1-sqrt", "linear" or "cosine".

    Returns:
      A function of the tokens consumed (scalar or array, any numeric dtype) returning the learning
      rate as a float array.

    Raises:
      ValueError: on a non-positive peak, negative lengths, `warmup + decay > total`, fractions
        outside [0, 1] or an unknown `decay_shape`.
    """
    if not peak_value > 0:
        raise ValueError(f"peak_value must be > 0, got {peak_value!r}")
    if warmup < 0 or decay < 0:
        raise ValueError(f"warmup and decay must be >= 0 tokens, got warmup={warmup!r}, decay={decay!r}")
    if warmup + decay > total:
        raise ValueError(
            f"warmup + decay must be <= total, got {warmup!r} + {decay!r} > {total!r}; "
            "shorten the warmup or the decay, or raise total"
        )
    for name, fraction in (("init_fraction", init_fraction), ("final_fraction", final_fraction)):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {fraction!r}")
    if decay_shape not in DECAY_SHAPES:
        raise ValueError(f"decay_shape must be one of {DECAY_SHAPES}, got {decay_shape!r}")

    warmup, decay, total = float(warmup), float(decay), float(total)
    init_value = init_fraction * peak_value
    final_value = final_fraction * peak_value
    decay_start = total - decay

    def decay_done(r: jax.Array) -> jax.Array:
        """1 - s(r): 0 at the decay start, so the peak is exact there (no final + (peak - final))."""
        if decay_shape == "1-sqrt":
            return jnp.sqrt(r)
        if decay_shape == "linear":
            return r
        return 0.5 * (1.0 - jnp.cos(math.pi * r))

    def schedule(tokens: jax.typing.ArrayLike) -> jax.Array:
        x = _as_float(tokens)
        value = jnp.full_like(x, peak_value)
        if warmup > 0:
            ramp = init_value + (peak_value - init_value) * (x / warmup)
            value = jnp.where(x < warmup, ramp, value)
        if decay > 0:
            r = jnp.clip((x - decay_start) / decay, 0.0, 1.0)
            cooled = peak_value - decay_done(r) * (peak_value - final_value)
            value = jnp.where(x >= decay_start, cooled, value)
        return jnp.where(x > total, final_value, value)

    return schedule


def cosine_schedule(
    peak_value: float,
    warmup: float,
    total: float,
    init_fraction: float = 0.0,
    final_fraction: float = 0.1,
) -> Schedule:
    """Baseline: linear warmup, then cosine decay from the peak to `final_fraction * peak` at `total`.

    Same units and conventions as `wsd_schedule` (tokens consumed); it is the WSD schedule with no
    stable phase and a cosine decay over `total - warmup`.

    Raises:
      ValueError: if `warmup > total`, and as `wsd_schedule`.
    """
    if warmup > total:
        raise ValueError(f"warmup must be <= total, got {warmup!r} > {total!r}")
    return wsd_schedule(
        peak_value,
        warmup=warmup,
        decay=total - warmup,
        total=total,
        init_fraction=init_fraction,
        final_fraction=final_fraction,
        decay_shape="cosine",
    )
