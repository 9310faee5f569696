"""Tokenization into the project's ArrayRecord shard sets on datatrove's executors (local, Slurm, Ray).

Apertus tokenized its corpus with datatrove across many nodes (Apertus section 3); this does the same for the
training format of `apertus_jax.data.shards`. Two stages, chained with `depends`:
  tokenize (T tasks): `RawDocumentReader` (task t reads input files t, t + T, ... with
                      `apertus_jax.data.sources`: JSONL, Parquet or text, invalid UTF-8 replaced and counted,
                      empty documents skipped) -> `TokenizeShards` (batched `encode_batch`, `[BoD] + ids +
                      [EoD]`, `shard_parts.PartWriter` into `<staging>/parts/<t>/`, counts in the part
                      manifest)
  merge    (1 task):  `MergeShardManifests`: one manifest over all parts (documents, tokens, files, skipped
                      and replaced counts summed), then the staging directory is renamed to `out`.
  megatron (1 task, `output_format="megatron"` only): `WriteMegatron`: the merged set, in its order, as the
                      Megatron dataset `out.bin` + `out.idx` (`apertus_jax.data.megatron.indexed`) with its manifest
                      as `out.json`; the staging set is removed. The fork trains on the prefix `out` unchanged.
With T = 1 the shards are bit for bit those of a single process reading the same files in order; with T
tasks every document is tokenized exactly once, so the multiset of token sequences is the same.
`experiments/tokenize_data.py` is the command-line front-end (`tokenize_job` turns its flags into a job).
"""

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

import numpy as np
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from apertus_jax import files
from apertus_jax.data import shards, sources
from apertus_jax.data.megatron import indexed as megatron
from apertus_jax.data.shards import load_manifest
from apertus_jax.prep import local_executor, shard_parts
from apertus_jax.prep.executors import make_executor
from apertus_jax.prep.steps import MergeShardManifests
from apertus_jax.tokenizers import load_tokenizer

OUTPUT_FORMATS = ("arrayrecord", "megatron")


class RawDocumentReader(PipelineStep):
    """Reads this task's share of the input files (`files[rank::world_size]`) as datatrove Documents.

    Documents carry `metadata["score"]` when `score_field` is set and present. The counts of the files read
    (`apertus_jax.data.sources.RawStats`) are kept in `self.raw_stats` for `TokenizeShards`.
    """

    name = "raw documents"
    type = "apertus-tokenize"

    def __init__(
        self,
        inputs,
        kind: str = "jsonl",
        text_field: str = "text",
        id_field: str = "id",
        score_field: str | None = None,
    ):
        super().__init__()
        self.inputs, self.kind = [str(p) for p in inputs], kind
        self.text_field, self.id_field, self.score_field = text_field, id_field, score_field
        self.raw_stats = sources.RawStats()

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        files = sources.list_files(self.inputs, self.kind)[rank::world_size]
        self.raw_stats = sources.RawStats()
        if not files:
            return
        for raw in sources.iter_raw_documents(
            files,
            self.kind,
            self.raw_stats,
            text_field=self.text_field,
            id_field=self.id_field,
            score_field=self.score_field,
        ):
            self.stat_update("documents")
            yield Document(
                text=raw.text, id=raw.doc_id, metadata={} if raw.score is None else {"score": raw.score}
            )


