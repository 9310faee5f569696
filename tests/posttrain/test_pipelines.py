"""Post-training end to end on CPU: a pretraining workdir -> SFT -> QRPO, each starting from the previous
one's parameters and each resumable after SIGTERM with bitwise per-step losses; the up-front data rules."""

import json
import os
import signal

import pytest

from apertus_jax.models.presets import model_section
from apertus_jax.posttrain.pipelines import posttrain_builder
from apertus_jax.posttrain.reference_cache import prepare_reference_cache
from apertus_jax.train import metrics as metrics_lib
from apertus_jax.train.loop import train
from configs import qrpo_tiny, sft_tiny, tiny_demo

from .conftest import SMALL_MODEL

ROWS, SEQ_LEN = 8, 128


def _small(config, steps, init_from=""):
    config.unlock()
    config.model = model_section("tiny", **SMALL_MODEL)
    config.train.steps = steps
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    if config.posttrain.objective == "lm" and config.data.pipeline.components.get("prose"):
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


def _run_with_sigterm(make_config, workdir, after_step, monkeypatch, before=None):
    """Runs to the end with a real SIGTERM after `after_step`, then resumes; returns the outcomes."""
    write = metrics_lib.MetricsWriter.write

    def write_then_signal(self, record):
        write(self, record)
        if record["step"] == after_step:
            os.kill(os.getpid(), signal.SIGTERM)

    with monkeypatch.context() as patch:
        patch.setattr(metrics_lib.MetricsWriter, "write", write_then_signal)
        config = make_config()
        before and before(config, workdir)
        first = train(config, workdir)
    config = make_config()
    before and before(config, workdir)
    return first, train(config, workdir)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("pretrain"))
    assert train(_small(tiny_demo.get_config(), 2), workdir) == "done"
    return workdir


def test_pretrain_sft_qrpo_chain_resumes_bitwise_after_sigterm(pretrained, tmp_path, monkeypatch):
    sft = lambda: _small(sft_tiny.get_config(), 4, pretrained)
    straight, resumed = str(tmp_path / "sft"), str(tmp_path / "sft_resumed")
    assert train(sft(), straight) == "done"
    assert _run_with_sigterm(sft, resumed, 2, monkeypatch) == ("preempted", "done")
    sft_losses = [(r["step"], r["loss"]) for r in _losses(straight)]
    assert [(r["step"], r["loss"]) for r in _losses(resumed)] == sft_losses  # bitwise
    assert len(sft_losses) == 4
    assert all(
        r["goldfish_dropped_fraction"] == 0.0 for r in _losses(straight)
    )  # prompts masked, no Goldfish

    qrpo = lambda: _small(qrpo_tiny.get_config(), 4, straight)
    straight_q, resumed_q = str(tmp_path / "qrpo"), str(tmp_path / "qrpo_resumed")
    config = qrpo()
    prepare_reference_cache(config, straight_q)
    assert train(config, straight_q) == "done"
    outcomes = _run_with_sigterm(qrpo, resumed_q, 2, monkeypatch, before=prepare_reference_cache)
    assert outcomes == ("preempted", "done")
    records = _losses(straight_q)
    keys = ("step", "loss", "quantile_reward", "log_ratio")
    assert [[r[k] for k in keys] for r in _losses(resumed_q)] == [[r[k] for k in keys] for r in records]
    # Policy = reference = the SFT parameters at the first step: the log-ratio is 0 (float32 noise).
    assert abs(records[0]["log_ratio"]) < 1e-3
    assert os.path.exists(os.path.join(straight_q, "reference_logprobs.json"))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"posttrain.objective": "qrpo"}, "chat data trains with posttrain.objective='lm'"),
        ({"data.pipeline.goldfish.k": 50}, "goldfish.k must be 0"),
    ],
)
def test_data_rules_fail_in_one_line(change, message, tokenizer):
    config = sft_tiny.get_config()
    config.unlock()
    for dotted, value in change.items():
        *path, key = dotted.split(".")
        node = config
        for part in path:
            node = node[part]
        node[key] = value
    with pytest.raises(ValueError, match=message):
        posttrain_builder(config, tokenizer)


def test_qrpo_objective_needs_preference_data(tokenizer):
    config = tiny_demo.get_config()
    config.unlock()
    config.posttrain.objective = "dpo"
    with pytest.raises(ValueError, match="needs a data component of kind 'preference'"):
        posttrain_builder(config, tokenizer)
    config.posttrain.objective = "lm"
    assert posttrain_builder(config, tokenizer) is None


@pytest.mark.parametrize("objective", ["qrpo", "dpo"])
def test_memory_plan_lowers_the_preference_step(objective):
    from apertus_jax.train.assemble import Run

    config = _small(qrpo_tiny.get_config(), 4, "unused")
    config.posttrain.objective = objective
    text = Run(config).lower_train_step(ROWS).as_text()
    assert "tensor<8x2xf32>" in text  # the [rows, 2] ref_logprobs and quantile_reward inputs
