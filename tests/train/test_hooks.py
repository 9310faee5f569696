"""The trainer's front door from typed sections alone (no ConfigDict): hooks are called at their points, a hook
can ask for the clean stop of a SIGTERM, and the resumed run equals the uninterrupted one bitwise."""

import dataclasses
import json
import os

import pytest

from apertus_jax.data.components import DemoSpec
from apertus_jax.data.config import DataConfig, PipelineSpec, StageSpec
from apertus_jax.data.goldfish.drop_masks import GoldfishSpec
from apertus_jax.models.partitioning import MeshConfig
from apertus_jax.models.presets import get_config
from apertus_jax.optim.config import OptimConfig
from apertus_jax.train import loop
from apertus_jax.train.config import CheckpointConfig, RunConfig, TrainConfig
from apertus_jax.train.hooks import Hook
from apertus_jax.train.run import Run

ROWS, SEQ_LEN, STEPS = 8, 32, 6


def typed_config() -> RunConfig:
    """A tiny Apertus on the demo corpus's UDHR and German prose, two stages, Goldfish k = 4: every section a
    dataclass."""
    pipeline = PipelineSpec(
        components={"udhr": DemoSpec(sources=("udhr",)), "prose": DemoSpec(sources=("german_prose",))},
        stages=(
            StageSpec("mixed", until_tokens=3 * ROWS * SEQ_LEN, weights={"udhr": 0.5, "prose": 0.5}),
            StageSpec("prose", weights={"prose": 1.0}),
        ),
        goldfish=GoldfishSpec(k=4, h=8),
    )
    return RunConfig(
        model=get_config(
            "tiny", vocab_size=1024, d_model=32, n_heads=2, n_kv_heads=1, head_dim=16, mlp_hidden=64
        ),
        data=DataConfig(demo_tokenizer_vocab=1024, seq_len=SEQ_LEN, num_shards=2, pipeline=pipeline),
        train=TrainConfig(steps=STEPS, batch_plan=((0, ROWS * SEQ_LEN),), prefetch_batches=1),
        optim=OptimConfig(
            peak_lr=1e-2, warmup_tokens=ROWS * SEQ_LEN, decay_tokens=0, total_tokens=STEPS * ROWS * SEQ_LEN
        ),
        mesh=MeshConfig(data=-1, fsdp=2),
        checkpoint=CheckpointConfig(every_steps=2, async_save=False),
    )


class Recorder(Hook):
    """Records every call; `on_step` after every third step (and the last); asks for a stop after the
    checkpoint of `stop_after`."""

    every_steps = 3

    def __init__(self, stop_after: int | None = None):
        self.calls, self.stop_after = [], stop_after

    def on_step(self, step, params, context):
        self.calls.append(("on_step", step, sorted(params)))
        return {"hook/params": float(len(params))}

    def on_save(self, step, context):
        consumed = sum(context.batches.consumed().get("tokens", {}).values())
        self.calls.append(("on_save", step, context.step, context.resumed, consumed))
        if step == self.stop_after:
            context.request_stop("a test's hook")


def _records(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _losses(workdir):
    return [
        (r["step"], r["loss"], r.get("goldfish_dropped_fraction")) for r in _records(workdir) if "loss" in r
    ]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("straight"))
    recorder = Recorder()
    assert loop.train(Run(typed_config(), hooks=[recorder]), workdir) == "done"
    return workdir, recorder


@pytest.mark.slow
def test_hooks_are_called_at_their_points_and_record_their_scalars(straight):
    workdir, recorder = straight
    params = sorted(["embed", "final_norm", "layers", "lm_head"])
    assert recorder.calls == [
        ("on_save", 0, 0, False, 0),  # the loop starts from step 0
        ("on_save", 2, 0, False, 2 * ROWS * SEQ_LEN),  # the batch source's count of the batches handed out
        ("on_step", 3, params),
        ("on_save", 4, 0, False, 4 * ROWS * SEQ_LEN),
        ("on_step", 6, params),  # every third step and the last
        ("on_save", 6, 0, False, 6 * ROWS * SEQ_LEN),
    ]
    hook_records = [r for r in _records(workdir) if "hook/params" in r]
    assert hook_records == [
        {"step": step, "tokens": step * ROWS * SEQ_LEN, "hook/params": 4.0} for step in (3, 6)
    ]
    losses = _losses(workdir)
    assert [step for step, _, _ in losses] == list(range(1, STEPS + 1))
    assert all(0.1 < dropped < 0.4 for _, _, dropped in losses)  # Goldfish k = 4 of the pipeline


@pytest.mark.slow
def test_a_hook_can_stop_the_run_cleanly_and_the_resumed_run_is_bitwise(straight, tmp_path):
    workdir = str(tmp_path)
    stopper = Recorder(stop_after=2)
    assert loop.train(Run(typed_config(), hooks=[stopper]), workdir) == "preempted"
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2"]
    resumed = Recorder()
    assert loop.train(Run(typed_config(), hooks=[resumed]), workdir) == "done"
    assert resumed.calls[0] == ("on_save", 2, 2, True, 2 * ROWS * SEQ_LEN)  # restored with the batch source
    assert _losses(workdir) == _losses(straight[0])  # float equality of every step


@pytest.mark.slow
def test_another_batch_source_replaces_the_pipeline(straight, tmp_path):
    config = typed_config()
    pipeline_run = Run(config)
    source = pipeline_run.batch_source()
    batches = [next(source) for _ in range(STEPS)]

    class Replay:
        def __init__(self):
            self.step = 0

        def __next__(self):
            self.step += 1
            return batches[self.step - 1]

        def get_state(self):
            return {"step": self.step}

        def set_state(self, state):
            self.step = state["step"]

        def consumed(self):
            return {}

    run = Run(dataclasses.replace(config, seed=0), batch_source=lambda run: Replay())
    assert loop.train(run, str(tmp_path)) == "done"
    replayed = _losses(str(tmp_path))
    assert [loss for _, loss, _ in replayed] == [
        loss for _, loss, _ in _losses(straight[0])
    ]  # the same batches
    assert all(dropped is None for _, _, dropped in replayed)  # not the pipeline: no Goldfish metric
