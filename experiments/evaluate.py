"""Evaluate a trained workdir: multiple choice, perplexity or memorization.

    python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=german_exams_qa
    python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=perplexity
    python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=memorization --limit=64

Tasks:
- `<language>_exams_qa` (e.g. `german_exams_qa`, 575 questions): cloze-style multiple choice from the
  `evals==3.0.1.post1` wheel (fetched from PyPI into the cache); accuracy per token, per character, per byte
  and unnormalised, and the chance level.
- `perplexity`: the demo corpus's held-out split, packed and masked as in training (EoD rules); perplexity,
  nats per token and bits per byte.
- `memorization`: prefix -> greedy (or `--temperature=1 --top_p=0.9` nucleus-sampled) suffix on documents of the demo corpus's training split vs held-out ones
  (the baseline of unseen text); ROUGE-L, LCCS, exact match and TTR.

The result is printed and written as JSON to `--output` (default WORKDIR/eval/TASK.json, atomically). A bad
workdir, task or limit ends with one line on stderr and exit status 2.
"""

import json
import os
import sys

from absl import flags

from experiments import cli

_WORKDIR = flags.DEFINE_string("workdir", None, "Training workdir (config.json + checkpoints/).")
_TASK = flags.DEFINE_string("task", "german_exams_qa", "<language>_exams_qa | perplexity | memorization")
_LIMIT = flags.DEFINE_integer(
    "limit", 0, "Use only the first N questions/documents (0 = all; memorization: 64)."
)
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 16, "Rows per forward pass.")
_SEQ_LEN = flags.DEFINE_integer(
    "seq_len",
    0,
    "Row length for scoring (0 = the run's data.seq_len; at least "
    "512 for exams_qa, whose longest options exceed 100 tokens with small BPEs).",
)
_PREFIX_LEN = flags.DEFINE_integer("prefix_len", 32, "Memorization: prompt tokens (with <s>).")
_SUFFIX_LEN = flags.DEFINE_integer("suffix_len", 32, "Memorization: generated and scored tokens.")
_TEMPERATURE = flags.DEFINE_float(
    "temperature", 0.0, "Memorization: 0 = greedy; docs/recipe.md 9 also uses 1.0 ..."
)
_TOP_P = flags.DEFINE_float("top_p", 1.0, "Memorization: ... with nucleus top-p 0.9.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON result path (default WORKDIR/eval/TASK.json).")

EXAMS_QA_SUFFIX = "_exams_qa"


def _limited(items: list, limit: int) -> list:
    return items[:limit] if limit else items


def run(
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
    """Evaluates the newest checkpoint of `workdir` on `task`; returns the JSON-ready result.

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
    from apertus_jax.data import demo_corpus
    from apertus_jax.eval.scoring import make_token_logprobs_fn
    from apertus_jax.eval.workdir import load_workdir

    trained = load_workdir(workdir)
    tokenizer = trained.tokenizer
    if not seq_len:
        seq_len = int(trained.config.data.seq_len)
        seq_len = max(seq_len, 512) if task.endswith(EXAMS_QA_SUFFIX) else seq_len
    result = {"workdir": os.path.abspath(workdir), "step": trained.step, "task": task, "seq_len": seq_len}
    if task.endswith(EXAMS_QA_SUFFIX):
        from apertus_jax.eval.multiple_choice import evaluate_multiple_choice
        from apertus_jax.eval.tasks import load_exams_qa

        questions = _limited(load_exams_qa(task[: -len(EXAMS_QA_SUFFIX)]), limit)
        mc = evaluate_multiple_choice(
            make_token_logprobs_fn(trained.model),
            tokenizer,
            questions,
            seq_len=seq_len,
            batch_size=batch_size,
        )
        return {**result, **mc.summary()}
    if task == "perplexity":
        from apertus_jax.eval.perplexity import perplexity

        texts = [d["text"] for d in _limited(demo_corpus.load_demo_documents("heldout"), limit)]
        ppl = perplexity(
            make_token_logprobs_fn(trained.model),
            [tokenizer.encode_document(t) for t in texts],
            seq_len=seq_len,
            batch_size=batch_size,
            eod_id=tokenizer.eod_id,
            pad_id=tokenizer.pad_id,
            num_bytes=sum(len(t.encode("utf-8")) for t in texts),
        )
        return {
            **result,
            "split": "demo heldout",
            "num_documents": ppl.num_documents,
            "num_tokens": ppl.num_tokens,
            "perplexity": ppl.perplexity,
            "nll_per_token": ppl.nll_per_token,
            "bits_per_byte": ppl.bits_per_byte,
        }
    from apertus_jax.eval.memorization import mean_scores, memorization_scores

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


def main(argv) -> None:
    del argv
    if not _WORKDIR.value:
        print("error: --workdir is required (a directory written by experiments.pretrain)", file=sys.stderr)
        sys.exit(2)
    try:
        result = run(
            _WORKDIR.value,
            _TASK.value,
            limit=_LIMIT.value,
            batch_size=_BATCH_SIZE.value,
            seq_len=_SEQ_LEN.value,
            prefix_len=_PREFIX_LEN.value,
            suffix_len=_SUFFIX_LEN.value,
            temperature=_TEMPERATURE.value,
            top_p=_TOP_P.value,
        )
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    output = _OUTPUT.value or os.path.join(_WORKDIR.value, "eval", f"{_TASK.value}.json")
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.replace(output + ".tmp", output)
    print(json.dumps(result, indent=2))
    print(f"wrote {output}")


if __name__ == "__main__":
    cli.run_absl(main)
