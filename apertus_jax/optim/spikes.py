"""Loss-spike guard: skip an update whose loss or gradient norm jumps above its running average.

Apertus restarted from checkpoints and skipped data by hand after loss spikes (report, section on training
stability); MaxText (`skip_step_on_spikes`), OLMo-core and Levanter skip such updates automatically. This
wrapper does it inside the optimizer: with `factor` f, an update is dropped (parameters and the inner
optimizer state untouched, the counter `skipped` + 1) when, after `warmup_steps` accepted updates,

    loss > f * mean_loss   or   grad_norm > f * mean_grad_norm

where the means are bias-corrected exponential moving averages (decay `ema_decay`) over ACCEPTED updates
only, so a spike never raises its own threshold. The statistics live in the optimizer state, so they are
checkpointed with it and a resumed run decides exactly as an uninterrupted one.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax


class SpikeGuardState(NamedTuple):
    """count: accepted updates (int32); loss_ema, grad_norm_ema: un-corrected EMAs (float32);
    skipped: updates dropped so far (int32); last_skipped: 1.0 when the latest update was dropped."""

    inner: optax.OptState
    count: jax.Array
    loss_ema: jax.Array
    grad_norm_ema: jax.Array
    skipped: jax.Array
    last_skipped: jax.Array


def skip_spikes(
    inner: optax.GradientTransformation, factor: float, warmup_steps: int, ema_decay: float
) -> optax.GradientTransformationExtraArgs:
    """Wraps `inner` (e.g. clip -> AdEMAMix) with the spike guard described in the module docstring.

    `update(grads, state, params, *, loss)` needs the batch's mean loss (float32 scalar) as the extra
    argument `loss`; the gradient norm is the global L2 norm of the incoming (unclipped) `grads`.

    Args:
      inner: the optimizer chain.
      factor: > 1; the multiple of the running means above which an update is dropped.
      warmup_steps: >= 1; accepted updates before the guard is armed (the means need a history).
      ema_decay: in [0, 1); decay of the moving averages.
    """
    if factor <= 1 or warmup_steps < 1 or not 0 <= ema_decay < 1:
        raise ValueError(
            f"skip_spikes: factor={factor} must be > 1, warmup_steps={warmup_steps} >= 1, "
            f"ema_decay={ema_decay} in [0, 1)"
        )
    inner = optax.with_extra_args_support(inner)

    def init(params):
        zero = jnp.zeros((), jnp.float32)
        return SpikeGuardState(
            inner.init(params), jnp.zeros((), jnp.int32), zero, zero, jnp.zeros((), jnp.int32), zero
        )

    def update(updates, state, params=None, *, loss, **extra_args):
        grad_norm = optax.tree.norm(updates)
        correction = 1.0 - jnp.float32(ema_decay) ** jnp.maximum(state.count, 1).astype(jnp.float32)
        mean_loss, mean_norm = state.loss_ema / correction, state.grad_norm_ema / correction
        spike = (state.count >= warmup_steps) & (
            (loss > factor * mean_loss) | (grad_norm > factor * mean_norm)
        )
        new_updates, new_inner = inner.update(updates, state.inner, params, loss=loss, **extra_args)
        keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(spike, o, n), new, old)
        ema = lambda old, x: jnp.where(spike, old, ema_decay * old + (1.0 - ema_decay) * x)
        new_state = SpikeGuardState(
            inner=keep(new_inner, state.inner),
            count=state.count + jnp.where(spike, 0, 1).astype(jnp.int32),
            loss_ema=ema(state.loss_ema, loss.astype(jnp.float32)),
            grad_norm_ema=ema(state.grad_norm_ema, grad_norm),
            skipped=state.skipped + spike.astype(jnp.int32),
            last_skipped=spike.astype(jnp.float32),
        )
        return jax.tree.map(lambda u: jnp.where(spike, jnp.zeros_like(u), u), new_updates), new_state

    return optax.GradientTransformationExtraArgs(init, update)


# The step metric that flags an update the guard dropped (`dropped_updates`).
DROP_REASON = "spike_skipped"


def dropped_updates(opt_state: optax.OptState) -> dict[str, jax.Array]:
    """`{"spike_skipped": 1.0}` when the spike guard in `opt_state` dropped the latest update, else 0.0 (also
    without a guard): why the optimizer dropped an update, as the train step reports it."""
    return {DROP_REASON: spike_skipped(opt_state)}


def spike_skipped(opt_state: optax.OptState) -> jax.Array:
    """1.0 when the spike guard in `opt_state` dropped the latest update, else 0.0 (also without a guard)."""
    return optax.tree_utils.tree_get(opt_state, "last_skipped", jnp.float32(0))


def spikes_skipped_total(opt_state: optax.OptState) -> jax.Array:
    """Updates dropped by the spike guard so far (int32; 0 without a guard)."""
    return optax.tree_utils.tree_get(opt_state, "skipped", jnp.int32(0))
