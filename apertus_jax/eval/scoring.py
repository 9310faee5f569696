"""Log-likelihoods of continuations given contexts, batched and packed (the core of every evaluation).

A request is `(context_ids, continuation_ids)`; its score is `log p(continuation | context)` token by token.
Requests are packed several to a row of fixed length (each its own segment, positions restarting at 0, so
the model's segment masking keeps them apart: docs/recipe.md section 2), rows are batched to a fixed shape (one
compilation), and padding rows/slots have segment id 0. Packing and batching never change a score.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from apertus_jax.train.loss import chunked_token_logprobs

# (tokens[B,T], positions[B,T], segment_ids[B,T]) -> logprobs[B,T-1] float32:
# logprobs[b, t] = log p(tokens[b, t + 1] | tokens of its segment up to t).
TokenLogprobsFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
Request = tuple[Sequence[int], Sequence[int]]


def make_token_logprobs_fn(model: nnx.Module) -> TokenLogprobsFn:
    """A jitted `(tokens, positions, segment_ids) -> logprobs[B, T-1]` for `model` (an `Apertus`).

    The log-softmax runs in float32 whatever the compute dtype, chunk by chunk over the sequence
    (`apertus_jax.train.loss.chunked_token_logprobs`), so `[B, T, vocab]` logits never exist at once. Entries
    whose next token belongs to another segment are meaningless; `continuation_logprobs` never reads them.
    """
    graphdef, state = nnx.split(model)

    @jax.jit
    def token_logprobs(state, tokens_BxT, positions_BxT, segment_ids_BxT):
        model = nnx.merge(graphdef, state)
        hidden_BxTxD = model.final_hidden(tokens_BxT, positions_BxT, segment_ids_BxT)
        return chunked_token_logprobs(hidden_BxTxD[:, :-1], model.output_weights(), tokens_BxT[:, 1:])

    return lambda tokens, positions, segment_ids: np.asarray(
        token_logprobs(state, jnp.asarray(tokens), jnp.asarray(positions), jnp.asarray(segment_ids))
    )


def _truncate(context: Sequence[int], continuation: Sequence[int], seq_len: int) -> np.ndarray:
    """`context + continuation`, dropping context tokens from the left to fit `seq_len`."""
    if not continuation:
        raise ValueError("empty continuation: a request needs at least one continuation token to score")
    if len(continuation) >= seq_len:
        raise ValueError(
            f"continuation of {len(continuation)} tokens does not fit seq_len={seq_len} with at "
            "least one context token; raise seq_len or shorten the continuation"
        )
    if not context:
        raise ValueError("empty context: start every context with the BoD token")
    keep = min(len(context), seq_len - len(continuation))
    return np.asarray([*context[len(context) - keep :], *continuation], dtype=np.int32)


def pack_requests(
    requests: Sequence[Request], seq_len: int, pad_id: int
) -> tuple[dict[str, np.ndarray], list[tuple[int, int, int]]]:
    """Packs requests into rows of `seq_len` tokens (longest first, first fit).

    Args:
      requests: `(context_ids, continuation_ids)` pairs; contexts longer than the row are cut on the left.
      seq_len: tokens per row.
      pad_id: id of unused slots (segment 0).

    Returns:
      `(rows, spans)`: rows is a dict of int32 `[R, seq_len]` arrays `tokens`, `positions`, `segment_ids`;
      `spans[i] = (row, start, stop)` locates request i's continuation logprobs as
      `logprobs[row, start:stop]` (logprobs as in `make_token_logprobs_fn`).

    Raises:
      ValueError: an empty context or continuation, or a continuation that leaves no room for context.
    """
    sequences = [_truncate(c, x, seq_len) for c, x in requests]
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
    fill: list[int] = []  # used slots per row
    placement = [(0, 0)] * len(sequences)
    for i in order:
        length = len(sequences[i])
        row = next((r for r, used in enumerate(fill) if used + length <= seq_len), None)
        if row is None:
            row = len(fill)
            fill.append(0)
        placement[i] = (row, fill[row])
        fill[row] += length
    rows = {
        "tokens": np.full((len(fill), seq_len), pad_id, np.int32),
        "positions": np.zeros((len(fill), seq_len), np.int32),
        "segment_ids": np.zeros((len(fill), seq_len), np.int32),
    }
    spans = []
    for i, (row, offset) in enumerate(placement):
        sequence, stop = sequences[i], offset + len(sequences[i])
        rows["tokens"][row, offset:stop] = sequence
        rows["positions"][row, offset:stop] = np.arange(len(sequence))
        rows["segment_ids"][row, offset:stop] = 1 + int(rows["segment_ids"][row].max())
        n_continuation = len(requests[i][1])
        spans.append((row, stop - n_continuation - 1, stop - 1))
    return rows, spans


def continuation_logprobs(
    token_logprobs: TokenLogprobsFn,
    requests: Sequence[Request],
    *,
    seq_len: int,
    batch_size: int,
    pad_id: int,
) -> list[np.ndarray]:
    """Per-token `log p(continuation_t | context, continuation_<t)` of every request, in request order.

    Args:
      token_logprobs: from `make_token_logprobs_fn`.
      requests: `(context_ids, continuation_ids)`; contexts should start with BoD as in training.
      seq_len: row length (<= the model's trained context); longer contexts are cut on the left.
      batch_size: rows per forward pass; the last batch is padded with empty rows (fixed shapes).
      pad_id: the tokenizer's pad id.

    Returns:
      One float32 array `[len(continuation_ids)]` (natural log) per request.
    """
    rows, spans = pack_requests(requests, seq_len, pad_id)
    logprobs = batched_token_logprobs(token_logprobs, rows, batch_size=batch_size, pad_id=pad_id)
    return [logprobs[row, start:stop] for row, start, stop in spans]


def batched_token_logprobs(
    token_logprobs: TokenLogprobsFn, rows: dict[str, np.ndarray], *, batch_size: int, pad_id: int
) -> np.ndarray:
    """`token_logprobs` over rows `{"tokens", "positions", "segment_ids"}` (int32 `[R, T]`) in batches of
    `batch_size` rows, the last one filled up with padding rows so every call has the same shape (one
    compilation). Returns float32 `[R, T - 1]`.

    Raises:
      ValueError: batch_size < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    num_rows, length = rows["tokens"].shape
    padded = -(-num_rows // batch_size) * batch_size
    rows = {
        k: np.pad(rows[k], ((0, padded - num_rows), (0, 0)), constant_values=pad_id if k == "tokens" else 0)
        for k in ("tokens", "positions", "segment_ids")
    }
    batches = [
        token_logprobs(*(rows[k][b : b + batch_size] for k in ("tokens", "positions", "segment_ids")))
        for b in range(0, padded, batch_size)
    ]
    return np.concatenate(batches)[:num_rows] if batches else np.zeros((0, length - 1), np.float32)
