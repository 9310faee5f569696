"""apertus_jax.studies.ablations.compare: variants from the ablation layout, seed means, tokens to the baseline's loss, the
table; `experiments.compare_runs` writes them and refuses bad input with one line."""

import json
import os

import numpy as np
import pytest

from apertus_jax.records.runs import load_runs
from apertus_jax.studies.ablations import compare


def _write_run(path, losses, heldout, planned_steps=None):
    """A workdir with one training record per step (1,000 tokens each) and an eval every 2 steps (none without
    `heldout`); with `planned_steps`, a config.json of that many `train.steps`."""
    os.makedirs(path)
    if planned_steps:
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump({"train": {"steps": planned_steps}}, f)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        for step, loss in enumerate(losses, 1):
            f.write(
                json.dumps({"step": step, "tokens": 1000 * step, "loss": loss, "tokens_per_s": 500.0}) + "\n"
            )
            if heldout and step % 2 == 0:
                record = {"step": step, "tokens": 1000 * step, "eval/web/loss": heldout[step // 2 - 1]}
                # An unseen-language set, left out of the held-out loss (its weight would dominate it).
                unseen = {
                    "eval/unseen_languages/web/loss": 9.0 + step,
                    "eval/unseen_languages/web/tokens": 1000,
                }
                f.write(json.dumps({**record, "eval/web/tokens": 100, **unseen}) + "\n")


@pytest.fixture
def ablation(tmp_path):
    _write_run(tmp_path / "base" / "seed0", [4, 3.5, 3, 2.5], [3.6, 3.0])
    _write_run(tmp_path / "base" / "seed1", [4, 3.5, 3, 2.5], [3.4, 3.0])
    _write_run(tmp_path / "better" / "seed0", [4, 3, 2.5, 2], [3.0, 2.0])
    return tmp_path


def test_tokens_to_reach_interpolates_between_points():
    tokens, values = np.array([0.0, 10.0, 20.0]), np.array([5.0, 3.0, 1.0])
    assert compare.tokens_to_reach(tokens, values, 2.0) == 15.0
    assert compare.tokens_to_reach(tokens, values, 6.0) == 0.0
    assert compare.tokens_to_reach(tokens, values, 0.5) is None


def test_summary_groups_seeds_and_reads_the_heldout_curve(ablation):
    runs = load_runs([str(ablation)])
    assert [(r.variant, r.seed) for r in runs] == [("base", "seed0"), ("base", "seed1"), ("better", "seed0")]
    base, better = compare.summarize(runs, "base")
    assert base["seeds"] == 2 and base["heldout_loss"] == 3.0 and base["heldout_loss_spread"] == 0.0
    assert base["tokens_to_baseline"] == 1.0
    # better's held-out curve: 3.0 at 2,000 tokens, 2.0 at 4,000: reaches 3.0 at 2,000 = 50% of 4,000
    assert better["tokens_to_baseline"] == 0.5
    # final train loss: trailing mean over 10% of 4 steps = the last step
    assert better["final_loss"] == 2.0 and better["tokens_per_s"] == 500.0


def test_tokens_to_baseline_compares_like_with_like(ablation):
    # A finished run without in-loop evals: every run is read on its training loss, the baseline's target too.
    _write_run(ablation / "noeval" / "seed0", [4, 3, 2.5, 2], None)
    base, _, noeval = compare.summarize(load_runs([str(ablation)]), "base")
    assert base["tokens_to_baseline"] == 1.0
    assert noeval["tokens_to_baseline"] == 0.75  # 2.5 (the baseline's final training loss) at 3,000 of 4,000


def test_unfinished_runs_are_left_out_and_named(ablation, run_job):
    # lr/seed0 stopped at step 1 of its 4 (preempted): without evals, it would have dropped the held-out loss.
    _write_run(ablation / "lr" / "seed0", [4], None, planned_steps=4)
    _write_run(ablation / "big" / "seed0", [4, 3, 2.5, 2], [3.0, 2.0], planned_steps=4)  # finished
    done = run_job("experiments.compare_runs", ablation, "--baseline=base", f"--out={ablation / 'cmp'}")
    assert done.returncode == 0, done.stderr[-2000:]
    unfinished = f"{ablation / 'lr' / 'seed0'} (step 1 of 4)"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("W ")]
    assert [w.split(" ", 2)[2] for w in warnings] == [
        f"left out of the comparison, unfinished: {unfinished}; finish them to compare them"
    ]
    lines = (ablation / "cmp.md").read_text().splitlines()
    assert lines[2] == f"Left out, unfinished: {unfinished}."
    assert lines[4].startswith(
        "| variant | seeds | final train loss | held-out loss | unseen_languages/web/loss |"
    )
    assert [line.split(" | ")[0] for line in lines[6:]] == ["| base", "| better", "| big"]
    with pytest.raises(ValueError, match=r"no run under .*/lr is finished \(.*/lr/seed0 \(step 1 of 4\)\)"):
        compare.compare([str(ablation / "lr")])


@pytest.mark.slow
def test_compare_writes_png_and_table(ablation):
    png, md = compare.compare([str(ablation)], "better", str(ablation / "cmp"))
    assert (png, md) == (str(ablation / "cmp.png"), str(ablation / "cmp.md"))
    table = (ablation / "cmp.md").read_text()
    assert table.startswith("Baseline: `better`.") and "| better | 1 |" in table.splitlines()[4]
    assert os.path.getsize(ablation / "cmp.png") > 10_000


def test_cli_prints_the_table_it_writes(ablation, run_job):
    done = run_job("experiments.compare_runs", ablation, "--baseline=better", f"--out={ablation / 'cmp'}")
    assert done.returncode == 0, done.stderr[-2000:]
    table = (ablation / "cmp.md").read_text()
    assert table in done.stdout and f"wrote {ablation / 'cmp.png'} and {ablation / 'cmp.md'}" in done.stdout
    assert os.path.getsize(ablation / "cmp.png") > 10_000


def test_without_out_the_comparison_goes_beside_the_runs_never_into_one(ablation, run_job):
    runs = [ablation / "base" / "seed0", ablation / "better" / "seed0"]
    done = run_job("experiments.compare_runs", *runs)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.endswith(f"wrote {ablation / 'comparison.png'} and {ablation / 'comparison.md'}\n")
    assert (ablation / "comparison.md").read_text().startswith("Baseline: `base`.")
    for run in [*runs, ablation / "base" / "seed1"]:
        assert os.listdir(run) == ["metrics.jsonl"]
    assert compare.default_out([str(runs[1])]) == str(
        ablation / "better" / "comparison"
    )  # one run: beside it


def test_bad_inputs_are_one_line_exit_2(ablation, tmp_path, run_job):
    with pytest.raises(FileNotFoundError, match="holds no metrics.jsonl"):
        compare.compare([str(tmp_path / "nothing")])
    with pytest.raises(ValueError, match="baseline 'nope' is not among"):
        compare.compare([str(ablation)], "nope")
    for args in ([tmp_path / "nothing"], [ablation, "--baseline=nope"], []):
        done = run_job("experiments.compare_runs", *args)
        errors = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(errors) == 1 and errors[0].startswith("error: "), done.stderr
    assert not (ablation / "comparison.png").exists() and not (ablation / "comparison.md").exists()
