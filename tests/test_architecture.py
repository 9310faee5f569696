"""The four recipes of docs/architecture.md, as written there: a toy component kind, a toy objective, an objective
that distills a frozen toy teacher, and a toy job, each plugged in above the trainer's front door without editing
`train/` or `data/`."""

import dataclasses
import json
import os
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from apertus_jax.config.schema import Config, base_config, parse
from apertus_jax.data.demo_corpus import load_german_prose
from apertus_jax.data.documents import tokenize_documents
from apertus_jax.data.kinds import DocumentSpec, register_kind
from apertus_jax.data.run_tokenizer import demo_tokenizer
from apertus_jax.jobs.pretrain import assemble
from apertus_jax.models.config import ModelConfig
from apertus_jax.models.presets import model_section
from apertus_jax.train import loop
from apertus_jax.train.run import Run
from apertus_jax.train.step import FrozenParams, Objective
from apertus_jax.train.train_state import make_abstract_params, make_global_batch

ROWS, SEQ_LEN, STEPS = 8, 32, 3


@register_kind
@dataclasses.dataclass(frozen=True)
class ExcerptSpec(DocumentSpec):
    """The start of each German prose document of the demo corpus."""

    kind: ClassVar[str] = "excerpts"
    chars: int = 200

    def __post_init__(self):
        if not isinstance(self.chars, int) or self.chars < 1:
            raise ValueError(f"chars={self.chars!r} must be a positive number of characters")
        super().__post_init__()

    def load(self, name, tokenizer):
        texts = [d["text"][: self.chars] for d in load_german_prose()]
        return tokenize_documents(name, texts, [None] * len(texts), tokenizer)


def tiny_config(**pipeline):
    config = base_config()
    config.model = model_section(
        "tiny",
        vocab_size=1024,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
        mlp_hidden=64,
        max_seq_len=SEQ_LEN,
    )
    config.data.demo_tokenizer_vocab = 1024
    config.data.seq_len = SEQ_LEN
    if pipeline:
        config.data.pipeline = pipeline
    config.train.steps = STEPS
    config.train.batch_plan = ((0, ROWS * SEQ_LEN),)
    config.optim.warmup_tokens = ROWS * SEQ_LEN
    config.optim.decay_tokens = 0
    config.optim.total_tokens = STEPS * ROWS * SEQ_LEN
    config.checkpoint.every_steps = STEPS
    config.checkpoint.async_save = False
    return config


def _losses(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line)["loss"] for line in f if '"loss"' in line]


@pytest.mark.slow
def test_a_new_component_kind_trains_through_the_pipeline(tmp_path):
    config = parse(
        tiny_config(components={"excerpts": {"kind": "excerpts", "chars": 120}}, goldfish={"k": 0})
    )
    spec = config.data.pipeline.components["excerpts"]
    assert isinstance(spec, ExcerptSpec) and spec.chars == 120
    tokenizer = demo_tokenizer(1024)
    batch = next(Run(config).batch_source())
    # The rows hold the excerpts: every row that starts a document starts with one of them.
    excerpts = {tuple(tokenizer.encode_document(d["text"][:120])[:SEQ_LEN]) for d in load_german_prose()}
    starts = [row for row in batch["tokens"] if row[0] == tokenizer.bod_id]
    assert starts and all(any(tuple(row[: len(e)]) == e for e in excerpts) for row in starts)
    assert loop.train(assemble(config), str(tmp_path)) == "done"
    assert len(_losses(str(tmp_path))) == STEPS
    with pytest.raises(ValueError, match="data.pipeline.components.excerpts: chars=0 must be a positive"):
        parse(tiny_config(components={"excerpts": {"kind": "excerpts", "chars": 0}}))


def smoothed_cross_entropy(epsilon):
    def loss_fn(logits_BxTxV, mb, frozen):
        log_p = jax.nn.log_softmax(logits_BxTxV.astype(jnp.float32))
        target = jnp.take_along_axis(log_p, mb["targets"][..., None], axis=-1)[..., 0]
        per_token = -(1 - epsilon) * target - epsilon * log_p.mean(-1)
        mask = mb["loss_mask"].astype(bool)
        return jnp.where(mask, per_token, 0.0).sum(), {"count": mask.sum(dtype=jnp.float32)}

    return Objective(loss_fn)


def _first_step_loss(run):
    state = run.spec.init()
    batch = make_global_batch(next(run.batch_source()), run.mesh)
    with jax.set_mesh(run.mesh):
        _, _, metrics = run.train_step(ROWS).fn(state["params"], state["opt_state"], batch, None)
    return float(metrics["loss"])


