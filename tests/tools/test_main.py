"""tools.measure as a CLI: bad flags are one line, exit 2, nothing measured or written."""

import pathlib

import pytest

from tools.measure.measurements import MEASUREMENTS

ROOT = pathlib.Path(__file__).parents[2]


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--only=demo,nope"],
            f"error: --only: no measurement nope; known: {', '.join(MEASUREMENTS)}",
        ),
        (
            ["--only=demo", "--rewrite_only"],
            "error: --rewrite_only measures nothing: drop --only, or --rewrite_only to measure",
        ),
    ],
)
def test_bad_flags_are_one_line_and_nothing_is_measured(flags, message, run_job):
    before = {p: p.read_bytes() for p in (ROOT / "docs" / "results").rglob("*") if p.is_file()}
    result = run_job("tools.measure", *flags)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0] == message
    assert {p: p.read_bytes() for p in (ROOT / "docs" / "results").rglob("*") if p.is_file()} == before
