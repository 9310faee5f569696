"""Raw documents from JSONL, Parquet and plain-text files (tokenized later, on the fly or by the CLI).

Formats (a path is a file or a directory searched recursively, in sorted order):
- "jsonl": `*.jsonl`, `*.jsonl.gz`, `*.json` (one JSON object per line; text in `text_field`, optional
  `id_field` and `score_field`);
- "parquet": `*.parquet` (same fields as columns);
- "text": `*.txt`, `*.txt.gz`, `*.md` (each file one document, its relative path the id).

Bytes that are not valid UTF-8 are replaced by U+FFFD and counted in `RawStats.replaced_invalid_utf8`,
never a crash; empty (whitespace-only) documents are skipped and counted.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import pathlib
from collections.abc import Iterator, Sequence

RAW_KINDS = ("jsonl", "parquet", "text")
_SUFFIXES = {
    "jsonl": (".jsonl", ".jsonl.gz", ".json"),
    "parquet": (".parquet",),
    "text": (".txt", ".txt.gz", ".md"),
}


@dataclasses.dataclass
class RawDocument:
    """One raw document: its text, an id and an optional quality score (for "sorted" curricula)."""

    text: str
    doc_id: str
    score: float | None = None


@dataclasses.dataclass
class RawStats:
    """Counts gathered while reading: files, documents, skipped empty ones, replaced invalid bytes."""

    files: int = 0
    documents: int = 0
    skipped_empty: int = 0
    replaced_invalid_utf8: int = 0


def list_files(paths: Sequence[str | os.PathLike], kind: str) -> list[pathlib.Path]:
    """The input files of `kind` under `paths`, sorted within each directory.

    Raises:
      ValueError: an unknown kind, or no matching file.
      FileNotFoundError: a path does not exist.
    """
    if kind not in RAW_KINDS:
        raise ValueError(f"raw document kind {kind!r} is not one of {RAW_KINDS}")
    files = []
    for path in map(pathlib.Path, paths):
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(_SUFFIXES[kind]))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    if not files:
        raise ValueError(f"no {kind} files ({', '.join(_SUFFIXES[kind])}) under {[str(p) for p in paths]}")
    return files


def decode_utf8(data: bytes, stats: RawStats) -> str:
    """UTF-8 text of `data`; invalid bytes become U+FFFD and are counted in `stats`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        stats.replaced_invalid_utf8 += text.count("\ufffd") - data.count("\ufffd".encode())
        return text


def _read_bytes(path: pathlib.Path) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return f.read()


def _jsonl_records(path: pathlib.Path, stats: RawStats) -> Iterator[dict]:
    for line_number, line in enumerate(decode_utf8(_read_bytes(path), stats).splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{line_number}: not a JSON object ({error.msg})") from None


def _parquet_records(path: pathlib.Path, fields: Sequence[str]) -> Iterator[dict]:
    import pyarrow.parquet as pq  # optional dependency (extra "prep")

    table = pq.read_table(path)
    columns = [f for f in fields if f in table.column_names]
    yield from table.select(columns).to_pylist()


def iter_raw_documents(
    paths: Sequence[str | os.PathLike],
    kind: str,
    stats: RawStats | None = None,
    *,
    text_field: str = "text",
    id_field: str = "id",
    score_field: str | None = None,
) -> Iterator[RawDocument]:
    """Yields the non-empty documents under `paths` in file order (see the module docstring).

    Raises:
      ValueError: unknown kind, no input files, a record without `text_field`, a malformed JSON line.
      FileNotFoundError: a path does not exist.
    """
    stats = stats if stats is not None else RawStats()
    for path in list_files(paths, kind):
        stats.files += 1
        if kind == "text":
            records = [{text_field: decode_utf8(_read_bytes(path), stats), id_field: str(path)}]
        elif kind == "jsonl":
            records = _jsonl_records(path, stats)
        else:
            records = _parquet_records(path, [text_field, id_field] + ([score_field] if score_field else []))
        for index, record in enumerate(records):
            text = record.get(text_field)
            if text is None:
                raise ValueError(f"{path}: record {index} has no {text_field!r} field (set text_field)")
            if isinstance(text, bytes):
                text = decode_utf8(text, stats)
            if not text.strip():
                stats.skipped_empty += 1
                continue
            stats.documents += 1
            score = record.get(score_field) if score_field else None
            yield RawDocument(
                text,
                str(record.get(id_field, f"{path.name}:{index}")),
                None if score is None else float(score),
            )
