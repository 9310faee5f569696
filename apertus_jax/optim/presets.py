"""Apertus-8B and -70B optimizer, LR schedule and batch-size plan (docs/recipe.md sections 4 and 5)."""

import dataclasses

import optax

from apertus_jax.optim.batch_plan import BatchSizePlan, schedule_in_steps
from apertus_jax.optim.factory import make_optimizer
from apertus_jax.optim.schedules import Schedule, wsd_schedule

SEQUENCE_LENGTH = 4096


@dataclasses.dataclass(frozen=True)
class OptimPreset:
    """One pretraining run's optimizer settings; token counts are Python ints.

    The "4.2M / 8.4M / 16.8M" batch sizes of the report are 1024 / 2048 / 4096 sequences of 4,096
    tokens; the doubling boundary is snapped up to the next batch edge (`BatchSizePlan(snap=True)`).
    """

    name: str
    peak_lr: float
    warmup_tokens: int
    decay_tokens: int
    total_tokens: int
    init_fraction: float
    final_fraction: float
    batch_phases: tuple[tuple[int, int], ...]
    b1: float = 0.9
    b2: float = 0.999
    b3: float = 0.9999
    alpha: float = 8.0
    alpha_warmup_steps: int = 100_000
    b3_warmup_steps: int = 100_000
    eps: float = 1e-8
    weight_decay: float = 0.1
    clip_norm: float = 0.1

    @property
    def batch_plan(self) -> BatchSizePlan:
        """The batch-size plan of `batch_phases`, boundaries snapped up to batch edges."""
        return BatchSizePlan(self.batch_phases, snap=True)

    def token_schedule(self) -> Schedule:
        """WSD with 1-sqrt decay as a function of tokens consumed."""
        return wsd_schedule(
            self.peak_lr,
            warmup=self.warmup_tokens,
            decay=self.decay_tokens,
            total=self.total_tokens,
            init_fraction=self.init_fraction,
            final_fraction=self.final_fraction,
            decay_shape="1-sqrt",
        )

    def learning_rate(self) -> Schedule:
        """The LR as an optax schedule of the 0-based update count."""
        return schedule_in_steps(self.token_schedule(), self.batch_plan)

    def total_steps(self) -> int:
        """Optimizer updates needed to consume `total_tokens` under the batch plan."""
        return self.batch_plan.step_at_tokens(self.total_tokens)

    def optimizer(self) -> optax.GradientTransformation:
        """clip_by_global_norm -> AdEMAMix with warmups, weight decay on >= 2-D params, the LR schedule."""
        return make_optimizer(
            "ademamix",
            self.learning_rate(),
            weight_decay=self.weight_decay,
            clip_norm=self.clip_norm,
            b1=self.b1,
            b2=self.b2,
            b3=self.b3,
            alpha=self.alpha,
            alpha_warmup_steps=self.alpha_warmup_steps,
            b3_warmup_steps=self.b3_warmup_steps,
            eps=self.eps,
        )


_PRESETS = {
    "apertus-8b": OptimPreset(
        name="apertus-8b",
        peak_lr=1.1e-4,
        warmup_tokens=16_800_000_000,
        decay_tokens=1_500_000_000_000,
        total_tokens=15_000_000_000_000,
        init_fraction=0.0,  # released launch script; the report text says 0.1
        final_fraction=0.1,
        batch_phases=((0, 1024 * SEQUENCE_LENGTH), (7_000_000_000_000, 2048 * SEQUENCE_LENGTH)),
    ),
    # The report gives the 70B peak LR and batch doubling; warmup and cooldown lengths as for 8B.
    "apertus-70b": OptimPreset(
        name="apertus-70b",
        peak_lr=1.0e-5,
        warmup_tokens=16_800_000_000,
        decay_tokens=1_500_000_000_000,
        total_tokens=15_000_000_000_000,
        init_fraction=0.0,
        final_fraction=0.1,
        batch_phases=((0, 2048 * SEQUENCE_LENGTH), (4_400_000_000_000, 4096 * SEQUENCE_LENGTH)),
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
