"""apertus_jax.optim.schedule_plot: the values follow the preset, a readable PNG, unknown presets rejected."""

import numpy as np
import pytest
from matplotlib import image

from apertus_jax.optim import schedule_plot
from apertus_jax.optim.presets import get_optim_preset


def test_values_follow_the_preset():
    preset = get_optim_preset("apertus-8b")
    values = schedule_plot.schedule_values(preset, np.array([0, 50_000, 99_999, 2_000_000]))
    np.testing.assert_allclose(values["alpha"], [8e-5, 4.00008, 8.0, 8.0], rtol=1e-5)
    assert values["beta3"][-1] == np.float32(0.9999)
    assert values["lr"][0] == 0.0 and values["lr"][-1] == np.float32(1.1e-4)
    assert values["tokens"][-1] == preset.batch_plan.tokens_at_step(2_000_000)


def test_figure_titles_name_the_preset_and_its_schedule():
    fig = schedule_plot.schedule_figure(get_optim_preset("apertus-70b"))
    titles = [ax.get_title() for ax in fig.axes[:2]]
    assert titles[0] == (
        "apertus-70b: WSD, 1-sqrt decay over the last 1.5T tokens\npeak 1e-05 -> 1e-06, "
        f"{get_optim_preset('apertus-70b').total_steps():,} steps"
    )
    assert titles[1] == (
        "first 600B tokens: LR warmup 16.8B tokens\nalpha and beta3 warmups 100,000 / 100,000 steps"
    )
    assert len(fig.axes) == 6


def test_writes_png(tmp_path):
    path = schedule_plot.write_schedule_plot("apertus-8b", str(tmp_path / "figures"))
    assert path == str(tmp_path / "figures" / "apertus8b_schedules.png")
    assert image.imread(path).shape[:2] == (990, 1430)
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["apertus8b_schedules.png"]  # no temp file


def test_unknown_preset_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match="apertus-1b"):
        schedule_plot.write_schedule_plot("apertus-1b", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
