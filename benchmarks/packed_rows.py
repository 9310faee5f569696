"""Rows of packed documents for the attention benchmarks: segment ids from demo-corpus document lengths, and
the same rows in the offsets-and-lengths layout of jax's cuDNN wrapper.

    segment_ids = packed_segment_ids(rows=2, seq=2048)   # int32 [2, 2048], documents 1, 2, ..., padding 0
    offsets, lengths = packed_layout(segment_ids)       # int32 [2, M + 1], [2, M]
"""

import numpy as np

from apertus_jax.data.demo_corpus import load_demo_documents


def packed_segment_ids(rows: int, seq: int, max_document: int = 0) -> np.ndarray:
    """int32 `[rows, seq]`: documents of demo-corpus byte lengths (capped at `max_document`, by default seq / 3)
    packed in order, the last ~5% of each row padding (segment 0)."""
    cap = max_document or seq // 3
    it = (min(len(d["text"].encode()), cap) for d in load_demo_documents())
    segment_ids = np.zeros((rows, seq), np.int32)
    for r in range(rows):
        pos, seg = 0, 1
        while pos < int(seq * 0.95):
            n = max(1, min(next(it), int(seq * 0.95) - pos))
            segment_ids[r, pos : pos + n] = seg
            pos, seg = pos + n, seg + 1
    return segment_ids


def packed_layout(segment_ids_BxT: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start offsets int32 `[B, M + 1]` and lengths int32 `[B, M]` of the documents (segments > 0) of each row,
    M the most documents in a row; the entries after a row's last document are -1 (the layout of jax's cuDNN
    wrapper, whose offsets hold starts only: row `[[1, 1, 2, 0]]` gives `[[0, 2, -1]]` and `[[2, 1]]`).

    Segments must be contiguous runs numbered 1, 2, ... in row order (what `packed_segment_ids` and the
    pipeline's packing produce)."""
    rows = [np.unique(row[row > 0], return_index=True, return_counts=True) for row in segment_ids_BxT]
    most = max(len(ids) for ids, _, _ in rows)
    offsets = np.full((len(rows), most + 1), -1, np.int32)
    lengths = np.full((len(rows), most), -1, np.int32)
    for r, (_, starts, counts) in enumerate(rows):
        offsets[r, : len(starts)] = starts
        lengths[r, : len(counts)] = counts
    return offsets, lengths
