"""experiments.lm_eval_task as a CLI: a task written from local samples; bad input is one line, exit 2."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parents[2]
EXTRACT = ROOT / "tests" / "eval" / "assets" / "german_exams_qa_first20.jsonl"


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "experiments.lm_eval_task", *args],
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bad_samples_file_is_one_line_and_nothing_is_written(tmp_path):
    bad = tmp_path / "bad"
    result = _run(f"--output_dir={bad}", f"--samples={tmp_path / 'missing.jsonl'}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "missing.jsonl" in lines[0]
    assert not bad.exists()
