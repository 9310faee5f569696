"""`python -m benchmarks.peers`: usage errors exit 2 before anything is installed or run."""

import pytest

from benchmarks.peers.__main__ import main


@pytest.mark.parametrize(
    "args", (["maxtext", "--vocab=512"], ["transformers", "--vocab=0"], ["all", "--steps=0"])
)
def test_usage_errors_exit_2(args, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*args, f"--cache={tmp_path}"])
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing installed