class TokenizeShards(PipelineStep):
    """Tokenizes documents in batches into one ArrayRecord shard set per task at `<output_dir>/parts/<rank>/`.

    Writes with `shard_parts.PartWriter`, the same writer as the preparation pipeline's `steps.WriteShards`.

    Args:
      output_dir: the (staging) directory of the whole set; `MergeShardManifests` lists all parts.
      tokenizer: a `load_tokenizer` spec ("tekken", "sentencepiece:PATH", "hf:PATH").
      source, licence: recorded in the manifest (see `apertus_jax.data.shards.ShardWriter`).
      shard_tokens: shard size in tokens (see `shards.SHARD_TOKENS`).
      batch_documents: documents per `encode_batch` call.
      reader: the `RawDocumentReader` before this step; its counts go into the part manifest.
      extra: more manifest fields (e.g. inputs, kind).

    Stats: `documents`, `tokens`; its time covers only tokenization and writing, so tokens / time is the
    throughput of one worker. A task without documents writes nothing.
    """

    name = "tokenize to ArrayRecord shards"
    type = "apertus-tokenize"

    def __init__(
        self,
        output_dir: str,
        tokenizer: str,
        source: str,
        licence: str,
        shard_tokens: int = shards.SHARD_TOKENS,
        batch_documents: int = shard_parts.BATCH_DOCUMENTS,
        reader: RawDocumentReader | None = None,
        extra: dict | None = None,
    ):
        super().__init__()
        self.output_dir, self.tokenizer_spec, self.source, self.licence = (
            output_dir,
            tokenizer,
            source,
            licence,
        )
        self.shard_tokens, self.batch_documents = shard_tokens, batch_documents
        self.reader, self.extra = reader, dict(extra or {})

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        stream = shard_parts.batches(data, self.batch_documents)
        if stream is None:
            return
        with shard_parts.PartWriter(
            self.output_dir,
            rank,
            self.tokenizer_spec,
            source=self.source,
            licence=self.licence,
            score_key="score",
            shard_tokens=self.shard_tokens,
            extra=self.extra,
        ) as part:
            start = time.perf_counter()
            for batch in stream:
                with self.track_time(unit="batch"):
                    tokens = part.write_batch(batch)
                self.stat_update("documents", value=len(batch))
                self.stat_update("tokens", value=tokens, unit="batch")
                manifest = part.manifest
                print(
                    f"task {rank}: {manifest['documents']:,} documents, {manifest['tokens']:,} tokens, "
                    f"{manifest['tokens'] / (time.perf_counter() - start):,.0f} tokens/s",
                    file=sys.stderr,
                )
            if self.reader is not None:
                stats = self.reader.raw_stats
                part.manifest.update(
                    skipped_empty_documents=stats.skipped_empty,
                    replaced_invalid_utf8=stats.replaced_invalid_utf8,
                    files=stats.files,
                )
        yield from ()


