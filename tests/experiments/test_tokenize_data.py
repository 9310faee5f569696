"""experiments.tokenize_data as a CLI: an empty input is one line, exit 2, nothing written (no staging
directory left)."""

import os

import pytest


@pytest.mark.slow
def test_empty_input_is_one_line_and_nothing_is_written(tmp_path, run_job):
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"text": "   "}\n{"text": ""}\n')
    result = run_job(
        "experiments.tokenize_data",
        f"--input={empty}",
        "--tokenizer=tekken",
        f"--out={tmp_path / 'out'}",
        "--source=s",
        "--licence=l",
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("error: ") and "input is empty" in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["empty.jsonl"]
