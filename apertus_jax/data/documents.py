"""A loaded document source (`Component`) and how raw text becomes its documents.

The leaf of the data layer: component loaders (`components`, `seqio.import_tasks`) make Components, the
mixture (`mixture`) and the pipeline read them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np


@dataclasses.dataclass
class Component:
    """A loaded document source: random access to int32 token arrays, their scores, mean length."""

    name: str
    documents: Any  # Sequence-like: len() and [i] -> int32 tokens [L]
    mean_tokens: float
    scores: np.ndarray | None = None  # float64 [N], only for "sorted" order


def tokenize_documents(name: str, texts: Sequence[str], scores: list[float | None], tokenizer) -> Component:
    """`[BoD] + ids + [EoD]` int32 documents of `texts` as a Component (scores None -> NaN)."""
    ids = tokenizer.encode_batch(list(texts))
    documents = [np.array([tokenizer.bod_id, *doc, tokenizer.eod_id], dtype=np.int32) for doc in ids]
    mean_tokens = float(np.mean([len(d) for d in documents]))
    score_array = np.array([np.nan if s is None else s for s in scores], np.float64)
    return Component(name, documents, mean_tokens, score_array)
