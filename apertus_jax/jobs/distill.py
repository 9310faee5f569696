"""Pretraining distillation from stored teacher logits, as Apertus Mini did it (docs/recipe.md section 13).

    write_teacher_logits(teacher_workdir, student_config, logits_dir, steps=300, k=32)   # the teacher's pass
    distill(student_config, workdir, logits_dir, alpha=0.9, temperature=1.0)          # the student's run

The teacher runs once over exactly the batches the student will train on (the student config's data pipeline,
seed and batch plan) and writes, per step, its `k` most likely next tokens and their log-probabilities at
every position, with the log of the remaining probability mass, to `logits_dir/step_NNNNNNNN.safetensors`
(and `meta.json`). The student's batch source is its usual pipeline source with the stored arrays of the same
step attached (`TeacherLogits`): packing, stages and exact resume are the pipeline's own, and each step's
file carries a checksum of its tokens, so a misaligned store fails loudly instead of teaching the wrong rows.
The student's run checks the store whole before its first step, and a store it cannot train on (a step file
missing or unreadable, rows of another seed) is refused with one line before anything is written. A rerun of an
interrupted teacher pass keeps the step files the same teacher wrote for the same rows (`holds_step`).

The store's format, its batch source (`TeacherLogits`) and the objective (`distillation`, with its formula):
`apertus_jax.posttrain.distillation`. One process: the store holds the rows of a single-process run.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging
from safetensors.numpy import save_file

from apertus_jax import files
from apertus_jax.config.schema import Config
from apertus_jax.jobs.pretrain import run_training
from apertus_jax.posttrain.distillation import (
    CHECKSUM,
    META,
    TeacherLogits,
    check_store,
    distillation,
    holds_step,
    loss_label,
    read_meta,
    step_file,
    tokens_checksum,
)
from apertus_jax.records.loss_plot import LossPlot
from apertus_jax.train.run import Run, pipeline_batch_source
from apertus_jax.trained.workdir import load_workdir


def write_teacher_logits(
    teacher_workdir: str, config: Config, logits_dir: str, *, steps: int, k: int
) -> dict:
    """Runs the teacher of `teacher_workdir` over the first `steps` batches of the student run `config` and
    writes its top-`k` log-probabilities per position to `logits_dir` (module docstring); returns the meta.

    A step file already in `logits_dir`, whole and written by the same teacher (workdir, step) and `k` for the
    same rows (`holds_step`), is kept: a rerun after an interruption writes only the missing or other steps.

    Raises:
      ValueError: k out of [1, vocab], steps < 1, more than one process, or a teacher whose vocabulary or
        tokenizer differs from the student's (one line).
      FileNotFoundError: as `apertus_jax.trained.workdir.load_workdir`.
    """
    if jax.process_count() > 1:
        raise ValueError("write_teacher_logits runs in one process; start it without a multi-host launcher")
    teacher = load_workdir(teacher_workdir, "writing teacher logits from")
    run = Run(config)  # the student run: its data side gives the batches
    vocab = config.model.vocab_size
    if teacher.config.model.vocab_size != vocab:
        raise ValueError(
            f"the teacher's vocab_size {teacher.config.model.vocab_size} differs from the student's {vocab}"
        )
    if teacher.tokenizer.checksum != run.tokenizer.checksum:
        raise ValueError(
            f"the teacher's tokenizer {teacher.tokenizer.name} is not the student's {run.tokenizer.name}; set "
            "the student's --config.data.tokenizer to the teacher's"
        )
    if not 1 <= k <= vocab or steps < 1:
        raise ValueError(f"k={k} must be in [1, {vocab}] and steps={steps} >= 1")

    @jax.jit
    def top_k(tokens, positions, segment_ids):
        logprobs = jax.nn.log_softmax(teacher.model(tokens, positions, segment_ids).astype(jnp.float32), -1)
        top_logprobs, top_ids = jax.lax.top_k(logprobs, k)
        rest = jnp.log1p(-jnp.minimum(jnp.sum(jnp.exp(top_logprobs), -1), 1.0 - 1e-7))
        return top_ids.astype(jnp.int32), top_logprobs, rest

    os.makedirs(logits_dir, exist_ok=True)
    source = pipeline_batch_source(run)
    # what each step file records of its writer: a rerun keeps the files of the same teacher, k and rows
    written_by = {"teacher": os.path.abspath(teacher_workdir), "teacher_step": str(teacher.step), "k": str(k)}
    kept = []
    for step in range(1, steps + 1):
        batch = next(source)
        if holds_step(logits_dir, step, batch["tokens"], written_by):
            kept.append(step)
        else:
            ids, logprobs, rest = jax.device_get(
                top_k(batch["tokens"], batch["positions"], batch["segment_ids"])
            )
            arrays = {"teacher_ids": ids, "teacher_logprobs": logprobs, "rest_logprob": rest}
            arrays[CHECKSUM] = tokens_checksum(batch["tokens"])
            with files.atomic_path(step_file(logits_dir, step)) as path:
                save_file(
                    {name: np.ascontiguousarray(a) for name, a in arrays.items()}, path, metadata=written_by
                )
        if step % 50 == 0 or step == steps:
            logging.info("teacher logits: step %d of %d", step, steps)
    if kept:
        logging.info(
            "teacher logits: kept %d of %d step files written before by the same teacher for the same rows, "
            "wrote the other %d",
            len(kept),
            steps,
            steps - len(kept),
        )
    meta = {"teacher": os.path.abspath(teacher_workdir), "teacher_step": teacher.step, "k": k, "steps": steps}
    meta.update(seq_len=config.data.seq_len, vocab_size=vocab, tokenizer=run.tokenizer.name)
    with files.atomic_path(os.path.join(logits_dir, META)) as path, open(path, "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def _same_tokenizer(run: Run, meta: dict) -> Run:
    """`run`, if its tokenizer is the one the teacher logits were written with.

    Raises:
      ValueError: another tokenizer (one line).
    """
    if meta["tokenizer"] != run.tokenizer.name:
        raise ValueError(
            f"the teacher logits were written with tokenizer {meta['tokenizer']}, the student reads "
            f"{run.tokenizer.name}; write them with the student's config"
        )
    return run


def distill(config: Config, workdir: str, logits_dir: str, *, alpha: float, temperature: float) -> str:
    """Trains (or resumes) the student `config` in `workdir` on the teacher logits of `logits_dir` with the
    standard hooks; returns "done" or "preempted". The store is checked whole before the run writes anything:
    its meta against the student's config, every step file up to `train.steps` (`check_store`), and its first
    step's rows against the student's first batch (`TeacherLogits`).

    Raises:
      FileNotFoundError: as `read_meta`.
      ValueError: a store of another row length or vocabulary, shorter than `train.steps`, with a step file
        missing or unreadable, or of other rows (one line naming the store and the fix); as `distillation` and
        `apertus_jax.train.loop.train`.
    """
    meta = read_meta(logits_dir)
    if meta["vocab_size"] != config.model.vocab_size:
        raise ValueError(
            f"{logits_dir} holds logits over {meta['vocab_size']} ids, the student's model.vocab_size is "
            f"{config.model.vocab_size}; write the logits with the student's config"
        )
    if meta["seq_len"] != config.data.seq_len or meta["steps"] < config.train.steps:
        raise ValueError(
            f"{logits_dir} holds {meta['steps']} steps of {meta['seq_len']}-token rows; the student trains "
            f"{config.train.steps} steps of {config.data.seq_len}: write the logits with the student's config"
        )
    check_store(logits_dir, meta, config.train.steps)
    pipeline = config.data.pipeline
    pipeline.check_inputs()
    data = {name: spec.describe() for name, spec in pipeline.components.items()}
    data["teacher_logits"] = {"kind": "teacher_logits", "licence": None, **meta, "path": logits_dir}
    return run_training(
        config,
        workdir,
        objective=distillation(config.data.seq_len, meta["k"], alpha, temperature),
        batch_source=lambda run: TeacherLogits(
            pipeline_batch_source(_same_tokenizer(run, meta)), logits_dir, meta
        ),
        data=data,
        loss_plot=LossPlot("distillation loss (nats/token)", loss_label(alpha, temperature)),
    )
