"""The learning rate, AdEMAMix alpha and beta3 of an Apertus run against tokens consumed, as a figure.

`write_schedule_plot(preset_name, out_dir)` writes `out_dir/<preset without dash>_schedules.png` (e.g.
`apertus8b_schedules.png`): three rows (LR, alpha, beta3), the whole 15T-token run on the left and the first
600B tokens (LR warmup, alpha/beta3 warmups of 100k steps) on the right. Every value comes from the same code
the optimizer runs (`apertus_jax.optim` presets and schedulers), evaluated at the optax count of each step.
CLI: `python -m experiments.plot_schedules --out=DIR [--preset=apertus-8b]`.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from apertus_jax import plots
from apertus_jax.optim.config import make_lr_schedule
from apertus_jax.optim.presets import OptimPreset, get_optim_preset
from apertus_jax.optim.schedules import alpha_scheduler, beta3_scheduler

ZOOM_TOKENS = 600e9
SAMPLES = 4000


def schedule_values(preset: OptimPreset, steps: np.ndarray) -> dict[str, np.ndarray]:
    """Tokens consumed, LR, alpha and beta3 of the update made at each 0-based optax count in `steps`."""
    plan = preset.batch_plan
    count = jnp.asarray(steps, jnp.int32)
    t = count + 1  # AdEMAMix's 1-based step
    return {
        "tokens": plan.tokens_at_step(steps).astype(np.float64),
        "lr": np.asarray(jax.vmap(make_lr_schedule(preset, plan))(count)),
        "alpha": np.asarray(alpha_scheduler(preset.alpha, preset.alpha_warmup_steps)(t)),
        "beta3": np.asarray(beta3_scheduler(preset.b1, preset.b3, preset.b3_warmup_steps)(t)),
    }


def schedule_figure(preset: OptimPreset) -> Figure:
    """The 3x2 figure of `preset` (module docstring), 13 x 9 inches."""
    plan = preset.batch_plan
    total_steps = preset.total_steps()
    zoom_steps = plan.step_at_tokens(int(ZOOM_TOKENS))
    full = schedule_values(preset, np.unique(np.linspace(0, total_steps, SAMPLES).astype(np.int64)))
    zoom = schedule_values(preset, np.unique(np.linspace(0, zoom_steps, SAMPLES).astype(np.int64)))

    fig = plots.figure((13, 9))
    axes = fig.subplots(3, 2, sharex="col")
    for column, (values, scale, unit) in enumerate(((full, 1e12, "T"), (zoom, 1e9, "B"))):
        x = values["tokens"] / scale
        lr_ax, alpha_ax, beta_ax = axes[:, column]
        lr_ax.plot(x, values["lr"], color="tab:blue")
        lr_ax.set_ylabel("learning rate")
        alpha_ax.plot(x, values["alpha"], color="tab:orange")
        alpha_ax.set_ylabel("AdEMAMix alpha")
        beta_ax.plot(x, 1.0 - values["beta3"], color="tab:green")
        beta_ax.set_yscale("log")
        beta_ax.set_ylabel("1 - beta3 (log scale)")
        beta_ax.set_xlabel(f"tokens consumed ({unit})")
        for start, size in plan.phases[1:]:
            if start / scale <= x[-1]:
                for ax in axes[:, column]:
                    ax.axvline(start / scale, color="gray", linestyle="--", linewidth=1)
                lr_ax.annotate(
                    f"batch {plan.batch_tokens[0] / 1e6:.1f}M -> {size / 1e6:.1f}M tokens",
                    (start / scale, preset.peak_lr * 0.5),
                    xytext=(5, 0),
                    textcoords="offset points",
                    color="gray",
                )
        for ax in axes[:, column]:
            ax.grid(alpha=0.3)
        lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    axes[0, 0].set_title(
        f"{preset.preset}: WSD, 1-sqrt decay over the last {preset.decay_tokens / 1e12:g}T tokens\n"
        f"peak {preset.peak_lr:g} -> {preset.final_fraction * preset.peak_lr:g}, {total_steps:,} steps"
    )
    axes[0, 1].set_title(
        f"first {ZOOM_TOKENS / 1e9:.0f}B tokens: LR warmup {preset.warmup_tokens / 1e9:.1f}B tokens\n"
        f"alpha and beta3 warmups {preset.alpha_warmup_steps:,} / {preset.b3_warmup_steps:,} steps"
    )
    axes[2, 1].annotate(
        f"beta3: {preset.b1} -> {preset.b3} (half-life interpolation)",
        (0.35, 0.8),
        xycoords="axes fraction",
    )
    return fig


def plot_schedules(preset: OptimPreset, path: str) -> None:
    """Writes `schedule_figure(preset)` to the PNG `path`, 1430 x 990 pixels (atomic)."""
    plots.save(schedule_figure(preset), path, dpi=110)


def write_schedule_plot(preset_name: str, out_dir: str) -> str:
    """Writes the figure of the preset `preset_name` into `out_dir` (created if missing); returns its path.

    Raises:
      ValueError: an unknown preset (nothing is written).
    """
    preset = get_optim_preset(preset_name)
    path = os.path.join(out_dir, f"{preset_name.replace('-', '')}_schedules.png")
    plot_schedules(preset, path)
    return path