@pytest.mark.slow
def test_a_new_objective_replaces_the_loss_of_the_step(tmp_path):
    config = parse(tiny_config())
    pretraining = _first_step_loss(Run(config))
    plain = _first_step_loss(Run(config, objective=smoothed_cross_entropy(0.0)))
    smoothed = _first_step_loss(Run(config, objective=smoothed_cross_entropy(0.1)))
    # epsilon = 0 is the pretraining cross-entropy (the trainer's fused lm_head path, float32 rounding apart).
    assert plain == pytest.approx(pretraining, rel=1e-5)
    # An untrained model is near uniform, where the mean log-probability over the vocabulary is about the
    # target's: smoothing moves the loss by little, but it moves it.
    assert smoothed != plain and abs(smoothed - plain) < 0.1 * plain
    assert loop.train(Run(config, objective=smoothed_cross_entropy(0.1)), str(tmp_path)) == "done"
    assert _losses(str(tmp_path))[0] == pytest.approx(smoothed, rel=1e-6)


def distillation(teacher: ModelConfig, seed: int) -> Objective:
    """KL(teacher || student) per unmasked token; the teacher's parameters are frozen inputs of the step."""
    forward = {}  # the teacher's forward function, made with its parameters on the run's mesh

    def frozen(run):
        params = make_abstract_params(teacher, run.mesh, seed)
        forward["apply"] = params.apply_fn
        return FrozenParams(params.abstract, jax.jit(params.create, out_shardings=params.shardings))

    def loss_fn(logits_BxTxV, mb, teacher_params):
        teacher_BxTxV = forward["apply"](teacher_params, mb["tokens"], mb["positions"], mb["segment_ids"])
        log_p = jax.nn.log_softmax(teacher_BxTxV.astype(jnp.float32))
        log_q = jax.nn.log_softmax(logits_BxTxV.astype(jnp.float32))
        kl_BxT = (jnp.exp(log_p) * (log_p - log_q)).sum(-1)
        mask = mb["loss_mask"].astype(bool)
        return jnp.where(mask, kl_BxT, 0.0).sum(), {"count": mask.sum(dtype=jnp.float32)}

    return Objective(loss_fn, frozen=frozen)


def _kl_float64(teacher_BxTxV, student_BxTxV, loss_mask_BxT) -> float:
    """The mean over unmasked tokens of KL(teacher || student), in float64."""
    log_p, log_q = (
        x - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)) - x.max(-1, keepdims=True)
        for x in (np.asarray(teacher_BxTxV, np.float64), np.asarray(student_BxTxV, np.float64))
    )
    kl_BxT = (np.exp(log_p) * (log_p - log_q)).sum(-1)
    mask = np.asarray(loss_mask_BxT, bool)
    return float(kl_BxT[mask].sum() / mask.sum())


@pytest.mark.slow
def test_a_frozen_teacher_is_an_input_of_the_step_and_its_kl_is_the_loss(tmp_path):
    config = parse(tiny_config())
    teacher = dataclasses.replace(config.model, n_layers=1)  # a smaller toy teacher, seeded apart
    run = Run(config, objective=distillation(teacher, seed=7))
    step = run.train_step(ROWS)
    # The teacher's arrays are the step's last input, sharded like a model: not constants of its program.
    assert step.in_shardings[3] == jax.tree.map(lambda x: x.sharding, run.frozen.abstract)
    state, teacher_params = run.spec.init(), run.load_frozen()
    batch = make_global_batch(next(run.batch_source()), run.mesh)
    inputs = batch["tokens"], batch["positions"], batch["segment_ids"]
    teacher_apply = make_abstract_params(teacher, run.mesh, 7).apply_fn
    expected = _kl_float64(
        teacher_apply(teacher_params, *inputs),
        run.spec.apply_fn(state["params"], *inputs),
        batch["loss_mask"],
    )
    with jax.set_mesh(run.mesh):
        _, _, metrics = step.fn(state["params"], state["opt_state"], batch, teacher_params)
    assert float(metrics["loss"]) == pytest.approx(expected, rel=1e-4) and expected > 0.01
    # The loop loads the teacher once and passes it to every step: its first loss is the same.
    assert loop.train(Run(config, objective=distillation(teacher, seed=7)), str(tmp_path)) == "done"
    losses = _losses(str(tmp_path))
    assert len(losses) == STEPS and losses[0] == pytest.approx(float(metrics["loss"]), rel=1e-6)


def last_loss(workdir: str) -> float:
    return _losses(workdir)[-1]


def seed_sweep(config: Config, root: str, seeds=(0, 1)) -> dict[int, float]:
    """Trains `config` once per seed in ROOT/seed<N>; returns the final training loss of each."""
    finals = {}
    for seed in seeds:
        seeded = config.replace(seed=seed)
        workdir = os.path.join(root, f"seed{seed}")
        loop.train(assemble(seeded), workdir)
        finals[seed] = last_loss(workdir)
    return finals


@pytest.mark.slow
def test_a_new_job_is_a_function_of_a_parsed_config(tmp_path):
    config = parse(tiny_config())
    finals = seed_sweep(config, str(tmp_path))
    assert set(finals) == {0, 1} and finals[0] != finals[1]  # other initializations and data orders
    for seed in (0, 1):  # the standard hooks wrote each run's records
        recorded = json.loads((tmp_path / f"seed{seed}" / "config.json").read_text())
        assert recorded["seed"] == seed and parse(recorded).seed == seed
    assert seed_sweep(config, str(tmp_path)) == finals  # finished runs resume at their last step
