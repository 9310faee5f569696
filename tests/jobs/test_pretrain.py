"""The pretraining job and the standard hooks every job's run gets."""

import types

import pytest

from apertus_jax.config.schema import parse
from apertus_jax.eval.in_loop import InLoopEvaluation
from apertus_jax.jobs import pretrain as pretrain_job
from apertus_jax.records.config_record import ConfigRecord
from apertus_jax.records.loss_plot import LossPlot
from apertus_jax.records.probe_manifest import ProbeManifest
from apertus_jax.records.provenance import ProvenanceRecord
from configs.runs import tiny_demo
from configs.studies import memorization_tiny


def test_standard_hooks_follow_the_config():
    demo = parse(tiny_demo.get_config())  # in-loop evaluation on, no injected components
    hooks = pretrain_job.standard_hooks(demo)
    assert [type(h) for h in hooks] == [
        ConfigRecord,
        ProvenanceRecord,
        LossPlot,
        InLoopEvaluation,
        ProbeManifest,
    ]
    assert hooks[0].config_dict == demo.to_dict()
    assert set(hooks[1].components) == {"prose", "udhr"} and hooks[1].components["prose"]["kind"] == "demo"
    study = parse(memorization_tiny.get_config().run)  # probes and canaries, no evaluation
    assert [type(h) for h in pretrain_job.standard_hooks(study)] == [
        ConfigRecord,
        ProvenanceRecord,
        LossPlot,
        ProbeManifest,
    ]
    own = {"mine": {"kind": "mine", "licence": None}}
    hooks = pretrain_job.standard_hooks(
        study, data=own
    )  # a job's own data: no probe manifest of the pipeline
    assert [type(h) for h in hooks] == [ConfigRecord, ProvenanceRecord, LossPlot] and hooks[
        1
    ].components == own
    # ... and no held-out sets of the pipeline it does not read (the tasks and eval.heldout_paths stay).
    assert pretrain_job.standard_hooks(demo, data=own)[-1].pipeline is None
    assert pretrain_job.standard_hooks(demo)[-2].pipeline is demo.data.pipeline


def test_a_batch_source_needs_the_description_of_its_data():
    with pytest.raises(ValueError, match="needs the description of what it reads"):
        pretrain_job.assemble(parse(tiny_demo.get_config()), batch_source=lambda run: iter(()))


def test_pretrain_refuses_post_training_data(tmp_path):
    config = tiny_demo.get_config()
    config.unlock()
    config.posttrain.data = ("chat.jsonl",)
    with pytest.raises(ValueError, match="posttrain.data is set: train it with `python -m experiments.sft`"):
        pretrain_job.pretrain(parse(config), str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()


def test_the_start_up_line_names_model_optimizer_schedule_and_tokens():
    from apertus_jax.models import flops

    config = tiny_demo.get_config()
    config.optim.name = "muon"
    config.optim.schedule = "cosine"
    config.train.batch_plan = ((0, 16 * 128), (301_056, 32 * 128))
    parsed = parse(config)
    assert pretrain_job.describe(parsed) == (
        f"run: model tiny (2 layers, d_model 128, vocab 4,096: {flops.param_count(parsed.model):,} "
        "parameters); optimizer muon (peak LR 0.002, weight decay 0.1, clip 1); schedule cosine: warmup "
        "40,960 of 614,400 tokens; 300 steps of 16 x 128 then 32 x 128 from token 301,056 tokens: "
        f"{parsed.train.plan.tokens_at_step(300):,} tokens planned"
    )


def test_the_start_up_line_of_a_one_layer_model_says_1_layer():
    """Before: "run: model tiny (1 layers, ..." (the student of docs/usage.md's distillation)."""
    config = tiny_demo.get_config()
    config.model.n_layers = 1
    assert pretrain_job.describe(parse(config)).startswith(
        "run: model tiny (1 layer, d_model 128, vocab 4,096: "
    )


def test_the_probe_manifest_is_written_only_for_a_pipeline_that_injects_documents(tmp_path):
    for name, config, written in [
        ("demo", parse(tiny_demo.get_config()), False),
        ("study", parse(memorization_tiny.get_config().run), True),
    ]:
        workdir = tmp_path / name
        workdir.mkdir()
        context = types.SimpleNamespace(
            run=types.SimpleNamespace(config=config),
            workdir=str(workdir),
            batches=types.SimpleNamespace(consumed=dict),
        )
        ProbeManifest().on_save(0, context)
        assert (workdir / "probes.json").exists() is written, name
