"""Lion with the interface of `adamw` (the optimizer ablation, docs/optimizers.md)."""

import optax

from apertus_jax.optim.ademamix import MaskOrFn


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
