"""EoD-based document masks of a packed row (docs/recipe.md section 2, the Apertus loader rules).

A packed row holds several `<s> ... </s>` documents back to back. From the input tokens alone we derive
which document each token belongs to (`segment_ids`), where it sits inside that document (`positions`)
and whether its next-token prediction counts in the loss (`loss_mask`):

- a token after an EoD cannot attend to anything up to and including that EoD: the EoD closes its
  segment, the next token opens a new one;
- positions restart at 0 after each EoD (and at the start of every row);
- the loss is masked where the INPUT token is EoD, so "EoD -> next document's BoD" is never a target,
  while the EoD itself stays the target of the token before it;
- padding attends nowhere (segment 0, position 0) and is never a target.
"""

from __future__ import annotations

import numpy as np


def document_masks(
    tokens: np.ndarray,
    eod_id: int,
    pad_id: int | None = None,
    targets: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segment ids, positions and loss mask of packed input tokens.

    Args:
      tokens: int array `[..., T]` of input token ids (the row without its last token).
      eod_id: the end-of-document id (tekken: 2).
      pad_id: the padding id (tekken: 3), or None when rows hold no padding. A pad id equal to `eod_id`
        (tokenizers without a pad token, e.g. Llama-3 or Qwen `tokenizer.json` files) cannot be told
        apart from a real EoD, so it is ignored: trailing padding then follows the EoD rules (each pad
        its own one-token segment, never a target) and real EoDs stay targets.
      targets: optional int array `[..., T]` of next tokens; a pad target is masked too. Without it a pad
        target can only follow an EoD input (padding trails complete documents), which is masked anyway.

    Returns:
      `(segment_ids, positions, loss_mask)`, each int32 `[..., T]`: segment ids count documents from 1 in
      every row (0 = padding), positions restart at 0 after each EoD, loss_mask is 1 where the
      prediction of the next token counts.

    Example (docs/recipe.md 2): tokens `<s> a b </s> <s> c d </s>` give segment ids `1 1 1 1 2 2 2 2`,
    positions `0 1 2 3 0 1 2 3` and loss mask `1 1 1 0 1 1 1 0`.
    """
    tokens = np.asarray(tokens)
    is_eod = tokens == eod_id
    # A new document starts right after every EoD.
    starts = np.zeros(tokens.shape, dtype=bool)
    starts[..., 1:] = is_eod[..., :-1]
    segment_ids = 1 + np.cumsum(starts, axis=-1, dtype=np.int32)

    index = np.broadcast_to(np.arange(tokens.shape[-1], dtype=np.int32), tokens.shape)
    document_start = np.maximum.accumulate(np.where(starts, index, 0), axis=-1)
    positions = index - document_start

    loss_mask = ~is_eod
    if pad_id is not None and pad_id != eod_id:
        is_pad = tokens == pad_id
        segment_ids = np.where(is_pad, 0, segment_ids)
        positions = np.where(is_pad, 0, positions)
        loss_mask &= ~is_pad
        if targets is not None:
            loss_mask &= np.asarray(targets) != pad_id
    return segment_ids.astype(np.int32), positions.astype(np.int32), loss_mask.astype(np.int32)
