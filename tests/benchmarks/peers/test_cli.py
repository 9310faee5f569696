"""`python -m benchmarks.peers`: usage errors exit 2 before anything is installed or run."""

import pytest

from benchmarks.peers import run


@pytest.mark.parametrize(
    "peer, kwargs",
    (("maxtext", {"vocab": 512}), ("transformers", {"vocab": 0}), ("all", {"steps": 0}), ("nosuch", {})),
)
def test_usage_errors_are_refused_before_anything_is_installed(peer, kwargs, tmp_path):
    with pytest.raises(ValueError):
        next(run.run_peers(peer, str(tmp_path), **kwargs))
    assert not any(tmp_path.iterdir())  # nothing installed


def test_usage_error_exits_2_with_one_line(tmp_path, run_job):
    proc = run_job("benchmarks.peers", "maxtext", "--vocab=512", f"--cache={tmp_path}")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line == "error: --vocab is for the transformers peer only, not 'maxtext'"
    assert not any(tmp_path.iterdir())  # nothing installed
