"""Optax transforms of the Apertus recipe: AdEMAMix with warmups, Muon by logical axes, token-based WSD,
batch-size plans.

from apertus_jax.optim import ademamix, muon, muon_dimension_numbers, wsd_schedule, BatchSizePlan
"""

from apertus_jax.optim.adamw import adamw
from apertus_jax.optim.ademamix import ScaleByAdemamixState, ademamix, scale_by_ademamix
from apertus_jax.optim.batch_plan import BatchSizePlan, schedule_in_steps
from apertus_jax.optim.decay_mask import default_weight_decay_mask
from apertus_jax.optim.factory import make_optimizer
from apertus_jax.optim.lion import lion
from apertus_jax.optim.muon import muon, muon_assignment, muon_dimension_numbers
from apertus_jax.optim.presets import OptimPreset, get_optim_preset
from apertus_jax.optim.schedules import alpha_scheduler, beta3_scheduler, cosine_schedule, wsd_schedule
from apertus_jax.optim.state import opt_state_shardings

__all__ = [
    "BatchSizePlan",
    "OptimPreset",
    "ScaleByAdemamixState",
    "adamw",
    "ademamix",
    "alpha_scheduler",
    "beta3_scheduler",
    "cosine_schedule",
    "default_weight_decay_mask",
    "get_optim_preset",
    "lion",
    "make_optimizer",
    "muon",
    "muon_assignment",
    "muon_dimension_numbers",
    "opt_state_shardings",
    "scale_by_ademamix",
    "schedule_in_steps",
    "wsd_schedule",
]
