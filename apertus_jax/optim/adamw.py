"""AdamW baseline with the same interface as `ademamix` (ablations, the Boldt recipe)."""

import optax

from apertus_jax.optim.ademamix import MaskOrFn


def adamw(
    learning_rate: optax.ScalarOrSchedule,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    mask: MaskOrFn = None,
) -> optax.GradientTransformation:
    """AdamW with decoupled weight decay multiplied by the learning rate (Loshchilov & Hutter 2019).

    Same conventions as `ademamix`: optax's 0-based count (bias corrections use t = count + 1, a
    learning-rate schedule is called with count), weight decay applied where `mask` is True (a pytree
    of bools or a callable such as `default_weight_decay_mask`; None: everywhere). It is
    `ademamix` with alpha = 0, implemented by `optax.adamw`.

    Args:
      learning_rate: float or optax schedule of the 0-based count.
      b1, b2: first and second moment decays.
      eps: added to the bias-corrected RMS in the denominator.
      weight_decay: decay coefficient, multiplied by the learning rate.
      mask: weight-decay mask (pytree or callable) or None.

    Returns:
      An `optax.GradientTransformation`.
    """
    return optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay, mask=mask)
