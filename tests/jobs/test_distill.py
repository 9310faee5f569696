"""Pretraining distillation from stored teacher logits: the objective against a written-out reference, the
store aligned with the student's rows (a store of other rows refused), and a student run that reports its KL
and cross-entropy and resumes exactly."""

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from apertus_jax.jobs import distill, distill_study
from apertus_jax.jobs.workdir import read_config
from apertus_jax.train.run import Run, pipeline_batch_source

from .conftest import write_tiny_workdir

K = 8


def reference_loss(logits, teacher_ids, teacher_logprobs, rest_logprob, targets, mask, alpha, tau):
    """The documented loss written out in numpy, position by position, in float64."""
    total = count = 0.0
    for b, t in zip(*np.nonzero(mask)):
        z = logits[b, t].astype(np.float64)
        q = np.exp(z / tau) / np.sum(np.exp(z / tau))
        teacher = np.append(teacher_logprobs[b, t], rest_logprob[b, t]).astype(np.float64)
        p = np.exp(teacher / tau) / np.sum(np.exp(teacher / tau))
        q_top = q[teacher_ids[b, t]]
        q_all = np.append(q_top, 1.0 - q_top.sum())
        kl = np.sum(p * (np.log(p) - np.log(q_all)))
        ce = np.log(np.sum(np.exp(z))) - z[targets[b, t]]
        total += alpha * tau**2 * kl + (1 - alpha) * ce
        count += 1
    return total, count


@pytest.mark.parametrize("alpha,tau", [(0.9, 1.0), (0.5, 2.0), (0.0, 1.0)])
def test_the_objective_is_the_documented_kl_plus_cross_entropy(alpha, tau):
    rng = np.random.default_rng(0)
    rows, length, vocab = 2, 5, 16
    logits = rng.normal(size=(rows, length, vocab)).astype(np.float32)
    teacher = jax.nn.log_softmax(rng.normal(size=(rows, length, vocab)), -1)
    teacher_logprobs, teacher_ids = jax.lax.top_k(teacher, K)
    rest_logprob = np.log1p(-np.exp(np.asarray(teacher_logprobs, np.float64)).sum(-1))
    batch = {
        "targets": rng.integers(0, vocab, (rows, length)).astype(np.int32),
        "loss_mask": (rng.random((rows, length)) > 0.3).astype(np.int32),
        "teacher_ids": np.asarray(teacher_ids, np.int32),
        "teacher_logprobs": np.asarray(teacher_logprobs, np.float32),
        "rest_logprob": rest_logprob.astype(np.float32),
    }
    objective = distill.distillation(length, K, alpha, tau)
    loss, sums = objective.loss_fn(jnp.asarray(logits), batch, None)
    names = ("teacher_ids", "teacher_logprobs", "rest_logprob", "targets", "loss_mask")
    expected, count = reference_loss(logits, *(batch[name] for name in names), alpha, tau)
    assert float(sums["count"]) == count
    np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
    assert objective.batch_arrays["teacher_ids"] == ((length, K), "int32")


def test_a_student_equal_to_its_teacher_has_zero_kl():
    logits = jax.random.normal(jax.random.key(1), (1, 4, 8))
    logprobs, ids = jax.lax.top_k(jax.nn.log_softmax(logits, -1), 8)
    batch = {"targets": np.zeros((1, 4), np.int32), "loss_mask": np.ones((1, 4), np.int32)}
    batch.update(teacher_ids=np.asarray(ids), teacher_logprobs=np.asarray(logprobs))
    batch["rest_logprob"] = np.full((1, 4), -np.inf, np.float32)  # all 8 ids stored: no mass left
    _, sums = distill.distillation(4, 8, 1.0, 1.0).loss_fn(logits, batch, None)
    assert abs(float(sums["kl"])) < 1e-5


def test_bad_alpha_or_temperature_is_refused():
    with pytest.raises(ValueError, match="alpha=1.5 must be in"):
        distill.distillation(4, 8, 1.5, 1.0)
    with pytest.raises(ValueError, match="temperature=0"):
        distill.distillation(4, 8, 0.5, 0)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """(teacher workdir, student config, logits dir of 3 steps): a tiny teacher, a one-layer student."""
    teacher = str(tmp_path_factory.mktemp("teacher"))
    write_tiny_workdir(teacher, 3, init_std=0.5)
    config = read_config(teacher)
    run = config.run.replace(
        model=dataclasses.replace(config.run.model, n_layers=1),
        train=dataclasses.replace(config.run.train, steps=3),
        mesh=dataclasses.replace(config.run.mesh, data=-1),
    )
    student = dataclasses.replace(config, run=run)
    logits_dir = str(tmp_path_factory.mktemp("logits"))
    meta = distill.write_teacher_logits(teacher, student, logits_dir, steps=3, k=K)
    assert meta["k"] == K and meta["steps"] == 3
    return teacher, student, logits_dir


