"""Apertus-8B and -70B optimizer, LR schedule and batch-size plan (docs/recipe.md sections 4 and 5)."""

import dataclasses

from apertus_jax.optim.batch_plan import BatchSizePlan
from apertus_jax.optim.config import OptimConfig

SEQUENCE_LENGTH = 4096


@dataclasses.dataclass(frozen=True)
class OptimPreset(OptimConfig):
    """One pretraining run's `OptimConfig` plus its batch-size phases; token counts are Python ints.

    The "4.2M / 8.4M / 16.8M" batch sizes of the report are 1024 / 2048 / 4096 sequences of 4,096
    tokens; the doubling boundary is snapped up to the next batch edge (`BatchSizePlan(snap=True)`).
    Build the schedule and optimizer with `apertus_jax.optim.config.make_lr_schedule` / `make_tx`.
    """

    preset: str = ""
    batch_phases: tuple[tuple[int, int], ...] = ()

    @property
    def batch_plan(self) -> BatchSizePlan:
        """The batch-size plan of `batch_phases`, boundaries snapped up to batch edges."""
        return BatchSizePlan(self.batch_phases, snap=True)

    def total_steps(self) -> int:
        """Optimizer updates needed to consume `total_tokens` under the batch plan."""
        return self.batch_plan.step_at_tokens(self.total_tokens)


# Shared by both sizes: AdEMAMix with 100k-update alpha/beta3 warmups, WSD 1-sqrt over the last 1.5T of 15T
# tokens, clipping 0.1, weight decay 0.1. The report gives the 70B peak LR and batch doubling; warmup and
# cooldown lengths are as for 8B.
_APERTUS = dict(
    name="ademamix",
    schedule="wsd",
    decay_shape="1-sqrt",
    warmup_tokens=16_800_000_000,
    decay_tokens=1_500_000_000_000,
    total_tokens=15_000_000_000_000,
    init_fraction=0.0,  # released launch script; the report text says 0.1
    final_fraction=0.1,
    alpha_warmup_steps=100_000,
    b3_warmup_steps=100_000,
)
_PRESETS = {
    "apertus-8b": OptimPreset(
        preset="apertus-8b",
        peak_lr=1.1e-4,
        batch_phases=((0, 1024 * SEQUENCE_LENGTH), (7_000_000_000_000, 2048 * SEQUENCE_LENGTH)),
        **_APERTUS,
    ),
    "apertus-70b": OptimPreset(
        preset="apertus-70b",
        peak_lr=1.0e-5,
        batch_phases=((0, 2048 * SEQUENCE_LENGTH), (4_400_000_000_000, 4096 * SEQUENCE_LENGTH)),
        **_APERTUS,
    ),
}


def get_optim_preset(name: str) -> OptimPreset:
    """The optimizer preset "apertus-8b" or "apertus-70b".

    Raises:
      ValueError: for an unknown name.
    """
    if name not in _PRESETS:
        raise ValueError(f"unknown optimizer preset {name!r}; choose one of {sorted(_PRESETS)}")
    return _PRESETS[name]
