"""Whole sequences packed into one trainer row (no sequence is ever split across rows).

A sequence of L ids occupies L - 1 positions of a row of T: inputs `ids[:-1]`, targets `ids[1:]`, its own
segment id (so it attends only to itself), positions 0..L-2, and `loss_mask = trained[1:]` (a position
counts when its TARGET is a trained token). The rest of the row is padding: pad ids, segment 0, position 0,
loss_mask 0 (docs/recipe.md section 2).
"""

from collections.abc import Sequence

import numpy as np


def positions_needed(ids: np.ndarray) -> int:
    """Row positions a sequence of `len(ids)` ids takes (its inputs)."""
    return len(ids) - 1


def pack_row(
    sequences: Sequence[tuple[np.ndarray, np.ndarray]], seq_len: int, pad_id: int
) -> dict[str, np.ndarray]:
    """One row from `(ids int32 [L], trained bool [L])` sequences, segment k + 1 for sequence k.

    Returns:
      int32 `[T]` arrays tokens, targets, positions, segment_ids, loss_mask (T = seq_len).

    Raises:
      ValueError: the sequences need more than `seq_len` positions together, or one has fewer than 2 ids.
    """
    row = {
        "tokens": np.full(seq_len, pad_id, np.int32),
        "targets": np.full(seq_len, pad_id, np.int32),
        "positions": np.zeros(seq_len, np.int32),
        "segment_ids": np.zeros(seq_len, np.int32),
        "loss_mask": np.zeros(seq_len, np.int32),
    }
    start = 0
    for segment, (ids, trained) in enumerate(sequences, 1):
        n = positions_needed(ids)
        if n < 1 or start + n > seq_len:
            raise ValueError(f"sequences of {start + n} positions do not fit a row of {seq_len}")
        span = slice(start, start + n)
        row["tokens"][span], row["targets"][span] = ids[:-1], ids[1:]
        row["positions"][span] = np.arange(n)
        row["segment_ids"][span] = segment
        row["loss_mask"][span] = trained[1:]
        start += n
    return row


def stack_rows(rows: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """`[B, ...]` arrays of the rows' keys."""
    return {key: np.stack([r[key] for r in rows]) for key in rows[0]}
