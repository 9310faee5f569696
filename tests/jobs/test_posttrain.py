"""The post-training jobs end to end on CPU: a pretraining workdir -> SFT -> QRPO, each starting from the
previous one's parameters and each resumable after SIGTERM with bitwise per-step losses; the cached
reference's reuse; the preference step's memory plan; the up-front data rules."""

import dataclasses
import json
import os
import re
import signal

import pytest

from apertus_jax.config.schema import parse
from apertus_jax.jobs import posttrain
from apertus_jax.jobs.pretrain import pretrain
from apertus_jax.models.presets import model_section
from apertus_jax.posttrain import reference as reference_lib
from apertus_jax.posttrain.objectives import objective_for
from apertus_jax.train import metrics as metrics_lib
from apertus_jax.train.run import Run
from apertus_jax.trained import export
from configs.posttrain import qrpo_tiny, sft_tiny
from configs.runs import tiny_demo

ROWS, SEQ_LEN = 8, 128
# The small model of the post-training tests (tests/posttrain/conftest.py) over the 4,096-id demo BPE.
SMALL_MODEL = dict(
    vocab_size=4096, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, mlp_hidden=64, max_seq_len=128
)


@pytest.fixture(scope="module")
def tokenizer():
    from apertus_jax.data.run_tokenizer import demo_tokenizer

    return demo_tokenizer(4096)


def _small(config, steps, init_from=""):
    """A config file's ConfigDict narrowed to the small model, `steps` steps of ROWS x SEQ_LEN tokens."""
    config.unlock()
    config.model = model_section("tiny", **SMALL_MODEL)
    config.train.steps = steps
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    if not config.posttrain.data:  # pretraining: the demo config's WSD schedule, shortened
        config.optim.warmup_tokens = config.optim.decay_tokens = ROWS * SEQ_LEN
        config.optim.total_tokens = steps * ROWS * SEQ_LEN
    else:
        sft_tiny.post_training_optimizer(config, steps, ROWS, SEQ_LEN, config.optim.peak_lr)
    config.checkpoint.every_steps = 2
    config.checkpoint.init_from = init_from
    return config


