"""Evaluating a trained workdir: multiple choice, perplexity or memorization.

    result = evaluate("/tmp/apertus_demo", "german_exams_qa")     # JSON-ready dict
    result = evaluate("/tmp/my_run", "perplexity", heldout="/data/my_heldout.jsonl")

Tasks:
- `<language>_exams_qa` (e.g. `german_exams_qa`, 575 questions): cloze-style multiple choice from the
  `evals==3.0.1.post1` wheel (fetched from PyPI into the cache; `apertus_jax.eval.tasks`); accuracy per token,
  per character, per byte and unnormalised, and the chance level.
- `perplexity`: held-out documents, packed and masked as in training (EoD rules); perplexity, nats per token
  and bits per byte; the same under `unseen_languages` for text in languages the run never trained on (the
  demo corpus's UDHR translations held out whole).
- `memorization`: prefix -> greedy (or `temperature=1, top_p=0.9` nucleus-sampled) suffix on documents the run
  trained on vs held-out ones (the baseline of unseen text); ROUGE-L, LCCS, exact match and TTR.

The held-out documents are the user's (`heldout`: a shard set or a JSONL, Parquet or text file), else the
held-out parts of the run's own components; a run whose components have none is refused, naming `--heldout`
(`apertus_jax.trained.eval_data`). The result's `data` fields, and the log, say what was scored.

The command line is `python -m experiments.evaluate` (it writes the result to WORKDIR/eval/TASK.json).
"""

from __future__ import annotations

import os

from absl import logging

from apertus_jax.data.run_tokenizer import run_tokenizer
from apertus_jax.eval import tasks
from apertus_jax.eval.memorization import mean_scores, memorization_scores
from apertus_jax.eval.multiple_choice import evaluate_multiple_choice
from apertus_jax.eval.perplexity import perplexity
from apertus_jax.eval.scoring import make_token_logprobs_fn
from apertus_jax.trained.eval_data import Documents, heldout_documents, trained_documents
from apertus_jax.trained.workdir import TrainedModel, load_workdir, read_config

EXAMS_QA_SUFFIX = "_exams_qa"


def _limited(items: list, limit: int) -> list:
    return items[:limit] if limit else items


def _perplexity(
    trained: TrainedModel, documents: Documents, seq_len: int, batch_size: int, limit: int
) -> dict:
    """The perplexity scores of the first `limit` (0: all) of `documents`, with what they are (`data`)."""
    tokenizer = trained.tokenizer
    tokens, num_bytes = documents.take(tokenizer, limit)
    logging.info("perplexity: scoring %d documents of %s", len(tokens), documents.data)
    ppl = perplexity(
        make_token_logprobs_fn(trained.model),
        tokens,
        seq_len=seq_len,
        batch_size=batch_size,
        eod_id=tokenizer.eod_id,
        pad_id=tokenizer.pad_id,
        num_bytes=num_bytes,
    )
    return {
        "data": documents.data,
        "num_documents": ppl.num_documents,
        "num_tokens": ppl.num_tokens,
        "perplexity": ppl.perplexity,
        "nll_per_token": ppl.nll_per_token,
        "bits_per_byte": ppl.bits_per_byte,
    }


def evaluate(
    workdir: str,
    task: str,
    *,
    heldout: str = "",
    limit: int = 0,
    batch_size: int = 16,
    seq_len: int = 0,
    prefix_len: int = 32,
    suffix_len: int = 32,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> dict:
    """Evaluates the newest checkpoint of `workdir` on `task` (module docstring); returns the JSON-ready
    result: workdir, step, task, seq_len and the task's scores, with what they score (`data`).

    Args:
      heldout: perplexity and memorization: the user's held-out data, a shard set folder or a JSONL, Parquet
        or text file ("": the held-out parts of the run's own components).
      limit: the first N questions or documents only (0 = all; memorization: 64).
      batch_size: rows per forward pass.
      seq_len: row length in tokens for scoring (0 = the run's `data.seq_len`, at least 512 for exams_qa,
        whose longest options exceed 100 tokens with small BPEs).
      prefix_len, suffix_len: memorization: prompt tokens (with <s>) and generated, scored tokens.
      temperature, top_p: memorization: 0 = greedy; else sampling at `temperature` with nucleus `top_p`.

    Raises:
      ValueError: unknown task, bad limit, `heldout` with a multiple-choice task, held-out data that cannot
        be scored or a run without any (`apertus_jax.trained.eval_data`); FileNotFoundError: no checkpoint
        (from `load_workdir`), no such `heldout`.
    """
    exams = task.endswith(EXAMS_QA_SUFFIX)
    if task != "perplexity" and task != "memorization" and not exams:
        raise ValueError(
            f"unknown --task={task!r}; use german_exams_qa (or <language>_exams_qa), perplexity "
            "or memorization"
        )
    if limit < 0 or batch_size < 1:
        raise ValueError(f"--limit={limit} must be >= 0 and --batch_size={batch_size} >= 1")
    if heldout and exams:
        raise ValueError(f"--heldout goes with --task=perplexity or memorization, not --task={task}")
    tokenizer = None
    if not exams:  # the data to score, found before the model is read: bad data is refused at once
        config = read_config(workdir)
        tokenizer = run_tokenizer(config.data.tokenizer, config.data.demo_tokenizer_vocab)
        heldout_set, unseen = heldout_documents(config, tokenizer, heldout)
        trained_set = trained_documents(config, tokenizer) if task == "memorization" else None
    trained = load_workdir(workdir, "evaluating", tokenizer)  # the tokenizer loaded (and logged) once
    tokenizer = trained.tokenizer
    if not seq_len:
        seq_len = int(trained.config.data.seq_len)
        seq_len = max(seq_len, 512) if exams else seq_len
    result = {"workdir": os.path.abspath(workdir), "step": trained.step, "task": task, "seq_len": seq_len}
    if exams:
        questions = _limited(tasks.load_exams_qa(task[: -len(EXAMS_QA_SUFFIX)]), limit)
        mc = evaluate_multiple_choice(
            make_token_logprobs_fn(trained.model),
            tokenizer,
            questions,
            seq_len=seq_len,
            batch_size=batch_size,
        )
        return {**result, **mc.summary()}
    if task == "perplexity":
        result.update(_perplexity(trained, heldout_set, seq_len, batch_size, limit))
        if unseen is not None:
            result["unseen_languages"] = _perplexity(trained, unseen, seq_len, batch_size, limit)
        return result
    need = prefix_len + suffix_len
    for split, documents in (("train", trained_set), ("heldout", heldout_set)):
        tokens, _ = documents.take(tokenizer, limit or 64, need)
        logging.info("memorization: %d documents of %s", len(tokens), documents.data)
        scores = memorization_scores(
            trained.model,
            tokens,
            prefix_len=prefix_len,
            suffix_len=suffix_len,
            batch_size=batch_size,
            temperature=temperature,
            top_p=top_p,
            pad_id=tokenizer.pad_id,
        )
        result[split] = {"data": documents.data, "num_documents": len(tokens), **mean_scores(scores)}
    return {
        **result,
        "prefix_len": prefix_len,
        "suffix_len": suffix_len,
        "temperature": temperature,
        "top_p": top_p,
    }
