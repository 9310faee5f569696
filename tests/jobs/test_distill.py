"""Pretraining distillation from stored teacher logits: the store aligned with the student's rows (a store of
other rows, another row length or vocabulary, too few steps or another tokenizer refused), and a student run
that reports its KL and cross-entropy and resumes exactly (the store: `teacher_logits_store`, tests/conftest.py)."""

import dataclasses
import json
import os
import shutil

import jax
import pytest

from apertus_jax.jobs.distill import distill
from apertus_jax.posttrain.distillation import TeacherLogits, read_meta
from apertus_jax.train.run import Run, pipeline_batch_source

K = 8


@pytest.mark.slow
def test_the_student_reports_kl_and_ce_and_resumes_exactly(teacher_logits_store, tmp_path, read_records):
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


def test_a_store_of_other_rows_or_too_few_steps_is_refused(teacher_logits_store, tmp_path):
    _, student, logits_dir = teacher_logits_store
    other_seed = student.replace(seed=student.seed + 1)
    meta = read_meta(logits_dir)
    source = TeacherLogits(
        pipeline_batch_source(Run(other_seed, devices=jax.devices()[:1])), logits_dir, meta
    )
    with pytest.raises(ValueError, match="teacher logits of step 1 .* are of other rows"):
        next(source)
    longer = student.replace(train=dataclasses.replace(student.train, steps=4))
    with pytest.raises(ValueError, match="holds 3 steps of 64-token rows; the student trains 4 steps"):
        distill(longer, str(tmp_path / "w"), logits_dir, alpha=0.9, temperature=1.0)
    wider = student.replace(model=dataclasses.replace(student.model, vocab_size=2048))
    with pytest.raises(ValueError, match="logits over 1024 ids, the student's model.vocab_size is 2048"):
        distill(wider, str(tmp_path / "w"), logits_dir, alpha=0.9, temperature=1.0)
    other_k = TeacherLogits(
        pipeline_batch_source(Run(student, devices=jax.devices()[:1])), logits_dir, {**meta, "k": K + 1}
    )
    with pytest.raises(ValueError, match=rf"have shape \(8, 64, {K}\), the step needs \(8, 64, {K + 1}\)"):
        next(other_k)
    retokenized = tmp_path / "retokenized"
    shutil.copytree(logits_dir, retokenized)
    (retokenized / "meta.json").write_text(json.dumps({**meta, "tokenizer": "tekken"}))
    with pytest.raises(ValueError, match="written with tokenizer tekken, the student reads"):
        distill(student, str(tmp_path / "w"), str(retokenized), alpha=0.9, temperature=1.0)
    with pytest.raises(FileNotFoundError, match="no meta.json"):
        read_meta(str(tmp_path))
    assert sorted(os.listdir(logits_dir))[-1] == "step_00000003.safetensors"
