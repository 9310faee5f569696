"""apertus_jax.studies.ablations.ablate: a 3-variant tiny ablation end to end through `experiments.ablate`, then a second
call that skips every run; overrides and the shipped ablations in process."""

import json
import os
import pathlib
import subprocess
import sys

import ml_collections
import pytest

from apertus_jax.records import config_record as records
from apertus_jax.studies.ablations import ablate as ablations
from tools.measure import ablation_studies

from ...conftest import COMPILE_FLAGS

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
TINY = os.path.join(ROOT, "configs", "ablations", "tiny.py")


def _ablate(*args):
    return subprocess.run(
        [sys.executable, "-m", "experiments.ablate", f"--config={TINY}", *args],
        cwd=ROOT,
        # one device, compiled as the other tests are (tests/conftest.py)
        env={**os.environ, "XLA_FLAGS": COMPILE_FLAGS, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_three_variants_end_to_end_then_skipped(tmp_path):
    workdir = tmp_path / "tiny"
    first = _ablate(f"--workdir={workdir}")
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.loads(first.stdout[: first.stdout.index("\n}\n") + 2])
    labels = ["baseline/seed0", "lr3e-3/seed0", "no_qk_norm/seed0"]
    assert result["trained"] == labels and result["skipped"] == []
    assert os.path.getsize(workdir / "comparison.png") > 10_000
    table = (workdir / "comparison.md").read_text().splitlines()
    rows = [line for line in table if line.startswith("| ") and not line.startswith(("| variant", "| ---"))]
    assert [row.split(" | ")[0][2:] for row in rows] == ["baseline", "lr3e-3", "no_qk_norm"]
    assert "held-out loss" in table[2] and "demo/bits_per_byte" in table[2]
    reach = rows[0].split(" | ")[
        -2
    ]  # the baseline reaches its own final held-out loss by its end at the latest
    assert reach.endswith("%") and 0 < int(reach[:-1]) <= 100
    for label in labels:
        with open(workdir / label / "metrics.jsonl") as f:
            records = [json.loads(line) for line in f]
        assert [r["step"] for r in records if "loss" in r] == list(range(1, 9))
        assert [r["step"] for r in records if "eval/demo/loss" in r] == [4, 8]
    stamps = {label: os.path.getmtime(workdir / label / "metrics.jsonl") for label in labels}
    # The values the docs bind (tools.measure.ablation_studies): the table's rows and each seed's paired difference.
    values = ablation_studies.ablation_values(str(workdir), "baseline")
    assert list(values) == ["baseline", "lr3e_3", "no_qk_norm"] and values["baseline"]["seeds"] == 1
    assert rows[2].split(" | ")[2] == f"{values['no_qk_norm']['final_loss']:.4f} ± 0.0000"
    assert (
        values["baseline"]["tokens_to_baseline"] == reach and "unseen_languages_demo_loss" in values["lr3e_3"]
    )
    final = [r for r in records if "eval/demo/loss" in r][-1]  # the last eval of no_qk_norm/seed0
    row = values["no_qk_norm"]
    assert row["demo_loss_seed0"] == row["demo_loss"] == final["eval/demo/loss"]
    with open(workdir / "baseline" / "seed0" / "metrics.jsonl") as f:
        base = [r for r in map(json.loads, f) if "eval/demo/loss" in r][-1]
    assert row["demo_loss_vs_baseline_seed0"] == final["eval/demo/loss"] - base["eval/demo/loss"]

    second = _ablate(f"--workdir={workdir}", "--variants=baseline,no_qk_norm")
    assert second.returncode == 0, second.stderr[-3000:]
    result = json.loads(second.stdout[: second.stdout.index("\n}\n") + 2])
    assert result["trained"] == [] and result["skipped"] == ["baseline/seed0", "no_qk_norm/seed0"]
    assert stamps == {label: os.path.getmtime(workdir / label / "metrics.jsonl") for label in labels}


@pytest.mark.slow
def test_bad_variant_is_one_line_and_writes_nothing(tmp_path):
    done = _ablate(f"--workdir={tmp_path / 'w'}", "--variants=baseline,nope")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: --variants: unknown ['nope']")
    assert not (tmp_path / "w").exists()


def test_seeds_that_are_not_integers_are_one_line(tmp_path, run_job):
    done = run_job("experiments.ablate", f"--config={TINY}", f"--workdir={tmp_path / 'w'}", "--seeds=0,x")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: flag --seeds=0,x: give comma-separated integers, e.g. 4,50 (see --helpshort)"
    ]
    assert not (tmp_path / "w").exists()


def test_overrides_reach_every_variant_and_unknown_keys_are_refused():
    ablation = ablations.load_ablation(TINY)
    # this process has 8 virtual devices (tests/conftest.py): a mesh the 4-row batches split over
    sets = ablations.parse_sets(["train.steps=5", "mesh.data=1", "mesh.fsdp=2", "mesh.tensor=-1"])
    runs = ablations.variant_configs(ablation, None, [3], sets)
    assert [(name, seed, c.train.steps) for name, seed, c in runs] == [
        ("baseline", 3, 5),
        ("lr3e-3", 3, 5),
        ("no_qk_norm", 3, 5),
    ]
    assert [c.optim.peak_lr for _, _, c in runs] == [1e-2, 3e-3, 1e-2]
    assert [c.model.qk_norm for _, _, c in runs] == [True, True, False]
    with pytest.raises(ValueError, match="train.stpes: unknown key"):
        ablations.apply_overrides(ml_collections.ConfigDict(ablation["base"]), {"train.stpes": 5})
    with pytest.raises(ValueError, match="KEY=VALUE"):
        ablations.parse_sets(["train.steps"])
    with pytest.raises(ValueError, match=r"^--set: override train.stpes: unknown key"):
        ablations.variant_configs(ablation, None, [0], {"train.stpes": 5})


def test_a_set_step_count_alone_takes_the_schedule_with_it(caplog):
    """tiny.py (8 steps of 256 tokens; warmup 2 steps, cooldown 3) with --set=train.steps=4: every variant's
    schedule ends with step 4 and keeps its shares, said once in the log; a set schedule field turns it off."""
    ablation = ablations.load_ablation(TINY)
    mesh = ["mesh.data=1", "mesh.fsdp=2", "mesh.tensor=-1"]  # 8 virtual devices here (tests/conftest.py)
    with caplog.at_level("INFO"):
        runs = ablations.variant_configs(ablation, None, [0], ablations.parse_sets(["train.steps=4", *mesh]))
    assert [(c.optim.total_tokens, c.optim.warmup_tokens, c.optim.decay_tokens) for _, _, c in runs] == [
        (4 * 256, 256, 384)
    ] * 3
    fitted = [r.getMessage() for r in caplog.records if "the schedule follows it" in r.getMessage()]
    assert len(fitted) == 1 and fitted[0].endswith("set --set=optim.total_tokens etc. to choose it")

    sets = ablations.parse_sets(["train.steps=4", "optim.decay_tokens=256", *mesh])
    runs = ablations.variant_configs(ablation, None, [0], sets)
    assert {(c.optim.total_tokens, c.optim.decay_tokens) for _, _, c in runs} == {(8 * 256, 256)}


MESH = ["mesh.data=1", "mesh.fsdp=2", "mesh.tensor=-1"]  # 8 virtual devices here (tests/conftest.py)


@pytest.fixture
def fake_training(monkeypatch):
    """`ablations.pretrain` replaced by a run that records its config and a falling loss over its steps."""

    def pretrain(config, run_dir):
        records.record_config(run_dir, config.to_dict(), None)
        with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
            for step in range(1, config.train.steps + 1):
                loss = 5.0 - step * config.optim.peak_lr
                f.write(
                    json.dumps({"step": step, "tokens": 256 * step, "loss": loss, "tokens_per_s": 1.0}) + "\n"
                )
        return "done"

    monkeypatch.setattr(ablations, "pretrain", pretrain)


def _table_rows(workdir):
    lines = (workdir / "comparison.md").read_text().splitlines()
    return [
        line.split(" | ")[:2]
        for line in lines
        if line.startswith("| ") and not line.startswith(("| variant", "| ---"))
    ]


def test_a_later_call_compares_every_finished_run(tmp_path, fake_training):
    ablation = ablations.load_ablation(TINY)
    ablations.run_ablation(ablation, str(tmp_path), seeds=[0], sets=ablations.parse_sets(MESH))
    result = ablations.run_ablation(
        ablation, str(tmp_path), variants=["lr3e-3"], seeds=[5], sets=ablations.parse_sets(MESH)
    )
    assert result["trained"] == ["lr3e-3/seed5"]
    # the seed-0 runs of the first call stay in the table, lr3e-3 now with both seeds
    assert _table_rows(tmp_path) == [["| baseline", "1"], ["| lr3e-3", "2"], ["| no_qk_norm", "1"]]


def test_finished_runs_of_other_settings_are_refused(tmp_path, fake_training, run_job):
    ablations.run_ablation(
        ablations.load_ablation(TINY), str(tmp_path), seeds=[0], sets=ablations.parse_sets(MESH)
    )
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    sets = [f"--set={s}" for s in MESH]
    done = run_job(
        "experiments.ablate", f"--config={TINY}", f"--workdir={tmp_path}", *sets, "--set=optim.peak_lr=0.5"
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path}/baseline/seed0 finished earlier with optim.peak_lr=0.01, but this call gives it "
        "optim.peak_lr=0.5: repeat the --set of the call that trained it, or pass a new --workdir for these settings"
    )
    # a subset call checks the other finished runs too: the comparison covers them
    done = run_job(
        "experiments.ablate",
        f"--config={TINY}",
        f"--workdir={tmp_path}",
        *sets,
        "--set=train.steps=4",
        "--variants=no_qk_norm",
        "--seeds=1",
    )
    assert done.returncode == 2 and "baseline/seed0 finished earlier with train.steps=8" in done.stderr
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before  # nothing written


