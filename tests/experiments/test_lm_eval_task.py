"""experiments.lm_eval_task as a CLI: a task written from local samples; bad input is one line, exit 2."""

import pathlib

ROOT = pathlib.Path(__file__).parents[2]
EXTRACT = ROOT / "tests" / "eval" / "assets" / "german_exams_qa_first20.jsonl"


def test_bad_samples_file_is_one_line_and_nothing_is_written(tmp_path, run_job):
    bad = tmp_path / "bad"
    result = run_job(
        "experiments.lm_eval_task", f"--output_dir={bad}", f"--samples={tmp_path / 'missing.jsonl'}"
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "missing.jsonl" in lines[0]
    assert not bad.exists()
