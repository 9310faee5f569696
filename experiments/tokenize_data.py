"""Tokenize raw documents into ArrayRecord shards with a manifest (the pipeline's production format).

    python -m experiments.tokenize_data --input=DIR_OR_FILE [--input=...] --kind=jsonl --tokenizer=tekken \
        --out=/data/shards/web --source=NAME --licence=ODC-By-1.0 [--score_field=score] [--shard_tokens=N] \
        [--tasks=T --workers=W] [--executor=slurm --slurm_partition=normal --logging_dir=/scratch/logs]

A front-end of `apertus_jax.prep.tokenize` (needs the `prep` extra, datatrove): T datatrove tasks (each a share of the input files) on the
local, Slurm or Ray executor, then one merged manifest. `--tasks=1` gives the shards of a single process
bit for bit; more tasks give the same documents and tokens in per-task parts. `--out` appears atomically
(a hidden staging directory renamed into place; a failed local run leaves nothing), and the manifest
records tokenizer name/sha256/vocab, source, licence, inputs, document and token counts, skipped empty
documents and replaced invalid UTF-8 bytes. Exit status 1 with a one-line error on bad input.
"""

from __future__ import annotations

import argparse
import sys

from apertus_jax.data import sources
from apertus_jax.prep.tokenize import TokenizeJob, run_tokenize
from experiments import cli

EXECUTORS = ("local", "slurm", "ray")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", action="append", required=True, help="file or directory (repeatable)")
    parser.add_argument("--kind", choices=sources.RAW_KINDS, default="jsonl")
    parser.add_argument("--tokenizer", required=True, help='"tekken", "sentencepiece:PATH" or "hf:PATH"')
    parser.add_argument("--out", required=True, help="the shard set directory to create")
    parser.add_argument("--source", required=True, help="name of the data source")
    parser.add_argument("--licence", required=True, help="licence of the source text")
    parser.add_argument("--text_field", default="text")
    parser.add_argument("--id_field", default="id")
    parser.add_argument("--score_field", default=None)
    parser.add_argument("--shard_tokens", type=int, default=256 * 1024 * 1024)
    parser.add_argument("--batch_documents", type=int, default=1024, help="documents per encode batch")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--tasks", type=int, default=1, help="datatrove tasks (input file shares)")
    parser.add_argument("--workers", type=int, default=1, help="tasks run at once")
    parser.add_argument("--executor", choices=EXECUTORS, default="local")
    parser.add_argument("--logging_dir", default=None, help="datatrove logs and stats (default: temporary)")
    parser.add_argument("--slurm_partition", default="normal")
    parser.add_argument("--slurm_time", default="04:00:00")
    parser.add_argument("--slurm_cpus_per_task", type=int, default=1)
    parser.add_argument("--slurm_mem_per_cpu_gb", type=int, default=4)
    parser.add_argument("--slurm_venv", default=None, help="virtualenv activate script on the nodes")
    return parser.parse_args(argv)


def job_from_args(args: argparse.Namespace) -> TokenizeJob:
    slurm = dict(
        partition=args.slurm_partition,
        time=args.slurm_time,
        cpus_per_task=args.slurm_cpus_per_task,
        mem_per_cpu_gb=args.slurm_mem_per_cpu_gb,
        venv_path=args.slurm_venv,
    )
    return TokenizeJob(
        inputs=list(args.input),
        out=args.out,
        tokenizer=args.tokenizer,
        source=args.source,
        licence=args.licence,
        kind=args.kind,
        text_field=args.text_field,
        id_field=args.id_field,
        score_field=args.score_field,
        shard_tokens=args.shard_tokens,
        batch_documents=args.batch_documents,
        overwrite=args.overwrite,
        tasks=args.tasks,
        executor={
            "kind": args.executor,
            "workers": args.workers,
            "skip_completed": args.executor != "local",
            "slurm": slurm,
            "ray": {},
        },
        logging_dir=args.logging_dir,
    )


def tokenize(args: argparse.Namespace) -> dict | None:
    """Writes the shard set and returns its manifest (None when the jobs were submitted to Slurm/Ray)."""
    return run_tokenize(job_from_args(args))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.executor != "local" and args.logging_dir is None:
        cli.usage_error("--executor=slurm/ray needs --logging_dir on shared storage")
    try:
        manifest = tokenize(args)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print("error: " + " ".join(str(error).split()), file=sys.stderr)
        return cli.USAGE_ERROR
    if manifest is None:
        print(f"submitted: the shard set appears at {args.out} when the merge job ends", file=sys.stderr)
        return 0
    print(
        f"wrote {args.out}: {manifest['documents']:,} documents, {manifest['tokens']:,} tokens in "
        f"{len(manifest['shards'])} shards from {manifest['tasks']} tasks; "
        f"{manifest['replaced_invalid_utf8']} invalid UTF-8 bytes replaced, "
        f"{manifest['skipped_empty_documents']} empty documents skipped",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
