"""Pretraining distillation from stored teacher logits: the store aligned with the student's rows (a store of
other rows, another row length or vocabulary, too few steps or another tokenizer refused), checked whole before
the first step (a missing or unreadable step file, rows of another seed: one line, nothing written), and a
student run that reports its KL and cross-entropy and resumes exactly (the store: `teacher_logits_store`,
tests/conftest.py)."""

import dataclasses
import json
import logging
import os
import shutil

import jax
import pytest
from safetensors import safe_open

from apertus_jax import plots
from apertus_jax.jobs.distill import distill, write_teacher_logits
from apertus_jax.posttrain.distillation import TeacherLogits, check_store, holds_step, read_meta, step_file
from apertus_jax.train.run import Run, pipeline_batch_source

K = 8


@pytest.mark.slow
def test_the_student_reports_kl_and_ce_and_resumes_exactly(
    teacher_logits_store, tmp_path, read_records, caplog, monkeypatch
):
    caplog.set_level(logging.INFO)
    drawn, save = [], plots.save  # the loss curves, with their labels, as the runs draw them

    def keep(fig, path, **kwargs):
        drawn.append((os.path.basename(path), fig.axes[0].get_ylabel(), fig.axes[0].get_title()))
        save(fig, path, **kwargs)

    monkeypatch.setattr(plots, "save", keep)
    _, student, logits_dir = teacher_logits_store
    records = {}
    for name, stops in (("uninterrupted", [3]), ("resumed", [2, 3])):
        for steps in stops:
            config = student.replace(
                train=dataclasses.replace(student.train, steps=steps),
                checkpoint=dataclasses.replace(student.checkpoint, every_steps=1),
            )
            assert distill(config, str(tmp_path / name), logits_dir, alpha=0.9, temperature=2.0) == "done"
        records[name] = [(r["step"], r["loss"], r["kl"], r["ce"]) for r in read_records(str(tmp_path / name))]
    assert records["resumed"] == records["uninterrupted"] and len(records["resumed"]) == 3
    for _, loss, kl, ce in records["resumed"]:
        assert loss == pytest.approx(0.9 * 4 * kl + 0.1 * ce, rel=1e-5)
    # Each step's log line shows the objective's own metrics, as metrics.jsonl records them.
    logged = [m.split(" | lr ")[0] for m in caplog.messages if m.startswith("step ") and "/3 | loss" in m]
    assert drawn[-1] == ("loss.png", "distillation loss (nats/token)", "0.9 x tau^2 x KL + 0.1 x CE at tau 2")
    assert logged[:3] == [  # the uninterrupted run's
        f"step {step}/3 | loss {loss:.4f} | ce {ce:.4f} | kl {kl:.4f}"
        for step, loss, kl, ce in records["uninterrupted"]
    ]


def test_a_store_of_other_rows_or_too_few_steps_is_refused(teacher_logits_store, tmp_path):
    _, student, logits_dir = teacher_logits_store
    other_seed = student.replace(seed=student.seed + 1)
    meta = read_meta(logits_dir)
    with pytest.raises(
        ValueError, match="step 1 holds the teacher's logits of other rows than the student's"
    ):
        TeacherLogits(pipeline_batch_source(Run(other_seed, devices=jax.devices()[:1])), logits_dir, meta)
    longer = student.replace(train=dataclasses.replace(student.train, steps=4))
    with pytest.raises(ValueError, match="holds 3 steps of 64-token rows; the student trains 4 steps"):
        distill(longer, str(tmp_path / "w"), logits_dir, alpha=0.9, temperature=1.0)
    wider = student.replace(model=dataclasses.replace(student.model, vocab_size=2048))
    with pytest.raises(ValueError, match="logits over 1024 ids, the student's model.vocab_size is 2048"):
        distill(wider, str(tmp_path / "w"), logits_dir, alpha=0.9, temperature=1.0)
    other_k = {**meta, "k": K + 1}
    with pytest.raises(
        ValueError, match=rf"shape \(8, 64, {K}\), meta.json says rows of 64 tokens and k={K + 1}"
    ):
        check_store(logits_dir, other_k, 3)
    retokenized = tmp_path / "retokenized"
    shutil.copytree(logits_dir, retokenized)
    (retokenized / "meta.json").write_text(json.dumps({**meta, "tokenizer": "tekken"}))
    with pytest.raises(ValueError, match="written with tokenizer tekken, the student reads"):
        distill(student, str(tmp_path / "w"), str(retokenized), alpha=0.9, temperature=1.0)
    with pytest.raises(FileNotFoundError, match="no meta.json"):
        read_meta(str(tmp_path))
    assert sorted(os.listdir(logits_dir))[-1] == "step_00000003.safetensors"


