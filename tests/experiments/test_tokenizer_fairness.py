"""experiments.tokenizer_fairness as a CLI: an unknown UDHR code is one line, exit 2, nothing written."""


def test_unknown_language_is_one_line_and_nothing_is_written(tmp_path, run_job):
    result = run_job("experiments.tokenizer_fairness", f"--out={tmp_path}/bad", "--languages=eng,xx")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "unknown UDHR codes ['xx']" in lines[0]
    assert not list(tmp_path.iterdir())
