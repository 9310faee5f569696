"""experiments.tokenizer_fairness as a CLI: an unknown UDHR code is one line, exit 2, nothing written."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[2]


def test_unknown_language_is_one_line_and_nothing_is_written(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.tokenizer_fairness",
            f"--out={tmp_path}/bad",
            "--languages=eng,xx",
        ],
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "unknown UDHR codes ['xx']" in lines[0]
    assert not list(tmp_path.iterdir())
