"""apertus_jax.studies.memorization.study: the two runs differ only in the loss; scores, tables and heatmaps on a tiny
model; the whole command `experiments.memorization` on a few steps (training, the stop after the first
checkpoint and the resume, scoring, outputs) and its one-line refusal of a bad setting."""

import copy
import json

import ml_collections
import numpy as np
import pytest

from apertus_jax.models import create_model, get_config
from apertus_jax.models.generate import generate
from apertus_jax.studies.memorization import study as study_lib
from apertus_jax.train.hooks import LoopContext
from configs.studies import memorization_tiny


@pytest.fixture(scope="module")
def study():
    return memorization_tiny.get_config()


@pytest.fixture(scope="module")
def tiny_model():
    config = get_config(
        "tiny",
        vocab_size=1024,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
        mlp_hidden=64,
        max_seq_len=128,
    )
    return create_model(config, seed=1)


def test_the_two_runs_differ_only_in_the_goldfish_settings(study):
    configs = study_lib.run_configs(study)
    assert list(configs) == ["standard", "goldfish_k4"]
    standard, goldfish = (copy.deepcopy(c.to_dict()) for c in configs.values())
    assert standard["data"]["pipeline"]["goldfish"]["k"] == 0
    assert goldfish["data"]["pipeline"]["goldfish"] == {"k": 4, "h": 13, "hash": "apertus"}
    del standard["data"]["pipeline"]["goldfish"], goldfish["data"]["pipeline"]["goldfish"]
    assert standard == goldfish
    other = copy.deepcopy(study)
    other.goldfish.hash = "canonical"
    assert list(study_lib.run_configs(other)) == ["standard", "goldfish_k4_canonical"]


@pytest.mark.slow
def test_scores_of_a_memorized_and_an_unrelated_probe(tiny_model, tokenizer):
    # Probe 0 is the model's own greedy continuation of a sonnet's start: it is "memorized" by construction.
    from apertus_jax.data.memorization.sonnets import load_sonnets

    sonnets = load_sonnets()
    start = tokenizer.encode_document(sonnets[0])[:16]
    continuation = generate(tiny_model, [start], max_new_tokens=40)[0]
    memorized = np.concatenate([start, continuation])
    unrelated = tokenizer.encode_document(sonnets[1])[:56]
    study = ml_collections.ConfigDict(
        dict(prefix_lengths=(8, 16), offsets=(0,), suffix_len=24, top_p=0.9, seed=0)
    )
    records = study_lib.score_probes(
        tiny_model, tokenizer, [(4, memorized), (0, unrelated)], study, lambda: None
    )
    assert len(records) == 2 * 2 * 2  # probes x prefix lengths x decodings
    greedy16 = [r for r in records if r["decoding"] == "greedy" and r["prefix_len"] == 16]
    assert greedy16[0]["rouge_l"] == 1.0 and greedy16[0]["exact_match_length"] == 24
    assert greedy16[1]["rouge_l"] < 0.3
    table = study_lib.mean_table(records, "greedy", "rouge_l")
    assert set(table) == {0, 4} and table[4][16] == 1.0
    with pytest.raises(ValueError, match="shorter than offset"):
        study_lib.score_probes(tiny_model, tokenizer, [(1, memorized[:30])], study, lambda: None)


def test_mean_table_averages_over_probes_and_offsets():
    records = [
        {"decoding": "greedy", "repetitions": 8, "prefix_len": 16, "rouge_l": 1.0},
        {"decoding": "greedy", "repetitions": 8, "prefix_len": 16, "rouge_l": 0.5},
        {"decoding": "nucleus", "repetitions": 8, "prefix_len": 16, "rouge_l": 0.0},
        {"decoding": "greedy", "repetitions": 0, "prefix_len": 16, "rouge_l": 0.25},
    ]
    assert study_lib.mean_table(records, "greedy", "rouge_l") == {0: {16: 0.25}, 8: {16: 0.75}}


