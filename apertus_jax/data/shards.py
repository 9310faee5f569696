"""ArrayRecord shards of pre-tokenized documents with a JSON manifest (the production format).

A shard set is a directory:

    manifest.json                   format, tokenizer (name, sha256, vocab size, special ids), source,
                                    licence, documents, tokens, and per shard: path, documents, tokens, bytes
    shard-00000.array_record ...    one record per document

A record is `uint32 LE n` + `n` bytes of UTF-8 JSON metadata (`{"id": str, "score": float}`, either may be
absent) + the document's tokens as int32 little-endian (`[BoD] + ids + [EoD]`). No pickle anywhere.

`ShardWriter` writes a set atomically (into a hidden temporary directory renamed into place on success;
on any error nothing is left behind). `ShardSource` reads a set as a Grain random-access source after
checking the manifest against the tokenizer the pipeline uses (Grain's `MapDataset.source` takes it).
"""

from __future__ import annotations

import bisect
import datetime
import json
import os
import pathlib
import shutil
from typing import Any

import numpy as np
from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter

from apertus_jax.data.run_tokenizer import check_tokenized_with

MANIFEST = "manifest.json"
FORMAT = "apertus_jax.tokenized_documents/v1"
RECORD_LAYOUT = "uint32 LE header length + UTF-8 JSON header {id, score} + int32 LE tokens"


def encode_record(tokens: np.ndarray, doc_id: str | None = None, score: float | None = None) -> bytes:
    """One document as record bytes (layout in the module docstring)."""
    meta = {key: value for key, value in (("id", doc_id), ("score", score)) if value is not None}
    header = json.dumps(meta, separators=(",", ":")).encode() if meta else b""
    body = np.asarray(tokens, dtype="<i4").tobytes()
    return len(header).to_bytes(4, "little") + header + body


def decode_tokens(record: bytes) -> np.ndarray:
    """The int32 tokens `[L]` of a record (read-only view of the record bytes)."""
    header_length = int.from_bytes(record[:4], "little")
    return np.frombuffer(record, dtype="<i4", offset=4 + header_length)


def decode_metadata(record: bytes) -> dict[str, Any]:
    """The record's metadata dict (`id`, `score` when present)."""
    header_length = int.from_bytes(record[:4], "little")
    return json.loads(record[4 : 4 + header_length]) if header_length else {}


def tokenizer_info(tokenizer) -> dict[str, Any]:
    """What a manifest records about the tokenizer that produced its shards."""
    return {
        "name": tokenizer.name,
        "checksum": tokenizer.checksum,
        "vocab_size": tokenizer.vocab_size,
        "bod_id": tokenizer.bod_id,
        "eod_id": tokenizer.eod_id,
        "pad_id": tokenizer.pad_id,
    }


SHARD_TOKENS = 256 * 1024 * 1024
"""Shard size in tokens (BoD and EoD included; int32, so ~1 GiB of token data per full shard).

A shard is closed once it holds at least this many tokens, so every shard of a part but its last holds
between `SHARD_TOKENS` and `SHARD_TOKENS` + (its last document's tokens - 1). The default of
`ShardWriter`, of prep's `config.shards.shard_tokens` (prepare_data) and of `--shard_tokens` (tokenize_data)."""


