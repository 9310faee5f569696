"""AdEMAMix (Pagliardini et al. 2024) with the alpha and beta3 warmups of the Apertus recipe.

Update rule (docs/recipe.md section 4), with t the 1-based step:

    m1 = b1*m1 + (1-b1)*g
    m2 = b3(t)*m2 + (1-b3(t))*g            # slow EMA, not bias-corrected
    nu = b2*nu + (1-b2)*g^2
    update = (m1/(1-b1^t) + alpha(t)*m2) / (sqrt(nu)/sqrt(1-b2^t) + eps) + wd*theta
    theta -= lr * update                   # weight decay multiplied by the learning rate

Step-count convention: the state holds optax's 0-based `count`, the number of updates already
applied (0 after `init`). The update computed with state count `c` uses `t = c + 1` in the bias
corrections and in the alpha/beta3 schedulers, and `learning_rate(c)` when the learning rate is a
schedule (optax's convention: with `batch_plan.schedule_in_steps`, `c` maps to the tokens consumed
before this update). The count lives in the saved state, so a restored optimizer continues at the
same t, alpha, beta3 and learning rate.

`optax.contrib.ademamix` computes the same rule without warmups (its `alpha` default is 5.0, ours 8.0,
the Apertus value).
"""

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from apertus_jax.optim.schedules import alpha_scheduler, beta3_one_minus_scheduler, beta3_scheduler

MaskOrFn = Any | Callable[[optax.Params], Any] | None


class ScaleByAdemamixState(NamedTuple):
    """Optimizer state: a plain pytree of arrays (Orbax saves and restores it as is).

    Attributes:
      count: int32 scalar, number of updates applied (0-based; the next update uses t = count + 1).
      m1: fast EMA of the gradients, same tree/shapes/dtypes as the params.
      m2: slow EMA of the gradients (decay b3(t)), not bias-corrected.
      nu: EMA of the squared gradients.
    """

    count: jax.Array
    m1: optax.Updates
    m2: optax.Updates
    nu: optax.Updates


def _log(b: float) -> float:
    """ln(b), with ln(0) = -inf so that the bias correction 1 - b^t = -expm1(t ln b) is 1 for b = 0."""
    return math.log(b) if b > 0 else -math.inf


def _check_decay_rate(b: float, name: str) -> None:
    if not 0.0 <= b < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {b!r}")


def scale_by_ademamix(
    b1: float = 0.9,
    b2: float = 0.999,
    b3: float = 0.9999,
    alpha: float = 8.0,
    alpha_warmup_steps: int = 0,
    b3_warmup_steps: int = 0,
    eps: float = 1e-8,
) -> optax.GradientTransformation:
    """The AdEMAMix direction `(m1_hat + alpha(t) m2) / (sqrt(nu_hat) + eps)`, without lr or decay.

    Arguments as `ademamix`. The moments keep the dtype of the params.
    """
    for name, b in (("b1", b1), ("b2", b2), ("b3", b3)):
        _check_decay_rate(b, name)
    alpha_t = alpha_scheduler(alpha, alpha_warmup_steps)
    b3_t = beta3_scheduler(b1, b3, b3_warmup_steps)
    one_minus_b3_t = beta3_one_minus_scheduler(b1, b3, b3_warmup_steps)
    log_b1, log_b2 = _log(b1), _log(b2)

    def init_fn(params: optax.Params) -> ScaleByAdemamixState:
        return ScaleByAdemamixState(
            count=jnp.zeros([], jnp.int32),
            m1=optax.tree.zeros_like(params),
            m2=optax.tree.zeros_like(params),
            nu=optax.tree.zeros_like(params),
        )

    def update_fn(updates, state, params=None):
        del params
        t = (state.count + 1).astype(jnp.result_type(float))
        slow_decay, slow_rate = b3_t(t), one_minus_b3_t(t)
        # 1 - b^t via expm1 keeps full precision at small t (1 - 0.999 loses digits in float32).
        correction1 = -jnp.expm1(t * log_b1)
        correction2 = -jnp.expm1(t * log_b2)
        mix = alpha_t(t)

        def ema(decay, rate, old, new):
            return (decay * old + rate * new).astype(old.dtype)

        m1 = jax.tree.map(lambda m, g: ema(b1, 1.0 - b1, m, g), state.m1, updates)
        m2 = jax.tree.map(lambda m, g: ema(slow_decay, slow_rate, m, g), state.m2, updates)
        nu = jax.tree.map(lambda v, g: ema(b2, 1.0 - b2, v, jnp.square(g)), state.nu, updates)

        def direction(g, m1_, m2_, v_):
            d = (m1_ / correction1 + mix * m2_) / (jnp.sqrt(v_) / jnp.sqrt(correction2) + eps)
            return d.astype(g.dtype)

        updates = jax.tree.map(direction, updates, m1, m2, nu)
        count = optax.safe_int32_increment(state.count)
        return updates, ScaleByAdemamixState(count=count, m1=m1, m2=m2, nu=nu)

    return optax.GradientTransformation(init_fn, update_fn)


def ademamix(
    learning_rate: optax.ScalarOrSchedule,
    b1: float = 0.9,
    b2: float = 0.999,
    b3: float = 0.9999,
    alpha: float = 8.0,
    alpha_warmup_steps: int = 0,
    b3_warmup_steps: int = 0,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    mask: MaskOrFn = None,
) -> optax.GradientTransformation:
    """AdEMAMix with linear alpha warmup and half-life beta3 warmup, as in Apertus (docs/recipe.md section 4).

    A chain `scale_by_ademamix -> add_decayed_weights(weight_decay, mask) -> scale_by_learning_rate`,
    so it composes with `optax.chain` (e.g. after `optax.clip_by_global_norm`). Its state is a tuple
    of NamedTuples of arrays that Orbax saves and restores. See the module docstring for the
    0-based count / 1-based t convention.

    Args:
      learning_rate: float, or an optax schedule called with the 0-based count (see
        `batch_plan.schedule_in_steps` for token-based schedules).
      b1: fast-EMA decay (Apertus 0.9).
      b2: second-moment decay (Apertus 0.999).
      b3: final slow-EMA decay (Apertus 0.9999).
      alpha: final weight of the slow EMA (Apertus 8.0; `optax.contrib.ademamix` defaults to 5.0).
      alpha_warmup_steps: linear warmup of alpha in steps (Apertus 100,000); 0 means no warmup.
      b3_warmup_steps: half-life warmup of b3 from b1 in steps (Apertus 100,000); 0 means none.
      eps: added to the bias-corrected RMS in the denominator.
      weight_decay: decoupled decay coefficient, multiplied by the learning rate (Apertus 0.1).
      mask: where weight decay applies: a pytree of bools matching the params (or a prefix), or a
        callable params -> such a tree, e.g. `default_weight_decay_mask`. None: every parameter.

    Returns:
      An `optax.GradientTransformation`; its updates are to be added to the params.

    Raises:
      ValueError: if a decay rate is outside [0, 1) (b3 also must be > 0 with a b3 warmup) or a
        warmup length is negative.
    """
    return optax.chain(
        scale_by_ademamix(b1, b2, b3, alpha, alpha_warmup_steps, b3_warmup_steps, eps),
        optax.add_decayed_weights(weight_decay, mask),
        optax.scale_by_learning_rate(learning_rate),
    )