def test_heatmap_is_written(tmp_path):
    path = str(tmp_path / "heatmap.png")
    study_lib.plot_heatmap({0: {8: 0.1, 16: 0.2}, 64: {8: 0.9, 16: 1.0}}, "test", path)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, message",
    [
        (dict(suffix_len=0), "suffix_len=0 must be >= 1"),
        (dict(num_candidates=0), "num_candidates=0 must be >= 1"),
        (dict(top_p=1.5), "top_p=1.5 must be in"),
        (dict(suffix_len=5000), "shortest probe has"),
    ],
)
def test_bad_study_settings_are_refused_before_training(study, change, message):
    bad = copy.deepcopy(study)
    for key, value in change.items():
        bad[key] = value
    with pytest.raises(ValueError, match=message):
        study_lib.check_study(bad)
    study_lib.check_study(study)  # the shipped config passes


def test_unseen_occurrences_name_the_short_documents():
    manifest = {
        "components": {
            "probes": {
                "documents": [{"repetitions": 4, "exposures": 4}, {"repetitions": 128, "exposures": 37}]
            },
            "canaries": {"documents": [{"repetitions": 0, "exposures": 0}]},
        }
    }
    line = study_lib.unseen_occurrences(manifest)
    assert line.startswith("1 injected documents saw fewer occurrences than planned (probes 37/128)")
    manifest["components"]["probes"]["documents"][1]["exposures"] = 128
    assert study_lib.unseen_occurrences(manifest) is None


def test_the_resume_check_hook_asks_for_the_clean_stop_after_a_checkpoint():
    reasons = []
    hook = study_lib.StopAfterFirstCheckpoint()
    context = LoopContext(None, "workdir", None, 0, False, lambda: False, reasons.append)
    hook.on_save(0, context)  # the loop starts
    assert reasons == []
    hook.on_save(6, context)
    assert reasons == ["resume check: stop after the checkpoint of step 6"]


@pytest.mark.parametrize("preempted", ["standard", "goldfish_k4", "resume check", "standard_resumed"])
def test_a_preempted_run_ends_the_study_with_nothing_scored_or_written(
    study, tmp_path, monkeypatch, preempted
):
    # A SIGTERM makes the trainer save a checkpoint and return "preempted": no later run starts, no results.
    calls, lines = [], []

    def pretrain(config, workdir):
        name = workdir.rpartition("/")[2]
        calls.append(name)
        return "preempted" if name == preempted else "done"

    def run_training(config, workdir, hooks):
        calls.append("resume check")
        if preempted != "resume check":  # the hook's own stop after the first checkpoint, at step 6
            hooks[0].requested = True
            (tmp_path / "standard_resumed").mkdir()
            (tmp_path / "standard_resumed" / "metrics.jsonl").write_text('{"step": 6}\n')
        return "preempted"

    monkeypatch.setattr(study_lib, "pretrain", pretrain)
    monkeypatch.setattr(study_lib, "run_training", run_training)
    assert study_lib.run_study(study, str(tmp_path), log=lines.append) is None
    order = ["standard", "goldfish_k4", "resume check", "standard_resumed"]
    assert calls == order[: order.index(preempted) + 1]
    name = "standard_resumed" if preempted == "resume check" else preempted
    assert lines[-1] == f"[{name}] preempted: the study stops without scoring; rerun the command to continue"
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == []  # no memorization.json, .md, PNGs


@pytest.fixture
def memorization(run_job):
    """(out, *overrides) -> the finished `experiments.memorization` command on the tiny study config."""
    return lambda out, *overrides: run_job(
        "experiments.memorization",
        "--config=configs/studies/memorization_tiny.py",
        f"--out={out}",
        *overrides,
    )


