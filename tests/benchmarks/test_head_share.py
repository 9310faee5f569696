"""The step decomposition into body and vocabulary part, and the body budget it leaves for a ratio."""

import pytest

from benchmarks import runners


def test_decompose_takes_medians_and_splits_each_step():
    tokens = runners.TOKENS  # 4 x 256
    results = {
        ("ours", 32000): [tokens / 0.5, tokens / 0.6, tokens / 0.4],  # median 0.5 s
        ("ours", 512): [tokens / 0.2],
        ("transformers", 32000): [tokens / 0.75],
        ("transformers", 512): [tokens / 0.25, tokens / 0.15],  # median of the step times: 0.2 s
    }
    parts = runners.decompose(results, 512)
    assert parts["ours"] == pytest.approx({"full_ms": 500, "small_ms": 200, "vocab_ms": 300, "body_ms": 200})
    assert parts["transformers"]["small_ms"] == pytest.approx(200)
    assert parts["transformers"]["vocab_ms"] == pytest.approx(550)


def test_report_budget_and_ceiling_by_hand():
    parts = {
        "ours": {"full_ms": 500.0, "small_ms": 200.0, "vocab_ms": 300.0, "body_ms": 200.0},
        "transformers": {"full_ms": 750.0, "small_ms": 150.0, "vocab_ms": 600.0, "body_ms": 150.0},
    }
    report = runners.format_head_share(parts, 512, body_floor_ms=100.0, target=1.5)
    assert "| ours | 500 | 200 | 300 | 60% |" in report
    assert (
        "ratio ours/transformers: 1.50x; vocabulary part ours/transformers: 0.50; body transformers/ours: 0.75x"
        in report
    )
    # 750 / 1.5 - 300 = 200 ms of body budget; ceiling 750 / (300 + 100) = 1.875
    assert "for 1.50x our body may take 200 ms; it takes 200 ms; its floor" in report
    assert "ceiling with our body at its floor: 1.88x" in report


def test_unreachable_target_is_said_not_a_negative_budget():
    parts = {
        "ours": {"full_ms": 500.0, "small_ms": 200.0, "vocab_ms": 300.0, "body_ms": 200.0},
        "transformers": {"full_ms": 750.0, "small_ms": 150.0, "vocab_ms": 600.0, "body_ms": 150.0},
    }
    report = runners.format_head_share(parts, 512, body_floor_ms=100.0, target=3.0)  # 750 / 3 = 250 < 300
    assert "3.00x is out of reach: our vocabulary part alone takes more than 250 ms" in report
    assert "may take -" not in report


def test_missing_vocabulary_run_is_a_key_error():
    with pytest.raises(KeyError):
        runners.decompose({("ours", 32000): [1.0]}, 512)


@pytest.mark.parametrize(
    "kwargs",
    (
        {"small_vocab": 0},
        {"small_vocab": 32000},
        {"rounds": 0},
        {"env": ["NOEQUALS"]},
        {"target": float("nan")},
        {"target": float("inf")},
    ),
)
def test_bad_arguments_are_refused_before_anything_runs(kwargs, tmp_path):
    arguments = {"rounds": 3, "steps": 15, "small_vocab": 512, "target": 1.5, "peers_cache": str(tmp_path)}
    with pytest.raises(ValueError, match="must|is not KEY=VALUE"):
        next(runners.head_share(**{**arguments, **kwargs}))
    assert not any(tmp_path.iterdir())


def test_bad_argument_exits_2_with_one_line(tmp_path, run_job):
    proc = run_job("benchmarks.head_share", "--target=nan", f"--peers_cache={tmp_path}")
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line == "error: --target=nan must be a finite ratio > 0"
