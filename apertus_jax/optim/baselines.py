"""The baselines of the optimizer ablation, with the interface of `ademamix`: AdamW (also the Boldt recipe's) and
Lion (docs/optimizers.md)."""

import optax

from apertus_jax.optim.ema_mixture import MaskOrFn


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


def lion(
    learning_rate: optax.ScalarOrSchedule,
    b1: float = 0.9,
    b2: float = 0.99,
    weight_decay: float = 0.0,
    mask: MaskOrFn = None,
) -> optax.GradientTransformation:
    """Lion (Chen et al. 2023, *Symbolic Discovery of Optimization Algorithms*, arXiv 2302.06675), `optax.lion`.

    The update is the sign of `b1 m + (1 - b1) g` (every entry +-1, or 0), then the momentum becomes
    `b2 m + (1 - b2) g`; decoupled weight decay multiplied by the learning rate where `mask` is True. One
    float32 moment per parameter. A sign update has RMS 1, about five times AdamW's: the paper's learning rates
    are 3-10 times smaller than AdamW's, with a weight decay as many times larger.

    Args:
      learning_rate: float or optax schedule of the 0-based update count.
      b1: interpolation of momentum and gradient for the update direction (paper: 0.9).
      b2: momentum decay (paper: 0.99).
      weight_decay: decay coefficient, multiplied by the learning rate.
      mask: weight-decay mask (pytree or callable such as `default_weight_decay_mask`) or None (all).

    Returns:
      An `optax.GradientTransformation`.
    """
    return optax.lion(learning_rate, b1=b1, b2=b2, weight_decay=weight_decay, mask=mask)
