"""Tokenization throughput on datatrove's executor: ours (ArrayRecord shards) vs datatrove's DocumentTokenizer.

    python -m benchmarks.tokenize [--copies=2] [--tasks=4] [--vocab=32000] [--rounds=2]

Same input for both (the demo corpus's train split, real multilingual and German text, `--copies` times, as
8 JSONL files), same tokenizer (a byte-level BPE `tokenizer.json` trained here on that text with HF
`tokenizers`, loaded by ours as "hf:PATH" and by datatrove from the path), same tasks, 1 and 2 workers:
- ours: `apertus_jax.prep.tokenize` (RawDocumentReader -> TokenizeShards -> merged manifest);
- peer: datatrove `JsonlReader` -> `DocumentTokenizer` (unshuffled .ds files, EOS appended).
HF tokenizers run one thread per worker (RAYON_NUM_THREADS=1). Reports per configuration (best of `--rounds`
alternating rounds): tokens, the tokenizer step's own time summed over tasks (datatrove's per-step timer:
encode + write, reading excluded), tokens/s per worker from that timer, wall time and wall tokens/s.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import tempfile
import time

import tokenizers
from absl import flags
from tokenizers import decoders, models, pre_tokenizers, trainers

from apertus_jax.data.demo_corpus import load_demo_documents
from experiments import cli

_COPIES = flags.DEFINE_integer("copies", 2, "copies of the demo corpus's train split in the input")
_TASKS = flags.DEFINE_integer("tasks", 4, "executor tasks of both runners")
_VOCAB = flags.DEFINE_integer("vocab", 32000, "vocabulary of the BPE trained on the input")
_ROUNDS = flags.DEFINE_integer("rounds", 2, "alternating rounds; the table shows the best")

# One thread per worker in both runners (HF tokenizers' encode_batch would otherwise use every core in every
# worker), so tokens/s per worker is one core's rate and 2 workers on 2 cores show the scaling.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")


def write_inputs(root: str, copies: int) -> int:
    docs = load_demo_documents("train")
    os.makedirs(root, exist_ok=True)
    for i in range(8):
        with open(os.path.join(root, f"part-{i}.jsonl"), "w", encoding="utf-8") as f:
            for copy in range(copies):
                for d in docs[i::8]:
                    f.write(
                        json.dumps({"id": f"{d['doc_id']}#{copy}", "text": d["text"]}, ensure_ascii=False)
                        + "\n"
                    )
    return len(docs) * copies


def train_tokenizer(path: str, vocab: int) -> None:
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator((d["text"] for d in load_demo_documents("train")), trainer)
    tokenizer.save(path)


def _step_stats(logging_dir: str, step_name: str) -> tuple[float, float]:
    """(tokens, seconds) of the named step, summed over the executor's tasks (its stats.json)."""
    with open(os.path.join(logging_dir, "stats.json")) as f:
        for step in json.load(f):
            if step_name in step["name"]:
                tokens = step["stats"]["tokens"]
                return float(tokens["total"] if isinstance(tokens, dict) else tokens), step["time_stats"][
                    "total"
                ]
    raise KeyError(step_name)


def run_ours(inputs: str, tokenizer: str, tasks: int, workers: int, work: str) -> dict:
    from apertus_jax.prep.tokenize import TokenizeJob, run_tokenize

    logs = os.path.join(work, "logs")
    job = TokenizeJob(
        inputs=[inputs],
        out=os.path.join(work, "shards"),
        tokenizer=f"hf:{tokenizer}",
        source="demo",
        licence="demo",
        tasks=tasks,
        executor={"kind": "local", "workers": workers, "skip_completed": False, "slurm": {}, "ray": {}},
        logging_dir=logs,
    )
    start = time.perf_counter()
    run_tokenize(job)
    wall = time.perf_counter() - start
    tokens, seconds = _step_stats(os.path.join(logs, "tokenize"), "tokenize to ArrayRecord shards")
    return {"tokens": tokens, "step_seconds": seconds, "wall_seconds": wall}


def run_datatrove(inputs: str, tokenizer: str, tasks: int, workers: int, work: str) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    logs = os.path.join(work, "logs")
    executor = LocalPipelineExecutor(
        pipeline=[
            JsonlReader(inputs, glob_pattern="*.jsonl"),
            DocumentTokenizer(
                os.path.join(work, "ds"),
                tokenizer,
                eos_token="</s>",
                shuffle_documents=False,
                batch_size=1024,
            ),
        ],
        tasks=tasks,
        workers=workers,
        logging_dir=logs,
        skip_completed=False,
    )
    start = time.perf_counter()
    executor.run()
    wall = time.perf_counter() - start
    tokens, seconds = _step_stats(logs, "TOKENIZER")
    return {"tokens": tokens, "step_seconds": seconds, "wall_seconds": wall}


def main(argv) -> None:
    del argv
    root = tempfile.mkdtemp(prefix="bench_tokenize_")
    try:
        inputs = os.path.join(root, "inputs")
        documents = write_inputs(inputs, _COPIES.value)
        tokenizer = os.path.join(root, "tokenizer.json")
        train_tokenizer(tokenizer, _VOCAB.value)
        best = {}
        runners = (("ours (ArrayRecord)", run_ours), ("datatrove DocumentTokenizer", run_datatrove))
        for round_index in range(_ROUNDS.value):
            for workers in (1, 2):
                for name, runner in runners:
                    work = os.path.join(root, f"{name.split()[0]}_{workers}")
                    result = runner(inputs, tokenizer, _TASKS.value, workers, work)
                    shutil.rmtree(work, ignore_errors=True)
                    if (name, workers) not in best or result["step_seconds"] < best[name, workers][
                        "step_seconds"
                    ]:
                        best[name, workers] = result
                    print(f"round {round_index + 1}: {name}, {workers} workers: {result}", flush=True)
        rows = [(name, workers, result) for (name, workers), result in best.items()]
        print(
            f"\n{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
            f"{platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} CPUs; {documents:,} documents, {_TASKS.value} tasks, BPE vocab {_VOCAB.value:,}\n"
        )
        print(
            "| runner | workers | tokens | step s (sum over tasks) | tokens/s per worker | wall s "
            "| wall tokens/s |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, workers, r in rows:
            print(
                f"| {name} | {workers} | {r['tokens']:,.0f} | {r['step_seconds']:.2f} | "
                f"{r['tokens'] / r['step_seconds']:,.0f} | {r['wall_seconds']:.1f} | "
                f"{r['tokens'] / r['wall_seconds']:,.0f} |"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    cli.execute(main)
