"""The `optim` section of a run: one dataclass holding every field, its default and its range, and the one
builder of the LR schedule and the optax chain from it (docs/recipe.md sections 4 and 5).

Token counts (`warmup_tokens`, `decay_tokens`, `total_tokens`) are counted in training tokens; the
schedule becomes a function of the optimizer's update count through the run's `BatchSizePlan`. The defaults
are the tiny CPU demo's; `apertus_jax.optim.presets` holds the Apertus-8B/70B values.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import optax

from apertus_jax.checks import check_choice, check_number
from apertus_jax.optim.batch_plan import BatchSizePlan, schedule_in_steps
from apertus_jax.optim.factory import OPTIMIZERS, make_optimizer
from apertus_jax.optim.schedules import DECAY_SHAPES, Schedule, cosine_schedule, wsd_schedule
from apertus_jax.optim.spikes import DROP_REASON, dropped_updates, skip_spikes

SCHEDULES = ("wsd", "cosine")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """Optimizer, clipping, weight decay and the token-based LR schedule.

    Attributes:
      name: "ademamix" (Apertus), "adamw" (baseline), "muon" (Muon on the hidden matrices, AdamW with b1, b2,
        eps on embeddings, lm_head, norms and xIELU scalars; docs/optimizers.md) or "lion" (the sign of the
        b1-interpolated momentum, momentum decay b2, no eps; the optimizer ablation).
      peak_lr: the stable LR of WSD / the peak of cosine.
      schedule: "wsd" (warmup, stable, `decay_shape` cooldown over the last `decay_tokens`) or "cosine".
      decay_shape: the shape of the WSD cooldown, "1-sqrt" (Apertus), "linear" or "cosine".
      warmup_tokens, decay_tokens, total_tokens: schedule lengths in tokens.
      init_fraction, final_fraction: LR at the start of warmup / the end, as fractions of `peak_lr`.
      b1, b2, b3, alpha, alpha_warmup_steps, b3_warmup_steps, eps: AdEMAMix moments (b3, alpha and the
        warmups are ignored by AdamW); warmups count optimizer updates (the AdEMAMix reference convention).
      muon_momentum: Muon's Nesterov momentum decay (Muon only).
      muon_rms: RMS of a Muon update per unit LR, matched to AdamW's so that one `peak_lr` and
        `weight_decay` serve both branches (Moonlight: 0.2); 0 scales by sqrt(max(1, fan_out / fan_in))
        instead (Keller Jordan's reference, which needs its own LR). Muon only.
      weight_decay: decoupled decay, multiplied by the LR, on >= 2-D parameters.
      clip_norm: global gradient-norm clipping threshold; 0 disables clipping.

    Raises:
      ValueError: in `__post_init__`, one line naming the field ("optim.<field>") and its valid range.
    """

    name: str = "ademamix"
    peak_lr: float = 3e-3
    schedule: str = "wsd"
    warmup_tokens: int = 30 * 16 * 128
    decay_tokens: int = 60 * 16 * 128
    total_tokens: int = 300 * 16 * 128
    init_fraction: float = 0.0
    final_fraction: float = 0.1
    decay_shape: str = "1-sqrt"
    b1: float = 0.9
    b2: float = 0.999
    b3: float = 0.9999
    alpha: float = 8.0
    alpha_warmup_steps: int = 0
    b3_warmup_steps: int = 0
    eps: float = 1e-8
    muon_momentum: float = 0.95
    muon_rms: float = 0.2
    weight_decay: float = 0.1
    clip_norm: float = 0.1

    def __post_init__(self):
        check_choice("optim.name", self.name, tuple(sorted(OPTIMIZERS)))
        check_choice("optim.schedule", self.schedule, SCHEDULES)
        check_choice("optim.decay_shape", self.decay_shape, DECAY_SHAPES)
        check_number("optim.peak_lr", self.peak_lr, low=0, low_open=True)
        for name in ("warmup_tokens", "decay_tokens", "alpha_warmup_steps", "b3_warmup_steps"):
            check_number(f"optim.{name}", getattr(self, name), low=0, integer=True)
        check_number("optim.total_tokens", self.total_tokens, low=1, integer=True)
        for name in ("init_fraction", "final_fraction"):
            check_number(f"optim.{name}", getattr(self, name), low=0, high=1)
        for name in ("b1", "b2", "b3", "muon_momentum"):
            check_number(f"optim.{name}", getattr(self, name), low=0, high=1, high_open=True)
        for name in ("alpha", "muon_rms", "weight_decay", "clip_norm"):
            check_number(f"optim.{name}", getattr(self, name), low=0)
        check_number("optim.eps", self.eps, low=0, low_open=True)
        if self.warmup_tokens + (self.decay_tokens if self.schedule == "wsd" else 0) > self.total_tokens:
            raise ValueError(
                f"optim.warmup_tokens={self.warmup_tokens} (+ decay_tokens={self.decay_tokens} for wsd) "
                f"exceeds optim.total_tokens={self.total_tokens}; shorten the warmup/cooldown or raise the total"
            )


def section(optim: OptimConfig | None = None) -> dict:
    """The `optim` section of a run config: every field of `optim` (default: the defaults)."""
    optim = optim or OptimConfig()
    return {f.name: getattr(optim, f.name) for f in dataclasses.fields(OptimConfig)}


def from_section(section: dict) -> OptimConfig:
    """The validated `OptimConfig` of an `optim` section (a dict or ConfigDict).

    Raises:
      ValueError: an unknown field or a value out of range (one line).
    """
    section = dict(section)
    unknown = set(section) - {f.name for f in dataclasses.fields(OptimConfig)}
    if unknown:
        raise ValueError(f"optim: unknown fields {sorted(unknown)}")
    return OptimConfig(**section)


def make_lr_schedule(optim: OptimConfig, plan: BatchSizePlan) -> Schedule:
    """The optax schedule of the 0-based update count: WSD or cosine in tokens, read through `plan`."""
    if optim.schedule == "wsd":
        by_tokens = wsd_schedule(
            optim.peak_lr,
            optim.warmup_tokens,
            optim.decay_tokens,
            optim.total_tokens,
            optim.init_fraction,
            optim.final_fraction,
            optim.decay_shape,
        )
    else:
        by_tokens = cosine_schedule(
            optim.peak_lr, optim.warmup_tokens, optim.total_tokens, optim.init_fraction, optim.final_fraction
        )
    return schedule_in_steps(by_tokens, plan)


def make_tx(
    optim: OptimConfig, lr_schedule: Schedule, logical_axes: Any = None
) -> optax.GradientTransformation:
    """clip_by_global_norm -> AdEMAMix, AdamW, Lion or Muon with the default weight-decay mask (docs/recipe.md 4,
    docs/optimizers.md).

    Args:
      logical_axes: the parameters' logical axes (one tuple of names per parameter, the params' tree
        structure), which Muon needs to tell matrices from the rest; unused by the others.

    Raises:
      ValueError: "muon" without `logical_axes`, or a parameter Muon cannot classify (`muon_dimension_numbers`).
    """
    kwargs = (
        dict(b1=optim.b1, b2=optim.b2)
        if optim.name == "lion"
        else dict(b1=optim.b1, b2=optim.b2, eps=optim.eps)
    )
    if optim.name == "ademamix":
        kwargs.update(
            b3=optim.b3,
            alpha=optim.alpha,
            alpha_warmup_steps=optim.alpha_warmup_steps,
            b3_warmup_steps=optim.b3_warmup_steps,
        )
    if optim.name == "muon":
        kwargs.update(logical_axes=logical_axes, momentum=optim.muon_momentum, rms=optim.muon_rms)
    return make_optimizer(optim.name, lr_schedule, optim.weight_decay, optim.clip_norm, **kwargs)


@dataclasses.dataclass(frozen=True)
class RunOptimizer:
    """The gradient transformation of a run and what it says of each update.

    Attributes:
      tx: `make_tx`'s chain, inside the loss-spike guard when one is set; `update(grads, state, params, loss=)`.
      drop_reasons: the reasons it may drop an update (an update dropped: parameters and inner state kept).
      dropped: `(opt_state after the update) -> {reason: float32 scalar}`, 1.0 for the reason that dropped the
        latest update, else 0.0; the train step reports each as a metric of that name.
    """

    tx: optax.GradientTransformation
    drop_reasons: tuple[str, ...]
    dropped: Callable[[optax.OptState], dict[str, jax.Array]]


def make_run_optimizer(
    optim: OptimConfig,
    lr_schedule: Schedule,
    logical_axes: Any = None,
    *,
    spike_factor: float = 0.0,
    spike_warmup_steps: int = 1,
    spike_ema_decay: float = 0.0,
) -> RunOptimizer:
    """`make_tx`, wrapped in the loss-spike guard (`apertus_jax.optim.spikes.skip_spikes`) when `spike_factor`
    > 0; a run without the guard still reports its reason, always 0.0.

    Raises:
      ValueError: as `make_tx` and `skip_spikes`.
    """
    tx = make_tx(optim, lr_schedule, logical_axes)
    if spike_factor:
        tx = skip_spikes(tx, spike_factor, spike_warmup_steps, spike_ema_decay)
    return RunOptimizer(tx, (DROP_REASON,), dropped_updates)
