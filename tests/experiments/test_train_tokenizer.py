"""experiments.train_tokenizer as a CLI: an input that matches no file is one line, exit 2, nothing
written."""


def test_missing_input_is_one_line_and_nothing_is_written(tmp_path, run_job):
    result = run_job(
        "experiments.train_tokenizer", f"--input={tmp_path}/missing*.txt", f"--out={tmp_path}/x.model"
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "matches no file" in lines[0]
    assert not list(tmp_path.iterdir())
