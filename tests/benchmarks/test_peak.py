"""The matmul peak and the per-shape rate with its page faults; bad shapes exit 2."""

import pytest

from benchmarks import peak


def test_rate_of_a_small_matmul_is_positive_and_faults_are_counted():
    gflops, faults = peak.matmul_rate(64, 32, 128, repeats=3)
    assert gflops > 0 and faults >= 0
    assert peak.matmul_gflops("bf16->f32", size=64, repeats=2) > 0


@pytest.mark.parametrize("kwargs", ({"precision": "fp7"}, {"repeats": 0}))
def test_bad_rate_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        peak.matmul_rate(8, 8, 8, **kwargs)


@pytest.mark.parametrize("shape", ("1024,256", "a,b,c", "0,1,1"))
def test_bad_shape_exits_2(shape, capsys):
    with pytest.raises(SystemExit) as exit_info:
        peak.main([f"--shape={shape}"])
    assert exit_info.value.code == 2
    assert "must be three positive integers" in capsys.readouterr().err


def test_shape_run_prints_rate_and_faults(capsys):
    peak.main(["--shape=64,32,128", "--repeats=2"])
    out = capsys.readouterr().out
    assert out.startswith("matmul [64,32]x[32,128] float32 gflops=") and "minor_faults/call=" in out