@pytest.mark.parametrize(
    "name, runs", [("apertus_components", 21), ("boldt_strategies", 15), ("optimizers", 72)]
)
def test_shipped_ablations_validate(name, runs):
    ablation = ablations.load_ablation(os.path.join(ROOT, "configs", "ablations", f"{name}.py"))
    assert len(ablations.variant_configs(ablation, None, None, {})) == runs


def test_optimizer_ablation_sweeps_rates_and_budgets_on_the_apertus_architecture():
    ablation = ablations.load_ablation(os.path.join(ROOT, "configs", "ablations", "optimizers.py"))
    runs = {name: parsed for name, _, parsed in ablations.variant_configs(ablation, None, [0], {})}
    assert sorted({name.split("_")[0] for name in runs}) == ["adamw", "ademamix", "lion", "muon"]
    long_muon, lion = runs["muon_lr3e-3_3x"], runs["lion_lr1e-3"]
    assert (long_muon.optim.name, long_muon.optim.peak_lr, long_muon.train.steps) == ("muon", 3e-3, 450)
    assert long_muon.optim.total_tokens == 3 * 150 * 16 * 64 == 5 * long_muon.optim.decay_tokens
    assert (
        long_muon.model.mlp_type == "xielu" and long_muon.model.qk_norm and long_muon.optim.schedule == "wsd"
    )
    assert (lion.optim.weight_decay, lion.optim.b2, lion.train.steps) == (0.3, 0.99, 150)
    assert runs["ademamix_lr1e-2"].optim.alpha_warmup_steps == 150
