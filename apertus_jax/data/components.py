"""The built-in document kinds (`apertus_jax.data.kinds`) and how each loads into a `Component`.

- "arrayrecord": shard sets written by `experiments.tokenize_data` / `experiments.prepare_data`, opened for
  random access (`shards.ShardSource`);
- "jsonl" | "parquet" | "text": raw files (`sources`), tokenized on the fly;
- "demo": the vendored demo corpus (`demo_corpus`);
- "seqio": a registered seqio Task or Mixture (`seqio.import_tasks`, the optional extra "seqio").

Raw, demo and seqio components are read and tokenized once per process and cached, keyed by the spec and the
tokenizer checksum.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from apertus_jax.data import demo_corpus, provenance, shards, sources
from apertus_jax.data.documents import Component, tokenize_documents
from apertus_jax.data.kinds import DocumentSpec, check_paths, paths_tuple, register_kind

_TOKENIZED: dict[str, Component] = {}


def _cached(name: str, spec: DocumentSpec, tokenizer, read) -> Component:
    """`read()` -> (texts, scores), tokenized once per process for (name, spec, tokenizer)."""
    key = json.dumps([name, spec.to_dict(), tokenizer.checksum], sort_keys=True)
    if key not in _TOKENIZED:
        texts, scores = read()
        if not texts:
            raise ValueError(f"component {name!r}: no documents in {getattr(spec, 'paths', spec.kind)}")
        _TOKENIZED[key] = tokenize_documents(name, texts, scores, tokenizer)
    return _TOKENIZED[key]


@register_kind
@dataclasses.dataclass(frozen=True)
class ArrayRecordSpec(DocumentSpec):
    """Pre-tokenized shard sets: `paths` are shard-set directories (their manifests name the tokenizer)."""

    kind: ClassVar[str] = "arrayrecord"
    paths: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "paths", paths_tuple(self.paths))
        check_paths(self.paths, self.kind)
        super().__post_init__()

    def load(self, name: str, tokenizer) -> Component:
        sets = [shards.ShardSource(path, tokenizer) for path in self.paths]
        documents = sets[0] if len(sets) == 1 else _Concatenated(sets)
        tokens = sum(s.manifest["tokens"] for s in sets)
        count = sum(s.manifest["documents"] for s in sets)
        if count == 0:
            raise ValueError(f"component {name!r}: shard sets {list(self.paths)} hold no documents")
        scores = np.concatenate([s.scores() for s in sets]) if self.order == "sorted" else None
        return Component(name, documents, tokens / count, scores)

    def check_inputs(self) -> None:
        for path in self.paths:
            shards.load_manifest(path)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "shard_sets": [provenance.shard_set_record(p) for p in self.paths]}


@dataclasses.dataclass(frozen=True)
class RawSpec(DocumentSpec):
    """Raw documents under `paths` (files or directories), text in `text_field`; tokenized on the fly."""

    scored: ClassVar[bool] = True
    paths: tuple[str, ...] = ()
    text_field: str = "text"
    id_field: str = "id"
    score_field: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "paths", paths_tuple(self.paths))
        check_paths(self.paths, self.kind)
        super().__post_init__()

    def read(self, paths: Sequence[str], name: str) -> tuple[list[str], list[float | None]]:
        """(texts, scores) of the raw documents under `paths`, read with this spec's kind and fields."""
        stats = sources.RawStats()
        raw = list(
            sources.iter_raw_documents(
                paths,
                self.kind,
                stats,
                text_field=self.text_field,
                id_field=self.id_field,
                score_field=self.score_field,
            )
        )
        if stats.replaced_invalid_utf8:
            logging.warning(
                "component %r: replaced %d invalid UTF-8 bytes by U+FFFD", name, stats.replaced_invalid_utf8
            )
        return [d.text for d in raw], [d.score for d in raw]

    def load(self, name: str, tokenizer) -> Component:
        return _cached(name, self, tokenizer, lambda: self.read(self.paths, name))

    def heldout_texts(self, path: str | None) -> list[str] | None:
        return None if path is None else self.read([path], f"held-out {path}")[0]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "paths": list(self.paths), "licence": None}

    def check_inputs(self) -> None:
        sources.list_files(self.paths, self.kind)


