"""experiments.plot_schedules as a CLI: an unknown preset is one line and exit 2; the documented command."""

import pathlib
import re

ROOT = pathlib.Path(__file__).parents[2]


def test_unknown_preset_is_one_line_and_nothing_is_written(tmp_path, run_job):
    result = run_job("experiments.plot_schedules", f"--out={tmp_path / 'out'}", "--preset=apertus-1b")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "apertus-1b" in lines[0]
    assert not (tmp_path / "out").exists()


def test_documented_command_writes_the_figure_it_names():
    """The plot_schedules command of docs/usage.md writes the PNG that the page names (in docs/figures)."""
    usage = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    match = re.search(
        r"python -m experiments\.plot_schedules --out=(\S+)` draws .*?`([^`]+\.png)`", usage, re.S
    )
    assert match, "docs/usage.md lost its plot_schedules command"
    out, figure = match.groups()
    assert f"{out.rstrip('/')}/apertus8b_schedules.png" == figure
    assert (ROOT / figure).is_file()