def _losses(workdir):
    """The training steps' records of metrics.jsonl (in-loop evaluation records have no "loss")."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [record for record in map(json.loads, f) if "loss" in record]


def _run_with_sigterm(job, make_config, workdir, after_step, monkeypatch):
    """Runs `job` to the end with a real SIGTERM after `after_step`, then resumes; returns the outcomes."""
    write = metrics_lib.MetricsWriter.write

    def write_then_signal(self, record, **kwargs):
        write(self, record, **kwargs)
        if record["step"] == after_step:
            os.kill(os.getpid(), signal.SIGTERM)

    with monkeypatch.context() as patch:
        patch.setattr(metrics_lib.MetricsWriter, "write", write_then_signal)
        first = job(parse(make_config()), workdir)
    return first, job(parse(make_config()), workdir)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("pretrain"))
    assert pretrain(parse(_small(tiny_demo.get_config(), 2)), workdir) == "done"
    return workdir


@pytest.mark.slow(minutes=2)
def test_pretrain_sft_qrpo_chain_resumes_bitwise_after_sigterm(pretrained, tmp_path, monkeypatch):
    sft = lambda: _small(sft_tiny.get_config(), 4, pretrained)
    straight, resumed = str(tmp_path / "sft"), str(tmp_path / "sft_resumed")
    assert posttrain.sft(parse(sft()), straight) == "done"
    assert _run_with_sigterm(posttrain.sft, sft, resumed, 2, monkeypatch) == ("preempted", "done")
    sft_losses = [(r["step"], r["loss"]) for r in _losses(straight)]
    assert [(r["step"], r["loss"]) for r in _losses(resumed)] == sft_losses  # bitwise
    assert len(sft_losses) == 4
    # The pipeline of sft_tiny has Goldfish k=50; the chat rows (prompts masked) get no Goldfish.
    assert parse(sft()).data.pipeline.goldfish.k == 50
    assert not any("goldfish_dropped_fraction" in r for r in _losses(straight))
    # The records say what the run trained on: the conversations, not the unused pipeline.
    with open(os.path.join(straight, "provenance.json")) as f:
        described = json.load(f)["components"]
    assert described == {
        "posttrain": {"kind": "chat", "paths": list(parse(sft()).posttrain.data), "licence": None}
    }
    # ... and how many tokens of them: counted like the uninterrupted run's across the resume, within the
    # 4 steps' rows, and stated by the export's model card.
    consumed = []
    for workdir in (straight, resumed):
        with open(os.path.join(workdir, "provenance.json")) as f:
            consumed.append(json.load(f)["tokens_consumed"])
    steps_tokens = _losses(straight)[-1]["tokens"]
    assert consumed[0] == consumed[1] and 0.5 * steps_tokens < consumed[0]["posttrain"] <= steps_tokens
    record = export.export_hf(straight, str(tmp_path / "sft_hf"))
    card = (tmp_path / "sft_hf" / export.MODEL_CARD).read_text()
    assert f"Trained for 4 steps on {consumed[0]['posttrain']:,} target tokens" in card
    assert record["tokens_consumed"] == consumed[0]

    qrpo = lambda: _small(qrpo_tiny.get_config(), 4, straight)
    straight_q, resumed_q = str(tmp_path / "qrpo"), str(tmp_path / "qrpo_resumed")
    assert posttrain.qrpo(parse(qrpo()), straight_q) == "done"  # scores the reference first
    assert _run_with_sigterm(posttrain.qrpo, qrpo, resumed_q, 2, monkeypatch) == ("preempted", "done")
    records = _losses(straight_q)
    assert len(records) == 4
    keys = ("step", "loss", "quantile_reward", "log_ratio")
    assert [[r[k] for k in keys] for r in _losses(resumed_q)] == [[r[k] for k in keys] for r in records]
    # Policy = reference = the SFT parameters at the first step: the log-ratio is 0 (float32 noise).
    assert abs(records[0]["log_ratio"]) < 1e-3
    caches = []
    for workdir in (straight_q, resumed_q):
        with open(os.path.join(workdir, "reference_logprobs.json")) as f:
            caches.append(json.load(f))
    assert [(c["reference_workdir"], c["reference_step"]) for c in caches] == [(straight, 4)] * 2
    assert caches[0]["logprobs"] == caches[1]["logprobs"]  # the same reference scores the same


def _qrpo_config(reference):
    config = qrpo_tiny.get_config()
    config.unlock()
    config.train.batch_plan = ((0, 8 * 128),)  # the tests' 8 virtual devices
    config.checkpoint.init_from = reference
    return parse(config)


def _write_cache(path, config, tokenizer, reference):
    fingerprint = reference_lib.cache_fingerprint(config.posttrain.data, tokenizer, 128)
    reference_lib.write_cache(str(path), [-1.0] * 36, fingerprint, reference, 60)


@pytest.mark.slow
def test_valid_cache_is_reused_and_another_references_is_not(tmp_path, tokenizer):
    reference = str(tmp_path / "sft")  # never created: loading it would fail
    workdir = tmp_path / "qrpo"
    cache = str(workdir / "reference_logprobs.json")
    config = _qrpo_config(reference)
    _write_cache(cache, config, tokenizer, reference)
    prepared = posttrain.prepare_reference_cache(config, str(workdir))
    assert prepared == dataclasses.replace(
        config, posttrain=dataclasses.replace(config.posttrain, reference_cache=cache)
    )
    assert config.posttrain.reference_cache == ""  # the given config is left as it is
    with open(cache) as f:
        assert json.load(f)["logprobs"] == [-1.0] * 36

    _write_cache(cache, config, tokenizer, "another/workdir")
    with pytest.raises(FileNotFoundError, match=f"{reference} has no checkpoints/"):
        posttrain.prepare_reference_cache(_qrpo_config(reference), str(workdir))
    assert not os.path.exists(reference)


@pytest.mark.parametrize("objective", ["qrpo", "dpo"])
def test_memory_plan_lowers_the_preference_step(objective):
    config = _small(qrpo_tiny.get_config(), 4, "unused")
    config.posttrain.objective = objective
    parsed = parse(config)
    run = Run(parsed, objective=objective_for(parsed.posttrain))
    batch = run.abstract_batch(ROWS)
    assert [(batch[k].shape, str(batch[k].dtype)) for k in ("ref_logprobs", "quantile_reward")] == [
        ((ROWS, 2), "float32")
    ] * 2
    text = run.lower_train_step(ROWS).as_text()
    assert "tensor<8x2xf32>" in text  # the [rows, 2] ref_logprobs and quantile_reward inputs


def _config(module, **posttrain_fields):
    config = module.get_config()
    config.unlock()
    for field, value in posttrain_fields.items():
        config.posttrain[field] = value
    return config


@pytest.mark.parametrize(
    "job, module, change, message",
    [
        (
            posttrain.sft,
            sft_tiny,
            {"data": ()},
            "experiments.sft trains conversations (posttrain.data) with posttrain.objective='lm'; "
            "got objective 'lm' and data []",
        ),
        (
            posttrain.sft,
            qrpo_tiny,
            {},
            "experiments.sft trains conversations (posttrain.data) with posttrain.objective='lm'; "
            f"got objective 'qrpo' and data [{os.path.join(sft_tiny.ASSETS, 'qrpo_tiny.jsonl')!r}]",
        ),
        (
            posttrain.qrpo,
            qrpo_tiny,
            {"objective": "lm"},
            "experiments.qrpo trains posttrain.objective 'qrpo' or 'dpo'; use experiments.sft for 'lm'",
        ),
    ],
)
def test_jobs_refuse_data_of_another_job_in_one_line(job, module, change, message, tmp_path):
    workdir = tmp_path / "workdir"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        job(parse(_config(module, **change)), str(workdir))
    assert not workdir.exists()


@pytest.mark.parametrize("objective", ["qrpo", "dpo"])
def test_preference_objectives_without_data_are_refused_by_the_parse(objective):
    config = _config(qrpo_tiny, data=(), objective=objective)
    message = f"posttrain.objective={objective!r} needs preference records: set posttrain.data"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        parse(config)
