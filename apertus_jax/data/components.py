"""Loading a configured component (`apertus_jax.data.config`) of any kind into a `Component`.

"arrayrecord" shard sets are opened for random access (`shards.ShardSource`); raw kinds ("jsonl",
"parquet", "text"), the vendored "demo" corpus and "seqio" tasks (the optional extra) are read and tokenized
once per process and cached, keyed by the component spec and the tokenizer checksum.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from apertus_jax.data import injection, shards, sources
from apertus_jax.data.documents import Component, tokenize_documents

_RAW_CACHE: dict[str, Component] = {}


def load_component(name: str, spec: dict[str, Any], tokenizer) -> Component:
    """Opens (shard sets) or reads and tokenizes (raw, demo, seqio; cached per process) a component.

    Raises:
      ValueError: an empty source, a shard set from another tokenizer, bad raw records.
      FileNotFoundError: a missing path or shard.
    """
    kind = spec["kind"]
    if kind in injection.KINDS:  # probes and canaries: inserted by the pipeline, not mixed
        return injection.load_component(name, spec, tokenizer)
    if kind == "arrayrecord":
        sets = [shards.ShardSource(path, tokenizer) for path in spec["paths"]]
        documents = sets[0] if len(sets) == 1 else _Concatenated(sets)
        tokens = sum(s.manifest["tokens"] for s in sets)
        count = sum(s.manifest["documents"] for s in sets)
        if count == 0:
            raise ValueError(f"component {name!r}: shard sets {spec['paths']} hold no documents")
        scores = np.concatenate([s.scores() for s in sets]) if spec["order"] == "sorted" else None
        return Component(name, documents, tokens / count, scores)

    key = json.dumps([name, spec, tokenizer.checksum], sort_keys=True)
    if key not in _RAW_CACHE and kind == "seqio":
        from apertus_jax.data import seqio_import  # the optional extra "seqio" (pulls TensorFlow)

        _RAW_CACHE[key] = seqio_import.load_component(name, spec, tokenizer)
    if key not in _RAW_CACHE:
        if kind == "demo":
            from apertus_jax.data.demo_corpus import load_demo_documents

            records = load_demo_documents(split=spec["split"], sources=spec["sources"])
            texts, scores = [r["text"] for r in records], [None] * len(records)
        else:
            stats = sources.RawStats()
            raw = list(
                sources.iter_raw_documents(
                    spec["paths"],
                    kind,
                    stats,
                    text_field=spec["text_field"],
                    id_field=spec["id_field"],
                    score_field=spec["score_field"],
                )
            )
            texts, scores = [d.text for d in raw], [d.score for d in raw]
            if stats.replaced_invalid_utf8:
                logging.warning(
                    "component %r: replaced %d invalid UTF-8 bytes by U+FFFD",
                    name,
                    stats.replaced_invalid_utf8,
                )
        if not texts:
            raise ValueError(f"component {name!r}: no documents in {spec['paths'] or spec['kind']}")
        _RAW_CACHE[key] = tokenize_documents(name, texts, scores, tokenizer)
    return _RAW_CACHE[key]


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