@pytest.mark.slow
def test_the_student_reports_kl_and_ce_and_resumes_exactly(store, tmp_path, read_records):
    _, student, logits_dir = store
    records = {}
    for name, stops in (("uninterrupted", [3]), ("resumed", [2, 3])):
        for steps in stops:
            run = student.run.replace(
                train=dataclasses.replace(student.run.train, steps=steps),
                checkpoint=dataclasses.replace(student.run.checkpoint, every_steps=1),
            )
            config = dataclasses.replace(student, run=run)
            assert (
                distill.distill(config, str(tmp_path / name), logits_dir, alpha=0.9, temperature=2.0)
                == "done"
            )
        records[name] = [(r["step"], r["loss"], r["kl"], r["ce"]) for r in read_records(str(tmp_path / name))]
    assert records["resumed"] == records["uninterrupted"] and len(records["resumed"]) == 3
    for _, loss, kl, ce in records["resumed"]:
        assert loss == pytest.approx(0.9 * 4 * kl + 0.1 * ce, rel=1e-5)


def test_a_store_of_other_rows_or_too_few_steps_is_refused(store, tmp_path):
    _, student, logits_dir = store
    other_seed = dataclasses.replace(student, run=student.run.replace(seed=student.run.seed + 1))
    meta = distill.read_meta(logits_dir)
    source = distill.TeacherLogits(
        pipeline_batch_source(Run(other_seed.run, devices=jax.devices()[:1])), logits_dir, meta
    )
    with pytest.raises(ValueError, match="teacher logits of step 1 .* are of other rows"):
        next(source)
    longer = dataclasses.replace(
        student, run=student.run.replace(train=dataclasses.replace(student.run.train, steps=4))
    )
    with pytest.raises(ValueError, match="holds 3 steps of 64-token rows; the student trains 4 steps"):
        distill.distill(longer, str(tmp_path / "w"), logits_dir, alpha=0.9, temperature=1.0)
    wider = dataclasses.replace(
        student, run=student.run.replace(model=dataclasses.replace(student.run.model, vocab_size=2048))
    )
    with pytest.raises(ValueError, match="logits over 1024 ids, the student's model.vocab_size is 2048"):
        distill.distill(wider, str(tmp_path / "w"), logits_dir, alpha=0.9, temperature=1.0)
    other_k = distill.TeacherLogits(
        pipeline_batch_source(Run(student.run, devices=jax.devices()[:1])), logits_dir, {**meta, "k": K + 1}
    )
    with pytest.raises(ValueError, match=rf"have shape \(8, 64, {K}\), the step needs \(8, 64, {K + 1}\)"):
        next(other_k)
    retokenized = tmp_path / "retokenized"
    shutil.copytree(logits_dir, retokenized)
    (retokenized / "meta.json").write_text(json.dumps({**meta, "tokenizer": "tekken"}))
    with pytest.raises(ValueError, match="written with tokenizer tekken, the student reads"):
        distill.distill(student, str(tmp_path / "w"), str(retokenized), alpha=0.9, temperature=1.0)
    with pytest.raises(FileNotFoundError, match="no meta.json"):
        distill.read_meta(str(tmp_path))
    assert sorted(os.listdir(logits_dir))[-1] == "step_00000003.safetensors"


@pytest.mark.slow
def test_the_study_trains_both_arms_from_the_same_start_for_every_seed(store, tmp_path):
    teacher, student, _ = store
    config = dataclasses.replace(student, eval=dataclasses.replace(student.eval, every_steps=3, tasks=()))
    results = distill_study.run_study(teacher, config, str(tmp_path), seeds=(0, 1), k=K, alpha=0.9)
    for arm in distill_study.ARMS:
        assert [len(ce) for ce in results[arm]["ce"]] == [3, 3]
        assert results[arm]["held_out_loss"] and all(
            len(v) == 2 for v in results[arm]["held_out_loss"].values()
        )
    # The same parameters and batch: step 1's cross-entropy is the same in both arms; then the teacher differs.
    for seed in range(2):
        assert results["distilled"]["ce"][seed][0] == results["scratch"]["ce"][seed][0]
        assert results["distilled"]["ce"][seed][-1] != results["scratch"]["ce"][seed][-1]
    assert results["distilled"]["ce"][0][0] != results["distilled"]["ce"][1][0]  # the seeds differ
    assert (tmp_path / distill_study.PLOT).stat().st_size > 0
    assert json.loads((tmp_path / distill_study.RESULTS).read_text())["seeds"] == [0, 1]