@register_kind
@dataclasses.dataclass(frozen=True)
class JsonlSpec(RawSpec):
    kind: ClassVar[str] = "jsonl"


@register_kind
@dataclasses.dataclass(frozen=True)
class ParquetSpec(RawSpec):
    kind: ClassVar[str] = "parquet"


@register_kind
@dataclasses.dataclass(frozen=True)
class TextSpec(RawSpec):
    kind: ClassVar[str] = "text"


@register_kind
@dataclasses.dataclass(frozen=True)
class DemoSpec(DocumentSpec):
    """The vendored demo corpus: `split` "train", "heldout" or "unseen_languages", `sources` None (all) or a
    subset of ("udhr", "german_prose"). Its held-out set is the corpus's held-out split of the same sources
    (text of the training languages); with "udhr", its UDHR translations held out whole are its
    unseen-language set (`apertus_jax.data.demo_corpus.load_demo_documents`)."""

    kind: ClassVar[str] = "demo"
    split: str = "train"
    sources: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.sources is not None:
            object.__setattr__(self, "sources", tuple(self.sources))
        demo_corpus.check_selection(self.split, self._sources())
        super().__post_init__()

    def _sources(self) -> list[str] | None:
        return None if self.sources is None else list(self.sources)

    def load(self, name: str, tokenizer) -> Component:
        def read():
            records = demo_corpus.load_demo_documents(split=self.split, sources=self._sources())
            return [r["text"] for r in records], [None] * len(records)

        return _cached(name, self, tokenizer, read)

    def heldout_texts(self, path: str | None) -> list[str] | None:
        return [d["text"] for d in demo_corpus.load_demo_documents("heldout", self._sources())]

    def unseen_language_texts(self) -> list[str] | None:
        texts = [d["text"] for d in demo_corpus.load_demo_documents("unseen_languages", self._sources())]
        return texts or None

    def describe(self) -> dict[str, Any]:
        return provenance.demo_record(self.split, self._sources())


@register_kind
@dataclasses.dataclass(frozen=True)
class SeqioSpec(DocumentSpec):
    """A registered seqio Task or Mixture (`apertus_jax.data.seqio.import_tasks`): `task`, `split`, `feature`
    (text or ids of the same tokenizer), optional numeric `score_field` for "sorted" order."""

    kind: ClassVar[str] = "seqio"
    scored: ClassVar[bool] = True
    task: str = ""
    split: str = "train"
    feature: str = "targets"
    score_field: str | None = None

    def __post_init__(self):
        if not isinstance(self.task, str) or not self.task:
            raise ValueError("task must name a registered seqio Task or Mixture")
        super().__post_init__()

    def load(self, name: str, tokenizer) -> Component:
        key = json.dumps([name, self.to_dict(), tokenizer.checksum], sort_keys=True)
        if key not in _TOKENIZED:
            from apertus_jax.data.seqio import (
                import_tasks as seqio_import,  # the optional extra "seqio" (pulls TensorFlow)
            )

            _TOKENIZED[key] = seqio_import.load_component(name, self, tokenizer)
        return _TOKENIZED[key]

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "task": self.task, "licence": None}


class _Concatenated:
    """Several shard sets as one random-access sequence."""

    def __init__(self, parts: Sequence[Any]):
        self.parts = list(parts)
        self.starts = np.cumsum([0] + [len(p) for p in self.parts])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, index: int) -> np.ndarray:
        part = int(np.searchsorted(self.starts, index, side="right")) - 1
        return self.parts[part][index - int(self.starts[part])]