def test_a_step_count_alone_takes_the_schedule_with_it(tmp_path, memorization, monkeypatch):
    # --config.run.train.steps=N makes the schedule end with N (as in experiments.pretrain); its advice names
    # the study's key of the run's schedule, --config.run.optim.*
    studies = []
    monkeypatch.setattr(study_lib, "run_study", lambda study, out, log: studies.append(study))
    proc = memorization(tmp_path / "study", "--config.run.train.steps=30")
    assert proc.returncode == 0, proc.stderr[-3000:]
    optim = studies[0].run.optim
    assert optim.total_tokens == 30 * 16 * 128  # 30 steps of 16 rows of 128 tokens
    assert optim.decay_tokens == 30 * 16 * 128 * 60 // 400  # the config's share: 60 of its 400 steps
    assert "set --config.run.optim.total_tokens etc. to choose it" in proc.stderr


def test_a_bad_setting_is_one_line_and_writes_nothing(tmp_path, memorization):
    proc = memorization(tmp_path / "study", "--config.suffix_len=0")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: prefix_lengths=(8, 16, 32, 64) and suffix_len=0 must be >= 1 and offsets=(0, 64) >= 0"
    ]
    assert not (tmp_path / "study").exists()


@pytest.mark.slow(minutes=2)
def test_the_command_trains_preempts_resumes_and_scores(tmp_path, memorization):
    # 12 steps with a checkpoint every 6: the resume-check run stops after its first save (at step 6).
    overrides = {
        "run.train.steps": 12,
        "run.checkpoint.every_steps": 6,
        "run.optim.total_tokens": 12 * 16 * 128,
        "run.optim.decay_tokens": 4 * 16 * 128,
        "run.optim.warmup_tokens": 2 * 16 * 128,
        "run.data.pipeline.components.probes.spread_tokens": 8 * 16 * 128,
        "run.data.pipeline.components.canaries.spread_tokens": 8 * 16 * 128,
        "prefix_lengths": "(8,)",
        "offsets": "(0,)",
        "suffix_len": 8,
        "num_candidates": 7,
        "run.mesh.data": -1,  # the 16 rows over the 8 CPU devices of the tests' process
        "run.model.d_model": 64,  # a smaller model: the command's plumbing is under test, not what it learns
        "run.model.n_layers": 2,
        "run.model.mlp_hidden": 128,
    }
    out = tmp_path / "study"
    proc = memorization(out, *(f"--config.{key}={value}" for key, value in overrides.items()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "memorization.json").read_text())
    check = report["resume_check"]
    assert check["identical"] and check["metrics_steps_contiguous"]
    assert check["preempted_at_step"] == 6  # the hook stops right after the first checkpoint
    assert json.loads((out / "standard_resumed" / "preempted.json").read_text()) == {
        "outcome": "preempted",
        "step": 6,
    }
    assert (
        "[standard_resumed] preempted at step 6 (stopped after its first checkpoint); resuming" in proc.stderr
    )
    seen = check["uninterrupted"]["probes"]
    assert sum(seen) > 0 and seen == check["resumed"]["probes"]
    for name in ("standard", "goldfish_k4"):
        run = report["runs"][name]
        assert run["step"] == 12
        assert len(run["records"]) == 20 * 1 * 1 * 2  # probes x prefix lengths x offsets x decodings
        assert {c["repetitions"] for c in run["canaries"]} == {0, 1, 4, 16, 64}
        assert all(0.0 <= c["exposure"] <= 3.0 for c in run["canaries"])  # log2(8) = 3 bits at most
        for decoding in ("greedy", "nucleus"):
            assert (out / f"heatmap_{name}_{decoding}.png").read_bytes()[:4] == b"\x89PNG"
    summary = (out / "memorization.md").read_text()
    assert "Resume check" in summary
    # 12 steps do not reach every planned occurrence: said in the log and in the summary.
    assert "saw fewer occurrences than planned" in proc.stderr and "**Warning (standard):**" in summary
    # Progress goes to the log, the tables to stdout.
    assert "[standard] training done in" in proc.stderr and "[standard] training" not in proc.stdout
    assert proc.stdout.splitlines()[-1].startswith(f"wrote {out}/memorization.json, memorization.md")


@pytest.fixture(scope="module")
def tokenizer():
    from apertus_jax.data.run_tokenizer import demo_tokenizer

    return demo_tokenizer(1024)
