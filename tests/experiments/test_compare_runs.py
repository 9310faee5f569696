"""compare_runs: variants from the ablation layout, seed means, tokens to the baseline's loss, the table."""

import json
import os

import numpy as np
import pytest

from experiments import compare_runs


def _write_run(path, losses, heldout):
    """A workdir with one training record per step (1,000 tokens each) and an eval every 2 steps."""
    os.makedirs(path)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        for step, loss in enumerate(losses, 1):
            f.write(
                json.dumps({"step": step, "tokens": 1000 * step, "loss": loss, "tokens_per_s": 500.0}) + "\n"
            )
            if step % 2 == 0:
                record = {"step": step, "tokens": 1000 * step, "eval/web/loss": heldout[step // 2 - 1]}
                f.write(json.dumps({**record, "eval/web/tokens": 100}) + "\n")


@pytest.fixture
def ablation(tmp_path):
    _write_run(tmp_path / "base" / "seed0", [4, 3.5, 3, 2.5], [3.6, 3.0])
    _write_run(tmp_path / "base" / "seed1", [4, 3.5, 3, 2.5], [3.4, 3.0])
    _write_run(tmp_path / "better" / "seed0", [4, 3, 2.5, 2], [3.0, 2.0])
    return tmp_path


def test_tokens_to_reach_interpolates_between_points():
    tokens, values = np.array([0.0, 10.0, 20.0]), np.array([5.0, 3.0, 1.0])
    assert compare_runs.tokens_to_reach(tokens, values, 2.0) == 15.0
    assert compare_runs.tokens_to_reach(tokens, values, 6.0) == 0.0
    assert compare_runs.tokens_to_reach(tokens, values, 0.5) is None


def test_summary_groups_seeds_and_reads_the_heldout_curve(ablation):
    runs = compare_runs.load_runs([str(ablation)])
    assert [(r.variant, r.seed) for r in runs] == [("base", "seed0"), ("base", "seed1"), ("better", "seed0")]
    base, better = compare_runs.summarize(runs, "base")
    assert base["seeds"] == 2 and base["heldout_loss"] == 3.0 and base["heldout_loss_spread"] == 0.0
    assert base["tokens_to_baseline"] == 1.0
    # better's held-out curve: 3.0 at 2,000 tokens, 2.0 at 4,000: reaches 3.0 at 2,000 = 50% of 4,000
    assert better["tokens_to_baseline"] == 0.5
    # final train loss: trailing mean over 10% of 4 steps = the last step
    assert better["final_loss"] == 2.0 and better["tokens_per_s"] == 500.0


def test_cli_writes_png_and_table(ablation):
    assert compare_runs.main([str(ablation), "--baseline=better", f"--out={ablation / 'cmp'}"]) == 0
    table = (ablation / "cmp.md").read_text()
    assert table.startswith("Baseline: `better`.") and "| better | 1 |" in table.splitlines()[4]
    assert os.path.getsize(ablation / "cmp.png") > 10_000


def test_bad_inputs_are_one_line_exit_2(ablation, tmp_path, capsys):
    assert compare_runs.main([str(tmp_path / "nothing")]) == 2
    assert compare_runs.main([str(ablation), "--baseline=nope"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("error: ") for e in errors)
