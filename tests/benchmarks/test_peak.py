"""The matmul peak and the per-shape rate with its page faults; bad shapes exit 2."""

import pytest

from benchmarks import matmul


def test_rate_of_a_small_matmul_is_positive_and_faults_are_counted():
    gflops, faults = matmul.matmul_rate(64, 32, 128, repeats=3)
    assert gflops > 0 and faults >= 0
    assert matmul.matmul_gflops("bf16->f32", size=64, repeats=2) > 0


@pytest.mark.parametrize("kwargs", ({"precision": "fp7"}, {"repeats": 0}))
def test_bad_rate_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        matmul.matmul_rate(8, 8, 8, **kwargs)


@pytest.mark.parametrize("shape", ("1024,256", "a,b,c", "0,1,1"))
def test_bad_shape_is_refused_before_anything_is_measured(shape):
    with pytest.raises(ValueError, match="must be three positive integers"):
        next(matmul.peak_report(shape=shape))


def test_shape_run_prints_rate_and_faults():
    (line,) = matmul.peak_report(repeats=2, shape="64,32,128")
    assert line.startswith("matmul [64,32]x[32,128] float32 gflops=") and "minor_faults/call=" in line


def test_bad_shape_exits_2_with_one_line(run_job):
    proc = run_job("benchmarks.peak", "--shape=a,b,c")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and "must be three positive integers" in line
