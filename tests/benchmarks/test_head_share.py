"""The step decomposition into body and vocabulary part, and the body budget it leaves for a ratio."""

import pytest

from benchmarks import head_share


def test_decompose_takes_medians_and_splits_each_step():
    tokens = head_share.TOKENS  # 4 x 256
    results = {
        ("ours", 32000): [tokens / 0.5, tokens / 0.6, tokens / 0.4],  # median 0.5 s
        ("ours", 512): [tokens / 0.2],
        ("transformers", 32000): [tokens / 0.75],
        ("transformers", 512): [tokens / 0.25, tokens / 0.15],  # median of the step times: 0.2 s
    }
    parts = head_share.decompose(results, 512)
    assert parts["ours"] == pytest.approx({"full_ms": 500, "small_ms": 200, "vocab_ms": 300, "body_ms": 200})
    assert parts["transformers"]["small_ms"] == pytest.approx(200)
    assert parts["transformers"]["vocab_ms"] == pytest.approx(550)


def test_report_budget_and_ceiling_by_hand():
    parts = {
        "ours": {"full_ms": 500.0, "small_ms": 200.0, "vocab_ms": 300.0, "body_ms": 200.0},
        "transformers": {"full_ms": 750.0, "small_ms": 150.0, "vocab_ms": 600.0, "body_ms": 150.0},
    }
    report = head_share.format_report(parts, 512, body_floor_ms=100.0, target=1.5)
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
    report = head_share.format_report(parts, 512, body_floor_ms=100.0, target=3.0)  # 750 / 3 = 250 < 300
    assert "3.00x is out of reach: our vocabulary part alone takes more than 250 ms" in report
    assert "may take -" not in report


def test_missing_vocabulary_run_is_a_key_error():
    with pytest.raises(KeyError):
        head_share.decompose({("ours", 32000): [1.0]}, 512)


@pytest.mark.parametrize(
    "args",
    (
        ["--small_vocab=0"],
        ["--small_vocab=32000"],
        ["--rounds=0"],
        ["--env=NOEQUALS"],
        ["--target=nan"],
        ["--target=inf"],
    ),
)
def test_bad_arguments_exit_2(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        head_share.main(args)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
