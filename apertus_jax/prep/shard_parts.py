"""One task's part of an ArrayRecord shard set: the one way prep writes training shards.

Both prep paths write through `PartWriter`: the select stage of the preparation pipeline
(`steps.WriteShards`, `experiments/prepare_data.py`) and distributed tokenization (`tokenize.TokenizeShards`,
`experiments/tokenize_data.py`). Datatrove task `rank` writes the shard set `<output_dir>/parts/<rank:05d>/`
with `apertus_jax.data.shards.ShardWriter` (the training format); `steps.MergeShardManifests` then lists
every part in one manifest at `output_dir`. So both paths tokenize alike (one `encode_batch` call per batch,
`[BoD] + ids + [EoD]` per document) and cut shards by one rule: a part starts a new shard before a document
when its current shard holds at least `shard_tokens` tokens (`SHARD_TOKENS` unless configured).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from apertus_jax.data.shards import SHARD_TOKENS, ShardWriter
from apertus_jax.tokenizers import load_tokenizer

if TYPE_CHECKING:  # datatrove is imported by the steps
    from datatrove.data import Document

BATCH_DOCUMENTS = 1024
"""Documents per `encode_batch` call (the tokenizers encode a batch on several threads)."""


def batches(data: Iterable[Document] | None, size: int = BATCH_DOCUMENTS) -> Iterator[list[Document]] | None:
    """`data` in lists of `size` documents (the last may be shorter), or None when `data` has no document.

    A step calls it before opening a `PartWriter`, so a task without documents writes no part.

    Raises:
      ValueError: `size` < 1.
    """
    if size < 1:
        raise ValueError(f"batch size must be at least 1 document, got {size}")
    documents = iter(data if data is not None else ())
    stream = iter(lambda: list(itertools.islice(documents, size)), [])
    first = next(stream, None)
    return None if first is None else itertools.chain([first], stream)


class PartWriter:
    """Tokenizes task `rank`'s documents into the shard set `<output_dir>/parts/<rank:05d>/`, atomically.

    Use as a context manager (`with PartWriter(...) as part: part.write_batch(documents)`): the part appears
    when the block exits without an error and replaces an earlier part of the same task (a re-run task).

    Args:
      output_dir: the directory of the whole set (or its staging directory).
      rank: the datatrove task.
      tokenizer: a `load_tokenizer` spec ("tekken", "sentencepiece:PATH", "hf:PATH").
      source, licence: recorded in the manifest (see `apertus_jax.data.shards.ShardWriter`).
      score_key: the metadata key of a record's score (float); None or an absent key: no score.
      shard_tokens: shard size in tokens (`SHARD_TOKENS`).
      extra: more manifest fields (e.g. inputs, kind).

    Raises:
      ValueError: an unknown tokenizer spec or a tokenizer file its class rejects (`load_tokenizer`).
      FileNotFoundError: the tokenizer file does not exist.
    """

    def __init__(
        self,
        output_dir: str,
        rank: int,
        tokenizer: str,
        *,
        source: str,
        licence: str,
        score_key: str | None,
        shard_tokens: int = SHARD_TOKENS,
        extra: dict | None = None,
    ):
        self.tokenizer = load_tokenizer(tokenizer)
        self.score_key = score_key
        self._writer = ShardWriter(
            os.path.join(output_dir, "parts", f"{rank:05d}"),
            self.tokenizer,
            source=source,
            licence=licence,
            shard_tokens=shard_tokens,
            overwrite=True,
            extra=extra,
        )

    @property
    def manifest(self) -> dict:
        """The part's manifest so far (documents, tokens, shards); fields set in the block are written."""
        return self._writer.manifest

    def __enter__(self) -> PartWriter:
        self._writer.__enter__()
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self._writer.__exit__(exc_type, exc, traceback)

    def write_batch(self, documents: Sequence[Document]) -> int:
        """Tokenizes `documents` with one `encode_batch` call and appends them in order.

        Returns the tokens written (BoD and EoD included).

        Raises:
          ValueError: a token id outside the tokenizer's vocabulary (see `ShardWriter.write`).
        """
        before = self.manifest["tokens"]
        bod, eod = self.tokenizer.bod_id, self.tokenizer.eod_id
        for doc, ids in zip(documents, self.tokenizer.encode_batch([d.text for d in documents])):
            score = doc.metadata.get(self.score_key) if self.score_key is not None else None
            self._writer.write([bod, *ids, eod], doc.id, score)
        return self.manifest["tokens"] - before