class WriteMegatron(PipelineStep):
    """Single task: the merged shard set at `shard_dir` as the Megatron dataset `prefix` (.bin + .idx).

    Documents in the set's order, one sequence each, as `dtype`; the set's manifest (plus `megatron_dtype`
    and `megatron_prefix`, its `record_layout` that of the .bin) goes to `prefix.json`, and the shard set is
    removed. Nothing is left at `prefix`
    on error (`megatron.IndexedDatasetWriter`).
    """

    name = "write the Megatron dataset"
    type = "apertus-tokenize"

    def __init__(self, shard_dir: str, prefix: str, tokenizer: str, dtype: str, overwrite: bool = False):
        super().__init__()
        self.shard_dir, self.prefix, self.tokenizer_spec = shard_dir, prefix, tokenizer
        self.dtype, self.overwrite = dtype, overwrite

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        source = shards.ShardSource(self.shard_dir, load_tokenizer(self.tokenizer_spec))
        summary = megatron.write_indexed_dataset(self.prefix, source, self.dtype, overwrite=self.overwrite)
        manifest = {
            key: value for key, value in source.manifest.items() if key not in ("shards", "directory")
        }
        manifest.update(
            megatron_prefix=os.path.basename(self.prefix),
            megatron_dtype=self.dtype,
            record_layout=megatron_layout(self.dtype),
            **summary,
        )
        files.write_text(self.prefix + ".json", json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(self.shard_dir)
        self.stat_update("documents", value=summary["documents"])
        yield from ()


def megatron_layout(dtype: str) -> str:
    """The `record_layout` of a Megatron manifest: how the .bin and .idx of `dtype` tokens are laid out."""
    order = "LE " if np.dtype(dtype).itemsize > 1 else ""
    return (
        f"{dtype} {order}tokens, one sequence per document, in .bin; lengths and offsets in .idx (MMIDIDX v1)"
    )


def megatron_dtype(tokenizer: str, dtype: str | None) -> str:
    """The Megatron token dtype name for `tokenizer`'s ids: `dtype`, or for None the one Megatron's
    preprocessing picks (uint16 below 65,500 ids, else int32; `megatron.default_dtype`).

    Raises:
      ValueError: `dtype` has no code in the Megatron layout or cannot hold ids up to the vocabulary size - 1.
    """
    vocab_size = load_tokenizer(tokenizer).vocab_size
    chosen = megatron.default_dtype(vocab_size) if dtype is None else megatron.token_dtype(dtype)
    if np.iinfo(chosen).max < vocab_size - 1:
        raise ValueError(
            f"--megatron_dtype={chosen.name} holds ids up to {np.iinfo(chosen).max}, but tokenizer {tokenizer} "
            f"has {vocab_size} ids; use int32 (or leave it unset for Megatron's default)"
        )
    return chosen.name


@dataclasses.dataclass
class TokenizeJob:
    """Everything a distributed tokenization run needs (the fields of `experiments/tokenize_data.py`).

    `executor` is a prep executor section (`kind`, `workers`, `skip_completed`, `slurm {...}`, `ray {...}`;
    see configs/prep/demo.py). `logging_dir` None: a temporary directory, removed after a local run.
    `output_format` "arrayrecord" writes the shard set directory `out`; "megatron" the prefix `out` (`out.bin`,
    `out.idx`, `out.json`) with token dtype `megatron_dtype` (None: the one Megatron's preprocessing picks).
    """

    inputs: list
    out: str
    tokenizer: str
    source: str
    licence: str
    kind: str = "jsonl"
    text_field: str = "text"
    id_field: str = "id"
    score_field: str | None = None
    shard_tokens: int = shards.SHARD_TOKENS
    batch_documents: int = shard_parts.BATCH_DOCUMENTS
    overwrite: bool = False
    tasks: int = 1
    output_format: str = "arrayrecord"
    megatron_dtype: str | None = None
    executor: dict = dataclasses.field(
        default_factory=lambda: {
            "kind": "local",
            "workers": 1,
            "skip_completed": False,
            "slurm": {},
            "ray": {},
        }
    )
    logging_dir: str | None = None

    @property
    def staging(self) -> str:
        parent, name = os.path.split(os.path.abspath(self.out))
        return os.path.join(parent, f".{name}.staging")


def tokenize_job(
    inputs: Sequence[str],
    out: str,
    tokenizer: str,
    source: str,
    licence: str,
    *,
    executor: str = "local",
    workers: int = 1,
    slurm: Mapping | None = None,
    logging_dir: str | None = None,
    **fields,
) -> TokenizeJob:
    """The `TokenizeJob` of a command-line run (`experiments/tokenize_data.py`).

    Args:
      inputs, out, tokenizer, source, licence: as in `TokenizeJob`.
      executor: "local", "slurm" or "ray"; the cluster executors skip the tasks an earlier submission
        completed, the local one reruns every task.
      workers: tasks run at once.
      slurm: the Slurm options (`partition`, `time`, `cpus_per_task`, `mem_per_cpu_gb`, `venv_path`).
      logging_dir: datatrove's logs and stats; None: a temporary directory (local runs only).
      fields: the other `TokenizeJob` fields (kind, text_field, id_field, score_field, shard_tokens,
        batch_documents, overwrite, tasks, output_format, megatron_dtype).

    Raises:
      ValueError: a Slurm or Ray run without `logging_dir` (its tasks need it on shared storage).
    """
    if executor != "local" and logging_dir is None:
        raise ValueError("--executor=slurm/ray needs --logging_dir on shared storage")
    return TokenizeJob(
        inputs=list(inputs),
        out=out,
        tokenizer=tokenizer,
        source=source,
        licence=licence,
        executor={
            "kind": executor,
            "workers": workers,
            "skip_completed": executor != "local",
            "slurm": dict(slurm or {}),
            "ray": {},
        },
        logging_dir=logging_dir,
        **fields,
    )


def build_executors(job: TokenizeJob) -> dict:
    """The chained executors `{"tokenize": ..., "merge": ...}` (and `"megatron": ...` for that format); run the
    last one to run them all.

    Raises:
      ValueError: unknown executor kind, unknown input kind or output format, no input file, tasks < 1, a
        Megatron dtype that cannot hold the tokenizer's ids.
      FileNotFoundError: an input path does not exist.
    """
    if job.tasks < 1:
        raise ValueError(f"tasks must be at least 1, got {job.tasks}")
    if job.output_format not in OUTPUT_FORMATS:
        raise ValueError(f"output format {job.output_format!r} unknown; use one of {OUTPUT_FORMATS}")
    files = sources.list_files(job.inputs, job.kind)  # fail before any job starts
    logging_dir = job.logging_dir or tempfile.mkdtemp(prefix="tokenize_logs_")
    reader = RawDocumentReader(job.inputs, job.kind, job.text_field, job.id_field, job.score_field)
    tokenize = [
        reader,
        TokenizeShards(
            job.staging,
            job.tokenizer,
            job.source,
            job.licence,
            job.shard_tokens,
            job.batch_documents,
            reader=reader,
            extra={"inputs": list(map(str, job.inputs)), "kind": job.kind},
        ),
    ]
    first = make_executor(
        job.executor, tokenize, min(job.tasks, len(files)), os.path.join(logging_dir, "tokenize"), "tokenize"
    )
    megatron_format = job.output_format == "megatron"
    merge = make_executor(
        job.executor,
        [
            MergeShardManifests(
                job.staging, job.inputs, publish_to=None if megatron_format else os.path.abspath(job.out)
            )
        ],
        1,
        os.path.join(logging_dir, "merge"),
        "tokenize-merge",
        depends=first,
    )
    executors = {"tokenize": first, "merge": merge}
    if megatron_format:
        step = WriteMegatron(
            job.staging,
            os.path.abspath(job.out),
            job.tokenizer,
            megatron_dtype(job.tokenizer, job.megatron_dtype),
            job.overwrite,
        )
        executors["megatron"] = make_executor(
            job.executor, [step], 1, os.path.join(logging_dir, "megatron"), "tokenize-megatron", depends=merge
        )
    return executors


def run_tokenize(job: TokenizeJob) -> dict | None:
    """Runs `job` and returns the merged manifest, or for the Megatron format the contents of `out.json`
    (None for Slurm/Ray: the jobs were submitted).

    Local runs leave nothing behind on error (the staging directory and temporary logs are removed).
    Raises:
      FileExistsError: `out` (the Megatron format: `out.bin` or `out.idx`) exists and not `overwrite`.
      ValueError / FileNotFoundError: see `build_executors`; a bad record; an empty input.
    """
    targets = [job.out]
    if job.output_format == "megatron":
        targets = [megatron.data_path(job.out), megatron.index_path(job.out)]
        megatron_dtype(job.tokenizer, job.megatron_dtype)  # before anything is written
    for target in targets:
        if os.path.exists(target) and not job.overwrite:
            raise FileExistsError(f"{target} exists; choose a new --out or pass --overwrite")
    shutil.rmtree(job.staging, ignore_errors=True)
    temporary_logs = job.logging_dir is None
    if temporary_logs:
        job = dataclasses.replace(job, logging_dir=tempfile.mkdtemp(prefix="tokenize_logs_"))
    if job.executor["kind"] == "local":
        # The caller reports errors itself (one line); datatrove's console would repeat them as log records.
        local_executor.use_forkserver()
        local_executor.quiet_console("CRITICAL")
    try:
        executors = build_executors(job)
        list(executors.values())[-1].run()
        if job.executor["kind"] != "local":
            return None
        if job.output_format == "megatron":
            with open(job.out + ".json", encoding="utf-8") as f:
                return json.load(f)
        return load_manifest(job.out)
    except BaseException:
        shutil.rmtree(job.staging, ignore_errors=True)
        raise
    finally:
        if temporary_logs and job.executor["kind"] == "local":
            shutil.rmtree(job.logging_dir, ignore_errors=True)
