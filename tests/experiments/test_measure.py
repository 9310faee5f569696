"""experiments.measure as a CLI: an unknown measurement is one line, exit 2, nothing measured or written."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[2]


def test_unknown_measurement_is_one_line_naming_the_known_ones():
    before = sorted((ROOT / "docs" / "results").iterdir())
    result = subprocess.run(
        [sys.executable, "-m", "experiments.measure", "--only=demo,nope"],
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert (
        lines[0] == "error: --only: no measurement nope; known: demo, posttrain, evaluation, goldfish_study"
    )
    assert sorted((ROOT / "docs" / "results").iterdir()) == before
