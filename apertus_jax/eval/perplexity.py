"""Perplexity and bits per byte on held-out documents, packed and masked exactly as in training.

Documents `<s> text </s>` are packed into rows of T + 1 tokens with the training packer
(`apertus_jax.data.packing.PackedRows`, stride T), and the EoD rules of `apertus_jax.data.masks.document_masks`
decide which predictions count (docs/recipe.md section 2): no attention across documents, positions restarting
after each EoD, "EoD -> next BoD" never scored, padding never scored. Each token of a document after its
BoD (its text tokens and its EoD) is scored exactly once, so a document of n tokens contributes n - 1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import grain
import numpy as np

from apertus_jax.data.masks import document_masks
from apertus_jax.data.packing import PackedRows
from apertus_jax.eval.scoring import TokenLogprobsFn, batched_token_logprobs


@dataclasses.dataclass(frozen=True)
class PerplexityResult:
    """`nll` in nats summed over `num_tokens` scored tokens; `perplexity = exp(nll / num_tokens)`;
    `bits_per_byte = nll / ln 2 / num_bytes` (tokenizer-independent; the EoD predictions are included,
    `num_bytes` counts the UTF-8 bytes of the texts) or None when no byte count was given."""

    num_documents: int
    num_tokens: int
    nll: float
    perplexity: float
    bits_per_byte: float | None

    @property
    def nll_per_token(self) -> float:
        return self.nll / self.num_tokens


def packed_rows(documents: Sequence[np.ndarray], seq_len: int, pad_id: int) -> np.ndarray:
    """All rows `[R, seq_len + 1]` int32 of `documents` in order, as the training packer cuts them."""
    stream = grain.MapDataset.source([(0, i) for i in range(len(documents))])
    return np.stack(list(PackedRows(stream, [list(documents)], seq_len, pad_id)))


def perplexity(
    token_logprobs: TokenLogprobsFn,
    documents: Sequence[np.ndarray],
    *,
    seq_len: int,
    batch_size: int,
    eod_id: int,
    pad_id: int,
    num_bytes: int | None = None,
) -> PerplexityResult:
    """Perplexity of tokenized documents (each `[bod, ..., eod]`, e.g. `tokenizer.encode_document(text)`).

    Args:
      token_logprobs: from `apertus_jax.eval.scoring.make_token_logprobs_fn(model)`.
      documents: int token arrays, each starting with BoD and ending with EoD.
      seq_len: inputs per row (the training `data.seq_len`).
      batch_size: rows per forward pass.
      eod_id, pad_id: the tokenizer's ids.
      num_bytes: total UTF-8 bytes of the texts, for bits per byte.

    Raises:
      ValueError: no documents, or a document that does not end with EoD.
    """
    if not documents:
        raise ValueError("no documents to evaluate perplexity on")
    for i, doc in enumerate(documents):
        if len(doc) < 2 or doc[-1] != eod_id:
            raise ValueError(f"document {i} must be [bod, ..., eod] (use tokenizer.encode_document)")
    rows = packed_rows(documents, seq_len, pad_id)
    # Masks of the T + 1 tokens equal the training masks on the first T (document_masks is causal).
    segment_ids, positions, _ = document_masks(rows, eod_id, pad_id)
    _, _, loss_mask = document_masks(rows[:, :-1], eod_id, pad_id, targets=rows[:, 1:])
    logprobs = batched_token_logprobs(
        token_logprobs,
        {"tokens": rows, "positions": positions, "segment_ids": segment_ids},
        batch_size=batch_size,
        pad_id=pad_id,
    )
    mask = loss_mask.astype(bool)
    nll, count = -float(np.sum(logprobs[mask], dtype=np.float64)), int(mask.sum())
    return PerplexityResult(
        num_documents=len(documents),
        num_tokens=count,
        nll=nll,
        perplexity=math.exp(nll / count),
        bits_per_byte=None if num_bytes is None else nll / math.log(2) / num_bytes,
    )
