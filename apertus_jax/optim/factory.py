"""`make_optimizer`: the trainer's one call to build the gradient transformation.

    tx = make_optimizer("ademamix", schedule, weight_decay=0.1, clip_norm=0.1)

The optimizers are a table of names (`OPTIMIZERS`); an optimizer's module is imported when it is built, so
importing the trainer loads none of them.
"""

from typing import Any

import optax

from apertus_jax.named import load_named
from apertus_jax.optim.decay_mask import default_weight_decay_mask

# "module:function" by name
OPTIMIZERS = {
    "ademamix": "apertus_jax.optim.ema_mixture:ademamix",
    "adamw": "apertus_jax.optim.baselines:adamw",
    "lion": "apertus_jax.optim.baselines:lion",
    "muon": "apertus_jax.optim.orthogonal:muon",
}


def make_optimizer(
    name: str,
    learning_rate: optax.ScalarOrSchedule,
    weight_decay: float,
    clip_norm: float | None,
    **kwargs: Any,
) -> optax.GradientTransformation:
    """`optax.chain(clip_by_global_norm(clip_norm), ademamix | adamw | lion | muon)` with the default decay mask.

    Args:
      name: "ademamix" (Apertus), "adamw" (baseline) or "muon" (Muon on hidden matrices, AdamW on the rest;
        docs/optimizers.md) or "lion" (ablation).
      learning_rate: float or optax schedule of the 0-based update count (e.g. from
        `schedule_in_steps`).
      weight_decay: decoupled decay, multiplied by the LR (Apertus 0.1).
      clip_norm: global gradient-norm clipping threshold (Apertus 0.1); None or 0 disables it.
      **kwargs: further arguments of `ademamix`/`adamw`/`lion`/`muon` (b1, b2, b3, alpha, alpha_warmup_steps,
        b3_warmup_steps, eps, mask; muon: logical_axes, momentum, rms; lion: no eps). `mask` defaults to
        `default_weight_decay_mask`.

    Raises:
      ValueError: for an unknown `name` or a negative `clip_norm`; "muon" without `logical_axes`.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {sorted(OPTIMIZERS)}")
    if clip_norm is not None and clip_norm < 0:
        raise ValueError(f"clip_norm must be > 0, or None/0 to disable clipping, got {clip_norm!r}")
    if name == "muon" and kwargs.get("logical_axes") is None:
        raise ValueError(
            "optimizer 'muon' needs the parameters' logical axes (logical_axes=...) to tell matrices from "
            "embeddings and norms"
        )
    kwargs.setdefault("mask", default_weight_decay_mask)
    tx = load_named(OPTIMIZERS[name])(learning_rate, weight_decay=weight_decay, **kwargs)
    if not clip_norm:
        return tx
    return optax.chain(optax.clip_by_global_norm(clip_norm), tx)
