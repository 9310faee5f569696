"""Evaluating a trained workdir: multiple choice, perplexity or memorization.

    result = evaluate("/tmp/apertus_demo", "german_exams_qa")     # JSON-ready dict

Tasks:
- `<language>_exams_qa` (e.g. `german_exams_qa`, 575 questions): cloze-style multiple choice from the
  `evals==3.0.1.post1` wheel (fetched from PyPI into the cache; `apertus_jax.eval.tasks`); accuracy per token,
  per character, per byte and unnormalised, and the chance level.
- `perplexity`: the demo corpus's held-out split (text of the training languages), packed and masked as in
  training (EoD rules); perplexity, nats per token and bits per byte; the same under `unseen_languages` for the
  UDHR translations held out whole (languages the model never saw).
- `memorization`: prefix -> greedy (or `temperature=1, top_p=0.9` nucleus-sampled) suffix on documents of the
  demo corpus's training split vs held-out ones (the baseline of unseen text); ROUGE-L, LCCS, exact match and
  TTR.

The command line is `python -m experiments.evaluate` (it writes the result to WORKDIR/eval/TASK.json).
"""

from __future__ import annotations

import os

from apertus_jax.data import demo_corpus
from apertus_jax.eval import tasks
from apertus_jax.eval.memorization import mean_scores, memorization_scores
from apertus_jax.eval.multiple_choice import evaluate_multiple_choice
from apertus_jax.eval.perplexity import perplexity
from apertus_jax.eval.scoring import make_token_logprobs_fn
from apertus_jax.trained.workdir import load_workdir

EXAMS_QA_SUFFIX = "_exams_qa"


def _limited(items: list, limit: int) -> list:
    return items[:limit] if limit else items


def evaluate(
    workdir: str,
    task: str,
    *,
    limit: int = 0,
    batch_size: int = 16,
    seq_len: int = 0,
    prefix_len: int = 32,
    suffix_len: int = 32,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> dict:
    """Evaluates the newest checkpoint of `workdir` on `task` (module docstring); returns the JSON-ready
    result: workdir, step, task, seq_len and the task's scores.

    Args:
      limit: the first N questions or documents only (0 = all; memorization: 64).
      batch_size: rows per forward pass.
      seq_len: row length in tokens for scoring (0 = the run's `data.seq_len`, at least 512 for exams_qa,
        whose longest options exceed 100 tokens with small BPEs).
      prefix_len, suffix_len: memorization: prompt tokens (with <s>) and generated, scored tokens.
      temperature, top_p: memorization: 0 = greedy; else sampling at `temperature` with nucleus `top_p`.

    Raises:
      ValueError: unknown task, bad limit; FileNotFoundError: no checkpoint (from `load_workdir`).
    """
    if task != "perplexity" and task != "memorization" and not task.endswith(EXAMS_QA_SUFFIX):
        raise ValueError(
            f"unknown --task={task!r}; use german_exams_qa (or <language>_exams_qa), perplexity "
            "or memorization"
        )
    if limit < 0 or batch_size < 1:
        raise ValueError(f"--limit={limit} must be >= 0 and --batch_size={batch_size} >= 1")
    trained = load_workdir(workdir, "evaluating")
    tokenizer = trained.tokenizer
    if not seq_len:
        seq_len = int(trained.config.data.seq_len)
        seq_len = max(seq_len, 512) if task.endswith(EXAMS_QA_SUFFIX) else seq_len
    result = {"workdir": os.path.abspath(workdir), "step": trained.step, "task": task, "seq_len": seq_len}
    if task.endswith(EXAMS_QA_SUFFIX):
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
        scores = {}
        for split in ("heldout", "unseen_languages"):
            texts = [d["text"] for d in _limited(demo_corpus.load_demo_documents(split), limit)]
            ppl = perplexity(
                make_token_logprobs_fn(trained.model),
                [tokenizer.encode_document(t) for t in texts],
                seq_len=seq_len,
                batch_size=batch_size,
                eod_id=tokenizer.eod_id,
                pad_id=tokenizer.pad_id,
                num_bytes=sum(len(t.encode("utf-8")) for t in texts),
            )
            scores[split] = {
                "num_documents": ppl.num_documents,
                "num_tokens": ppl.num_tokens,
                "perplexity": ppl.perplexity,
                "nll_per_token": ppl.nll_per_token,
                "bits_per_byte": ppl.bits_per_byte,
            }
        return {
            **result,
            "split": "demo heldout",
            **scores["heldout"],
            "unseen_languages": scores["unseen_languages"],
        }
    need = prefix_len + suffix_len
    for split in ("train", "heldout"):
        documents = [tokenizer.encode_document(d["text"]) for d in demo_corpus.load_demo_documents(split)]
        documents = _limited([d for d in documents if len(d) >= need], limit or 64)
        scores = memorization_scores(
            trained.model,
            documents,
            prefix_len=prefix_len,
            suffix_len=suffix_len,
            batch_size=batch_size,
            temperature=temperature,
            top_p=top_p,
            pad_id=tokenizer.pad_id,
        )
        result[split] = {"num_documents": len(documents), **mean_scores(scores)}
    return {
        **result,
        "prefix_len": prefix_len,
        "suffix_len": suffix_len,
        "temperature": temperature,
        "top_p": top_p,
    }
