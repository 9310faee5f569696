"""experiments/plot_schedules.py writes a readable PNG and rejects unknown presets."""

import pathlib
import re

import numpy as np
import pytest
from matplotlib import image

from apertus_jax.optim import get_optim_preset
from experiments import plot_schedules


def test_values_follow_the_preset():
    preset = get_optim_preset("apertus-8b")
    values = plot_schedules.schedule_values(preset, np.array([0, 50_000, 99_999, 2_000_000]))
    np.testing.assert_allclose(values["alpha"], [8e-5, 4.00008, 8.0, 8.0], rtol=1e-5)
    assert values["beta3"][-1] == np.float32(0.9999)
    assert values["lr"][0] == 0.0 and values["lr"][-1] == np.float32(1.1e-4)
    assert values["tokens"][-1] == preset.batch_plan.tokens_at_step(2_000_000)


def test_cli_writes_png(tmp_path, capsys):
    assert plot_schedules.main([f"--out={tmp_path}"]) == 0
    path = tmp_path / "apertus8b_schedules.png"
    assert capsys.readouterr().out.strip() == str(path)
    assert image.imread(path).shape[:2] == (990, 1430)
    assert [p.name for p in tmp_path.iterdir()] == ["apertus8b_schedules.png"]  # no temp file left


def test_cli_rejects_unknown_preset(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        plot_schedules.main([f"--out={tmp_path}", "--preset=apertus-1b"])
    assert exit_info.value.code != 0


def test_readme_command_writes_the_figure_it_names():
    """The README's plot_schedules command writes the PNG that the README (and docs/figures) hold."""
    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    match = re.search(
        r"python -m experiments\.plot_schedules --out=(\S+)` draws .*?`([^`]+\.png)`", readme, re.S
    )
    assert match, "README lost its plot_schedules command"
    out, figure = match.groups()
    assert f"{out.rstrip('/')}/apertus8b_schedules.png" == figure
    assert (pathlib.Path(__file__).parents[2] / figure).is_file()