class ShardWriter:
    """Writes documents into a new shard set at `out_dir`, atomically.

    Use as a context manager: `with ShardWriter(...) as writer: writer.write(tokens, doc_id, score)`.
    The set appears at `out_dir` only when the block exits without an error.

    Args:
      out_dir: the directory to create; it must not exist unless `overwrite`.
      tokenizer: the tokenizer that produced the tokens (recorded in the manifest; ids are checked
        against its vocab size).
      source: the name of the data source (e.g. "fineweb2-deu").
      licence: the licence of the source text (e.g. "ODC-By-1.0").
      shard_tokens: start a new shard after this many tokens (`SHARD_TOKENS`).
      extra: more manifest fields (e.g. inputs, counts of replaced bytes).

    Raises:
      FileExistsError: `out_dir` exists and `overwrite` is False.
      ValueError: a token id outside [0, vocab_size), an empty document, or no documents at all.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        tokenizer,
        *,
        source: str,
        licence: str,
        shard_tokens: int = SHARD_TOKENS,
        overwrite: bool = False,
        extra: dict[str, Any] | None = None,
    ):
        self.out_dir = pathlib.Path(out_dir)
        if self.out_dir.exists() and not overwrite:
            raise FileExistsError(f"{self.out_dir} exists; choose a new --out or pass --overwrite")
        self.tmp_dir = self.out_dir.parent / f".{self.out_dir.name}.tmp-{os.getpid()}"
        self.tokenizer = tokenizer
        self.shard_tokens = shard_tokens
        self.manifest: dict[str, Any] = {
            "format": FORMAT,
            "record_layout": RECORD_LAYOUT,
            "tokenizer": tokenizer_info(tokenizer),
            "source": source,
            "licence": licence,
            "documents": 0,
            "tokens": 0,
            "shards": [],
            **(extra or {}),
        }
        self._writer: ArrayRecordWriter | None = None
        self.overwrite = overwrite

    def __enter__(self) -> ShardWriter:
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        self.tmp_dir.mkdir(parents=True)
        return self

    def write(self, tokens: np.ndarray, doc_id: str | None = None, score: float | None = None) -> None:
        """Appends one document (`[BoD] + ids + [EoD]`, int32 `[L]`)."""
        tokens = np.asarray(tokens)
        if tokens.size == 0:
            raise ValueError(f"document {doc_id!r} has no tokens; skip empty documents before writing")
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= self.tokenizer.vocab_size:
            bad = high if high >= self.tokenizer.vocab_size else low
            raise ValueError(
                f"document {doc_id!r}: token id {bad} outside [0, {self.tokenizer.vocab_size}) of "
                f"tokenizer {self.tokenizer.name}; the ids come from another tokenizer"
            )
        shards = self.manifest["shards"]
        if self._writer is None or shards[-1]["tokens"] >= self.shard_tokens:
            self._start_shard()
        self._writer.write(encode_record(tokens, doc_id, score))
        shards[-1]["documents"] += 1
        shards[-1]["tokens"] += int(tokens.size)
        self.manifest["documents"] += 1
        self.manifest["tokens"] += int(tokens.size)

    def _start_shard(self) -> None:
        self._close_shard()
        name = f"shard-{len(self.manifest['shards']):05d}.array_record"
        # One record per chunk, uncompressed (like Megatron's .bin files): a shuffled read of one
        # document decodes nothing else; zstd would save ~30% of disk for ~20% more read time.
        self._writer = ArrayRecordWriter(str(self.tmp_dir / name), "group_size:1,uncompressed")
        self.manifest["shards"].append({"path": name, "documents": 0, "tokens": 0})

    def _close_shard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            shard = self.manifest["shards"][-1]
            shard["bytes"] = (self.tmp_dir / shard["path"]).stat().st_size

    def __exit__(self, exc_type, exc, traceback) -> None:
        try:
            self._close_shard()
            if exc_type is None:
                if self.manifest["documents"] == 0:
                    raise ValueError(f"no documents to write to {self.out_dir}; the input is empty")
                self.manifest["created"] = datetime.datetime.now(datetime.UTC).isoformat()
                (self.tmp_dir / MANIFEST).write_text(json.dumps(self.manifest, indent=2) + "\n")
                if self.out_dir.exists():  # overwrite: move the old set aside, then swap
                    old = self.tmp_dir.with_name(self.tmp_dir.name + ".old")
                    self.out_dir.rename(old)
                    self.tmp_dir.rename(self.out_dir)
                    shutil.rmtree(old)
                else:
                    self.tmp_dir.rename(self.out_dir)
        finally:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)


def load_manifest(path: str | os.PathLike, tokenizer=None) -> dict[str, Any]:
    """Reads and checks a shard set's manifest (`path` = the set directory or its manifest.json).

    Adds `"directory"` (absolute). With `tokenizer`, checks that the shards were written by it.

    Raises:
      FileNotFoundError: `path` does not exist, a folder without a manifest, or a shard it lists is missing.
      ValueError: `path` is a file other than a manifest (e.g. the raw text), an unknown format, a shard whose
        size differs from the manifest (truncated or replaced); `run_tokenizer.TokenizerMismatchError`: the
        shards were tokenized with another tokenizer than `tokenizer`.
    """
    path = pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist; write a shard set there with `python -m experiments.tokenize_data "
            f"--out={path}`, or pass the folder it wrote"
        )
    if path.is_file() and path.suffix != ".json":
        raise ValueError(
            f"{path} is a file, not a shard folder; tokenize it into one with `python -m "
            f"experiments.tokenize_data --input={path} --out=FOLDER` and pass FOLDER"
        )
    manifest_path = path / MANIFEST if path.is_dir() else path
    if not manifest_path.is_file():
        raise FileNotFoundError(
            f"{manifest_path}: no shard manifest; write shards with `python -m experiments.tokenize_data`"
        )
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_path}: format {manifest.get('format')!r} is not {FORMAT!r}")
    directory = manifest_path.parent.resolve()
    for shard in manifest["shards"]:
        shard_path = directory / shard["path"]
        if not shard_path.is_file():
            raise FileNotFoundError(
                f"{shard_path}: shard listed in {manifest_path} is missing; restore it or re-run "
                "experiments.tokenize_data"
            )
        if shard_path.stat().st_size != shard["bytes"]:
            raise ValueError(
                f"{shard_path}: {shard_path.stat().st_size} bytes, manifest says {shard['bytes']}; "
                "the shard is truncated or from another run, re-run experiments.tokenize_data"
            )
    if tokenizer is not None:
        check_tokenized_with(str(path), manifest["tokenizer"], tokenizer)
    manifest["directory"] = str(directory)
    return manifest


class ShardSource:
    """A checked shard set as a random-access source of int32 token arrays `[L]` (Grain source protocol).

    Reads records with array_record's `ArrayRecordReader.read(i, i + 1)`, one lazily opened reader per
    shard: ~3 us per document, against ~24 us through `grain.sources.ArrayRecordDataSource` (its batched
    read path and per-read tracing dominate the pipeline's time on short documents).

    Args:
      path: the shard set directory (or its manifest.json).
      tokenizer: the pipeline's tokenizer (checksum and vocab size are checked).

    Raises:
      FileNotFoundError / ValueError: see `load_manifest`; ValueError on opening a shard whose record count
        differs from the manifest, or on reading a record with a token id outside [0, vocab_size).
    """

    def __init__(self, path: str | os.PathLike, tokenizer):
        self.manifest = load_manifest(path, tokenizer)
        self.vocab_size = tokenizer.vocab_size
        self._paths = [os.path.join(self.manifest["directory"], s["path"]) for s in self.manifest["shards"]]
        self._starts = np.cumsum([0] + [s["documents"] for s in self.manifest["shards"]]).tolist()
        self._readers: list[ArrayRecordReader | None] = [None] * len(self._paths)

    def __len__(self) -> int:
        return self._starts[-1]

    def _record(self, index: int) -> bytes:
        if not 0 <= index < len(self):
            raise IndexError(f"record {index} outside [0, {len(self)})")
        shard = bisect.bisect_right(self._starts, index) - 1
        reader = self._readers[shard]
        if reader is None:
            reader = ArrayRecordReader(self._paths[shard], "readahead_buffer_size:0")
            expected = self.manifest["shards"][shard]["documents"]
            if reader.num_records() != expected:
                raise ValueError(
                    f"{self._paths[shard]}: {reader.num_records()} records, manifest says "
                    f"{expected}; re-run experiments.tokenize_data"
                )
            self._readers[shard] = reader
        position = index - self._starts[shard]
        return reader.read(position, position + 1)[0]

    def __getitem__(self, index: int) -> np.ndarray:
        tokens = decode_tokens(self._record(index))
        # Viewed as uint32, negative ids are huge: one reduction checks both ends.
        if tokens.size and tokens.view(np.uint32).max() >= self.vocab_size:
            raise ValueError(
                f"{self.manifest['directory']} record {index}: token id outside [0, {self.vocab_size}); "
                "the shard is corrupt or from another tokenizer, re-run experiments.tokenize_data"
            )
        return tokens

    def scores(self) -> np.ndarray:
        """float64 `[N]` document scores from the record headers (NaN where absent); reads every record."""
        return np.array(
            [decode_metadata(self._record(i)).get("score", np.nan) for i in range(len(self))], np.float64
        )

    def __repr__(self) -> str:
        return f"ShardSource({self.manifest['directory']!r}, documents={len(self)})"
