"""experiments.train_tokenizer as a CLI: an input that matches no file is one line, exit 2, nothing
written."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[2]


def test_missing_input_is_one_line_and_nothing_is_written(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.train_tokenizer",
            f"--input={tmp_path}/missing*.txt",
            f"--out={tmp_path}/x.model",
        ],
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "matches no file" in lines[0]
    assert not list(tmp_path.iterdir())
