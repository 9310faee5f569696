"""The optimizers of the Apertus recipe as Optax transforms, with their schedules and batch-size plans.

    from apertus_jax.optim import ademamix, wsd_schedule, BatchSizePlan   # the public transforms, by name

AdEMAMix with warmups, Muon by logical axes, token-based WSD (docs/optimizers.md). The names of `PUBLIC` are
this package's attributes, each imported from its module on first use (importing the trainer loads no
optimizer it does not build); no module is named like the function it holds, so `apertus_jax.optim.ademamix`
is always the function.

- `factory`: `make_optimizer(name, ...)`, the trainer's one call;
- `ema_mixture`: AdEMAMix, a mixture of two EMAs of the gradient, with its alpha and beta3 warmups;
- `orthogonal`: Muon, orthogonalized momentum on the hidden matrices, AdamW on the rest;
- `baselines`: AdamW and Lion with AdEMAMix's interface;
- `spikes`: the loss-spike guard around any of them;
- `decay_mask`: which parameters get weight decay;
- `schedules`: WSD and cosine in tokens, AdEMAMix's alpha and beta3 warmups;
- `batch_plan`: `BatchSizePlan`, tokens per step and token-based schedules in steps;
- `config`: the `optim` section and the optimizer it builds;
- `presets`: the Apertus-8B and -70B optimizer settings;
- `schedule_plot`: the schedules as a PNG.
"""

from typing import Any

from apertus_jax.named import load_named

# name -> its module: the public transforms, schedules and plans (`from apertus_jax.optim import NAME`).
PUBLIC = {
    "ademamix": "ema_mixture",
    "scale_by_ademamix": "ema_mixture",
    "muon": "orthogonal",
    "adamw": "baselines",
    "lion": "baselines",
    "skip_spikes": "spikes",
    "default_weight_decay_mask": "decay_mask",
    "wsd_schedule": "schedules",
    "cosine_schedule": "schedules",
    "alpha_scheduler": "schedules",
    "beta3_scheduler": "schedules",
    "BatchSizePlan": "batch_plan",
    "schedule_in_steps": "batch_plan",
    "make_optimizer": "factory",
    "get_optim_preset": "presets",
}
__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    """A `PUBLIC` name, imported from its module now (PEP 562); any other is no attribute."""
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return load_named(f"{__name__}.{PUBLIC[name]}:{name}")
