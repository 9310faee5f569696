"""Evaluate a trained workdir: multiple choice, perplexity or memorization (`apertus_jax.trained.evaluate`).

    python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=german_exams_qa
    python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=perplexity
    python -m experiments.evaluate --workdir=/tmp/apertus_demo --task=memorization --limit=64
    python -m experiments.evaluate --workdir=/tmp/my_run --task=perplexity --heldout=/tmp/my_heldout.jsonl

Tasks (`<language>_exams_qa`, `perplexity`, `memorization`) and their scores: `apertus_jax/trained/evaluate.py`.
Perplexity and memorization score the held-out data of `--heldout` (a shard set or a JSONL, Parquet or text
file), else the held-out parts of the run's own components (`apertus_jax/trained/eval_data.py`); a run whose
components have none is refused, naming `--heldout`. The result, with what it scored (`data`), is printed and
written as JSON to `--output` (default WORKDIR/eval/TASK.json, atomically). A bad workdir, task, limit or
held-out path ends with one line on stderr and exit status 2.
"""

import json
import os

from absl import flags

from apertus_jax import files
from apertus_jax.trained.evaluate import evaluate
from experiments import cli

_WORKDIR = flags.DEFINE_string("workdir", None, "Training workdir (config.json + checkpoints/).")
_TASK = flags.DEFINE_string("task", "german_exams_qa", "<language>_exams_qa | perplexity | memorization")
_HELDOUT = flags.DEFINE_string(
    "heldout",
    "",
    "Perplexity, memorization: your held-out data, a shard set (experiments.tokenize_data) or a JSONL, Parquet "
    "or text file (default: the held-out parts of the run's components).",
)
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


def main(argv) -> None:
    del argv
    cli.required(workdir=_WORKDIR.value)
    result = evaluate(
        _WORKDIR.value,
        _TASK.value,
        heldout=_HELDOUT.value,
        limit=_LIMIT.value,
        batch_size=_BATCH_SIZE.value,
        seq_len=_SEQ_LEN.value,
        prefix_len=_PREFIX_LEN.value,
        suffix_len=_SUFFIX_LEN.value,
        temperature=_TEMPERATURE.value,
        top_p=_TOP_P.value,
    )
    output = _OUTPUT.value or os.path.join(_WORKDIR.value, "eval", f"{_TASK.value}.json")
    files.write_json(output, result, indent=2)
    print(json.dumps(result, indent=2))
    print(f"wrote {output}")


if __name__ == "__main__":
    cli.execute(main)
