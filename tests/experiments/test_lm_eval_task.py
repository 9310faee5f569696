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


def test_the_documented_samples_command_runs_as_written(tmp_path, run_job):
    """docs/lm_eval.md's --samples command named a `samples.jsonl` that exists nowhere (errno 2): it now names
    the repository's extract, and runs from the repository root as written."""
    docs = (ROOT / "docs" / "lm_eval.md").read_text()
    command = docs[docs.index("python -m experiments.lm_eval_task --output_dir=/tmp/lm_eval_tasks \\") :]
    args = command.split("#")[0].replace("\\\n", " ").split()[3:]
    assert args == ["--output_dir=/tmp/lm_eval_tasks", f"--samples={EXTRACT.relative_to(ROOT)}"]
    result = run_job("experiments.lm_eval_task", f"--output_dir={tmp_path}", args[1], cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"wrote {tmp_path}/german_exams_qa.yaml (20 questions)")


def test_a_samples_file_that_is_not_json_lines_names_the_flag_and_the_line(tmp_path, run_job):
    """Before: `error: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)`, no file or
    flag named."""
    samples = tmp_path / "samples.jsonl"
    samples.write_text(EXTRACT.read_text().splitlines()[0] + "\n{bad\n")
    result = run_job("experiments.lm_eval_task", f"--output_dir={tmp_path}/out", f"--samples={samples}")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"error: --samples={samples}: german-exams-qa/1: not a JSON line (Expecting property name enclosed in "
        "double quotes); pass an exams-qa samples.jsonl (the evals wheel's "
        "evals/registry/data/german-exams-qa/samples.jsonl)"
    ], result.stderr[-2000:]
    assert not (tmp_path / "out").exists()