def _store_copy(logits_dir, tmp_path):
    copy = tmp_path / "logits"
    shutil.copytree(logits_dir, copy)
    return copy


def test_a_missing_or_unreadable_step_file_is_refused_before_anything_is_written(
    teacher_logits_store, tmp_path
):
    _, student, logits_dir = teacher_logits_store
    workdir = tmp_path / "student"
    store = _store_copy(logits_dir, tmp_path)
    os.remove(step_file(str(store), 2))
    with pytest.raises(ValueError) as missing:
        distill(student, str(workdir), str(store), alpha=0.9, temperature=1.0)
    assert str(missing.value) == (
        f"teacher logits {store}: step_00000002.safetensors (step 2) is missing; write the store again with "
        "`python -m experiments.teacher_logits` with the student's --config and overrides and --steps of at "
        "least its train.steps"
    )
    shutil.copy(step_file(logits_dir, 3), step_file(str(store), 2))
    with open(step_file(str(store), 3), "r+b") as f:
        f.truncate(1000)
    with pytest.raises(
        ValueError, match=r"step_00000003.safetensors \(step 3\) is unreadable \(.*incomplete"
    ):
        distill(student, str(workdir), str(store), alpha=0.9, temperature=1.0)
    assert not workdir.exists()


def test_a_store_of_another_seed_is_refused_before_anything_is_written(teacher_logits_store, tmp_path):
    _, student, logits_dir = teacher_logits_store
    workdir = tmp_path / "student"
    with pytest.raises(
        ValueError, match=f"teacher logits {logits_dir}: step 1 holds the teacher's logits of other"
    ):
        distill(student.replace(seed=student.seed + 1), str(workdir), logits_dir, alpha=0.9, temperature=1.0)
    assert not workdir.exists()


def _contents(path):
    """A step file's metadata and arrays (as lists: comparable with ==)."""
    with safe_open(path, framework="numpy") as f:
        return f.metadata(), {name: f.get_tensor(name).tolist() for name in sorted(f.keys())}


def test_a_rerun_of_an_interrupted_teacher_pass_keeps_the_step_files_written(
    teacher_logits_store, tmp_path, caplog
):
    """Before: the rerun wrote every step again (an interrupted pass of 200 steps started over at step 1)."""
    caplog.set_level(logging.INFO)
    teacher, student, logits_dir = teacher_logits_store
    store = str(_store_copy(logits_dir, tmp_path))  # as an interruption during step 3 leaves it: no meta.json
    os.remove(os.path.join(store, "meta.json"))
    os.remove(step_file(store, 3))
    with open(step_file(store, 2), "r+b") as f:
        f.truncate(1000)  # a file cut short (a copy broken off) is written again
    first = os.stat(step_file(store, 1))
    assert write_teacher_logits(teacher, student, store, steps=3, k=K) == read_meta(logits_dir)
    kept = os.stat(step_file(store, 1))
    assert (kept.st_ino, kept.st_mtime_ns) == (
        first.st_ino,
        first.st_mtime_ns,
    )  # step 1 was not written again
    for step in (1, 2, 3):  # the store is the uninterrupted pass's
        assert _contents(step_file(store, step)) == _contents(step_file(logits_dir, step)), step
    assert (
        "teacher logits: kept 1 of 3 step files written before by the same teacher for the same rows, wrote the "
        "other 2"
    ) in caplog.messages
    # Each file names its teacher and k, and is checked against the rows: another k keeps nothing.
    write_teacher_logits(teacher, student, store, steps=3, k=K // 2)
    assert os.stat(step_file(store, 1)).st_ino != kept.st_ino
    check_store(store, read_meta(store), 3)
    written_by = {"teacher": os.path.abspath(teacher), "teacher_step": "3", "k": str(K // 2)}
    rows = {
        seed: next(pipeline_batch_source(Run(student.replace(seed=seed), devices=jax.devices()[:1])))[
            "tokens"
        ]
        for seed in (student.seed, student.seed + 1)
    }
    assert holds_step(store, 1, rows[student.seed], written_by)
    assert not holds_step(store, 1, rows[student.seed + 1], written_by)
    assert not holds_step(store, 1, rows[student.seed], {**written_by, "k": str(K)})
