"""Tokenization into the project's ArrayRecord shard sets on datatrove's executors (local, Slurm, Ray).

Apertus tokenized its corpus with datatrove across many nodes (Apertus section 3); this does the same for the
training format of `apertus_jax.data.shards`. Two stages, chained with `depends`:
  tokenize (T tasks): `RawDocumentReader` (task t reads input files t, t + T, ... with
                      `apertus_jax.data.sources`: JSONL, Parquet or text, invalid UTF-8 replaced and counted,
                      empty documents skipped) -> `TokenizeShards` (batched `encode_batch`, `[BoD] + ids +
                      [EoD]`, `ShardWriter` into `<staging>/parts/<t>/`, counts in the part manifest)
  merge    (1 task):  `MergeShardManifests`: one manifest over all parts (documents, tokens, files, skipped
                      and replaced counts summed), then the staging directory is renamed to `out`.
With T = 1 the shards are bit for bit those of a single process reading the same files in order; with T
tasks every document is tokenized exactly once, so the multiset of token sequences is the same.
`experiments/tokenize_data.py` is the command-line front-end.
"""

import dataclasses
import itertools
import os
import shutil
import sys
import tempfile
import time

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from apertus_jax.data import sources
from apertus_jax.prep import local_executor
from apertus_jax.prep.pipeline import make_executor
from apertus_jax.prep.steps import MergeShardManifests


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

    Args:
      output_dir: the (staging) directory of the whole set; `MergeShardManifests` lists all parts.
      tokenizer: a `load_tokenizer` spec ("tekken", "sentencepiece:PATH", "hf:PATH").
      source, licence: recorded in the manifest (see `apertus_jax.data.shards.ShardWriter`).
      shard_tokens: start a new shard after this many tokens.
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
        shard_tokens: int = 256 * 1024 * 1024,
        batch_documents: int = 1024,
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
        from apertus_jax.data.shards import ShardWriter
        from apertus_jax.tokenizers import load_tokenizer

        documents = iter(data if data is not None else ())
        first = next(documents, None)
        if first is None:
            return
        tokenizer = load_tokenizer(self.tokenizer_spec)
        out = os.path.join(self.output_dir, "parts", f"{rank:05d}")
        start = time.perf_counter()
        with ShardWriter(
            out,
            tokenizer,
            source=self.source,
            licence=self.licence,
            shard_tokens=self.shard_tokens,
            overwrite=True,
            extra=self.extra,
        ) as writer:
            stream = itertools.chain([first], documents)
            while batch := list(itertools.islice(stream, self.batch_documents)):
                with self.track_time(unit="batch"):
                    before = writer.manifest["tokens"]
                    for doc, ids in zip(batch, tokenizer.encode_batch([d.text for d in batch])):
                        writer.write(
                            [tokenizer.bod_id, *ids, tokenizer.eod_id], doc.id, doc.metadata.get("score")
                        )
                self.stat_update("documents", value=len(batch))
                self.stat_update("tokens", value=writer.manifest["tokens"] - before, unit="batch")
                manifest = writer.manifest
                print(
                    f"task {rank}: {manifest['documents']:,} documents, {manifest['tokens']:,} tokens, "
                    f"{manifest['tokens'] / (time.perf_counter() - start):,.0f} tokens/s",
                    file=sys.stderr,
                )
            if self.reader is not None:
                stats = self.reader.raw_stats
                writer.manifest.update(
                    skipped_empty_documents=stats.skipped_empty,
                    replaced_invalid_utf8=stats.replaced_invalid_utf8,
                    files=stats.files,
                )
        yield from ()


@dataclasses.dataclass
class TokenizeJob:
    """Everything a distributed tokenization run needs (the fields of `experiments/tokenize_data.py`).

    `executor` is a prep executor section (`kind`, `workers`, `skip_completed`, `slurm {...}`, `ray {...}`;
    see configs/prep/demo.py). `logging_dir` None: a temporary directory, removed after a local run.
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
    shard_tokens: int = 256 * 1024 * 1024
    batch_documents: int = 1024
    overwrite: bool = False
    tasks: int = 1
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


def build_executors(job: TokenizeJob) -> dict:
    """The two chained executors `{"tokenize": ..., "merge": ...}`; run `["merge"]` to run both.

    Raises:
      ValueError: unknown executor kind, unknown input kind, no input file, tasks < 1.
      FileNotFoundError: an input path does not exist.
    """
    if job.tasks < 1:
        raise ValueError(f"tasks must be at least 1, got {job.tasks}")
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
    merge = make_executor(
        job.executor,
        [MergeShardManifests(job.staging, publish_to=os.path.abspath(job.out))],
        1,
        os.path.join(logging_dir, "merge"),
        "tokenize-merge",
        depends=first,
    )
    return {"tokenize": first, "merge": merge}


def run_tokenize(job: TokenizeJob) -> dict | None:
    """Runs `job` and returns the merged manifest (None for Slurm/Ray: the jobs were submitted).

    Local runs leave nothing behind on error (the staging directory and temporary logs are removed).
    Raises:
      FileExistsError: `out` exists and not `overwrite`.
      ValueError / FileNotFoundError: see `build_executors`; a bad record; an empty input.
    """
    from apertus_jax.data.shards import load_manifest

    if os.path.exists(job.out) and not job.overwrite:
        raise FileExistsError(f"{job.out} exists; choose a new --out or pass --overwrite")
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
        executors["merge"].run()
        if job.executor["kind"] != "local":
            return None
        return load_manifest(job.out)
    except BaseException:
        shutil.rmtree(job.staging, ignore_errors=True)
        raise
    finally:
        if temporary_logs and job.executor["kind"] == "local":
            shutil.rmtree(job.logging_dir, ignore_errors=True)
